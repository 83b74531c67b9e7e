//! Where each point's thread-time went: a budget per point, and findings scored from it.
//!
//! At a point with N threads and throughput X (work units per second), the threads spend
//! `T = N / X` thread-seconds per unit of work. Against the first point, `T₀ / T` of that
//! is useful (the efficiency); the rest was lost. A cause's share is the growth of its
//! time per unit since the first point, divided by `T`:
//!
//! - a lock: its waits plus the on-CPU time spent for it (spinning, the futex call), in ns
//!   per unit, from the traced repeats, scaled by how much slower (or faster) the traced
//!   repeats ran than the clean ones;
//! - a kernel function (`kernel_hotspot`) or the locked writes of a shared cache line
//!   (`false_sharing`, `true_sharing`): sampled on-CPU cost, converted to ns through the
//!   clean repeats' CPU time per unit (so it works for cpu-clock and for cycles);
//! - a serial phase: while one thread runs alone for a share s of the time, the other
//!   N − 1 lose s·(N − 1)/N of the thread-time.
//!
//! `overhead` is scalprof's own cost at that point: its sampled frames, and the time the
//! program's threads waited for a CPU scalprof held; `unexplained` is the rest.
//! Causes can overlap: when the named ones explain more than was lost, they are scaled
//! down together so that the parts still sum to 1. A serial phase overlaps the waits that
//! cause it (one thread runs while the other sleeps on the lock it holds), so it only
//! keeps the share the named causes leave.

use scalprof_model::locks::RunQueueBehind;
use scalprof_model::{Budget, Cause, FindingKind, Point};

pub(crate) mod series;
pub use series::{observer_wait_ns, overhead_ns, Series};

use scalprof_model::LISTED_SHARE;

/// The budget of every point after the first (`None` for the first, and where the
/// throughput is unknown). `overhead_ns`: scalprof's own sampled ns per unit at each point.
pub fn budgets(
    points: &[Point],
    overhead_ns: &[Option<f64>],
    series: &[Series],
    cpus: u32,
) -> Vec<Option<Budget>> {
    let mut out = vec![None; points.len()];
    // One point has nothing to compare with: no budget (its findings score themselves).
    if points.len() < 2 {
        return out;
    }
    let Some(t0) = points[0].thread_ns_per_op() else {
        return out;
    };
    // The baseline: useful is its efficiency, 1 by definition, and causes are growth since
    // it, so its budget is all useful. Every point then carries a budget that sums to 1,
    // for a reader of the document.
    if points[0].efficiency.is_some() && t0 > 0.0 {
        out[0] = Some(Budget {
            useful_interval: None,
            unexplained_interval: None,
            useful: 1.0,
            overhead: 0.0,
            unexplained: 0.0,
            causes: Vec::new(),
        });
    }
    for i in 1..points.len() {
        let (Some(t), Some(e)) = (points[i].thread_ns_per_op(), points[i].efficiency) else {
            continue;
        };
        let useful = e.clamp(0.0, 1.0);
        let room = 1.0 - useful;
        let mut causes = point_causes(series, i, t);
        take_from_cpu_wait(&mut causes);
        crate::stability::move_interference(&mut causes, &points[i], cpus);
        fit_to_room(&mut causes, room);
        fold_late_run(&mut causes, series, i);
        causes.retain(|c| c.share >= LISTED_SHARE);
        causes.sort_by(|a, b| {
            b.share
                .total_cmp(&a.share)
                .then_with(|| a.subject.cmp(&b.subject))
        });
        let explained: f64 = causes.iter().map(|c| c.share).sum();
        // The observer's cost is the traced repeats' alone: the clean ones, whose loss this
        // splits, never paid it. It takes what the measured causes leave, never their room
        // (a probe trapping at every hand-off would otherwise crowd out the channel it
        // measures).
        let left = (room - explained).max(0.0);
        let overhead = overhead_ns[i].map_or(0.0, |o| o / t).clamp(0.0, left);
        out[i] = Some(Budget {
            useful_interval: None,
            unexplained_interval: None,
            useful,
            overhead,
            unexplained: left - overhead,
            causes,
        });
    }
    out
}

