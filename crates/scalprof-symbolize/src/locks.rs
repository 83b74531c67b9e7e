//! Naming one execution's locks: kernel lock stacks through kallsyms, user futex
//! addresses through the process's mappings and ELF symbols, and the waiters' copied
//! user stacks unwound with `.eh_frame`. The naming vocabulary (conventional names, wait
//! kinds, what counts as lock machinery) is `scalprof_analyze::locks`'.

use scalprof_model::locks::{LockKind, Scope};
use std::collections::HashMap;

use scalprof_analyze::locks::{
    conventional_name, is_disk_wait, is_lock_internal, is_scheduler_frame, kernel_lock_type,
    sort_rows, top_callers, untraced_kernel_lock, user_wait_kind,
};
use scalprof_debuginfo::Kallsyms;
use scalprof_model::locks::{
    LockProfile, LockRow, ProcMap, RawLocks, RunQueueBehind, RunQueueRaw, StackSnapshot, CPU_WAIT,
    CPU_WAIT_OBSERVER, CPU_WAIT_OTHER,
};

use crate::profile::{Symbols, UserSpace};

/// Names and aggregates one execution's lock data.
pub fn lock_profile(raw: &RawLocks, symbols: &mut Symbols) -> LockProfile {
    let mut rows: Vec<LockRow> = Vec::new();
    add_kernel_rows(raw, &symbols.kernel, &mut rows);
    let (snapshots, resolved) = add_user_rows(raw, symbols, &mut rows);
    add_syscall_rows(raw, symbols, &mut rows);
    add_runqueue_row(raw, &mut rows);
    sort_rows(&mut rows);
    LockProfile {
        rows,
        failures: raw.failures.clone(),
        snapshots,
        snapshots_resolved: resolved,
        repeats: 1,
        tracer: raw.tracer,
    }
}

fn add_kernel_rows(raw: &RawLocks, kallsyms: &Kallsyms, rows: &mut Vec<LockRow>) {
    // (name, type) → row; callers accumulated by wait.
    let mut by_name: HashMap<(String, LockKind), (LockRow, HashMap<String, u64>)> = HashMap::new();
    // Wait per process of each row, to say which attached process did it.
    let mut procs: HashMap<(String, LockKind), HashMap<u32, u64>> = HashMap::new();
    for k in &raw.kernel {
        let frames: Vec<&str> = k.stack.iter().filter_map(|&a| kallsyms.lookup(a)).collect();
        let frames: Vec<&str> = frames
            .into_iter()
            .filter(|f| !f.starts_with("bpf_") && !f.starts_with("__bpf"))
            .collect();
        let caller = frames
            .iter()
            .find(|f| !is_lock_internal(f))
            .copied()
            .unwrap_or("[unknown]")
            .to_string();
        let lock_type = kernel_lock_type(k.flags);
        let name = match kallsyms.lookup_data(k.lock, 4096) {
            Some((sym, 0)) => sym.to_string(),
            Some((sym, off)) => format!("{sym}+{off:#x}"),
            None => match conventional_name(&frames, k.flags) {
                Some(n) => n.to_string(),
                None => format!("{lock_type}@{caller}"),
            },
        };
        let entry = by_name
            .entry((name.clone(), lock_type.clone()))
            .or_insert_with(|| {
                (
                    LockRow {
                        scope: Scope::Kernel,
                        wait_ns_per_op: None,
                        spin_ns: None,
                        woken_by: None,
                        process: None,
                        peer_attached: false,
                        attributed_to: (name == "futex hash bucket")
                            .then(|| "user locks".to_string()),
                        name,
                        lock_type,
                        address: format!("{:#x}", k.lock),
                        count: 0,
                        total_wait_ns: 0,
                        max_wait_ns: 0,
                        callers: Vec::new(),
                    },
                    HashMap::new(),
                )
            });
        entry.0.count += k.count;
        entry.0.total_wait_ns += k.total_ns;
        entry.0.max_wait_ns = entry.0.max_wait_ns.max(k.max_ns);
        *entry.1.entry(caller).or_default() += k.total_ns;
        *procs
            .entry((entry.0.name.clone(), entry.0.lock_type.clone()))
            .or_default()
            .entry(k.tgid)
            .or_default() += k.total_ns;
    }
    for (key, (mut row, callers)) in by_name {
        row.callers = top_callers(callers, row.total_wait_ns);
        row.process = procs.get(&key).and_then(|p| attached_process(raw, p));
        rows.push(row);
    }
}

