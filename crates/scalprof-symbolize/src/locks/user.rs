//! User futex waits as rows: the address named through the process's mappings and ELF
//! symbols, the kind (mutex, condvar, join…) from the waiter's libc frames, the callers
//! from its copied user stack.

use crate::profile::{BlamedLock, Symbols, UserSpace};
use scalprof_model::locks::top_callers;
use scalprof_model::locks::{HolderState, HolderWait, LockCaller, LockKind, Scope};
use scalprof_model::locks::{LockRow, ProcMap, RawLocks};
use scalprof_model::vocabulary::user_wait_kind;
use std::collections::HashMap;

use super::*;

/// libc / dynamic loader / vDSO frames are the locking machinery of user space.
pub(crate) fn is_runtime_library(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.starts_with("libc.so")
        || file.starts_with("libpthread")
        || file.starts_with("ld-linux")
        || path.starts_with('[')
}

/// Whether `addr` lies in the last 16 KiB of an anonymous mapping: where glibc puts a
/// thread's descriptor (struct pthread, whose tid field pthread_join waits on) above its stack.
pub(super) fn is_thread_descriptor(addr: u64, maps: &[ProcMap]) -> bool {
    maps.iter()
        .any(|m| m.path.is_empty() && addr >= m.start && addr < m.end && m.end - addr <= 16 * 1024)
}

