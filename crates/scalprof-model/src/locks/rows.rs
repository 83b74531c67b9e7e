//! Lock rows in the order and with the callers every table shows them: read by the
//! converter (one repeat's rows) and the analysis (merged rows) alike.

use super::{LockCaller, LockRow};
use std::collections::HashMap;

/// Callers (or holders) kept per lock row.
pub const TOP_CALLERS: usize = 3;

/// Locks first (joins and condition variables after them), heaviest first (traced wait
/// plus sampled spinning).
pub fn sort_rows(rows: &mut [LockRow]) {
    let cost = |r: &LockRow| r.total_wait_ns + r.spin_ns.unwrap_or(0);
    rows.sort_by(|a, b| {
        b.is_lock()
            .cmp(&a.is_lock())
            .then(cost(b).cmp(&cost(a)))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The heaviest [`TOP_CALLERS`] functions of `callers` (wait by function), with their
/// shares of `total`.
pub fn top_callers(callers: HashMap<String, u64>, total: u64) -> Vec<LockCaller> {
    let mut v: Vec<(String, u64)> = callers.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter()
        .take(TOP_CALLERS)
        .map(|(function, w)| {
            let share = if total == 0 {
                0.0
            } else {
                w as f64 / total as f64
            };
            LockCaller::new(function, share)
        })
        .collect()
}