/// libc / dynamic loader / vDSO frames are the locking machinery of user space.
fn is_runtime_library(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.starts_with("libc.so")
        || file.starts_with("libpthread")
        || file.starts_with("ld-linux")
        || path.starts_with('[')
}

/// Whether `addr` lies in the last 16 KiB of an anonymous mapping: where glibc puts a
/// thread's descriptor (struct pthread, whose tid field pthread_join waits on) above its stack.
fn is_thread_descriptor(addr: u64, maps: &[ProcMap]) -> bool {
    maps.iter()
        .any(|m| m.path.is_empty() && addr >= m.start && addr < m.end && m.end - addr <= 16 * 1024)
}

/// Names a user futex address from the process's mappings and the ELF symbols.
fn name_user_address(addr: u64, maps: &[ProcMap], symbols: &mut Symbols) -> String {
    let Some(m) = maps.iter().find(|m| addr >= m.start && addr < m.end) else {
        return format!("{addr:#x}");
    };
    // The file the address belongs to: the mapping's own, or for .bss beyond the file's
    // pages the file whose mappings end where this anonymous one starts.
    let file_map = if m.path.starts_with('/') {
        Some(m)
    } else if m.path.is_empty() {
        maps.iter()
            .find(|p| p.end == m.start && p.path.starts_with('/'))
    } else {
        None
    };
    if let Some(fm) = file_map {
        if let Some(elf) = symbols.files.get(std::path::Path::new(&fm.path)) {
            // Load bias from the file's first mapping (file offset 0).
            let base = maps
                .iter()
                .find(|p| p.path == fm.path && p.offset == 0)
                .map(|p| p.start);
            if let (Some(base), Some(image)) = (base, elf.image_base()) {
                let svma = addr.wrapping_sub(base).wrapping_add(image);
                if let Some((name, off)) = elf.object(svma) {
                    return if off == 0 {
                        name.to_string()
                    } else {
                        format!("{name}+{off:#x}")
                    };
                }
            }
        }
    }
    match m.path.as_str() {
        "[heap]" => format!("heap {addr:#x}"),
        "[stack]" => format!("stack {addr:#x}"),
        "" => format!("anon {addr:#x}"),
        p => format!(
            "{}+{:#x}",
            p.rsplit('/').next().unwrap_or(p),
            addr - m.start + m.offset
        ),
    }
}

/// What a blocking system call waits for (x86-64 numbers), and its scope.
fn syscall_wait_kind(nr: u32) -> (LockKind, Scope) {
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

fn syscall_name(nr: u32) -> String {
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
type CallKey = (u32, u64, u32);

/// Rows for the waits in blocking system calls, named from the stacks they blocked in:
/// a file lock by its file, a sleep by the function that sleeps (`sleep in
/// sqliteDefaultBusyCallback`), a wait the kernel stack shows is for the disk as disk I/O,
/// other I/O by the call and what the descriptor named (a file; a pipe or a socket by
/// kind, as their inode numbers change every run).
fn add_syscall_rows(raw: &RawLocks, symbols: &mut Symbols, rows: &mut Vec<LockRow>) {
    // The user function that made each call, from the sampled stack copies.
    let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
    let mut user_callers: HashMap<CallKey, HashMap<String, u64>> = HashMap::new();
    for s in raw.snapshots.iter().filter(|s| s.syscall) {
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
                        scope,
                        name,
                        lock_type: kind,
                        address: match scope {
                            Scope::File => format!("fd {}", w.uaddr),
                            Scope::Kernel => "blocked".into(),
                            Scope::User => "syscall".into(),
                        },
                        count: 0,
                        total_wait_ns: 0,
                        max_wait_ns: 0,
                        callers: Vec::new(),
                        attributed_to: None,
                        wait_ns_per_op: None,
                        spin_ns: None,
                        woken_by: None,
                        process: None,
                        peer_attached: false,
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
    }
    for (key, (mut row, c)) in by_name {
        let total: u64 = c.values().sum();
        row.callers = top_callers(c, total);
        row.process = procs.get(&key).and_then(|p| attached_process(raw, p));
        rows.push(row);
    }
}

/// The command name of the process that waited most, when it is an attached one (a server
/// observed with `--attach`): findings then say whose lock it is.
fn attached_process(raw: &RawLocks, by_tgid: &HashMap<u32, u64>) -> Option<String> {
    let (tgid, _) = by_tgid
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
    let comm = raw.waker_comms.get(tgid)?;
    raw.attached_comms.contains(comm).then(|| comm.clone())
}

/// The waker of most of the wait, when one did more than half of it.
fn main_waker<'a>(wakers: &HashMap<&'a str, u64>) -> Option<&'a str> {
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
fn stable_fd_name(path: &str) -> std::borrow::Cow<'_, str> {
    match path.split_once(":[") {
        Some((kind, _)) if path.ends_with(']') => return kind.into(),
        _ => {}
    }
    match path.rsplit_once('/') {
        Some((dir, file)) if file.len() >= 8 && file.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("{dir}/*").into()
        }
        _ => path.into(),
    }
}

