//! Who held what the waiters waited for: the function whose critical section a waker's
//! stack copy ends, what the holders were sampled running meanwhile, and their own waits.

use std::collections::HashMap;

use scalprof_model::locks::top_callers;
use scalprof_model::locks::{
    sort_holder_waits, HeldWait, HolderState, HolderWait, LockCaller, LockRow, RawLocks,
};
use scalprof_model::locks::{HolderBlocked, StackSnapshot};
use scalprof_model::profile::FoldedStack;
use scalprof_model::vocabulary::{is_lock_wrapper, is_rust_library_frame, is_user_lock_code};

use super::calls::syscall_name;
use super::stacks::{
    is_jdk_lock_code, is_jit_stub, is_runtime_library, is_vm_library, lookup_address, named_frames,
    unwind_copy, waiting_function,
};
use crate::profile::{BlamedLock, Symbols, UserSpace};

/// Per user lock (tgid, futex address, `None`) or system-call wait (tgid, first argument,
/// `Some(call)`): what its holders were sampled doing during its waits, function →
/// (samples, weight) (the profile's [`crate::profile::Blamed`], by lock).
pub type HolderSamples = HashMap<BlameKey, BlamedLock>;

/// A lock or a wait the profile's samples are blamed for.
pub type BlameKey = (u32, u64, Option<u32>);

/// What a holder waited on: (a system call, not a futex; the call or futex operation; its
/// first argument or the futex).
pub(super) type WaitTarget = (bool, u32, u64);

/// Holder samples a lock needs before they name its holders: fewer say little about what
/// the holders did (a 20 µs wait holds a 1 ms-period sample 2% of the time).
pub(super) const MIN_HOLDER_SAMPLES: u64 = 3;

/// Holder stacks a row keeps for its flame graph: the heaviest.
const HOLDER_STACKS: usize = 40;

/// What a wait's holder was blocked on, and for how much of the wait.
pub(super) fn blocked_target(b: &HolderBlocked, wait_ns: u64) -> (WaitTarget, u64) {
    ((b.syscall, b.op, b.uaddr), b.ns.min(wait_ns))
}

/// What a row's holders were seen doing during its waker-seen waits, summed over the
/// locks or calls that went to the row.
#[derive(Default)]
pub(super) struct HolderEvidence {
    /// Their samples while the waiters waited; `None` when no lock of the row had any.
    pub running: Option<BlamedLock>,
    /// The waker-seen wait time.
    pub seen: u64,
    /// Their own waits meanwhile: (what they waited on, the waiters' process) → wait.
    pub blocked: HashMap<(WaitTarget, u32), u64>,
    /// Where they released the lock or answered from → the wait it ended.
    pub released: HashMap<String, u64>,
}

impl HolderEvidence {
    /// Adds one lock's sampled holders.
    pub fn add_running(&mut self, sampled: Option<&BlamedLock>) {
        if let Some(h) = sampled {
            add_sampled(self.running.get_or_insert_with(BlamedLock::default), h);
        }
    }

    /// Adds the holders' own waits during the waits of process `tgid`.
    pub fn add_blocked(&mut self, tgid: u32, blocked: Option<&HashMap<WaitTarget, u64>>) {
        for (&target, &ns) in blocked.into_iter().flatten() {
            *self.blocked.entry((target, tgid)).or_default() += ns;
        }
    }

    /// Adds where the holders released the lock or answered from.
    pub fn add_released(&mut self, released: Option<&HashMap<String, u64>>) {
        for (f, &ns) in released.into_iter().flatten() {
            *self.released.entry(f.clone()).or_default() += ns;
        }
    }

    /// The holders' samples: (samples, weight).
    pub fn sampled(&self) -> (u64, u64) {
        self.running.as_ref().map_or((0, 0), |r| {
            let samples = r.functions.values().map(|v| v.0).sum();
            let weight = r.functions.values().map(|v| v.1).sum();
            (samples, weight)
        })
    }

    /// The holders' share of the waker-seen time they were sampled running (the weight is
    /// the sampling period's).
    pub fn running_share(&self) -> f64 {
        (self.sampled().1 as f64 / self.seen as f64).min(1.0)
    }

    /// Names the row's holders: what they were sampled running, where there are samples
    /// enough; else where they released the lock (or answered from).
    pub fn name_holders(&mut self, row: &mut LockRow) {
        if self.sampled().0 >= MIN_HOLDER_SAMPLES {
            on_cpu_holders(row, self.running.take().unwrap_or_default());
        } else if !self.released.is_empty() {
            let released = std::mem::take(&mut self.released);
            let total: u64 = released.values().sum();
            row.holders = with_state(top_callers(released, total), HolderState::AtRelease);
        }
    }
}

/// The holders, each marked with what they were doing.
pub(super) fn with_state(mut holders: Vec<LockCaller>, state: HolderState) -> Vec<LockCaller> {
    for h in &mut holders {
        h.state = Some(state);
    }
    holders
}