/// The quota's share is time the tracer saw as waiting for a CPU: it is taken from those
/// rows (the workload's own first, then behind other processes, whom a throttled group
/// leaves the CPU to), so that it is not counted twice.
fn take_from_cpu_wait(causes: &mut [Cause]) {
    let Some(mut left) = causes
        .iter()
        .find(|c| c.kind == FindingKind::CpuThrottling)
        .map(|c| c.share)
    else {
        return;
    };
    for behind in [RunQueueBehind::Own, RunQueueBehind::Other] {
        if let Some(c) = causes.iter_mut().find(|c| c.run_queue() == Some(behind)) {
            let taken = c.share.min(left);
            c.share -= taken;
            left -= taken;
        }
    }
}

/// The causes at point `i` (thread time `t` ns per unit): each series' share, its own or
/// its growth since the first point over `t`, where it is positive.
fn point_causes(series: &[Series], i: usize, t: f64) -> Vec<Cause> {
    series
        .iter()
        .filter_map(|s| {
            let share = match &s.shares {
                Some(shares) => shares[i]?,
                None => {
                    let now = s.per_op[i]?;
                    (now - s.per_op[0].unwrap_or(0.0)) / t
                }
            };
            (share > 0.0).then(|| Cause {
                run_queue: s.run_queue,
                late_share: 0.0,
                foreign: s.run_queue == Some(RunQueueBehind::Other),
                share_interval: None,
                kind: s.kind,
                scope: s.scope,
                subject: s.subject.clone(),
                share,
                detail: s.detail.clone(),
            })
        })
        .collect()
}

/// Fits the causes into the `room` the useful work and the overhead leave, largest first.
/// A serial phase is a symptom: while one thread runs, the others wait on something.
/// Named waits and costs take the room first (scaled down together when they overflow
/// it); the serial causes (a phase, a saturated stage) share what they leave.
fn fit_to_room(causes: &mut [Cause], room: f64) {
    let named: f64 = causes
        .iter()
        .filter(|c| c.kind != FindingKind::SerialFraction)
        .map(|c| c.share)
        .sum();
    if named > room && named > 0.0 {
        for c in causes
            .iter_mut()
            .filter(|c| c.kind != FindingKind::SerialFraction)
        {
            c.share *= room / named;
        }
    }
    let mut left = (room - named).max(0.0);
    causes.sort_by(|a, b| b.share.total_cmp(&a.share));
    for c in causes
        .iter_mut()
        .filter(|c| c.kind == FindingKind::SerialFraction)
    {
        c.share = c.share.min(left);
        left -= c.share;
    }
}

