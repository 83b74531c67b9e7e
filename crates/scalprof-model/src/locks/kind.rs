//! What kind of lock or wait a row is (`LockKind`), and the side of a reader-writer lock
//! a waiter wanted, with the words the lock table and the run document write them as.

use serde::{Deserialize, Serialize};

/// The side of a reader-writer lock a waiter wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Read,
    Write,
}

/// The side of a Go channel a goroutine waited on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChanSide {
    Send,
    Recv,
}

/// What kind of lock (or wait) a row is. Written as the words the lock table shows:
/// `spinlock`, `rwsem:W`, `percpu-rwsem:R`, `mutex`, `condvar`, `join`, …; a word this
/// build does not know (from a newer store) is kept as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum LockKind {
    Spinlock,
    Rwlock(Option<Side>),
    Rwsem(Option<Side>),
    PercpuRwsem(Option<Side>),
    Mutex,
    RtMutex,
    /// A kernel sleeping lock of no known type.
    Lock,
    PiMutex,
    Condvar,
    Join,
    Barrier,
    Semaphore,
    /// A futex wait no libc frame explains.
    Futex,
    /// Go's `sync.Mutex`: parked goroutines.
    GoMutex,
    /// Go's `sync.RWMutex`, by the side that waited.
    GoRwMutex(Option<Side>),
    /// Go's `sync.WaitGroup.Wait`: waiting for other goroutines, not contention.
    GoWaitGroup,
    /// A channel's hand-off (Go's, Rust's std::sync::mpsc and crossbeam's), by the side
    /// that waited: a send waits for a receiver or for room (`chan:send`), a receive for
    /// a sender (`chan:recv`).
    Chan(Option<ChanSide>),
    /// A one-time initialization others wait for (Rust's `Once`, `OnceLock`).
    Once,
    /// Go's `sync.Cond.Wait`.
    GoCond,
    /// A Java object's monitor (`synchronized`), contended: the JVM's ObjectMonitor.
    JavaMonitor,
    /// A Java thread parked by `LockSupport.park`: java.util.concurrent's locks (a
    /// ReentrantLock's waiters) and queues.
    JavaPark,
    /// fcntl(F_SETLKW): a POSIX record lock on a file.
    PosixLock,
    /// flock(LOCK_EX/LOCK_SH) on a file.
    Flock,
    /// nanosleep / clock_nanosleep.
    Sleep,
    /// poll, select, epoll: waiting for any of several events.
    Idle,
    /// A read, write, send or receive that waited (for data, for room, for the disk).
    Io,
    /// Another blocking system call.
    Syscall,
    /// A wait the blocked kernel stack shows is for the disk (`io_schedule`).
    DiskIo,
    /// Runnable but not running: waiting for a CPU.
    CpuWait,
    Other(String),
}

impl LockKind {
    /// Whether the lock lets one holder in at a time, so that its holds add up to serial
    /// time: a mutex or a write side yes; a read side, a condvar, a join, a barrier, a
    /// semaphore or a wait group no; `None` for a reader-writer lock whose side is not
    /// known.
    pub fn one_holder(&self) -> Option<bool> {
        match self {
            LockKind::Rwlock(side)
            | LockKind::Rwsem(side)
            | LockKind::PercpuRwsem(side)
            | LockKind::GoRwMutex(side) => side.map(|s| s == Side::Write),
            kind if kind.is_handoff_or_structure() => Some(false),
            _ => Some(true),
        }
    }

    /// Waits on condition variables, channels, joins, barriers and semaphores are not
    /// contention.
    pub fn is_lock(&self) -> bool {
        !self.is_handoff_or_structure() && !self.is_blocked_wait() && *self != LockKind::Idle
    }

    /// A wait for another thread's hand-off (a condition variable, a channel, a semaphore,
    /// a one-time initialization) or for the program's structure (a join, a barrier): no
    /// one holds it.
    fn is_handoff_or_structure(&self) -> bool {
        matches!(
            self,
            LockKind::Condvar
                | LockKind::Join
                | LockKind::Barrier
                | LockKind::Semaphore
                | LockKind::GoWaitGroup
                | LockKind::Chan(_)
                | LockKind::Once
                | LockKind::GoCond
        )
    }

    /// Go's locks: their waits are parked goroutines', not their threads'.
    pub fn is_goroutine_lock(&self) -> bool {
        matches!(self, LockKind::GoMutex | LockKind::GoRwMutex(_))
    }

