//! User futex waits as rows: the address named through the process's mappings and ELF
//! symbols, the kind (mutex, condvar, join…) from the waiter's libc frames, the callers
//! from its copied user stack.

use std::collections::{HashMap, HashSet};

use scalprof_model::locks::{
    CallerNamed, ChanSide, HoldTimes, LockAddress, LockKind, LockPlace, LockRow, ProcMap, RawLocks,
    Region, Scope, UserLockRaw,
};
use scalprof_model::vocabulary::{is_runtime_service_thread, user_wait_kind};

use super::holders::{blocked_target, holder_of, holder_waits};
use super::holders::{HolderEvidence, HolderSamples, WaitTarget};
use super::rows::{top_caller, RowBuilder, RowKey, RowName};
use super::stacks::snapshot_frames_rooted;
use crate::profile::{Symbols, UserSpace};

/// Whether `addr` lies in the last 16 KiB of an anonymous mapping: where glibc puts a
/// thread's descriptor (struct pthread, whose tid field pthread_join waits on) above its stack.
pub(super) fn is_thread_descriptor(addr: u64, maps: &[ProcMap]) -> bool {
    maps.iter()
        .any(|m| m.path.is_empty() && addr >= m.start && addr < m.end && m.end - addr <= 16 * 1024)
}

/// Where a user futex address is, from the process's mappings and the ELF symbols.
pub(super) fn place_of(addr: u64, maps: &[ProcMap], symbols: &mut Symbols) -> LockPlace {
    let Some(m) = maps.iter().find(|m| addr >= m.start && addr < m.end) else {
        return LockPlace::Dynamic { region: None, addr };
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
        // The file the process mapped, or none: a path may name another file by now.
        let mapped = scalprof_debuginfo::mapped::Mapped {
            path: &fm.path,
            dev: fm.dev,
            inode: fm.inode,
            live: None,
        };
        if let Ok(elf) = symbols.files.get_mapped(&mapped) {
            // Load bias from the file's first mapping (file offset 0).
            let base = maps
                .iter()
                .find(|p| p.path == fm.path && p.offset == 0)
                .map(|p| p.start);
            if let (Some(base), Some(image)) = (base, elf.image_base()) {
                let svma = addr.wrapping_sub(base).wrapping_add(image);
                if let Some((name, offset)) = elf.object(svma) {
                    return LockPlace::Symbol {
                        name: name.to_string(),
                        offset,
                    };
                }
            }
        }
    }
    let dynamic = |region| LockPlace::Dynamic {
        region: Some(region),
        addr,
    };
    match m.path.as_str() {
        "[heap]" => dynamic(Region::Heap),
        "[stack]" => dynamic(Region::Stack),
        "" => dynamic(Region::Anon),
        p => LockPlace::File {
            file: p.rsplit('/').next().unwrap_or(p).to_string(),
            offset: addr - m.start + m.offset,
        },
    }
}

/// Offset of `__g_signals` in glibc's `pthread_cond_t` (2.25 and later): the futex words
/// condvar waiters sleep on.
pub(super) const COND_SIGNALS_OFFSET: u64 = 40;

/// `gil_cond+0x2c` (a waiter on the second signal word of `gil_cond`) → `gil_cond`;
/// `_PyRuntime+0x1b4` → `_PyRuntime+0x188`, where that condvar starts. A place with no
/// offset, or without room for the signal words before it, is left as it is.
pub(super) fn condvar_place(place: LockPlace) -> LockPlace {
    let start = |offset: u64| {
        (offset & !7)
            .checked_sub(COND_SIGNALS_OFFSET)
            .unwrap_or(offset)
    };
    match place {
        LockPlace::Symbol { name, offset } => LockPlace::Symbol {
            name,
            offset: start(offset),
        },
        LockPlace::File { file, offset } => LockPlace::File {
            file,
            offset: start(offset),
        },
        place => place,
    }
}

/// The row of a runtime's service threads' waits, and whom they are left to (listed,
/// never a cause).
pub const RUNTIME_SERVICE_THREADS: &str = "JVM service threads";
pub const RUNTIME_SERVICE_IDLE: &str =
    "the JVM's own threads (JIT compilers, garbage collectors, the VM thread) idling";

