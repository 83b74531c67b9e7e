//! Blocking system calls as rows: file locks, sleeps, I/O, polls and other waits, named by
//! what they wait on (a file, a socket, the disk) and who woke them.

use std::collections::HashMap;

use scalprof_debuginfo::Kallsyms;
use scalprof_model::locks::is_fd_syscall;
use scalprof_model::locks::{
    CallWait, LockAddress, LockKind, LockRow, RawLocks, Scope, UserLockRaw,
};
use scalprof_model::vocabulary::{
    is_disk_wait, is_lock_internal, is_scheduler_frame, untraced_kernel_lock,
};

use super::calls::{is_sleep_call, syscall_name, syscall_wait_kind};
use super::holders::{blocked_target, holder_of, holder_waits};
use super::holders::{HolderEvidence, HolderSamples, WaitTarget};
use super::rows::{top_caller, RowBuilder, RowKey};
use super::stacks::{snapshot_frames_rooted, waiting_function};
use crate::profile::{Symbols, UserSpace};

/// One system call's waits: (tgid, first argument, call number).
type CallKey = (u32, u64, u32);

/// Rows for the waits in blocking system calls, named from the stacks they blocked in:
/// a file lock by its file, a sleep by the function that sleeps (`sleep in
/// sqliteDefaultBusyCallback`), a wait the kernel stack shows is for the disk as disk I/O,
/// other I/O by the call and what the descriptor named (a file; a pipe or a socket by
/// kind, as their inode numbers change every run).
pub(super) fn add_syscall_rows(
    raw: &RawLocks,
    symbols: &mut Symbols,
    on_cpu: &HolderSamples,
    rows: &mut Vec<LockRow>,
) {
    let waits = SyscallWaits::index(raw, symbols);
    let mut by_name: HashMap<RowKey, (RowBuilder, HolderEvidence)> = HashMap::new();
    for w in &raw.syscalls {
        let key = (w.tgid, w.uaddr, w.op);
        let call = waits.classify(raw, w);
        let (b, peers) = by_name
            .entry((call.name.clone(), call.kind.clone()))
            .or_insert_with(|| (RowBuilder::new(call.new_row(w)), HolderEvidence::default()));
        b.add_wait(w.tgid, w.count, w.total_ns, w.max_ns);
        if b.row.woken_by.is_none() {
            b.row.woken_by = call.peer.map(str::to_string);
            b.row.peer_attached = call
                .peer
                .is_some_and(|p| raw.attached_comms.iter().any(|c| c == p));
        }
        b.add_callers(call.callers);
        b.add_roots(waits.user_roots.get(&key));
        peers.add_running(on_cpu.get(&(w.tgid, w.uaddr, Some(w.op))));
        peers.seen += waits.seen.get(&key).copied().unwrap_or(0);
        peers.add_blocked(w.tgid, waits.blocked.get(&key));
        peers.add_released(waits.answered.get(&key));
    }
    for (b, peers) in by_name.into_values() {
        let mut row = b.finish(raw);
        name_peers(&mut row, peers);
        rows.push(row);
    }
}

/// A sleep: what the other threads ran while it slept (the holder of what a retry loop
/// waits for is among them). A wait for a peer: what the answering thread ran meanwhile,
/// else where it answered from, and its own waits (a server's disk).
fn name_peers(row: &mut LockRow, mut peers: HolderEvidence) {
    if peers.seen == 0 {
        return;
    }
    if peers.sampled().0 > 0 {
        row.holder_running = Some(peers.running_share());
    }
    peers.name_holders(row);
    row.holder_waits = holder_waits(peers.blocked, &HashMap::new(), peers.seen);
}

