//! What every kind of cause reads to make its series: [`Series`] (one candidate cause, its
//! cost at every point of the sweep), the traced clock scaled back to the clean one, sampled
//! on-CPU cost in thread-ns per unit, and a function's self time. Each kind's own series is
//! its file in `causes/`; scalprof's own overhead (its sampled frames, the CPU its threads
//! held) is here, as it is no cause.

use scalprof_model::locks::{RunQueueBehind, Scope};
use scalprof_model::profile::folded;
use scalprof_model::vocabulary::{blocking_call_of, in_user_lock};
use scalprof_model::{CauseId, FindingKind, Point, PointProfile};

/// One candidate cause, with its cost at every point of the sweep.
#[derive(Clone, Debug)]
pub struct Series {
    /// Which wait for a CPU this is, where it is one (from its lock rows' addresses).
    pub run_queue: Option<RunQueueBehind>,
    pub kind: FindingKind,
    pub scope: Option<Scope>,
    pub subject: String,
    pub detail: String,
    /// Thread-ns per unit of work at each point (aligned with the points; `None` when not
    /// measured there).
    pub per_op: Vec<Option<f64>>,
    /// Or the share itself at each point (serial phases).
    pub shares: Option<Vec<Option<f64>>>,
    /// Of a serial phase's share, the part in which the lone thread ran late (the same
    /// work as threads that had finished): the echo of its waits, at each point.
    pub late: Option<Vec<Option<f64>>>,
}

impl Series {
    pub fn id(&self) -> CauseId<'_> {
        CauseId {
            kind: self.kind,
            scope: self.scope,
            subject: &self.subject,
        }
    }
}

/// CPU ns per unit of work, from the clean repeats' user + system time.
fn cpu_ns_per_op(p: &Point) -> Option<f64> {
    let x = p.throughput.filter(|&x| x > 0.0)?;
    let wall = p.wall_s?.median;
    let cpu = p.user_s?.median + p.sys_s?.median;
    (wall > 0.0).then(|| cpu / wall / x * 1e9)
}

/// Clean time per traced time at a point: waits are measured in the traced repeats, whose
/// every operation took `1 / (1 + perturbation)` times as long as in the clean ones (slower
/// when tracing costs, faster when the clean repeats were the disturbed ones); the budget's
/// thread-time comes from the clean repeats, so waits are scaled back to that clock.
pub(crate) fn dilation(p: &Point) -> f64 {
    p.perturbation.map_or(1.0, |x| (1.0 + x).clamp(0.25, 4.0))
}

/// Sampled on-CPU cost (profile units per work unit) → thread-ns per work unit at each
/// point: the clean CPU time per unit, spread in proportion to the samples.
pub(crate) fn sampled_to_ns(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
) -> Vec<Option<f64>> {
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let prof = profiles[i]?;
            // With --attach the samples include the attached processes' while the clean
            // CPU time is the command's alone; spreading it over the command's samples only
            // was tried and is unstable when the client is a thin one (15 samples against
            // the server's 656 in a debug run of loop_server): left for the sampling period.
            let total: f64 = prof.folded.iter().map(|f| f.weight as f64).sum::<f64>() / work[i];
            (total > 0.0 && work[i] > 0.0).then_some(())?;
            Some(cpu_ns_per_op(p)? / total)
        })
        .collect()
}

/// The self time of a function (a kernel one when `kernel`) at point `i`, in clean
/// thread-ns per unit: the samples whose leaf it is, less those that are a lock's own
/// on-CPU time (the futex call, libc's lock code) or a blocking call's.
pub(crate) fn self_ns(
    profiles: &[Option<&PointProfile>],
    work: &[f64],
    scale: &[Option<f64>],
    i: usize,
    function: &str,
    kernel: bool,
) -> Option<f64> {
    let prof = profiles[i]?;
    let weight: u64 = prof
        .folded
        .iter()
        .filter(|f| {
            // A runtime's own work is its name's, whatever its leaf (as the diff counts it).
            let work = scalprof_model::vocabulary::runtime_work(&f.stack);
            let leaf = folded::leaf(&f.stack);
            let name = match (work, folded::kernel(leaf)) {
                (Some(w), _) if !kernel => w,
                (Some(_), _) => return false,
                (None, Some(k)) if kernel => k,
                (None, None) if !kernel => leaf,
                _ => return false,
            };
            name == function && !in_user_lock(&f.stack) && blocking_call_of(&f.stack).is_none()
        })
        .map(|f| f.weight)
        .sum();
    Some(weight as f64 / work[i] * scale[i]?)
}

/// scalprof's own sampled cost (BPF programs, unwinding) in thread-ns per unit of work.
pub fn overhead_ns(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
) -> Vec<Option<f64>> {
    let scale = sampled_to_ns(points, profiles, work);
    (0..points.len())
        .map(|i| Some(profiles[i]?.stats.overhead_weight as f64 / work[i] * scale[i]?))
        .collect()
}

/// The time the program's threads waited for a CPU that scalprof's own threads held, in
/// thread-ns per unit of work (on the clean clock): the observer's cost, like its sampled
/// frames. Nothing of it happens in the clean repeats.
pub fn observer_wait_ns(points: &[Point], work: &[f64]) -> Vec<Option<f64>> {
    points
        .iter()
        .zip(work)
        .map(|(p, &w)| {
            let rows = &p.locks.as_ref()?.rows;
            let ns: u64 = rows
                .iter()
                .filter(|r| r.run_queue() == Some(RunQueueBehind::Observer))
                .map(|r| r.total_wait_ns)
                .sum();
            (w > 0.0).then(|| ns as f64 / w * dilation(p))
        })
        .collect()
}
