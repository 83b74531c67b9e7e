//! How a lock's holders were seen while its waiters waited, and what they waited on while
//! they held it: a typed wait, written in the run document as the string and flag it
//! always had.

use serde::{Deserialize, Serialize};

/// A holder's own wait is told (and lengthened by `verify`) from this share of the
/// waiters' wait on.
pub const HOLDER_WAIT_SHARE: f64 = 0.05;

/// A wait of a lock's holders while they held it, as a share of the waiters' wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "HolderWaitDoc", into = "HolderWaitDoc")]
pub struct HolderWait {
    pub on: HeldWait,
    pub share: f64,
}

/// What a holder waited on under its lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HeldWait {
    /// A lock of the same table, by its row's name.
    Lock(String),
    /// A futex no row of the table names, by its address.
    Futex(u64),
    /// A system call, by name (`fdatasync`).
    Syscall(String),
}

impl std::fmt::Display for HeldWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeldWait::Lock(name) | HeldWait::Syscall(name) => f.write_str(name),
            HeldWait::Futex(address) => write!(f, "{FUTEX}{address:#x}"),
        }
    }
}

const FUTEX: &str = "futex ";

/// Holders' waits largest first, ties by what they waited on as written.
pub fn sort_holder_waits(waits: &mut [HolderWait]) {
    waits.sort_by(|a, b| {
        b.share
            .total_cmp(&a.share)
            .then_with(|| a.on.to_string().cmp(&b.on.to_string()))
    });
}

/// A holder's wait as the document writes it (the contract): `wait` the row's name, the
/// system call's, or `futex 0x…`; `lock` whether it is a lock rather than a system call.
#[derive(Clone, Serialize, Deserialize)]
struct HolderWaitDoc {
    wait: String,
    lock: bool,
    share: f64,
}

impl From<HolderWait> for HolderWaitDoc {
    fn from(w: HolderWait) -> HolderWaitDoc {
        HolderWaitDoc {
            wait: w.on.to_string(),
            lock: !matches!(w.on, HeldWait::Syscall(_)),
            share: w.share,
        }
    }
}

impl From<HolderWaitDoc> for HolderWait {
    fn from(d: HolderWaitDoc) -> HolderWait {
        let futex = d
            .wait
            .strip_prefix(FUTEX)
            .and_then(|a| u64::from_str_radix(a.strip_prefix("0x")?, 16).ok());
        let on = match (d.lock, futex) {
            (false, _) => HeldWait::Syscall(d.wait),
            (true, Some(address)) => HeldWait::Futex(address),
            (true, None) => HeldWait::Lock(d.wait),
        };
        HolderWait { on, share: d.share }
    }
}

/// How a lock's holder was seen while its waiters waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HolderState {
    /// Running: the holder thread's own profile samples between a waiter's block and
    /// its wakeup were in this function (the wait's time shifted to what the holder did).
    OnCpu,
    /// Releasing: the function whose unlock woke the waiter (the end of the critical
    /// section), where the holder was not sampled during the waits.
    AtRelease,
}

impl HolderState {
    pub fn as_str(self) -> &'static str {
        match self {
            HolderState::OnCpu => "on_cpu",
            HolderState::AtRelease => "at_release",
        }
    }
}
