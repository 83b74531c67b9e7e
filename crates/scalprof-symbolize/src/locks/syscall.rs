//! Blocking system calls as rows: file locks, sleeps, I/O, polls and other waits, named by
//! what they wait on (a file, a socket, the disk) and who woke them.

use crate::profile::{Symbols, UserSpace};
use scalprof_model::locks::top_callers;
use scalprof_model::locks::{LockKind, Scope};
use scalprof_model::locks::{LockRow, RawLocks};
use scalprof_model::vocabulary::{
    is_disk_wait, is_lock_internal, is_scheduler_frame, untraced_kernel_lock,
};
use std::collections::HashMap;

use super::*;

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

/// One system call's waits: (tgid, first argument, call number).
pub(super) type CallKey = (u32, u64, u32);

/// Rows for the waits in blocking system calls, named from the stacks they blocked in:
/// a file lock by its file, a sleep by the function that sleeps (`sleep in
/// sqliteDefaultBusyCallback`), a wait the kernel stack shows is for the disk as disk I/O,
/// other I/O by the call and what the descriptor named (a file; a pipe or a socket by
/// kind, as their inode numbers change every run).
pub(super) fn add_syscall_rows(
    raw: &RawLocks,
    symbols: &mut Symbols,
    on_cpu: &super::HolderSamples,
    rows: &mut Vec<LockRow>,
) {
    // The time of the sampled waits whose holder is known (sleeps: the other threads; a
    // peer's answer: the thread that wrote it), for the share it ran during them; the
    // answering threads' own waits then (a server's disk); where they answered from.
    let mut seen: HashMap<CallKey, u64> = HashMap::new();
    let mut blocked: HashMap<CallKey, HashMap<super::user::WaitTarget, u64>> = HashMap::new();
    let mut answered: HashMap<CallKey, HashMap<String, u64>> = HashMap::new();
    let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
    for s in raw.snapshots.iter().filter(|s| s.syscall && s.wait_ns > 0) {
        let key = (s.waiter_tgid, s.uaddr, s.op);
        match s.waker {
            None if super::is_sleep_call(s.op) => {}
            None => continue,
            Some(_) => {
                if let Some(b) = s.holder_blocked {
                    *blocked
                        .entry(key)
                        .or_default()
                        .entry((b.syscall, b.op, b.uaddr))
                        .or_default() += b.ns.min(s.wait_ns);
                }
                if let Some(h) = super::user::holder_of(raw, s, symbols, &mut spaces) {
                    *answered.entry(key).or_default().entry(h).or_default() += s.wait_ns;
                }
            }
        }
        *seen.entry(key).or_default() += s.wait_ns;
    }
    #[derive(Default)]
    struct Peers {
        running: crate::profile::BlamedLock,
        seen: u64,
        blocked: HashMap<(super::user::WaitTarget, u32), u64>,
        answered: HashMap<String, u64>,
    }
    let mut others: HashMap<(String, LockKind), Peers> = HashMap::new();
    // The user function that made each call, from the sampled stack copies.
    let mut user_callers: HashMap<CallKey, HashMap<String, u64>> = HashMap::new();
    for s in raw
        .snapshots
        .iter()
        .filter(|s| s.syscall && s.waker.is_none())
    {
        if let Some(c) = snapshot_frames(raw, s, symbols, &mut spaces)
            .and_then(|(own, _)| waiting_function(&own))
        {
            let w = user_callers
                .entry((s.tgid, s.uaddr, s.op))
                .or_default()
                .entry(c)
                .or_default();
            *w = w.saturating_add(s.wait_ns.max(1));
        }
    }
    // Where in the kernel each call blocked, and how much of it was a wait for the disk.
    let mut kernel_callers: HashMap<CallKey, HashMap<String, u64>> = HashMap::new();
    // Sampled wait per call: (on the disk, on an untraced kernel lock, in all).
    let mut disk: HashMap<CallKey, (u64, u64)> = HashMap::new();
    let mut locked: HashMap<CallKey, (&'static str, LockKind, u64)> = HashMap::new();
    let mut lock_callers: HashMap<CallKey, HashMap<String, u64>> = HashMap::new();
    for k in &raw.syscall_stacks {
        let frames: Vec<&str> = k
            .stack
            .iter()
            .filter_map(|&a| symbols.kernel.lookup(a))
            .collect();
        let key = (k.tgid, k.uaddr, k.op);
        let d = disk.entry(key).or_default();
        d.1 += k.total_ns;
        if frames.iter().any(|f| is_disk_wait(f)) {
            d.0 += k.total_ns;
        }
        if let Some((i, (name, kind))) = frames
            .iter()
            .enumerate()
            .find_map(|(i, f)| untraced_kernel_lock(f).map(|l| (i, l)))
        {
            locked.entry(key).or_insert((name, kind, 0)).2 += k.total_ns;
            // Who took it: the first frame past the lock's own functions.
            if let Some(c) = frames[i..]
                .iter()
                .find(|f| untraced_kernel_lock(f).is_none() && !is_lock_internal(f))
            {
                *lock_callers
                    .entry(key)
                    .or_default()
                    .entry(c.to_string())
                    .or_default() += k.total_ns;
            }
        }
        if let Some(f) = frames.iter().find(|f| !is_scheduler_frame(f)) {
            *kernel_callers
                .entry(key)
                .or_default()
                .entry(f.to_string())
                .or_default() += k.total_ns;
        }
    }
    // Who woke each call's sampled waits, by command name.
    let mut wakers: HashMap<CallKey, HashMap<&str, u64>> = HashMap::new();
    for k in &raw.wakers {
        if let Some(comm) = raw.waker_comms.get(&k.waker) {
            *wakers
                .entry((k.tgid, k.uaddr, k.op))
                .or_default()
                .entry(comm.as_str())
                .or_default() += k.total_ns;
        }
    }
    let mut by_name: HashMap<(String, LockKind), (LockRow, HashMap<String, u64>)> = HashMap::new();
    // Wait per process of each row, to say which attached process did it.
    let mut procs: HashMap<(String, LockKind), HashMap<u32, u64>> = HashMap::new();
    for w in &raw.syscalls {
        let key = (w.tgid, w.uaddr, w.op);
        let (kind, scope) = syscall_wait_kind(w.op);
        let sampled = disk.get(&key).map_or(0, |d| d.1);
        let on_disk = disk.get(&key).is_some_and(|&(d, _)| 2 * d > sampled);
        let kind = if on_disk { LockKind::DiskIo } else { kind };
        // Mostly blocked on a kernel lock the tracepoints do not see: that lock's row.
        let on_lock = locked
            .get(&key)
            .filter(|(_, _, ns)| sampled > 0 && 2 * ns > sampled);
        let (kind, scope) = match on_lock {
            Some((_, lock_kind, _)) => (lock_kind.clone(), Scope::Kernel),
            None => (kind, scope),
        };
        let call = syscall_name(w.op);
        let path = scalprof_model::locks::is_fd_syscall(w.op)
            .then(|| raw.fd_paths.get(&(w.tgid, w.uaddr)))
            .flatten();
        let callers = user_callers.get(&key);
        let caller = callers.and_then(top_caller);
        let what = match (&kind, path) {
            (LockKind::PosixLock | LockKind::Flock, Some(path)) => path.clone(),
            (LockKind::PosixLock | LockKind::Flock, None) => format!("{call} fd {}", w.uaddr),
            (LockKind::Sleep, _) => "sleep".to_string(),
            (LockKind::DiskIo, Some(path)) => {
                format!("disk I/O ({call} {})", stable_fd_name(path))
            }
            (LockKind::DiskIo, None) => format!("disk I/O ({call})"),
            (_, Some(path)) => format!("{call} {}", stable_fd_name(path)),
            (_, None) => call.clone(),
        };
        // Waiting for data or room: the task that ended most of the waits is the peer (a
        // wakeup from an interrupt names whoever it interrupted, so not for timers or
        // the disk).
        let peer = (kind == LockKind::Io)
            .then(|| wakers.get(&key).and_then(main_waker))
            .flatten();
        // A lock is named by itself (a file lock by its file); a wait by what it waits for
        // and who waits.
        let name = match caller {
            _ if on_lock.is_some() => on_lock.expect("checked").0.to_string(),
            Some(c) if !matches!(kind, LockKind::PosixLock | LockKind::Flock) => {
                format!("{what} in {c}")
            }
            None if kind == LockKind::Sleep => call,
            _ => what,
        };
        let entry = by_name
            .entry((name.clone(), kind.clone()))
            .or_insert_with(|| {
                (
                    LockRow {
                        address: match scope {
                            Scope::File => format!("fd {}", w.uaddr),
                            Scope::Kernel => "blocked".into(),
                            Scope::User => "syscall".into(),
                        },
                        ..LockRow::new(scope, name, kind)
                    },
                    HashMap::new(),
                )
            });
        entry.0.count += w.count;
        entry.0.total_wait_ns += w.total_ns;
        entry.0.max_wait_ns = entry.0.max_wait_ns.max(w.max_ns);
        if entry.0.woken_by.is_none() {
            entry.0.woken_by = peer.map(str::to_string);
            entry.0.peer_attached = peer.is_some_and(|p| raw.attached_comms.iter().any(|c| c == p));
        }
        *procs
            .entry((entry.0.name.clone(), entry.0.lock_type.clone()))
            .or_default()
            .entry(w.tgid)
            .or_default() += w.total_ns;
        // Callers: the user functions that made the call; where none was found, the
        // kernel path it blocked in.
        let found = if on_lock.is_some() {
            lock_callers.get(&key)
        } else {
            callers.or_else(|| kernel_callers.get(&key))
        };
        for (f, ns) in found.into_iter().flatten() {
            *entry.1.entry(f.clone()).or_default() += ns;
        }
        let to = others
            .entry((entry.0.name.clone(), entry.0.lock_type.clone()))
            .or_default();
        if let Some(h) = on_cpu.get(&(w.tgid, w.uaddr, Some(w.op))) {
            super::add_sampled(&mut to.running, h);
        }
        to.seen += seen.get(&key).copied().unwrap_or(0);
        for (&t, &ns) in blocked.get(&key).into_iter().flatten() {
            *to.blocked.entry((t, w.tgid)).or_default() += ns;
        }
        for (f, &ns) in answered.get(&key).into_iter().flatten() {
            *to.answered.entry(f.clone()).or_default() += ns;
        }
    }
    for (key, (mut row, c)) in by_name {
        // A sleep: what the other threads ran while it slept (the holder of what a retry
        // loop waits for is among them). A wait for a peer: what the answering thread ran
        // meanwhile, else where it answered from, and its own waits (a server's disk).
        if let Some(p) = others.remove(&key).filter(|p| p.seen > 0) {
            let samples: u64 = p.running.functions.values().map(|v| v.0).sum();
            let weight: u64 = p.running.functions.values().map(|v| v.1).sum();
            if samples > 0 {
                row.holder_running = Some((weight as f64 / p.seen as f64).min(1.0));
            }
            if samples >= super::user::MIN_HOLDER_SAMPLES {
                super::on_cpu_holders(&mut row, p.running);
            } else if !p.answered.is_empty() {
                let total: u64 = p.answered.values().sum();
                row.holders = super::user::with_state(
                    top_callers(p.answered, total),
                    scalprof_model::locks::HolderState::AtRelease,
                );
            }
            row.holder_waits = super::user::holder_waits(Some(p.blocked), &HashMap::new(), p.seen);
        }
        let total: u64 = c.values().sum();
        row.callers = top_callers(c, total);
        row.process = procs.get(&key).and_then(|p| attached_process(raw, p));
        rows.push(row);
    }
}

/// The command name of the process that waited most, when it is an attached one (a server
/// observed with `--attach`): findings then say whose lock it is.
pub(super) fn attached_process(raw: &RawLocks, by_tgid: &HashMap<u32, u64>) -> Option<String> {
    let (tgid, _) = by_tgid
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
    let comm = raw.waker_comms.get(tgid)?;
    raw.attached_comms.contains(comm).then(|| comm.clone())
}

/// The waker of most of the wait, when one did more than half of it.
pub(super) fn main_waker<'a>(wakers: &HashMap<&'a str, u64>) -> Option<&'a str> {
    let total: u64 = wakers.values().sum();
    wakers
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .filter(|(_, &ns)| 2 * ns > total)
        .map(|(c, _)| *c)
}