/// What the sampled stack copies, kernel stacks and wakeups say of each call's waits.
#[derive(Default)]
struct SyscallWaits<'a> {
    /// The time of the sampled waits whose holder is known (sleeps: the other threads; a
    /// peer's answer: the thread that wrote it), for the share it ran during them.
    seen: HashMap<CallKey, u64>,
    /// The answering threads' own waits meanwhile (a server's disk).
    blocked: HashMap<CallKey, HashMap<WaitTarget, u64>>,
    /// Where the answering threads answered from.
    answered: HashMap<CallKey, HashMap<String, u64>>,
    /// The user function that made each call.
    user_callers: HashMap<CallKey, HashMap<String, u64>>,
    /// The outermost program function of each call's waiting threads.
    user_roots: HashMap<CallKey, HashMap<String, u64>>,
    /// Where in the kernel each call blocked.
    kernel_callers: HashMap<CallKey, HashMap<String, u64>>,
    /// Sampled wait per call: (on the disk, in all).
    disk: HashMap<CallKey, (u64, u64)>,
    /// The kernel lock the tracepoints miss that a call blocked on, its kind and the
    /// sampled wait on it.
    locked: HashMap<CallKey, (&'static str, LockKind, u64)>,
    /// Who took that lock: the first frame past the lock's own functions.
    lock_callers: HashMap<CallKey, HashMap<String, u64>>,
    /// Who woke each call's sampled waits, by command name.
    wakers: HashMap<CallKey, HashMap<&'a str, u64>>,
}

/// How one call's waits are shown: the row they go to, and what fills it in.
struct CallRow<'w> {
    name: String,
    kind: LockKind,
    scope: Scope,
    /// The task that ended most of the waits, for a wait for data or room.
    peer: Option<&'w str>,
    /// The user functions that made the call; where none was found, the kernel path it
    /// blocked in (or who took the kernel lock it blocked on).
    callers: Option<&'w HashMap<String, u64>>,
}