/// CPython's global interpreter lock, by the name its users know.
pub const GIL: &str = "GIL";

/// The functions CPython waits for its GIL in: `take_gil`, and where the compiler
/// inlined it, its condvar and mutex macros' functions or the `PyEval_` entry points.
const GIL_FUNCTIONS: &[&str] = &["take_gil", "drop_gil", "PyCOND_", "PyMUTEX_", "PyEval_"];

use scalprof_model::vocabulary::java_method;

/// A futex: (tgid, address).
type Futex = (u32, u64);

/// Rows for the futex waits, by (name, kind), summed over the processes of the tree.
/// Returns (snapshots, snapshots that named a caller).
pub(super) fn add_user_rows(
    raw: &RawLocks,
    symbols: &mut Symbols,
    on_cpu: &HolderSamples,
    rows: &mut Vec<LockRow>,
    thread_memory: &mut HashSet<RowKey>,
) -> (u64, u64) {
    let waits = FutexWaits::index(raw, symbols);
    let mut by_name: HashMap<RowKey, (RowBuilder, HolderEvidence)> = HashMap::new();
    // The row each futex went to, to name a holder's wait on another lock.
    let mut row_of: HashMap<Futex, String> = HashMap::new();
    let mut key_of: HashMap<Futex, RowKey> = HashMap::new();
    let mut named: Vec<(LockKind, RowName)> = raw
        .user
        .iter()
        .map(|u| {
            let maps = raw.maps.get(&u.tgid).map(Vec::as_slice).unwrap_or(&[]);
            let kind = waits.kind(u, maps);
            let name = waits.name(u, &kind, maps, symbols);
            (kind, name)
        })
        .collect();
    complete_chan_names(&mut named);
    for (u, (kind, name)) in raw.user.iter().zip(named) {
        let in_thread_memory = name.in_thread_memory();
        let name = name.text();
        if in_thread_memory {
            thread_memory.insert((name.clone(), kind.clone()));
        }
        let futex = (u.tgid, u.uaddr);
        let service = name == RUNTIME_SERVICE_THREADS;
        row_of.insert(futex, name.clone());
        key_of.insert(futex, (name.clone(), kind.clone()));
        let (b, holders) = by_name
            .entry((name.clone(), kind.clone()))
            .or_insert_with(|| {
                let row = LockRow {
                    address: LockAddress::Traced(u.uaddr),
                    ..LockRow::new(Scope::User, name, kind)
                };
                (RowBuilder::new(row), HolderEvidence::default())
            });
        b.add_wait(u.tgid, u.count, u.total_ns, u.max_ns);
        if service {
            b.row.attributed_to = Some(RUNTIME_SERVICE_IDLE.into());
        }
        b.add_callers(waits.callers.get(&futex));
        b.add_roots(waits.roots.get(&futex));
        holders.seen += waits.windows.get(&futex).copied().unwrap_or(0);
        holders.add_blocked(u.tgid, waits.blocked.get(&futex));
        holders.add_running(on_cpu.get(&(u.tgid, u.uaddr, None)));
        holders.add_released(waits.released.get(&futex));
    }
    let mut holds = holds_by_row(raw, &key_of);
    for (key, (b, holders)) in by_name {
        let mut row = b.finish(raw);
        name_holders(&mut row, holders, &row_of);
        row.hold = holds
            .remove(&key)
            .and_then(|(acquisitions, ns)| HoldTimes::of(acquisitions, ns));
        rows.push(row);
    }
    (waits.copies, waits.resolved)
}

/// A channel's row with one end unseen (`chan f → ?`: a wait on the channel's own mutex,
/// which either side takes) takes the name of the channel row that has its known end at
/// either end, when exactly one has it.
fn complete_chan_names(named: &mut [(LockKind, RowName)]) {
    // The channels seen with both ends, each once.
    let mut whole: Vec<(String, String)> = named
        .iter()
        .filter_map(|(_, n)| match n {
            RowName::Chan {
                sender: Some(s),
                receiver: Some(r),
            } => Some((s.clone(), r.clone())),
            _ => None,
        })
        .collect();
    whole.sort();
    whole.dedup();
    for (kind, name) in named.iter_mut() {
        let RowName::Chan { sender, receiver } = &*name else {
            continue;
        };
        if !matches!(kind, LockKind::Chan(_)) || (sender.is_some() && receiver.is_some()) {
            continue;
        }
        let Some(known) = sender.as_deref().or(receiver.as_deref()) else {
            continue;
        };
        let mut same = whole.iter().filter(|(s, r)| s == known || r == known);
        if let (Some((s, r)), None) = (same.next(), same.clone().next()) {
            *name = RowName::chan(Some(s), Some(r));
        }
    }
}

