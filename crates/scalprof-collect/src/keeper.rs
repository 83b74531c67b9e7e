//! Nothing of a workload outlives scalprof, even when scalprof is killed with SIGKILL.
//!
//! The workload's own child dies with scalprof (parent-death signal), and on every normal
//! end scalprof kills the workload's group and the orphans reparented to it. But a
//! SIGKILLed scalprof runs no code: the workload's grandchildren, reparented to init, would
//! run on. So every process scalprof starts carries a token in its environment
//! ([`TREE_ENV`]), which its descendants inherit, and a small keeper process (scalprof
//! itself, run as [`KEEPER_ARG`]) waits on a pipe that only scalprof holds open. When
//! scalprof ends, however it ends, the pipe closes and the keeper kills every process whose
//! environment carries the token. Written by hand: a scan of /proc, which no crate here does
//! for this purpose.
//!
//! A process that clears its environment escapes the keeper; scalprof's own ends still
//! kill its group. Attached processes (`--attach`) were not started by scalprof and never
//! carry the token.

use std::io::Read;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that marks the processes of scalprof's workloads: one token
/// per scalprof process, space-separated when one scalprof runs inside another's workload.
pub const TREE_ENV: &str = "SCALPROF_TREE";

/// The first argument that makes the scalprof binary a keeper (not a user command).
pub const KEEPER_ARG: &str = "__scalprof-keeper";

/// This process's token: its pid and a random part, so that one token never names two runs.
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

/// The value of [`TREE_ENV`] for a workload started now: the inherited tokens and ours.
pub fn tree_value() -> String {
    match std::env::var(TREE_ENV) {
        Ok(outer) if !outer.trim().is_empty() => format!("{} {}", outer.trim(), token()),
        _ => token().to_string(),
    }
}

/// The write end of the keeper's pipe, held (never written) for the life of this process.
static KEEPER: Mutex<Option<ChildStdin>> = Mutex::new(None);

/// Starts the keeper: `program` (scalprof's own binary) run as [`KEEPER_ARG`] with this
/// process's token, in a process group of its own so that a Ctrl-C or a kill of scalprof's
/// group does not reach it first. Call once, before the first workload starts (the keeper
/// is a child of scalprof and must not be taken for a workload's leftover).
pub fn start(program: &Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut held = KEEPER.lock().unwrap_or_else(|e| e.into_inner());
    if held.is_some() {
        return Ok(());
    }
    let mut child = Command::new(program)
        .arg(KEEPER_ARG)
        .arg(token())
        .env_remove(TREE_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    *held = child.stdin.take();
    // The keeper outlives this handle: it exits when our end of the pipe closes.
    std::mem::forget(child);
    Ok(())
}

/// The keeper's whole life: wait until scalprof's end of the pipe closes, then kill the
/// processes that carry `token`, a few rounds (a dying parent may fork once more).
pub fn serve(token: &str) -> ! {
    // A name of its own, so that `pkill scalprof` or `killall scalprof` (the usual way to
    // stop a stuck tool) leaves the keeper to clean up after it.
    let name = b"scalprof-keeper\0";
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; setting
    // signal dispositions to SIG_IGN runs no handler.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    for _ in 0..20 {
        if kill_carriers(token) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::process::exit(0)
}

/// SIGKILLs every process whose environment carries `token` in [`TREE_ENV`]; how many.
pub fn kill_carriers(token: &str) -> usize {
    let own = std::process::id() as i32;
    let mut killed = 0;
    for (pid, path) in crate::processes(Path::new("/proc")) {
        if pid == own {
            continue;
        }
        let Ok(environ) = std::fs::read(path.join("environ")) else {
            continue;
        };
        if carries(&environ, token) {
            // SAFETY: kill with a pid and a signal number; no memory is passed.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
    }
    killed
}

/// Whether a NUL-separated environment block has `token` among [`TREE_ENV`]'s words.
fn carries(environ: &[u8], token: &str) -> bool {
    let key = format!("{TREE_ENV}=");
    environ
        .split(|&b| b == 0)
        .filter_map(|kv| kv.strip_prefix(key.as_bytes()))
        .any(|value| {
            value
                .split(|&b| b == b' ')
                .any(|word| word == token.as_bytes())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_found_among_the_words_of_its_variable_only() {
        let t = "12-00ab";
        assert!(carries(b"A=1\0SCALPROF_TREE=12-00ab\0B=2\0", t));
        assert!(carries(b"SCALPROF_TREE=9-ff 12-00ab\0", t));
        assert!(!carries(b"SCALPROF_TREE=12-00abc\0", t));
        assert!(!carries(b"OTHER=12-00ab\0", t));
        assert!(!carries(b"XSCALPROF_TREE=12-00ab\0", t));
        assert!(!carries(b"", t));
    }

    #[test]
    fn the_marked_processes_are_killed_and_no_other() {
        // A token of this test's own: other tests of this binary start workloads with
        // the process's token meanwhile.
        let token = format!("{}-keeper-test", std::process::id());
        let value = format!("outer-1 {token}");
        let mut marked = Command::new("sleep")
            .arg("30")
            .env(TREE_ENV, value)
            .spawn()
            .unwrap();
        let mut other = Command::new("sleep")
            .arg("30")
            .env(TREE_ENV, "another-token")
            .spawn()
            .unwrap();
        // environ is readable once the child has exec'd.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(kill_carriers(&token), 1);
        let status = marked.wait().unwrap();
        assert!(!status.success());
        assert!(
            other.try_wait().unwrap().is_none(),
            "an unmarked process was killed"
        );
        let _ = other.kill();
        let _ = other.wait();
    }
}