    /// Off-CPU waits that are not a lock: sleeping, I/O, another system call.
    pub fn is_blocked_wait(&self) -> bool {
        matches!(
            self,
            LockKind::Sleep
                | LockKind::Io
                | LockKind::Syscall
                | LockKind::DiskIo
                | LockKind::CpuWait
        )
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sided = |f: &mut std::fmt::Formatter<'_>, base: &str, side: &Option<Side>| {
            f.write_str(base)?;
            match side {
                Some(Side::Read) => f.write_str(":R"),
                Some(Side::Write) => f.write_str(":W"),
                None => Ok(()),
            }
        };
        match self {
            LockKind::Spinlock => f.write_str("spinlock"),
            LockKind::Rwlock(s) => sided(f, "rwlock", s),
            LockKind::Rwsem(s) => sided(f, "rwsem", s),
            LockKind::PercpuRwsem(s) => sided(f, "percpu-rwsem", s),
            LockKind::Mutex => f.write_str("mutex"),
            LockKind::RtMutex => f.write_str("rtmutex"),
            LockKind::Lock => f.write_str("lock"),
            LockKind::PiMutex => f.write_str("pi-mutex"),
            LockKind::Condvar => f.write_str("condvar"),
            LockKind::Join => f.write_str("join"),
            LockKind::Barrier => f.write_str("barrier"),
            LockKind::Semaphore => f.write_str("semaphore"),
            LockKind::Futex => f.write_str("futex"),
            LockKind::GoMutex => f.write_str("sync.Mutex"),
            LockKind::GoRwMutex(s) => sided(f, "sync.RWMutex", s),
            LockKind::GoWaitGroup => f.write_str("sync.WaitGroup"),
            LockKind::Chan(None) => f.write_str("chan"),
            LockKind::Chan(Some(ChanSide::Send)) => f.write_str("chan:send"),
            LockKind::Chan(Some(ChanSide::Recv)) => f.write_str("chan:recv"),
            LockKind::GoCond => f.write_str("sync.Cond"),
            LockKind::Once => f.write_str("once"),
            LockKind::JavaMonitor => f.write_str("monitor"),
            LockKind::JavaPark => f.write_str("park"),
            LockKind::PosixLock => f.write_str("posix-lock"),
            LockKind::Flock => f.write_str("flock"),
            LockKind::Sleep => f.write_str("sleep"),
            LockKind::Idle => f.write_str("idle"),
            LockKind::Io => f.write_str("io"),
            LockKind::Syscall => f.write_str("syscall"),
            LockKind::DiskIo => f.write_str("disk-io"),
            LockKind::CpuWait => f.write_str("cpu-wait"),
            LockKind::Other(s) => f.write_str(s),
        }
    }
}

impl From<&str> for LockKind {
    fn from(text: &str) -> LockKind {
        match text {
            "chan:send" => return LockKind::Chan(Some(ChanSide::Send)),
            "chan:recv" => return LockKind::Chan(Some(ChanSide::Recv)),
            _ => {}
        }
        let (base, side) = match text.rsplit_once(':') {
            Some((b, "R")) => (b, Some(Side::Read)),
            Some((b, "W")) => (b, Some(Side::Write)),
            _ => (text, None),
        };
        match (base, side) {
            ("rwlock", s) => LockKind::Rwlock(s),
            ("rwsem", s) => LockKind::Rwsem(s),
            ("percpu-rwsem", s) => LockKind::PercpuRwsem(s),
            ("sync.RWMutex", s) => LockKind::GoRwMutex(s),
            ("chan", None) => LockKind::Chan(None),
            (_, Some(_)) => LockKind::Other(text.to_string()),
            ("spinlock", None) => LockKind::Spinlock,
            ("mutex", None) => LockKind::Mutex,
            ("rtmutex", None) => LockKind::RtMutex,
            ("lock", None) => LockKind::Lock,
            ("pi-mutex", None) => LockKind::PiMutex,
            ("condvar", None) => LockKind::Condvar,
            ("join", None) => LockKind::Join,
            ("barrier", None) => LockKind::Barrier,
            ("semaphore", None) => LockKind::Semaphore,
            ("futex", None) => LockKind::Futex,
            ("sync.Mutex", None) => LockKind::GoMutex,
            ("sync.WaitGroup", None) => LockKind::GoWaitGroup,
            ("sync.Cond", None) => LockKind::GoCond,
            ("once", None) => LockKind::Once,
            ("monitor", None) => LockKind::JavaMonitor,
            ("park", None) => LockKind::JavaPark,
            ("posix-lock", None) => LockKind::PosixLock,
            ("flock", None) => LockKind::Flock,
            ("sleep", None) => LockKind::Sleep,
            ("idle", None) => LockKind::Idle,
            ("io", None) => LockKind::Io,
            ("syscall", None) => LockKind::Syscall,
            ("disk-io", None) => LockKind::DiskIo,
            ("cpu-wait", None) => LockKind::CpuWait,
            _ => LockKind::Other(text.to_string()),
        }
    }
}

impl From<String> for LockKind {
    fn from(text: String) -> LockKind {
        LockKind::from(text.as_str())
    }
}

impl From<LockKind> for String {
    fn from(kind: LockKind) -> String {
        kind.to_string()
    }
}
