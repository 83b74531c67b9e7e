//! The token that marks this scalprof's workloads: in their environment (the keeper's
//! mark, [`crate::keeper`]) and in the name of their cgroup ([`crate::cgroup`]).

use std::io::Read;
use std::sync::OnceLock;

/// This process's token: its pid and a random part, so that one token never names two runs.
#[allow(clippy::disallowed_methods)] // opens: /dev/urandom
pub fn token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let mut bytes = [0u8; 8];
        let random = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .is_ok();
        let salt = if random {
            u64::from_ne_bytes(bytes)
        } else {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        };
        format!("{}-{salt:016x}", std::process::id())
    })
}
