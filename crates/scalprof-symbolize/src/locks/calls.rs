//! System calls by their x86-64 numbers: their names, and what a blocking one waits for.

use scalprof_model::locks::{LockKind, Scope};

/// What a blocking system call waits for (x86-64 numbers), and its scope.
pub(super) fn syscall_wait_kind(nr: u32) -> (LockKind, Scope) {
    match nr {
        72 => (LockKind::PosixLock, Scope::File),
        73 => (LockKind::Flock, Scope::File),
        35 | 230 => (LockKind::Sleep, Scope::User),
        7 | 23 | 34 | 43 | 232 | 270 | 271 | 281 | 288 | 441 => (LockKind::Idle, Scope::User),
        0 | 1 | 17 | 18 | 19 | 20 | 44 | 45 | 46 | 47 | 74 | 75 | 285 | 295 | 296 => {
            (LockKind::Io, Scope::User)
        }
        _ => (LockKind::Syscall, Scope::User),
    }
}

/// A system call's name (x86-64 numbers); an unknown one by its number.
pub(super) fn syscall_name(nr: u32) -> String {
    match nr {
        0 => "read".into(),
        1 => "write".into(),
        2 => "open".into(),
        3 => "close".into(),
        4 => "stat".into(),
        5 => "fstat".into(),
        8 => "lseek".into(),
        9 => "mmap".into(),
        11 => "munmap".into(),
        16 => "ioctl".into(),
        22 => "pipe".into(),
        42 => "connect".into(),
        76 => "truncate".into(),
        77 => "ftruncate".into(),
        82 => "rename".into(),
        83 => "mkdir".into(),
        87 => "unlink".into(),
        217 => "getdents64".into(),
        257 => "openat".into(),
        262 => "newfstatat".into(),
        7 => "poll".into(),
        17 => "pread64".into(),
        18 => "pwrite64".into(),
        19 => "readv".into(),
        20 => "writev".into(),
        23 => "select".into(),
        34 => "pause".into(),
        35 => "nanosleep".into(),
        43 => "accept".into(),
        44 => "sendto".into(),
        45 => "recvfrom".into(),
        46 => "sendmsg".into(),
        47 => "recvmsg".into(),
        72 => "fcntl".into(),
        73 => "flock".into(),
        74 => "fsync".into(),
        75 => "fdatasync".into(),
        230 => "clock_nanosleep".into(),
        232 => "epoll_wait".into(),
        270 => "pselect6".into(),
        271 => "ppoll".into(),
        281 => "epoll_pwait".into(),
        441 => "epoll_pwait2".into(),
        288 => "accept4".into(),
        n => format!("syscall {n}"),
    }
}

/// The x86-64 number of a system call scalprof names (the reverse of [`syscall_name`]).
pub fn syscall_number(name: &str) -> Option<u32> {
    (0..512).find(|&nr| syscall_name(nr) == name)
}

/// Sleeps (nanosleep, clock_nanosleep): a thread that sleeps in a retry loop waits for
/// whatever the others are doing; what they ran meanwhile is blamed.
pub(super) fn is_sleep_call(op: u32) -> bool {
    matches!(op, 35 | 230)
}
