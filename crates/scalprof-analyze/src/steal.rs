//! Steal: on a virtual machine, time the hypervisor ran another tenant on a CPU the guest
//! thought it was running on. The guest's threads seem to run through it, so it inflates
//! their CPU time per operation and shows in no wait; left alone it is unexplained. The
//! kernel counts it per CPU (`/proc/stat`), read around each repeat with the other
//! processes' time ([`scalprof_model::Interference::steal_s`]); it is a foreign cause,
//! never the program's.

use scalprof_model::locks::CPU_STEAL;
use scalprof_model::{FindingKind, Point, Spread};

use crate::budget::{thread_ns_per_op, Series};

/// The CPU-seconds stolen per second from the CPUs the point's threads used, at most
/// `cpus` (steal is counted for all CPUs; a point on fewer of them had its share), the
/// median over its clean repeats.
fn stolen_per_s(p: &Point, cpus: u32) -> Option<f64> {
    let cpus = f64::from(cpus.max(1));
    let used = (p.value.max(1) as f64).min(cpus);
    Spread::of(
        p.repeats
            .iter()
            .filter(|r| r.succeeded() && r.wall_s > 0.0)
            .filter_map(|r| Some(r.interference.as_ref()?.steal_s / r.wall_s * used / cpus)),
    )
    .map(|s| s.median)
}

/// Steal as a budget series: the thread-ns per unit of work it took at each point, where
/// any repeat measured some.
pub fn steal_series(points: &[Point], cpus: u32) -> Option<Series> {
    let per_s: Vec<Option<f64>> = points.iter().map(|p| stolen_per_s(p, cpus)).collect();
    if !per_s.iter().flatten().any(|&s| s > 0.0) {
        return None;
    }
    let per_op = points
        .iter()
        .zip(per_s)
        .map(|(p, s)| Some(s? / p.value.max(1) as f64 * thread_ns_per_op(p)?))
        .collect();
    Some(Series {
        kind: FindingKind::BlockedWait,
        scope: None,
        subject: CPU_STEAL.into(),
        detail: "steal".into(),
        per_op,
        shares: None,
        late: None,
    })
}