/// Time the traced threads were runnable but not running: one row for the whole tree per
/// kind of thread that had the CPU. Behind scalprof itself, the wait is the observer's
/// (the clean repeats do not have it): attributed to it, never a cause.
fn add_runqueue_row(raw: &RawLocks, rows: &mut Vec<LockRow>) {
    for (behind, name, address, attributed_to) in [
        (RunQueueBehind::Own, CPU_WAIT, "runqueue", None),
        (
            RunQueueBehind::Other,
            CPU_WAIT_OTHER,
            "runqueue:other",
            None,
        ),
        (
            RunQueueBehind::Observer,
            CPU_WAIT_OBSERVER,
            "runqueue:scalprof",
            Some("the observer"),
        ),
    ] {
        let of: Vec<&RunQueueRaw> = raw.runqueue.iter().filter(|r| r.behind == behind).collect();
        if of.is_empty() {
            continue;
        }
        rows.push(LockRow {
            scope: Scope::Kernel,
            name: name.into(),
            lock_type: LockKind::CpuWait,
            address: address.into(),
            count: of.iter().map(|r| r.count).sum(),
            total_wait_ns: of.iter().map(|r| r.total_ns).sum(),
            max_wait_ns: of.iter().map(|r| r.max_ns).max().unwrap_or(0),
            callers: Vec::new(),
            attributed_to: attributed_to.map(Into::into),
            wait_ns_per_op: None,
            spin_ns: None,
            woken_by: None,
            process: None,
            peer_attached: false,
        });
    }
}

/// The frames of a stack copy outside libc and the loader, innermost first (the first is
/// the function that waits), and the libc frames above them (they tell the kind of
/// wait). `None` when the copy's process map was not read.
fn snapshot_frames(
    raw: &RawLocks,
    s: &StackSnapshot,
    symbols: &mut Symbols,
    spaces: &mut HashMap<u32, UserSpace>,
) -> Option<(Vec<String>, Vec<String>)> {
    let maps = raw.maps.get(&s.tgid)?;
    let space = spaces
        .entry(s.tgid)
        .or_insert_with(|| UserSpace::from_maps(maps, &mut symbols.files));
    let addrs = space.unwind(s.ip, s.sp, s.bp, &s.stack);
    let mut libc = Vec::new();
    let mut own = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        let lookup = if i == 0 { a } else { a.saturating_sub(1) };
        let Some((func, path)) = space.symbolize(lookup) else {
            continue;
        };
        if is_runtime_library(&path) {
            if own.is_empty() && !libc.contains(&func) && libc.len() < 16 {
                libc.push(func);
            }
        } else {
            own.push(func);
        }
    }
    Some((own, libc))
}

/// A frame named only by its file and offset (`libsqlite3.so.0.8.6+0xaa1b4`: a stripped
/// library's internal function).
fn is_unnamed_frame(f: &str) -> bool {
    f.contains("+0x")
}

/// The function that waits, for a wait's name: the innermost frame outside libc; if a
/// stripped library left it unnamed, with the nearest named function that called it
/// (`libsqlite3.so.0.8.6+0xaa1b4 under sqlite3_step`).
fn waiting_function(own: &[String]) -> Option<String> {
    let first = own.first()?;
    if !is_unnamed_frame(first) {
        return Some(first.clone());
    }
    Some(match own.iter().find(|f| !is_unnamed_frame(f)) {
        Some(named) => format!("{first} under {named}"),
        None => first.clone(),
    })
}