/// The timed holds of the locks that were waited for, by the row each went to: the
/// acquisitions and the sampled holds of the row's locks in every process.
fn holds_by_row(
    raw: &RawLocks,
    key_of: &HashMap<Futex, RowKey>,
) -> HashMap<RowKey, (u64, Vec<u64>)> {
    let mut out: HashMap<RowKey, (u64, Vec<u64>)> = HashMap::new();
    for h in &raw.holds {
        if let Some(key) = key_of.get(&(h.tgid, h.uaddr)) {
            let e = out.entry(key.clone()).or_default();
            e.0 += h.acquisitions;
            e.1.extend_from_slice(&h.holds_ns);
        }
    }
    out
}

/// What the holders did while the waiters waited: their share running and their own
/// waits; who they were, where they were sampled running then, else where they released
/// the lock.
fn name_holders(row: &mut LockRow, mut holders: HolderEvidence, row_of: &HashMap<Futex, String>) {
    if holders.seen > 0 {
        row.holder_running = holders.running.as_ref().map(|_| holders.running_share());
        let chained = std::mem::take(&mut holders.blocked);
        row.holder_waits = holder_waits(chained, row_of, holders.seen);
    }
    holders.name_holders(row);
}

/// What the waiters' and wakers' stack copies say of each futex's waits.
#[derive(Default)]
struct FutexWaits {
    /// The function that released the lock to a waiter → the wait it ended (from the
    /// wakers' copies).
    released: HashMap<Futex, HashMap<String, u64>>,
    /// The time of the waits whose waker was seen.
    windows: HashMap<Futex, u64>,
    /// The parts of it the wakers spent blocked in waits of their own, by what they
    /// waited on.
    blocked: HashMap<Futex, HashMap<WaitTarget, u64>>,
    /// Caller → wait (from the waiters' copies).
    callers: HashMap<Futex, HashMap<String, u64>>,
    /// The outermost program function of each futex's waiting threads → their wait.
    roots: HashMap<Futex, HashMap<String, u64>>,
    /// The libc frames seen, to classify the wait.
    libc_frames: HashMap<Futex, Vec<String>>,
    /// Of the waiters' copies, how many were of a runtime's service thread, and in all.
    service: HashMap<Futex, (u64, u64)>,
    /// The waiters' stack copies.
    copies: u64,
    /// The waiters' stack copies that named a caller.
    resolved: u64,
}

impl FutexWaits {
    /// Reads every futex wait's stack copies.
    fn index(raw: &RawLocks, symbols: &mut Symbols) -> FutexWaits {
        let mut waits = FutexWaits::default();
        let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
        waits.add_released(raw, symbols, &mut spaces);
        waits.add_windows(raw);
        waits.add_waiters(raw, symbols, &mut spaces);
        waits
    }

    /// Where the wakers released each lock, by the wait it ended.
    fn add_released(
        &mut self,
        raw: &RawLocks,
        symbols: &mut Symbols,
        spaces: &mut HashMap<u32, UserSpace>,
    ) {
        for s in raw
            .snapshots
            .iter()
            .filter(|s| s.waker.is_some() && !s.syscall)
        {
            let Some(holder) = holder_of(raw, s, symbols, spaces) else {
                continue;
            };
            let w = self
                .released
                .entry((s.waiter_tgid, s.uaddr))
                .or_default()
                .entry(holder)
                .or_default();
            *w = w.saturating_add(s.wait_ns.max(1));
        }
    }