/// The holders' own waits as shares of the waker-seen wait time, largest first: a system
/// call by its name, a futex by the row its lock went to.
pub(super) fn holder_waits(
    chained: HashMap<(WaitTarget, u32), u64>,
    row_of: &HashMap<(u32, u64), String>,
    seen: u64,
) -> Vec<HolderWait> {
    let mut by_name: HashMap<HeldWait, u64> = HashMap::new();
    for (((syscall, op, uaddr), tgid), ns) in chained {
        let on = if syscall {
            HeldWait::Syscall(syscall_name(op))
        } else {
            // A futex in shared memory has one address in every forked process.
            row_of
                .get(&(tgid, uaddr))
                .or_else(|| row_of.iter().find(|(k, _)| k.1 == uaddr).map(|(_, v)| v))
                .map_or(HeldWait::Futex(uaddr), |name| HeldWait::Lock(name.clone()))
        };
        *by_name.entry(on).or_default() += ns;
    }
    let mut v: Vec<HolderWait> = by_name
        .into_iter()
        .map(|(on, ns)| HolderWait {
            on,
            share: (ns as f64 / seen as f64).min(1.0),
        })
        .filter(|w| w.share >= 0.01)
        .collect();
    sort_holder_waits(&mut v);
    v.truncate(3);
    v
}

/// The function whose critical section a waker's stack copy ends: the innermost frame
/// outside libc (the caller of the unlock), or, when that frame's call instruction called
/// another function of the program, that function, which tail-called the unlock
/// (`rebuild_index` ending in `jmp pthread_mutex_unlock` leaves only `worker` on the stack).
pub(super) fn holder_of(
    raw: &RawLocks,
    s: &StackSnapshot,
    symbols: &mut Symbols,
    spaces: &mut HashMap<u32, UserSpace>,
) -> Option<String> {
    let (space, addrs) = unwind_copy(raw, s, symbols, spaces)?;
    let mut own: Vec<String> = Vec::new();
    let mut first_own = None;
    let mut library: Option<String> = None;
    let frames = addrs.iter().enumerate().flat_map(|(i, &a)| {
        named_frames(space, lookup_address(i, a))
            .into_iter()
            .map(move |f| (i, f))
    });
    for (i, (func, path)) in frames {
        if is_runtime_library(&path)
            || is_vm_library(&path)
            || is_jit_stub(&path, &func)
            || is_jdk_lock_code(&path, &func)
            || is_lock_wrapper(&func)
            // A static libc's unlock and wake-up, Rust std's futex mutex: the lock's own
            // code, not the critical section it ends.
            || is_user_lock_code(&func)
        {
            continue;
        }
        // Rust's std and its map, inlined into the critical section: library code, as
        // libc is (kept only if no program function follows).
        if is_rust_library_frame(&func) {
            library.get_or_insert(func);
            continue;
        }
        if first_own.is_none() {
            first_own = Some(i);
        }
        own.push(scalprof_model::vocabulary::java_method(&func).to_string());
    }
    let Some(i) = first_own else {
        return library;
    };
    if i > 0 {
        if let Some(callee) = space
            .called_at(addrs[i])
            .filter(|c| !is_lock_wrapper(c) && !is_user_lock_code(c) && !is_rust_library_frame(c))
        {
            if Some(&callee) != own.first() {
                return Some(callee);
            }
        }
    }
    waiting_function(&own)
}

/// A row's holders from its sampled holders: functions by weight (state on-CPU), each
/// with its heaviest stack, and the heaviest stacks for the holders' flame graph.
fn on_cpu_holders(row: &mut LockRow, sampled: BlamedLock) {
    // A Java method as Java names it (the perf map's `void Counter.add(long)` is
    // `Counter.add`), as the waiters' callers are.
    let mut weights: HashMap<String, u64> = HashMap::new();
    for (f, v) in &sampled.functions {
        *weights
            .entry(scalprof_model::vocabulary::java_method(f).to_string())
            .or_default() += v.1;
    }
    let total: u64 = weights.values().sum();
    row.holders = top_callers(weights, total);
    let mut stacks: Vec<(String, (String, u64, u64))> = sampled.stacks.into_iter().collect();
    stacks.sort_by(|a, b| b.1 .2.cmp(&a.1 .2).then_with(|| a.0.cmp(&b.0)));
    for h in &mut row.holders {
        h.state = Some(HolderState::OnCpu);
        h.stack = stacks
            .iter()
            .find(|(_, (f, _, _))| scalprof_model::vocabulary::java_method(f) == h.function)
            .map(|(s, _)| s.clone());
    }
    row.holder_stacks = stacks
        .into_iter()
        .take(HOLDER_STACKS)
        .map(|(stack, (_, samples, weight))| FoldedStack {
            stack,
            samples,
            weight,
        })
        .collect();
}

/// Adds one lock's sampled holders into a row's.
fn add_sampled(to: &mut BlamedLock, from: &BlamedLock) {
    for (f, &(n, w)) in &from.functions {
        let e = to.functions.entry(f.clone()).or_default();
        e.0 += n;
        e.1 += w;
    }
    for (s, (f, n, w)) in &from.stacks {
        let e = to
            .stacks
            .entry(s.clone())
            .or_insert_with(|| (f.clone(), 0, 0));
        e.1 += n;
        e.2 += w;
    }
}