impl<'a> SyscallWaits<'a> {
    /// Reads every call's sampled stacks and wakeups.
    fn index(raw: &'a RawLocks, symbols: &mut Symbols) -> SyscallWaits<'a> {
        let mut waits = SyscallWaits::default();
        let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
        waits.add_answers(raw, symbols, &mut spaces);
        waits.add_user_callers(raw, symbols, &mut spaces);
        waits.add_kernel_stacks(raw, &symbols.kernel);
        waits.add_wakers(raw);
        waits
    }

    /// The sampled waits whose holder is known: their time, the answering threads' own
    /// waits meanwhile, and where they answered from.
    fn add_answers(
        &mut self,
        raw: &RawLocks,
        symbols: &mut Symbols,
        spaces: &mut HashMap<u32, UserSpace>,
    ) {
        for s in raw.snapshots.iter().filter(|s| s.syscall && s.wait_ns > 0) {
            let key = (s.waiter_tgid, s.uaddr, s.op);
            match s.waker {
                None if is_sleep_call(s.op) => {}
                None => continue,
                Some(_) => {
                    if let Some(b) = &s.holder_blocked {
                        let (target, ns) = blocked_target(b, s.wait_ns);
                        *self
                            .blocked
                            .entry(key)
                            .or_default()
                            .entry(target)
                            .or_default() += ns;
                    }
                    if let Some(h) = holder_of(raw, s, symbols, spaces) {
                        *self.answered.entry(key).or_default().entry(h).or_default() += s.wait_ns;
                    }
                }
            }
            *self.seen.entry(key).or_default() += s.wait_ns;
        }
    }

    /// The user function that made each call, from the sampled stack copies.
    fn add_user_callers(
        &mut self,
        raw: &RawLocks,
        symbols: &mut Symbols,
        spaces: &mut HashMap<u32, UserSpace>,
    ) {
        for s in raw
            .snapshots
            .iter()
            .filter(|s| s.syscall && s.waker.is_none())
        {
            let waiter = snapshot_frames_rooted(raw, s, symbols, spaces);
            if let Some(root) = waiter.as_ref().and_then(|w| w.root.as_ref()) {
                let w = self
                    .user_roots
                    .entry((s.tgid, s.uaddr, s.op))
                    .or_default()
                    .entry(root.clone())
                    .or_default();
                *w = w.saturating_add(s.wait_ns.max(1));
            }
            if let Some(c) = waiter.as_ref().and_then(|w| waiting_function(&w.own)) {
                let w = self
                    .user_callers
                    .entry((s.tgid, s.uaddr, s.op))
                    .or_default()
                    .entry(c)
                    .or_default();
                *w = w.saturating_add(s.wait_ns.max(1));
            }
        }
    }

    /// Where in the kernel each call blocked: how much of it was a wait for the disk or
    /// on a kernel lock the tracepoints miss, and the first frame outside the scheduler.
    fn add_kernel_stacks(&mut self, raw: &RawLocks, kallsyms: &Kallsyms) {
        for k in &raw.syscall_stacks {
            let frames: Vec<&str> = k.stack.iter().filter_map(|&a| kallsyms.lookup(a)).collect();
            let key = (k.tgid, k.uaddr, k.op);
            let d = self.disk.entry(key).or_default();
            d.1 += k.total_ns;
            if frames.iter().any(|f| is_disk_wait(f)) {
                d.0 += k.total_ns;
            }
            self.add_untraced_lock(key, &frames, k.total_ns);
            if let Some(f) = frames.iter().find(|f| !is_scheduler_frame(f)) {
                *self
                    .kernel_callers
                    .entry(key)
                    .or_default()
                    .entry(f.to_string())
                    .or_default() += k.total_ns;
            }
        }
    }

    /// A kernel stack's wait on a lock the tracepoints miss, and who took it: the first
    /// frame past the lock's own functions.
    fn add_untraced_lock(&mut self, key: CallKey, frames: &[&str], ns: u64) {
        let Some((i, (name, kind))) = frames
            .iter()
            .enumerate()
            .find_map(|(i, f)| untraced_kernel_lock(f).map(|l| (i, l)))
        else {
            return;
        };
        self.locked.entry(key).or_insert((name, kind, 0)).2 += ns;
        if let Some(c) = frames[i..]
            .iter()
            .find(|f| untraced_kernel_lock(f).is_none() && !is_lock_internal(f))
        {
            *self
                .lock_callers
                .entry(key)
                .or_default()
                .entry(c.to_string())
                .or_default() += ns;
        }
    }

    /// Who woke each call's sampled waits, by command name.
    fn add_wakers(&mut self, raw: &'a RawLocks) {
        for k in &raw.wakers {
            if let Some(comm) = raw.waker_comms.get(&k.waker) {
                *self
                    .wakers
                    .entry((k.tgid, k.uaddr, k.op))
                    .or_default()
                    .entry(comm.as_str())
                    .or_default() += k.total_ns;
            }
        }
    }

    /// The row one call's waits go to: mostly on the disk, disk I/O; mostly blocked on a
    /// kernel lock the tracepoints do not see, that lock's row; else the call's own kind.
    fn classify(&self, raw: &RawLocks, w: &UserLockRaw) -> CallRow<'_> {
        let key = (w.tgid, w.uaddr, w.op);
        let (kind, scope) = syscall_wait_kind(w.op);
        let sampled = self.disk.get(&key).map_or(0, |d| d.1);
        let on_disk = self.disk.get(&key).is_some_and(|&(d, _)| 2 * d > sampled);
        let kind = if on_disk { LockKind::DiskIo } else { kind };
        let on_lock = self
            .locked
            .get(&key)
            .filter(|(_, _, ns)| sampled > 0 && 2 * ns > sampled);
        let (kind, scope) = match on_lock {
            Some((_, lock_kind, _)) => (lock_kind.clone(), Scope::Kernel),
            None => (kind, scope),
        };
        let user_callers = self.user_callers.get(&key);
        // Waiting for data or room: the task that ended most of the waits is the peer (a
        // wakeup from an interrupt names whoever it interrupted, so not for timers or
        // the disk).
        let peer = (kind == LockKind::Io)
            .then(|| self.wakers.get(&key).and_then(main_waker))
            .flatten();
        let (name, callers) = match on_lock {
            Some((lock, _, _)) => (lock.to_string(), self.lock_callers.get(&key)),
            None => (
                wait_name(raw, w, &kind, user_callers.and_then(top_caller)),
                user_callers.or_else(|| self.kernel_callers.get(&key)),
            ),
        };
        CallRow {
            name,
            kind,
            scope,
            peer,
            callers,
        }
    }
}

