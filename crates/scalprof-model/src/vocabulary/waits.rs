//! What a user futex wait is (a mutex, a condvar, a join, …), from the functions on the
//! waiting stack: libc's, the JVM's, Rust's std and parking_lot's.

use crate::locks::{LockKind, Side};

/// A user futex wait's kind, by the libc functions on the waiting stack (and the JVM's,
/// whose monitors and parks wait on a condvar of their own, and Rust's std and
/// parking_lot, which wait on futexes without libc): the first row with a frame that
/// contains one of its names (a monitor before a condvar, a join before a condvar, …).
fn user_wait_rows() -> [(&'static [&'static str], LockKind); 12] {
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

/// What kind of wait a futex is, from the libc functions on the waiting stack.
pub fn user_wait_kind(frames: &[String]) -> LockKind {
    user_wait_rows()
        .into_iter()
        .find(|(names, _)| frames.iter().any(|f| names.iter().any(|n| f.contains(n))))
        .map_or(LockKind::Futex, |(_, kind)| kind)
}
