//! What a user futex wait is (a mutex, a condvar, a join, …), from the functions on the
//! waiting stack: libc's, the JVM's, Rust's std and parking_lot's.

use crate::locks::{ChanSide, LockKind, Side};

/// A user futex wait's kind, by the libc functions on the waiting stack (and the JVM's,
/// whose monitors and parks wait on a condvar of their own, and Rust's std and
/// parking_lot, which wait on futexes without libc): the first row with a frame that
/// contains one of its names (a monitor before a condvar, a join before a condvar, …).
fn user_wait_rows() -> [(&'static [&'static str], LockKind); 13] {
    [
        // A JVM's main thread waits for the other non-daemon threads to end: a join.
        (
            &["Threads::destroy_vm", "jni_DestroyJavaVM"],
            LockKind::Join,
        ),
        (
            &[
                "ObjectMonitor::enter",
                "ObjectMonitor::EnterI",
                "ObjectSynchronizer::enter",
            ],
            LockKind::JavaMonitor,
        ),
        (&["Parker::park"], LockKind::JavaPark),
        (&["pthread_join", "clockjoin", "timedjoin"], LockKind::Join),
        // Rust's std (futex-based since 1.62) and parking_lot, before the condvars: a
        // mutex's futex is waited on by its lock's slow path only, also when a condvar's
        // waiter takes the mutex back after waking (the condvar waits on a futex of its
        // own), whereas glibc's condvar takes its mutex back inside pthread_cond_wait.
        (&["::sync::mutex::", "RawMutex::lock_slow"], LockKind::Mutex),
        // A Once's (a OnceLock's, a LazyLock's) waiters wait for its initializer.
        (&["::sync::once::", "::sync::once_lock::"], LockKind::Once),
        (
            &["RwLock::read_contended", "RawRwLock::lock_shared_slow"],
            LockKind::Rwlock(Some(Side::Read)),
        ),
        (
            &["RwLock::write_contended", "RawRwLock::lock_exclusive_slow"],
            LockKind::Rwlock(Some(Side::Write)),
        ),
        (
            &[
                "pthread_cond",
                "::sync::condvar::",
                "parking_lot::condvar::",
            ],
            LockKind::Condvar,
        ),
        (&["pthread_barrier"], LockKind::Barrier),
        (
            &["sem_wait", "sem_timedwait", "sem_clockwait"],
            LockKind::Semaphore,
        ),
        (&["pthread_rwlock"], LockKind::Rwlock(None)),
        (
            &["lll_lock", "pthread_mutex", "mutex_lock"],
            LockKind::Mutex,
        ),
    ]
}

/// A channel's code: Rust std's (`std::sync::mpmc`, under `mpsc` since 1.67) and
/// crossbeam's, whose senders and receivers park their threads (a futex of each thread's)
/// and take the channel's own small mutex: all of it is the channel's wait.
const CHANNEL_CODE: [&str; 3] = [
    "std::sync::mpmc::",
    "std::sync::mpsc::",
    "crossbeam_channel",
];

/// The side of a channel the frames wait on, if they are a channel's code.
fn channel_wait(frames: &[String]) -> Option<LockKind> {
    let in_channel = |f: &String| CHANNEL_CODE.iter().any(|c| f.contains(c));
    if !frames.iter().any(in_channel) {
        return None;
    }
    let op = |name: &str| {
        frames
            .iter()
            .filter(|f| in_channel(f))
            .any(|f| f.contains(&format!("::{name}")))
    };
    // A wait on the channel's own mutex: both sides take it, neither waits for the other.
    let on_mutex = frames.iter().any(|f| f.contains("::sync::mutex::"));
    Some(LockKind::Chan(if on_mutex {
        None
    } else if op("send") {
        Some(ChanSide::Send)
    } else if op("recv") {
        Some(ChanSide::Recv)
    } else {
        None
    }))
}

/// What kind of wait a futex is, from the libc functions on the waiting stack.
pub fn user_wait_kind(frames: &[String]) -> LockKind {
    if let Some(chan) = channel_wait(frames) {
        return chan;
    }
    user_wait_rows()
        .into_iter()
        .find(|(names, _)| frames.iter().any(|f| names.iter().any(|n| f.contains(n))))
        .map_or(LockKind::Futex, |(_, kind)| kind)
}