impl CallRow<'_> {
    /// The row, with no waits yet, for `w` and the calls named like it.
    fn new_row(&self, w: &UserLockRaw) -> LockRow {
        LockRow {
            address: match self.scope {
                Scope::File => LockAddress::Descriptor(w.uaddr),
                Scope::Kernel => LockAddress::Blocked,
                Scope::User => LockAddress::Syscall,
            },
            ..LockRow::new(self.scope, self.name.clone(), self.kind.clone())
        }
    }
}

/// A call's wait by what it waits for and who waits ([`CallWait`] writes the name).
fn wait_name(raw: &RawLocks, w: &UserLockRaw, kind: &LockKind, caller: Option<&str>) -> String {
    let object = is_fd_syscall(w.op)
        .then(|| raw.fd_paths.get(&(w.tgid, w.uaddr)))
        .flatten()
        .map(|path| stable_fd_name(path).into_owned());
    CallWait {
        kind: kind.clone(),
        call: syscall_name(w.op),
        object,
        fd: w.uaddr,
        caller: caller.map(str::to_string),
    }
    .to_string()
}

/// The path up to a random token that ends its file name, as `mkstemp` and `tempfile` make
/// them (`/tmp/willitscale.k2Jd9Q` → `/tmp/willitscale.`): 6 to 12 letters and digits after
/// a `.`, `_` or `-` (or `tmp`), either in a temporary folder or mixing upper and lower case
/// (or letters and two digits or more), which a chosen name rarely does.
fn random_suffix_stem(path: &str) -> Option<&str> {
    let file_start = path.rfind('/').map_or(0, |i| i + 1);
    let file = &path[file_start..];
    let mut token_len = file
        .bytes()
        .rev()
        .take_while(u8::is_ascii_alphanumeric)
        .count();
    if token_len == file.len() && file.starts_with("tmp") {
        token_len -= 3;
    }
    if !(6..=12).contains(&token_len) || token_len == file.len() {
        return None;
    }
    let cut = path.len() - token_len;
    let before = &path[file_start..cut];
    if !(before.ends_with(['.', '_', '-']) || before.ends_with("tmp")) {
        return None;
    }
    let token = &path[cut..];
    let upper = token.bytes().any(|b| b.is_ascii_uppercase());
    let lower = token.bytes().any(|b| b.is_ascii_lowercase());
    let digits = token.bytes().filter(u8::is_ascii_digit).count();
    let letters = token.len() - digits;
    let temporary = ["/tmp/", "/var/tmp/", "/dev/shm/", "/run/user/"]
        .iter()
        .any(|d| path.starts_with(d))
        || std::env::var("TMPDIR").is_ok_and(|t| !t.is_empty() && path.starts_with(&t));
    let random = (upper && lower) || (digits >= 2 && letters >= 2);
    (random || (temporary && token_len == 6)).then_some(&path[..cut])
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
    // An unlinked file keeps its name with " (deleted)" after it, as /proc shows it.
    let (name, deleted) = match path.strip_suffix(" (deleted)") {
        Some(name) => (name, " (deleted)"),
        None => (path, ""),
    };
    if let Some(stem) = random_suffix_stem(name) {
        return format!("{stem}XXXXXX{deleted}").into();
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