/// A thread that waits while the others work ends late by as long, when all had the same
/// work: it then runs alone at the end, and that lone run is the waits' cost too, not a
/// serial phase of the program. The late part of each serial phase (see
/// [`scalprof_model::SerialStats::late_bins`]) moves to the program's waits (locks and
/// blocked waits, not another process's), in proportion to their shares and at most
/// doubling them: a wait cannot delay a thread by more than it lasted.
fn fold_late_run(causes: &mut [Cause], series: &[Series], i: usize) {
    let is_wait = |c: &Cause| {
        !c.foreign
            && matches!(
                c.kind,
                FindingKind::BlockedWait | FindingKind::LockContention
            )
    };
    let waits: f64 = causes.iter().filter(|c| is_wait(c)).map(|c| c.share).sum();
    if waits <= 0.0 {
        return;
    }
    let mut moved = 0.0;
    for c in causes
        .iter_mut()
        .filter(|c| c.kind == FindingKind::SerialFraction)
    {
        let late = series
            .iter()
            .find(|s| s.id() == c.id())
            .and_then(|s| s.late.as_ref()?[i])
            .unwrap_or(0.0);
        let m = late.min(c.share).min(waits - moved);
        if m > 0.0 {
            c.share -= m;
            moved += m;
        }
    }
    if moved <= 0.0 {
        return;
    }
    for c in causes.iter_mut().filter(|c| is_wait(c)) {
        let m = moved * c.share / waits;
        c.share += m;
        c.late_share = m;
        c.detail = format!(
            "{}; and the lone run it left at the end, {:.0}%",
            c.detail,
            m * 100.0
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use scalprof_model::locks::Scope;
    use scalprof_model::Spread;

    pub(crate) fn point(value: u64, throughput: f64, efficiency: f64) -> Point {
        let spread = |x: f64| {
            Some(Spread {
                median: x,
                min: x,
                max: x,
            })
        };
        Point {
            outliers: Vec::new(),
            other_mode: Vec::new(),
            perturbation_interval: None,
            settling: None,
            interference: None,
            value,
            repeats: Vec::new(),
            traced_repeats: Vec::new(),
            perturbation: None,
            throughput: Some(throughput),
            speedup: Some(efficiency * value as f64),
            efficiency: Some(efficiency),
            wall_speedup: None,
            wall_s: spread(1.0),
            user_s: spread(value as f64),
            sys_s: spread(0.0),
            throughput_spread: None,
            profile: None,
            locks: None,
            budget: None,
            counters: None,
        }
    }

    pub(crate) fn lock(subject: &str, per_op: [f64; 2]) -> Series {
        Series {
            run_queue: None,
            kind: FindingKind::LockContention,
            scope: Some(Scope::User),
            subject: subject.into(),
            detail: "mutex".into(),
            per_op: per_op.iter().map(|&x| Some(x)).collect(),
            shares: None,
            late: None,
        }
    }

    #[test]
    fn the_parts_sum_to_one_and_a_cause_is_its_growth_over_the_thread_time() {
        // 1 thread: 1000 ops/s → 1 ms per op. 2 threads: 1250 ops/s → 1.6 ms thread-time
        // per op, efficiency 0.625. The lock grew by 0.4 ms per op: 25% of 1.6 ms.
        let points = [point(1, 1000.0, 1.0), point(2, 1250.0, 0.625)];
        let b = budgets(
            &points,
            &[None, Some(16_000.0)],
            &[lock("table_lock", [0.0, 400_000.0])],
            0,
        );
        // The baseline has a budget too: all useful here (no overhead measured at 1).
        let b0 = b[0].as_ref().unwrap();
        assert_eq!((b0.useful, b0.overhead, b0.unexplained), (1.0, 0.0, 0.0));
        assert!(b0.causes.is_empty());
        let b = b[1].as_ref().unwrap();
        assert!((b.useful - 0.625).abs() < 1e-9);
        assert!((b.overhead - 0.01).abs() < 1e-9);
        assert_eq!(b.causes.len(), 1);
        assert!((b.causes[0].share - 0.25).abs() < 1e-9);
        assert!((b.unexplained - 0.115).abs() < 1e-9);
        let sum = b.useful + b.overhead + b.unexplained + b.causes[0].share;
        assert!((sum - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_observer_s_cost_takes_only_what_the_causes_leave() {
        // 2 threads lose 57%; the traced repeats measured a channel that explains all of it,
        // and probes whose cost, on the clean clock, would be more than the whole loss.
        let points = [point(1, 1000.0, 1.0), point(2, 860.0, 0.43)];
        let t = 2.0 / 860.0 * 1e9;
        let b = budgets(
            &points,
            &[None, Some(0.9 * t)],
            &[lock("chan", [0.0, 0.57 * t])],
            0,
        );
        let b = b[1].as_ref().unwrap();
        assert!((b.causes[0].share - 0.57).abs() < 1e-6, "{b:?}");
        assert!(
            b.overhead.abs() < 1e-6 && b.unexplained.abs() < 1e-6,
            "{b:?}"
        );
        // With no cause measured, the loss the observer could explain is its.
        let b = budgets(&points, &[None, Some(0.2 * t)], &[], 0);
        let b = b[1].as_ref().unwrap();
        assert!(
            (b.overhead - 0.2).abs() < 1e-6 && (b.unexplained - 0.37).abs() < 1e-6,
            "{b:?}"
        );
    }

    #[test]
    fn causes_that_explain_more_than_was_lost_are_scaled_down_together() {
        let points = [point(1, 1000.0, 1.0), point(2, 1600.0, 0.8)];
        // Lost: 20% of 1.25 ms = 0.25 ms; the causes claim 0.5 ms together.
        let series = [lock("a", [0.0, 375_000.0]), lock("b", [0.0, 125_000.0])];
        let b = budgets(&points, &[None, None], &series, 0)[1]
            .clone()
            .unwrap();
        let shares: Vec<f64> = b.causes.iter().map(|c| c.share).collect();
        assert!((shares[0] - 0.15).abs() < 1e-9 && (shares[1] - 0.05).abs() < 1e-9);
        assert!(b.unexplained.abs() < 1e-9);
    }

    #[test]
    fn a_serial_phase_keeps_only_what_the_named_waits_leave() {
        // Lost: 50%. The sleep explains 25% of the thread-time; the phase when one
        // thread runs alone would claim 47% on its own.
        let points = [point(1, 1000.0, 1.0), point(2, 1000.0, 0.5)];
        let serial = Series {
            run_queue: None,
            kind: FindingKind::SerialFraction,
            scope: Some(Scope::User),
            subject: "run".into(),
            detail: String::new(),
            per_op: vec![None, None],
            shares: Some(vec![None, Some(0.47)]),
            late: None,
        };
        let sleep = lock("sleep in busy_handler", [0.0, 500_000.0]);
        let b = budgets(&points, &[None, None], &[serial, sleep], 0)[1]
            .clone()
            .unwrap();
        let share = |s: &str| b.causes.iter().find(|c| c.subject == s).unwrap().share;
        assert!((share("sleep in busy_handler") - 0.25).abs() < 1e-9);
        assert!((share("run") - 0.25).abs() < 1e-9);
        assert!(b.unexplained.abs() < 1e-9);
    }

    #[test]
    fn a_late_lone_run_is_the_cost_of_the_waits_that_delayed_it() {
        // Lost: 50%. The sleep explains 25%; one thread ran alone for the rest, of which
        // 0.2 late (the same work as the thread that had finished): the sleep's echo.
        let points = [point(1, 1000.0, 1.0), point(2, 1000.0, 0.5)];
        let serial = |late: f64| Series {
            run_queue: None,
            kind: FindingKind::SerialFraction,
            scope: Some(Scope::User),
            subject: "run".into(),
            detail: String::new(),
            per_op: vec![None, None],
            shares: Some(vec![None, Some(0.47)]),
            late: Some(vec![None, Some(late)]),
        };
        let sleep = lock("sleep in busy_handler", [0.0, 500_000.0]);
        let b = budgets(&points, &[None, None], &[serial(0.2), sleep.clone()], 0)[1]
            .clone()
            .unwrap();
        let cause = |s: &str| b.causes.iter().find(|c| c.subject == s).cloned();
        let slept = cause("sleep in busy_handler").unwrap();
        assert!((slept.share - 0.45).abs() < 1e-9, "{b:?}");
        assert!((slept.late_share - 0.2).abs() < 1e-9);
        assert!((cause("run").unwrap().share - 0.05).abs() < 1e-9);
        assert!(b.unexplained.abs() < 1e-9);
        // A wait delays a thread by at most its own length: a late run longer than the
        // sleep keeps the rest as a serial phase.
        let points = [point(1, 1000.0, 1.0), point(2, 1000.0, 0.5)];
        let short = lock("sleep in busy_handler", [0.0, 400_000.0]);
        let b = budgets(&points, &[None, None], &[serial(0.4), short], 0)[1]
            .clone()
            .unwrap();
        let cause = |s: &str| b.causes.iter().find(|c| c.subject == s).cloned();
        assert!((cause("sleep in busy_handler").unwrap().share - 0.4).abs() < 1e-9);
        assert!((cause("run").unwrap().share - 0.1).abs() < 1e-9);
        // No wait: the late run stays the serial phase's.
        let b = budgets(&points, &[None, None], &[serial(0.2)], 0)[1]
            .clone()
            .unwrap();
        assert!((b.causes[0].share - 0.47).abs() < 1e-9);
        assert_eq!(b.causes[0].late_share, 0.0);
    }
}
