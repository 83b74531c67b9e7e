//! The on-CPU side of locks, from the profile: spin paths, the futex system call and
//! libc's lock code, and the blocking calls' own time, added to the rows they belong to.

use scalprof_model::locks::{kernel_lock_taken_by, top_callers};
use scalprof_model::locks::{LockAddress, LockKind, LockRow, Scope};
use scalprof_model::profile::folded;
use scalprof_model::vocabulary::{
    blocking_call_of, conventional_name, in_futex_syscall, in_user_lock, is_lock_internal,
    is_spin_path, LCB_F_SPIN,
};
use std::collections::HashMap;

/// Adds to the kernel lock rows the on-CPU time the profile sampled in their spin paths:
/// a stack whose kernel leaf is a spin function is attributed, through its callers, to the
/// lock those callers name (as for traced contention). Spinlocks are not traced at all
/// (their waits are on-CPU and a tracepoint program per contention costs more than the
/// contention): a spinlock without a traced row gets one from the samples alone, named
/// by convention or as `spinlock@caller`, with `address` "sampled" and `count` the
/// number of samples. Returns the spin time attributed.
pub fn attribute_spin(rows: &mut Vec<LockRow>, profile: &scalprof_model::PointProfile) -> u64 {
    let mut added = 0;
    // Callers of the rows made from samples, by spin weight.
    let mut sampled_callers: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for f in &profile.folded {
        let kernel: Vec<&str> = folded::kernel_frames(&f.stack).collect();
        let Some(leaf) = kernel.last() else { continue };
        if !is_spin_path(leaf) {
            continue;
        }
        let spin = leaf.contains("spin_lock") || leaf.contains("spin_unlock");
        let flags = if spin { LCB_F_SPIN } else { 0 };
        // Innermost first, as kernel stacks are read elsewhere.
        let inner_first: Vec<&str> = kernel.iter().rev().copied().collect();
        let caller = inner_first
            .iter()
            .find(|f| !is_lock_internal(f))
            .copied()
            .unwrap_or("[unknown]");
        let name = match conventional_name(&inner_first, flags) {
            Some(n) => n.to_string(),
            None if spin => format!("spinlock@{caller}"),
            // A sleeping lock spun on: the traced row its caller named (`rwsem:W@caller`).
            None => match rows.iter().find(|r| {
                r.scope == Scope::Kernel
                    && r.name == kernel_lock_taken_by(&r.lock_type, caller)
                    && r.lock_type != LockKind::Spinlock
            }) {
                Some(r) => r.name.clone(),
                None => continue,
            },
        };
        // Samples pile up on the unlock that re-enables interrupts (cpu-clock cannot fire
        // before it): time there is not spinning, so it names no lock of its own.
        let acquiring = !leaf.contains("spin_unlock");
        let row = match rows
            .iter()
            .position(|r| r.scope == Scope::Kernel && r.name == name)
        {
            Some(i) => &mut rows[i],
            None if spin && acquiring => {
                rows.push(LockRow {
                    attributed_to: (name == "futex hash bucket").then(|| "user locks".into()),
                    address: LockAddress::Sampled,
                    ..LockRow::new(Scope::Kernel, name.clone(), LockKind::from("spinlock"))
                });
                rows.last_mut().expect("just pushed")
            }
            None => continue,
        };
        if row.address == LockAddress::Sampled {
            row.count += f.samples;
            *sampled_callers
                .entry(name)
                .or_default()
                .entry(caller.to_string())
                .or_default() += f.weight;
        }
        *row.spin_ns.get_or_insert(0) += f.weight;
        added += f.weight;
    }
    for (name, callers) in sampled_callers {
        if let Some(r) = rows
            .iter_mut()
            .find(|r| r.scope == Scope::Kernel && r.name == name)
        {
            let total = callers.values().sum();
            r.callers = top_callers(callers, total);
        }
    }
    added
}

