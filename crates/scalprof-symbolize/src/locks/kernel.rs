//! Kernel lock rows: the contention tracepoints' stacks named through kallsyms, by the
//! conventional name their callers identify or `TYPE@caller`.

use std::collections::HashMap;

use scalprof_debuginfo::Kallsyms;
use scalprof_model::locks::THE_OBSERVER;
use scalprof_model::locks::{kernel_lock_taken_by, top_callers};
use scalprof_model::locks::{
    HoldTimes, HolderState, KernelLockRaw, LockAddress, LockKind, LockRow, RawLocks, Scope, Side,
};
use scalprof_model::profile::ToolCost;
use scalprof_model::vocabulary::{
    conventional_name, is_lock_internal, is_scheduler_frame, kernel_lock_type, tool_cost,
};

use super::holders::with_state;
use super::rows::{RowBuilder, RowKey};

/// Rows for the contended kernel locks, summed by name and type, with their callers and
/// the holders whose release ended the waits.
pub(super) fn add_kernel_rows(raw: &RawLocks, kallsyms: &Kallsyms, rows: &mut Vec<LockRow>) {
    let mut by_name: HashMap<RowKey, RowBuilder> = HashMap::new();
    // Which row each (lock, flags) went to, for its wakers.
    let mut row_of: HashMap<(u64, u32), RowKey> = HashMap::new();
    // The rows some of whose waits were the program's own, not in scalprof's probes.
    let mut own: std::collections::HashSet<RowKey> = std::collections::HashSet::new();
    for k in &raw.kernel {
        let (name, lock_type, caller) = name_kernel_lock(k, kallsyms);
        let key: RowKey = (name.clone(), lock_type.clone());
        row_of.insert((k.lock, k.flags), key.clone());
        if !in_probe(k, kallsyms) {
            own.insert(key.clone());
        }
        let b = by_name.entry(key).or_insert_with(|| {
            RowBuilder::new(LockRow {
                attributed_to: (name == "futex hash bucket").then(|| "user locks".to_string()),
                address: LockAddress::Traced(k.lock),
                ..LockRow::new(Scope::Kernel, name, lock_type)
            })
        });
        b.add_wait(k.tgid, k.count, k.total_ns, k.max_ns);
        b.add_caller(&caller, k.total_ns);
    }
    let mut held = released_by(raw, kallsyms, &row_of);
    let first = rows.len();
    for (key, b) in by_name {
        let mut row = b.finish(raw);
        // Waited for only inside a probe's trap (a uprobe's lookup waiting on the mmap_lock
        // while scalprof puts its probes on or takes them off): the observer's.
        if !own.contains(&key) && row.attributed_to.is_none() {
            row.attributed_to = Some(THE_OBSERVER.into());
        }
        if let Some(h) = held.remove(&key) {
            let total = h.values().sum();
            row.holders = with_state(top_callers(h, total), HolderState::AtRelease);
        }
        rows.push(row);
    }
    // The holds go to one row of the lock, the same in every repeat (they merge by row):
    // the write side where it was waited for.
    let mmap_lock = rows[first..]
        .iter_mut()
        .filter(|r| r.name == "mmap_lock")
        .max_by_key(|r| {
            (
                r.lock_type == LockKind::Rwsem(Some(Side::Write)),
                r.total_wait_ns,
            )
        });
    if let Some(row) = mmap_lock {
        row.hold = mmap_lock_holds(raw);
    }
}

/// The traced processes' mmap_lock holds, where the kernel's events timed them: both
/// sides summed (a reader waits behind writers, a writer behind readers and writers).
fn mmap_lock_holds(raw: &RawLocks) -> Option<HoldTimes> {
    let mut buckets: Vec<u64> = Vec::new();
    let (mut count, mut total, mut max) = (0, 0, 0);
    for h in &raw.kernel_holds {
        buckets.resize(buckets.len().max(h.buckets.len()), 0);
        for (sum, b) in buckets.iter_mut().zip(&h.buckets) {
            *sum += b;
        }
        count += h.count;
        total += h.total_ns;
        max = max.max(h.max_ns);
    }
    HoldTimes::of_buckets(count, total, max, &buckets)
}