/// `pipe:[4026]` → `pipe`, `socket:[77]` → `socket`: their numbers change every run. A
/// file keeps its path, except a numbered segment of a log (PostgreSQL's
/// `pg_wal/000000010000000000000004`), which is the next one in the next run: `pg_wal/*`.
pub(super) fn stable_fd_name(path: &str) -> std::borrow::Cow<'_, str> {
    match path.split_once(":[") {
        Some((kind, _)) if path.ends_with(']') => return kind.into(),
        _ => {}
    }
    match path.rsplit_once('/') {
        Some((dir, file)) if file.len() >= 8 && file.bytes().all(|b| b.is_ascii_hexdigit()) => {
            return format!("{dir}/*").into();
        }
        _ => {}
    }
    // A file per process or per run, named by a number after its stem (`worker.log.4242`,
    // `tmp_12345`): one row, whatever the number.
    let file_start = path.rfind('/').map_or(0, |i| i + 1);
    let digits = path.bytes().rev().take_while(u8::is_ascii_digit).count();
    let stem_end = path.len() - digits;
    if digits >= 3
        && stem_end > file_start + 1
        && matches!(path.as_bytes()[stem_end - 1], b'.' | b'_' | b'-')
    {
        return format!("{}*", &path[..stem_end]).into();
    }
    path.into()
}
