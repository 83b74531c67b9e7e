//! What the terminal and HTML views both say about a sweep point, computed once: the
//! rates as they are printed, the lock wait and scalprof's own share of the samples.

use scalprof_model::Point;

use crate::format::si;

/// One point as the views show it; "—" stands for a number the point does not have.
pub(crate) struct PointView {
    /// Operations per second, compact (`9.90M`).
    pub throughput: String,
    /// `1.85×`.
    pub speedup: String,
    /// `92%`.
    pub efficiency: String,
    /// Time in locks (not other waits) per traced repeat, in seconds; `None` without lock
    /// tables.
    pub lock_wait_s: Option<f64>,
    /// scalprof's own samples as a percentage of the point's; `None` without a profile.
    pub overhead_pct: Option<f64>,
}

impl PointView {
    /// The view of one point.
    pub(crate) fn of(p: &Point) -> PointView {
        PointView {
            throughput: p.throughput.map_or("—".into(), si),
            speedup: p.speedup.map_or("—".into(), |s| format!("{s:.2}×")),
            efficiency: p
                .efficiency
                .map_or("—".into(), |e| format!("{:.0}%", e * 100.0)),
            lock_wait_s: lock_wait_s(p),
            overhead_pct: p.profile.as_ref().map(|pr| {
                100.0 * pr.stats.overhead_samples as f64 / pr.stats.samples.max(1) as f64
            }),
        }
    }
}

/// The wait in the point's lock rows, per traced repeat that succeeded, in seconds.
fn lock_wait_s(p: &Point) -> Option<f64> {
    // Lock tables come from the traced repeats (the only ones in older runs).
    let traced = if p.traced_repeats.is_empty() {
        &p.repeats
    } else {
        &p.traced_repeats
    };
    let runs = traced.iter().filter(|r| r.succeeded()).count().max(1) as f64;
    p.locks.as_ref().map(|l| {
        l.rows
            .iter()
            .filter(|r| r.is_lock())
            .map(|r| r.total_wait_ns)
            .sum::<u64>() as f64
            / 1e9
            / runs
    })
}