    /// The time of the waits whose waker was seen, and the wakers' own waits in it.
    fn add_windows(&mut self, raw: &RawLocks) {
        for s in raw
            .snapshots
            .iter()
            .filter(|s| s.waker.is_some() && !s.syscall && s.wait_ns > 0)
        {
            let futex = (s.waiter_tgid, s.uaddr);
            *self.windows.entry(futex).or_default() += s.wait_ns;
            let Some(b) = &s.holder_blocked else {
                continue;
            };
            // A holder's wait on this very lock (before it took it) is no link.
            if !b.syscall && b.uaddr == s.uaddr {
                continue;
            }
            let (target, ns) = blocked_target(b, s.wait_ns);
            *self
                .blocked
                .entry(futex)
                .or_default()
                .entry(target)
                .or_default() += ns;
        }
    }

    /// The waiters' callers and libc frames, from their stack copies.
    fn add_waiters(
        &mut self,
        raw: &RawLocks,
        symbols: &mut Symbols,
        spaces: &mut HashMap<u32, UserSpace>,
    ) {
        for s in raw
            .snapshots
            .iter()
            .filter(|s| !s.syscall && s.waker.is_none())
        {
            self.copies += 1;
            let seen = self.service.entry((s.tgid, s.uaddr)).or_default();
            seen.0 += u64::from(is_runtime_service_thread(&s.comm));
            seen.1 += 1;
            let Some(waiter) = snapshot_frames_rooted(raw, s, symbols, spaces) else {
                continue;
            };
            let (own, libc) = (waiter.own, waiter.libc);
            let seen = self.libc_frames.entry((s.tgid, s.uaddr)).or_default();
            for f in libc {
                if !seen.contains(&f) && seen.len() < 16 {
                    seen.push(f);
                }
            }
            if let Some(root) = waiter.root {
                let w = self
                    .roots
                    .entry((s.tgid, s.uaddr))
                    .or_default()
                    .entry(root)
                    .or_default();
                *w = w.saturating_add(s.wait_ns.max(1));
            }
            if let Some(c) = own.into_iter().next() {
                self.resolved += 1;
                let w = self
                    .callers
                    .entry((s.tgid, s.uaddr))
                    .or_default()
                    .entry(c)
                    .or_default();
                *w = w.saturating_add(s.wait_ns.max(1));
            }
        }
    }

    /// Whether a futex's waiters wait in CPython's GIL code ([`GIL_FUNCTIONS`]); in a
    /// stripped interpreter (Debian's), where no caller has a name, whether it is one of
    /// `_PyRuntime`'s condvars or mutexes at all: the GIL is the one threads contend.
    fn waits_for_gil(&self, u: &UserLockRaw, kind: &LockKind) -> bool {
        let Some(callers) = self.callers.get(&(u.tgid, u.uaddr)) else {
            return false;
        };
        let named = |f: &String| GIL_FUNCTIONS.iter().any(|g| f.contains(g));
        let stripped = |f: &String| f.starts_with('[') && f.contains("]+0x");
        callers.keys().any(named)
            || (matches!(kind, LockKind::Condvar | LockKind::Mutex) && callers.keys().all(stripped))
    }

    /// Whether every waiter's copy of a futex was a runtime's service thread's (the JVM's
    /// compilers, collectors and VM thread, told by name).
    fn is_service(&self, u: &UserLockRaw) -> bool {
        self.service
            .get(&(u.tgid, u.uaddr))
            .is_some_and(|&(service, all)| all > 0 && service == all)
    }

    /// A futex's kind, from its waiters' libc frames. A futex waited on with the PI
    /// operations is a PI mutex. With no stack copy to tell, a futex at the top of an
    /// anonymous mapping is a thread descriptor's tid, which only pthread_join waits on.
    fn kind(&self, u: &UserLockRaw, maps: &[ProcMap]) -> LockKind {
        let libc = self
            .libc_frames
            .get(&(u.tgid, u.uaddr))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        // The JVM launcher's main thread waiting (Thread.join is Object.wait) while the
        // program's threads run: the harness's structure, as a C main's pthread_join.
        let launcher = self
            .callers
            .get(&(u.tgid, u.uaddr))
            .and_then(top_caller)
            .is_some_and(|c| c == "JavaMain");
        if launcher {
            return LockKind::Join;
        }
        match user_wait_kind(libc) {
            LockKind::Futex if matches!(u.op, 6 | 13) => LockKind::PiMutex,
            LockKind::Futex if is_thread_descriptor(u.uaddr, maps) => LockKind::Join,
            kind => kind,
        }
    }

