//! Kernel lock rows: the contention tracepoints' stacks named through kallsyms, by the
//! conventional name their callers identify or `TYPE@caller`.

use scalprof_debuginfo::Kallsyms;
use scalprof_model::locks::top_callers;
use scalprof_model::locks::{LockKind, Scope};
use scalprof_model::locks::{LockRow, RawLocks};
use scalprof_model::vocabulary::{
    conventional_name, is_lock_internal, is_scheduler_frame, kernel_lock_type,
};
use std::collections::HashMap;

use super::*;

pub(super) fn add_kernel_rows(raw: &RawLocks, kallsyms: &Kallsyms, rows: &mut Vec<LockRow>) {
    // (name, type) → row; callers accumulated by wait.
    let mut by_name: HashMap<(String, LockKind), (LockRow, HashMap<String, u64>)> = HashMap::new();
    // Wait per process of each row, to say which attached process did it.
    let mut procs: HashMap<(String, LockKind), HashMap<u32, u64>> = HashMap::new();
    // Which row each (lock, flags) went to, for its wakers.
    let mut row_of: HashMap<(u64, u32), (String, LockKind)> = HashMap::new();
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
        row_of.insert((k.lock, k.flags), (name.clone(), lock_type.clone()));
        let entry = by_name
            .entry((name.clone(), lock_type.clone()))
            .or_insert_with(|| {
                (
                    LockRow {
                        attributed_to: (name == "futex hash bucket")
                            .then(|| "user locks".to_string()),
                        address: format!("{:#x}", k.lock),
                        ..LockRow::new(Scope::Kernel, name, lock_type)
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
    // The holders: the first function of each waker's stack outside the lock and wakeup
    // machinery (`__vm_munmap` releasing mmap_lock), by the wait its release ended.
    let mut held: HashMap<(String, LockKind), HashMap<String, u64>> = HashMap::new();
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
    for (key, (mut row, callers)) in by_name {
        row.callers = top_callers(callers, row.total_wait_ns);
        if let Some(h) = held.remove(&key) {
            let total = h.values().sum();
            row.holders = super::user::with_state(
                top_callers(h, total),
                scalprof_model::locks::HolderState::AtRelease,
            );
        }
        row.process = procs.get(&key).and_then(|p| attached_process(raw, p));
        rows.push(row);
    }
}

/// The wakeup path a releasing task runs (and the tracepoint's own frames).
fn is_wakeup_frame(f: &str) -> bool {
    f.contains("wake_up")
        || f.contains("wake_q")
        || f.starts_with("ttwu")
        || f.contains("trace")
        || f == "downgrade_write"
}