/// A name made of an address (`heap 0x…`, `anon 0x…`, `stack 0x…`, `0x…`): no symbol.
fn is_dynamic_address_name(name: &str) -> bool {
    ["heap 0x", "anon 0x", "stack 0x", "0x"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The caller with the most wait.
fn top_caller(callers: &HashMap<String, u64>) -> Option<&str> {
    callers
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(f, _)| f.as_str())
}

/// Offset of `__g_signals` in glibc's `pthread_cond_t` (2.25 and later): the futex words
/// condvar waiters sleep on.
const COND_SIGNALS_OFFSET: u64 = 40;

/// `gil_cond+0x2c` (a waiter on the second signal word of `gil_cond`) → `gil_cond`;
/// `_PyRuntime+0x1b4` → `_PyRuntime+0x188`, where that condvar starts. A name that is not
/// `symbol+offset` with room for the offset is left as it is.
fn condvar_name(name: &str) -> String {
    let Some((sym, off)) = name.rsplit_once("+0x") else {
        return name.to_string();
    };
    let Ok(off) = u64::from_str_radix(off, 16) else {
        return name.to_string();
    };
    match (off & !7).checked_sub(COND_SIGNALS_OFFSET) {
        Some(0) => sym.to_string(),
        Some(start) => format!("{sym}+{start:#x}"),
        None => name.to_string(),
    }
}

/// Returns (snapshots, snapshots that named a caller).
fn add_user_rows(raw: &RawLocks, symbols: &mut Symbols, rows: &mut Vec<LockRow>) -> (u64, u64) {
    let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
    // Per (tgid, uaddr): caller → wait, and the libc frames seen (to classify the wait).
    let mut callers: HashMap<(u32, u64), HashMap<String, u64>> = HashMap::new();
    let mut libc_frames: HashMap<(u32, u64), Vec<String>> = HashMap::new();
    let mut resolved = 0;
    for s in raw.snapshots.iter().filter(|s| !s.syscall) {
        let Some((own, libc)) = snapshot_frames(raw, s, symbols, &mut spaces) else {
            continue;
        };
        let caller = own.into_iter().next();
        let seen = libc_frames.entry((s.tgid, s.uaddr)).or_default();
        for f in libc {
            if !seen.contains(&f) && seen.len() < 16 {
                seen.push(f);
            }
        }
        if let Some(c) = caller {
            resolved += 1;
            let w = callers
                .entry((s.tgid, s.uaddr))
                .or_default()
                .entry(c)
                .or_default();
            *w = w.saturating_add(s.wait_ns.max(1));
        }
    }
    // Rows by (name, kind), summed over processes of the tree.
    let mut by_name: HashMap<(String, LockKind), (LockRow, HashMap<String, u64>)> = HashMap::new();
    // Wait per process of each row, to say which attached process did it.
    let mut procs: HashMap<(String, LockKind), HashMap<u32, u64>> = HashMap::new();
    for u in &raw.user {
        let maps = raw.maps.get(&u.tgid).map(Vec::as_slice).unwrap_or(&[]);
        let kind = user_wait_kind(
            libc_frames
                .get(&(u.tgid, u.uaddr))
                .map(Vec::as_slice)
                .unwrap_or(&[]),
        );
        let kind = if kind == LockKind::Futex && matches!(u.op, 6 | 13) {
            LockKind::PiMutex
        } else {
            kind
        };
        // No stack copy to tell: a futex at the top of an anonymous mapping is a thread
        // descriptor's tid, which only pthread_join waits on.
        let kind = if kind == LockKind::Futex && is_thread_descriptor(u.uaddr, maps) {
            LockKind::Join
        } else {
            kind
        };
        // Each thread's join waits on its own descriptor: one row for all of them.
        let name = if kind == LockKind::Join {
            "pthread_join".to_string()
        } else if kind == LockKind::Condvar {
            // Waiters sleep on one of the condvar's two signal words: name the condvar.
            condvar_name(&name_user_address(u.uaddr, maps, symbols))
        } else {
            name_user_address(u.uaddr, maps, symbols)
        };
        // A lock in allocated memory has a new address in every run (ASLR, the
        // allocator): name it by the function that takes it, so that repeats and points
        // agree. The address stays in the row.
        let name = match callers.get(&(u.tgid, u.uaddr)).and_then(top_caller) {
            Some(caller) if is_dynamic_address_name(&name) => {
                let place = name.split(' ').next().unwrap_or("heap");
                format!("{kind}@{caller} ({place})")
            }
            _ => name,
        };
        let entry = by_name
            .entry((name.clone(), kind.clone()))
            .or_insert_with(|| {
                (
                    LockRow {
                        scope: Scope::User,
                        name,
                        lock_type: kind,
                        address: format!("{:#x}", u.uaddr),
                        count: 0,
                        total_wait_ns: 0,
                        max_wait_ns: 0,
                        callers: Vec::new(),
                        attributed_to: None,
                        wait_ns_per_op: None,
                        spin_ns: None,
                        woken_by: None,
                        process: None,
                        peer_attached: false,
                    },
                    HashMap::new(),
                )
            });
        entry.0.count += u.count;
        entry.0.total_wait_ns += u.total_ns;
        entry.0.max_wait_ns = entry.0.max_wait_ns.max(u.max_ns);
        *procs
            .entry((entry.0.name.clone(), entry.0.lock_type.clone()))
            .or_default()
            .entry(u.tgid)
            .or_default() += u.total_ns;
        if let Some(c) = callers.get(&(u.tgid, u.uaddr)) {
            for (f, w) in c {
                *entry.1.entry(f.clone()).or_default() += w;
            }
        }
    }
    for (key, (mut row, c)) in by_name {
        let total: u64 = c.values().sum();
        row.callers = top_callers(c, total);
        row.process = procs.get(&key).and_then(|p| attached_process(raw, p));
        rows.push(row);
    }
    let copies = raw.snapshots.iter().filter(|s| !s.syscall).count();
    (copies as u64, resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_names_are_told_from_symbols_and_the_heaviest_caller_names_them() {
        assert!(is_dynamic_address_name("heap 0x55e01aaf2ee8"));
        assert!(is_dynamic_address_name("0x7f00"));
        assert!(!is_dynamic_address_name("table_lock"));
        assert!(!is_dynamic_address_name("libfoo.so+0x40"));
        let callers: HashMap<String, u64> = [("a".to_string(), 5), ("b".to_string(), 9)]
            .into_iter()
            .collect();
        assert_eq!(top_caller(&callers), Some("b"));
    }

    #[test]
    fn a_condvar_is_named_by_where_it_starts_not_by_its_signal_words() {
        assert_eq!(condvar_name("gil_cond+0x28"), "gil_cond");
        assert_eq!(condvar_name("gil_cond+0x2c"), "gil_cond");
        assert_eq!(condvar_name("_PyRuntime+0x1b4"), "_PyRuntime+0x188");
        assert_eq!(condvar_name("heap 0x55e01aaf2ee8"), "heap 0x55e01aaf2ee8");
        assert_eq!(condvar_name("state+0x8"), "state+0x8");
    }

    #[test]
    fn a_wait_names_its_peer_only_when_one_waker_did_most_of_it() {
        let w: HashMap<&str, u64> = [("producer", 70), ("kworker/0:1", 30)]
            .into_iter()
            .collect();
        assert_eq!(main_waker(&w), Some("producer"));
        let w: HashMap<&str, u64> = [("a", 50), ("b", 50)].into_iter().collect();
        assert_eq!(main_waker(&w), None);
        // Pipes and sockets by kind (their numbers change every run), files by path.
        assert_eq!(stable_fd_name("pipe:[40261]"), "pipe");
        assert_eq!(stable_fd_name("socket:[77]"), "socket");
        assert_eq!(stable_fd_name("/var/lib/db/wal"), "/var/lib/db/wal");
        assert_eq!(
            stable_fd_name("/var/lib/postgresql/15/main/pg_wal/000000010000000000000004"),
            "/var/lib/postgresql/15/main/pg_wal/*"
        );
        assert_eq!(stable_fd_name("/tmp/deadbeef.db"), "/tmp/deadbeef.db");
        // Kernel locks the tracepoints miss are told from where their waiters block.
        assert_eq!(
            untraced_kernel_lock("__vma_start_write").map(|l| l.0),
            Some("vma lock")
        );
        assert!(untraced_kernel_lock("pipe_read").is_none());
    }

    #[test]
    fn a_stripped_frame_is_named_with_the_named_function_that_called_it() {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            waiting_function(&own(&[
                "libsqlite3.so.0.8.6+0xaa1b4",
                "libsqlite3.so.0.8.6+0x1c0",
                "sqlite3_step",
                "main"
            ]))
            .as_deref(),
            Some("libsqlite3.so.0.8.6+0xaa1b4 under sqlite3_step")
        );
        assert_eq!(
            waiting_function(&own(&["busy_wait_lock", "worker"])).as_deref(),
            Some("busy_wait_lock")
        );
        assert_eq!(
            waiting_function(&own(&["sort+0xb25c"])).as_deref(),
            Some("sort+0xb25c")
        );
        assert_eq!(waiting_function(&[]), None);
    }
}