/// A contended kernel lock's name, type and caller: its symbol when it is a global, else
/// the conventional name its callers identify, else `TYPE@caller`. The caller is the first
/// frame outside the lock's own functions (and the tracer's).
fn name_kernel_lock(k: &KernelLockRaw, kallsyms: &Kallsyms) -> (String, LockKind, String) {
    let frames: Vec<&str> = k
        .stack
        .iter()
        .filter_map(|&a| kallsyms.lookup(a))
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
            None => kernel_lock_taken_by(&lock_type, &caller),
        },
    };
    (name, lock_type, caller)
}

/// Whether a wait's stack passes through a uprobe's trap or the kernel's records for the
/// sampler: it only waited because scalprof was attached.
fn in_probe(k: &KernelLockRaw, kallsyms: &Kallsyms) -> bool {
    k.stack
        .iter()
        .filter_map(|&a| kallsyms.lookup(a))
        .any(|f| matches!(tool_cost(f), Some(ToolCost::Probe | ToolCost::SideBand)))
}

/// The holders: the first function of each waker's stack outside the lock and wakeup
/// machinery (`__vm_munmap` releasing mmap_lock), by the wait its release ended, per row.
fn released_by(
    raw: &RawLocks,
    kallsyms: &Kallsyms,
    row_of: &HashMap<(u64, u32), RowKey>,
) -> HashMap<RowKey, HashMap<String, u64>> {
    let mut held: HashMap<RowKey, HashMap<String, u64>> = HashMap::new();
    for w in &raw.kernel_wakers {
        let Some(key) = row_of.get(&(w.lock, w.flags)) else {
            continue;
        };
        let Some(holder) = w
            .stack
            .iter()
            .filter_map(|&a| kallsyms.lookup(a))
            .find(|f| !is_lock_internal(f) && !is_scheduler_frame(f) && !is_wakeup_frame(f))
        else {
            continue;
        };
        *held
            .entry(key.clone())
            .or_default()
            .entry(holder.to_string())
            .or_default() += w.total_ns.max(1);
    }
    held
}

/// The wakeup path a releasing task runs (and the tracepoint's own frames).
fn is_wakeup_frame(f: &str) -> bool {
    f.contains("wake_up")
        || f.contains("wake_q")
        || f.starts_with("ttwu")
        || f.contains("trace")
        || f == "downgrade_write"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_inside_a_probe_s_trap_is_the_observer_s_and_the_program_s_own_is_not() {
        let kallsyms = Kallsyms::parse(
            "ffffffff81000000 T down_read\n\
             ffffffff81000100 T find_active_uprobe_rcu\n\
             ffffffff81000200 T handle_swbp\n\
             ffffffff81000300 T uprobe_notify_resume\n\
             ffffffff81000400 T do_user_addr_fault\n\
             ffffffff81000500 T exc_page_fault\n\
             ffffffff81000600 T _etext\n",
        );
        let wait = |lock, stack: Vec<u64>| KernelLockRaw {
            lock,
            tgid: 7,
            flags: 0x2, // LCB_F_READ
            stack,
            count: 10,
            total_ns: 1000,
            max_ns: 200,
        };
        let raw = RawLocks {
            kernel: vec![
                wait(
                    0x1000,
                    vec![
                        0xffffffff81000010,
                        0xffffffff81000110,
                        0xffffffff81000210,
                        0xffffffff81000310,
                    ],
                ),
                wait(
                    0x2000,
                    vec![0xffffffff81000010, 0xffffffff81000410, 0xffffffff81000510],
                ),
            ],
            ..RawLocks::default()
        };
        let mut rows = Vec::new();
        add_kernel_rows(&raw, &kallsyms, &mut rows);
        let attributed = |caller: &str| {
            rows.iter()
                .find(|r| r.callers[0].function == caller)
                .map(|r| r.attributed_to.clone())
                .unwrap_or_else(|| panic!("no row of {caller}: {rows:?}"))
        };
        assert_eq!(
            attributed("find_active_uprobe_rcu"),
            Some(THE_OBSERVER.to_string())
        );
        assert_eq!(attributed("do_user_addr_fault"), None);
    }
}