/// The share of `function`'s self samples taken inside the futex system call.
pub fn futex_share(profile: &scalprof_model::PointProfile, function: &str) -> f64 {
    let (mut all, mut futex) = (0u64, 0u64);
    for f in &profile.folded {
        if folded::kernel(folded::leaf(&f.stack)) == Some(function) {
            all += f.weight;
            if in_futex_syscall(&f.stack) {
                futex += f.weight;
            }
        }
    }
    if all == 0 {
        0.0
    } else {
        futex as f64 / all as f64
    }
}

/// Adds to the user lock rows the on-CPU time the profile sampled inside the futex system
/// call — hash-bucket spinning, wake-ups, entering and leaving the kernel — and in libc's
/// lock code (the contended atomic on the lock word): what a
/// contended user lock costs besides the time its waiters are blocked (which is all the
/// scheduler-based futex tracing sees). Split over the point's user locks in proportion
/// to their blocked time. Returns the time attributed.
pub fn attribute_futex_cpu(rows: &mut [LockRow], profile: &scalprof_model::PointProfile) -> u64 {
    let on_cpu: u64 = profile
        .folded
        .iter()
        .filter(|f| in_user_lock(&f.stack))
        .map(|f| f.weight)
        .sum();
    let waits: u64 = rows
        .iter()
        .filter(|r| takes_futex_cpu(r))
        .map(|r| r.total_wait_ns)
        .sum();
    if on_cpu == 0 || waits == 0 {
        return 0;
    }
    let mut added = 0;
    for r in rows.iter_mut().filter(|r| takes_futex_cpu(r)) {
        let share = (u128::from(on_cpu) * u128::from(r.total_wait_ns) / u128::from(waits)) as u64;
        *r.spin_ns.get_or_insert(0) += share;
        added += share;
    }
    added
}

/// Adds to file-lock and sleep rows the on-CPU time sampled inside their system calls
/// (taking and releasing the lock, waking the next waiter, switching back in), split in
/// proportion to their waits. Returns the time attributed.
pub fn attribute_syscall_cpu(rows: &mut [LockRow], profile: &scalprof_model::PointProfile) -> u64 {
    let mut added = 0;
    for kind in [LockKind::PosixLock, LockKind::Flock, LockKind::Sleep] {
        let on_cpu: u64 = profile
            .folded
            .iter()
            .filter(|f| blocking_call_of(&f.stack).as_ref() == Some(&kind))
            .map(|f| f.weight)
            .sum();
        let waits: u64 = rows
            .iter()
            .filter(|r| r.lock_type == kind)
            .map(|r| r.total_wait_ns)
            .sum();
        if on_cpu == 0 || waits == 0 {
            continue;
        }
        for r in rows.iter_mut().filter(|r| r.lock_type == kind) {
            let share =
                (u128::from(on_cpu) * u128::from(r.total_wait_ns) / u128::from(waits)) as u64;
            *r.spin_ns.get_or_insert(0) += share;
            added += share;
        }
    }
    added
}

/// The user rows that share the futex call's on-CPU time (and the runtimes' lock code):
/// the waits made of futexes —
/// locks, condition variables, semaphores — but not joins and barriers (the harness's),
/// nor waits in other system calls (a sleep, a file lock, I/O: a main thread sleeping
/// while the workers contend must not take the workers' lock code).
pub fn takes_futex_cpu(r: &LockRow) -> bool {
    // Waits left to someone else (a runtime's idle service threads) are no lock's.
    r.scope == Scope::User
        && r.attributed_to.is_none()
        && matches!(
            r.lock_type,
            LockKind::Mutex
                | LockKind::PiMutex
                | LockKind::Rwlock(_)
                | LockKind::Spinlock
                | LockKind::Lock
                | LockKind::Condvar
                | LockKind::Semaphore
                | LockKind::Futex
                | LockKind::GoMutex
                | LockKind::GoRwMutex(_)
                | LockKind::JavaMonitor
                | LockKind::JavaPark
                | LockKind::Other(_)
        )
}