/// Names a user futex address from the process's mappings and the ELF symbols.
pub(super) fn name_user_address(addr: u64, maps: &[ProcMap], symbols: &mut Symbols) -> String {
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

/// Offset of `__g_signals` in glibc's `pthread_cond_t` (2.25 and later): the futex words
/// condvar waiters sleep on.
pub(super) const COND_SIGNALS_OFFSET: u64 = 40;

/// `gil_cond+0x2c` (a waiter on the second signal word of `gil_cond`) → `gil_cond`;
/// `_PyRuntime+0x1b4` → `_PyRuntime+0x188`, where that condvar starts. A name that is not
/// `symbol+offset` with room for the offset is left as it is.
pub(super) fn condvar_name(name: &str) -> String {
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

/// What a holder waited on: (a system call, not a futex; the call or futex operation; its
/// first argument or the futex).
pub(super) type WaitTarget = (bool, u32, u64);

/// Holder samples a lock needs before they name its holders: fewer say little about what
/// the holders did (a 20 µs wait holds a 1 ms-period sample 2% of the time).
pub(super) const MIN_HOLDER_SAMPLES: u64 = 3;

pub(super) fn with_state(mut holders: Vec<LockCaller>, state: HolderState) -> Vec<LockCaller> {
    for h in &mut holders {
        h.state = Some(state);
    }
    holders
}

/// Returns (snapshots, snapshots that named a caller).
pub(super) fn add_user_rows(
    raw: &RawLocks,
    symbols: &mut Symbols,
    on_cpu: &super::HolderSamples,
    rows: &mut Vec<LockRow>,
) -> (u64, u64) {
    let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
    // Per (tgid, uaddr): caller → wait, and the libc frames seen (to classify the wait).
    let mut callers: HashMap<(u32, u64), HashMap<String, u64>> = HashMap::new();
    let mut libc_frames: HashMap<(u32, u64), Vec<String>> = HashMap::new();
    // Per (tgid, uaddr): the function that released the lock to a waiter → the wait it
    // ended (from the wakers' copies).
    let mut holders: HashMap<(u32, u64), HashMap<String, u64>> = HashMap::new();
    for s in raw
        .snapshots
        .iter()
        .filter(|s| s.waker.is_some() && !s.syscall)
    {
        let Some(holder) = holder_of(raw, s, symbols, &mut spaces) else {
            continue;
        };
        let w = holders
            .entry((s.waiter_tgid, s.uaddr))
            .or_default()
            .entry(holder)
            .or_default();
        *w = w.saturating_add(s.wait_ns.max(1));
    }
    // Per (tgid, uaddr): the time of the waits whose waker was seen, and the parts of it
    // the wakers spent blocked in waits of their own (by what they waited on).
    let mut windows: HashMap<(u32, u64), u64> = HashMap::new();
    let mut blocked: HashMap<(u32, u64), HashMap<WaitTarget, u64>> = HashMap::new();
    for s in raw
        .snapshots
        .iter()
        .filter(|s| s.waker.is_some() && !s.syscall && s.wait_ns > 0)
    {
        *windows.entry((s.waiter_tgid, s.uaddr)).or_default() += s.wait_ns;
        if let Some(b) = s.holder_blocked {
            // A holder's wait on this very lock (before it took it) is no link.
            if !b.syscall && b.uaddr == s.uaddr {
                continue;
            }
            *blocked
                .entry((s.waiter_tgid, s.uaddr))
                .or_default()
                .entry((b.syscall, b.op, b.uaddr))
                .or_default() += b.ns.min(s.wait_ns);
        }
    }
    let mut resolved = 0;
    for s in raw
        .snapshots
        .iter()
        .filter(|s| !s.syscall && s.waker.is_none())
    {
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
    let mut held: HashMap<(String, LockKind), HashMap<String, u64>> = HashMap::new();
    let mut running: HashMap<(String, LockKind), BlamedLock> = HashMap::new();
    // Per row: the waker-seen wait time, and the holders' own waits in it by target.
    let mut seen_ns: HashMap<(String, LockKind), u64> = HashMap::new();
    let mut chained: HashMap<(String, LockKind), HashMap<(WaitTarget, u32), u64>> = HashMap::new();
    // The row each futex went to, to name a holder's wait on another lock.
    let mut row_of: HashMap<(u32, u64), String> = HashMap::new();
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
                        address: format!("{:#x}", u.uaddr),
                        ..LockRow::new(Scope::User, name, kind)
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
        let row_key = (entry.0.name.clone(), entry.0.lock_type.clone());
        row_of.insert((u.tgid, u.uaddr), entry.0.name.clone());
        if let Some(&w) = windows.get(&(u.tgid, u.uaddr)) {
            *seen_ns.entry(row_key.clone()).or_default() += w;
        }
        if let Some(b) = blocked.get(&(u.tgid, u.uaddr)) {
            let to = chained.entry(row_key).or_default();
            for (&target, &ns) in b {
                *to.entry((target, u.tgid)).or_default() += ns;
            }
        }
        if let Some(h) = on_cpu.get(&(u.tgid, u.uaddr, None)) {
            add_sampled(
                running
                    .entry((entry.0.name.clone(), entry.0.lock_type.clone()))
                    .or_default(),
                h,
            );
        }
        if let Some(h) = holders.get(&(u.tgid, u.uaddr)) {
            let to = held
                .entry((entry.0.name.clone(), entry.0.lock_type.clone()))
                .or_default();
            for (f, w) in h {
                *to.entry(f.clone()).or_default() += w;
            }
        }
    }
    for (key, (mut row, c)) in by_name {
        if let Some(&seen) = seen_ns.get(&key).filter(|&&n| n > 0) {
            row.holder_running = running.get(&key).map(|h| {
                (h.functions.values().map(|v| v.1).sum::<u64>() as f64 / seen as f64).min(1.0)
            });
            row.holder_waits = holder_waits(chained.remove(&key), &row_of, seen);
        }
        let total: u64 = c.values().sum();
        row.callers = top_callers(c, total);
        row.process = procs.get(&key).and_then(|p| attached_process(raw, p));
        // What the holders did while the waiters waited, where they were sampled
        // running then; else where they released the lock.
        let sampled = running
            .remove(&key)
            .filter(|h| h.functions.values().map(|v| v.0).sum::<u64>() >= MIN_HOLDER_SAMPLES);
        if let Some(h) = sampled {
            on_cpu_holders(&mut row, h);
        } else if let Some(h) = held.remove(&key) {
            let total: u64 = h.values().sum();
            row.holders = with_state(top_callers(h, total), HolderState::AtRelease);
        }
        rows.push(row);
    }
    let copies = raw
        .snapshots
        .iter()
        .filter(|s| !s.syscall && s.waker.is_none())
        .count();
    (copies as u64, resolved)
}

/// The holders' own waits as shares of the waker-seen wait time, largest first: a system
/// call by its name, a futex by the row its lock went to.
pub(super) fn holder_waits(
    chained: Option<HashMap<(WaitTarget, u32), u64>>,
    row_of: &HashMap<(u32, u64), String>,
    seen: u64,
) -> Vec<HolderWait> {
    let mut by_name: HashMap<(String, bool), u64> = HashMap::new();
    for (((syscall, op, uaddr), tgid), ns) in chained.unwrap_or_default() {
        let name = if syscall {
            super::syscall::syscall_name(op)
        } else {
            // A futex in shared memory has one address in every forked process.
            row_of
                .get(&(tgid, uaddr))
                .or_else(|| row_of.iter().find(|(k, _)| k.1 == uaddr).map(|(_, v)| v))
                .cloned()
                .unwrap_or_else(|| format!("futex {uaddr:#x}"))
        };
        *by_name.entry((name, !syscall)).or_default() += ns;
    }
    let mut v: Vec<HolderWait> = by_name
        .into_iter()
        .map(|((wait, lock), ns)| HolderWait {
            wait,
            lock,
            share: (ns as f64 / seen as f64).min(1.0),
        })
        .filter(|w| w.share >= 0.01)
        .collect();
    v.sort_by(|a, b| {
        b.share
            .total_cmp(&a.share)
            .then_with(|| a.wait.cmp(&b.wait))
    });
    v.truncate(3);
    v
}

/// The function whose critical section a waker's stack copy ends: the innermost frame
/// outside libc (the caller of the unlock), or, when that frame's call instruction called
/// another function of the program, that function, which tail-called the unlock
/// (`rebuild_index` ending in `jmp pthread_mutex_unlock` leaves only `worker` on the stack).
pub(super) fn holder_of(
    raw: &RawLocks,
    s: &scalprof_model::locks::StackSnapshot,
    symbols: &mut Symbols,
    spaces: &mut HashMap<u32, UserSpace>,
) -> Option<String> {
    let maps = raw.maps.get(&s.tgid)?;
    let space = spaces
        .entry(s.tgid)
        .or_insert_with(|| UserSpace::from_maps(maps, &mut symbols.files));
    let addrs = space.unwind(s.ip, s.sp, s.bp, &s.stack);
    let mut own: Vec<String> = Vec::new();
    let mut first_own = None;
    for (i, &a) in addrs.iter().enumerate() {
        let lookup = if i == 0 { a } else { a.saturating_sub(1) };
        let Some((func, path)) = space.symbolize(lookup) else {
            continue;
        };
        if is_runtime_library(&path) || scalprof_model::vocabulary::is_lock_wrapper(&func) {
            continue;
        }
        if first_own.is_none() {
            first_own = Some(i);
        }
        own.push(func);
    }
    let i = first_own?;
    if i > 0 {
        if let Some(callee) = space
            .called_at(addrs[i])
            .filter(|c| !scalprof_model::vocabulary::is_lock_wrapper(c))
        {
            if Some(&callee) != own.first() {
                return Some(callee);
            }
        }
    }
    waiting_function(&own)
}