    /// A futex's row name: its symbol, the condvar it is a signal word of, for every
    /// thread's join one name, or a channel's two ends.
    fn name(
        &self,
        u: &UserLockRaw,
        kind: &LockKind,
        maps: &[ProcMap],
        symbols: &mut Symbols,
    ) -> RowName {
        // A runtime's service threads wait on locks and condvars of their own, idly: one
        // row for all of them, which is no cause.
        if self.is_service(u) {
            return RowName::Named(RUNTIME_SERVICE_THREADS.to_string());
        }
        // A channel's waiters park on futexes of their own: the channel by its two ends,
        // the waiters' function and the one that ended their waits.
        if let LockKind::Chan(side) = kind {
            let futex = (u.tgid, u.uaddr);
            let caller = self.callers.get(&futex).and_then(top_caller);
            // A wait on the channel's own mutex (no side) was ended by whoever held it,
            // not the other end: that end stays unseen here.
            let other = self
                .released
                .get(&futex)
                .and_then(top_caller)
                .filter(|o| Some(*o) != caller && side.is_some());
            return match side {
                Some(ChanSide::Recv) => RowName::chan(other, caller),
                _ => RowName::chan(caller, other),
            };
        }
        // Each thread's join waits on its own descriptor: one row for all of them.
        if *kind == LockKind::Join {
            return RowName::Named("pthread_join".to_string());
        }
        let place = place_of(u.uaddr, maps, symbols);
        // Waiters sleep on one of the condvar's two signal words: name the condvar.
        let place = if *kind == LockKind::Condvar {
            condvar_place(place)
        } else {
            place
        };
        // CPython's GIL: a mutex and a condvar inside `_PyRuntime` that take_gil waits on.
        if place.symbol() == Some("_PyRuntime") && self.waits_for_gil(u, kind) {
            return RowName::Named(GIL.to_string());
        }
        // A lock in allocated memory has a new address in every run (ASLR, the
        // allocator): name it by the function that takes it, so that repeats and points
        // agree. The address stays in the row.
        let text = match self.callers.get(&(u.tgid, u.uaddr)).and_then(top_caller) {
            // A Java thread parks on a condvar of its own: the monitor or park is named by
            // the Java method that waited, as its users know it (`SyncCounter.add`).
            Some(caller) if matches!(kind, LockKind::JavaMonitor | LockKind::JavaPark) => {
                format!("{kind}@{}", java_method(caller))
            }
            Some(caller) => match place.region() {
                Some(region) => CallerNamed {
                    kind: kind.clone(),
                    caller: Some(caller.to_string()),
                    region,
                }
                .to_string(),
                None => place.to_string(),
            },
            None => place.to_string(),
        };
        RowName::Placed { text, place }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_row_with_an_end_unseen_takes_the_name_of_the_channel_with_that_end() {
        let chan = LockKind::Chan(None);
        let mut named = vec![
            (
                LockKind::Chan(Some(ChanSide::Send)),
                RowName::chan(Some("p"), Some("c")),
            ),
            (chan.clone(), RowName::chan(Some("c"), None)),
            (chan.clone(), RowName::chan(None, Some("p"))),
            (chan.clone(), RowName::chan(Some("x"), None)),
            (LockKind::Mutex, RowName::chan(Some("c"), None)),
        ];
        complete_chan_names(&mut named);
        let names: Vec<String> = named.iter().map(|(_, n)| n.text()).collect();
        assert_eq!(
            names,
            [
                "chan p → c",
                "chan p → c",
                "chan p → c",
                "chan x → ?",
                "chan c → ?"
            ]
        );
        // Two channels share the end: which one is not known, the name stays.
        let mut two = vec![
            (chan.clone(), RowName::chan(Some("p"), Some("c"))),
            (chan.clone(), RowName::chan(Some("p"), Some("d"))),
            (chan.clone(), RowName::chan(Some("p"), None)),
        ];
        complete_chan_names(&mut two);
        assert_eq!(two[2].1.text(), "chan p → ?");
    }
}
