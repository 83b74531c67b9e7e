//! The CPU quota as a cause. A cgroup whose quota runs out within a period has its run
//! queues throttled until the next one: its threads are runnable and off the CPUs, which
//! the scheduler's tracepoints show as waiting for a CPU (behind nobody: the CPU is idle).
//! The kernel counts that time itself (`cpu.stat`, read around each repeat,
//! [`scalprof_model::Throttling`]); the budget takes it from the CPU-wait rows and names
//! the quota instead.
//!
//! `throttled_time` is summed over the CPUs whose run queue the quota held back: CPU-ns
//! denied. A throttled run queue holds at least one runnable thread, so it is at least
//! that much thread-time; what the threads waited beyond it (more threads than CPUs)
//! stays waiting for a CPU.

use scalprof_model::{
    Finding, FindingDetails, FindingKind, Point, Spread, Throttling as Quota, ThrottlingDetails,
};

use super::{Cause, Run};
use crate::budget::series::Series;

/// The cause: a CPU quota's throttled time, per unit of work, and its finding.
pub(crate) struct Throttling;

impl Cause for Throttling {
    fn kinds(&self) -> &'static [FindingKind] {
        &[FindingKind::CpuThrottling]
    }

    fn series(&self, run: &Run<'_>, _findings: &mut Vec<Finding>) -> Vec<Series> {
        throttle_series(run.points).into_iter().collect()
    }

    fn findings(&self, points: &[Point], cpus: u32) -> Vec<Finding> {
        throttling_finding(points, cpus).into_iter().collect()
    }
}

/// What the quota took at one point: the median over its clean repeats of the CPU-seconds
/// it denied per second, and of the share of periods it ran out in; with the repeat the
/// cgroup is named from.
struct PointThrottling<'a> {
    denied_per_s: f64,
    throttled_periods: f64,
    named: &'a Quota,
}

fn at_point(p: &Point) -> Option<PointThrottling<'_>> {
    let measured: Vec<(&Quota, f64)> = p
        .repeats
        .iter()
        .filter(|r| r.succeeded() && r.wall_s > 0.0)
        .filter_map(|r| r.throttling.as_ref().map(|t| (t, r.wall_s)))
        .collect();
    let named = measured.first()?.0;
    let denied = Spread::of(measured.iter().map(|(t, wall)| t.throttled_s / wall))?.median;
    let periods = Spread::of(
        measured
            .iter()
            .map(|(t, _)| t.throttled_periods as f64 / t.periods.max(1) as f64),
    )?
    .median;
    Some(PointThrottling {
        denied_per_s: denied,
        throttled_periods: periods,
        named,
    })
}

/// The quota's subject: "CPU quota 1.00 CPU (cgroup /ci)".
fn subject(t: &Quota) -> String {
    format!(
        "CPU quota {:.2} CPU{} (cgroup {})",
        t.quota,
        if t.quota == 1.0 { "" } else { "s" },
        t.cgroup
    )
}

/// The quota's throttled time as a budget series: CPU-ns denied per unit of work at each
/// point. `None` when no repeat was throttled.
fn throttle_series(points: &[Point]) -> Option<Series> {
    let at: Vec<Option<PointThrottling>> = points.iter().map(at_point).collect();
    let named = at
        .iter()
        .rev()
        .flatten()
        .find(|t| t.denied_per_s > 0.0)?
        .named;
    let per_op = points
        .iter()
        .zip(&at)
        .map(|(p, t)| {
            let t = t.as_ref()?;
            // denied CPU-s per wall second, over the threads' seconds per unit of work.
            Some(t.denied_per_s / p.value.max(1) as f64 * p.thread_ns_per_op()?)
        })
        .collect();
    Some(Series {
        run_queue: None,
        kind: FindingKind::CpuThrottling,
        scope: None,
        subject: subject(named),
        detail: "cpu.stat".into(),
        per_op,
        shares: None,
        late: None,
    })
}

/// The finding for a quota that throttled the last point, scored from its budget; `cpus`:
/// online CPUs.
fn throttling_finding(points: &[Point], cpus: u32) -> Option<Finding> {
    let last = points.last()?;
    let budget = last.budget.as_ref()?;
    let cause = budget
        .causes
        .iter()
        .find(|c| c.kind == FindingKind::CpuThrottling)?;
    let at: Vec<Option<PointThrottling>> = points.iter().map(at_point).collect();
    let now = at.last()?.as_ref()?;
    let t = now.named;
    let threads = last.value;
    let allowed = t.quota.floor().max(1.0) as u64;
    let need = (threads as f64).min(f64::from(cpus.max(1)));
    let evidence = format!(
        "at {threads} threads the quota ran out in {:.0}% of its periods and held the threads off \
         the CPUs for {:.2} CPU-seconds per second (cpu.stat throttled time of {}); they could \
         have used {need:.0} CPU{}",
        now.throttled_periods * 100.0,
        now.denied_per_s,
        t.cgroup,
        if need == 1.0 { "" } else { "s" },
    );
    let speedup = ((budget.useful + cause.share) * threads as f64).min(need);
    let suggestion = format!(
        "the quota allows {:.2} CPU{} at once: raise it to {need:.0} CPUs (cgroup v2 cpu.max, v1 \
         cpu.cfs_quota_us, a container's --cpus or Kubernetes limits.cpu), which would run {threads} \
         threads up to {speedup:.2}× as fast as 1, or run {allowed} thread{} to stop paying for \
         threads the quota idles",
        t.quota,
        if t.quota == 1.0 { "" } else { "s" },
        if allowed == 1 { "" } else { "s" },
    );
    Some(Finding {
        kind: FindingKind::CpuThrottling,
        scope: None,
        subject: cause.subject.clone(),
        score: cause.share,
        score_interval: None,
        evidence,
        suggestion,
        details: FindingDetails::Throttling(ThrottlingDetails {
            cgroup: t.cgroup.clone(),
            quota: t.quota,
            points: points.iter().map(|p| p.value).collect(),
            denied_cpus: at
                .iter()
                .map(|t| t.as_ref().map(|t| t.denied_per_s))
                .collect(),
            throttled_periods: at
                .iter()
                .map(|t| t.as_ref().map(|t| t.throttled_periods))
                .collect(),
        }),
        what_if: None,
        experiment: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::locks::{Scope, CPU_WAIT};
    use scalprof_model::Repeat;

    fn point(value: u64, throughput: f64, throttled_s: Option<f64>) -> Point {
        let one = Some(Spread {
            median: 1.0,
            min: 1.0,
            max: 1.0,
        });
        let repeats = (0..3)
            .map(|i| Repeat {
                throttling: throttled_s.map(|s| Quota {
                    cgroup: "/ci".into(),
                    quota: 1.0,
                    periods: 10,
                    throttled_periods: if s > 0.0 { 10 } else { 0 },
                    throttled_s: s,
                }),
                ..Repeat::ok(i, 1.0)
            })
            .collect();
        let efficiency = throughput / 1000.0 / value as f64;
        Point {
            outliers: Vec::new(),
            other_mode: Vec::new(),
            perturbation_interval: None,
            settling: None,
            interference: None,
            value,
            repeats,
            traced_repeats: Vec::new(),
            perturbation: None,
            throughput: Some(throughput),
            speedup: Some(efficiency * value as f64),
            efficiency: Some(efficiency),
            wall_speedup: None,
            wall_s: one,
            user_s: one,
            sys_s: Some(Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            }),
            throughput_spread: None,
            profile: None,
            locks: None,
            budget: None,
            counters: None,
        }
    }

    fn cpu_wait(per_op: [f64; 2]) -> Series {
        Series {
            run_queue: Some(scalprof_model::locks::RunQueueBehind::Own),
            kind: FindingKind::BlockedWait,
            scope: Some(Scope::Kernel),
            subject: CPU_WAIT.into(),
            detail: "cpu-wait".into(),
            per_op: per_op.iter().map(|&x| Some(x)).collect(),
            shares: None,
            late: None,
        }
    }

    #[test]
    fn the_quota_s_denied_time_replaces_the_cpu_wait_it_was_seen_as() {
        // 1000 units/s at 1 and at 2 threads: 2 ms of thread-time per unit at 2, half of
        // it lost. cpu.stat: 0.96 CPU-s denied per second, 0.96 ms per unit: 48%. The
        // tracer saw 45% waiting for a CPU: the same time.
        let mut points = vec![point(1, 1000.0, Some(0.0)), point(2, 1000.0, Some(0.96))];
        let series = vec![
            cpu_wait([0.0, 900_000.0]),
            throttle_series(&points).unwrap(),
        ];
        assert_eq!(series[1].subject, "CPU quota 1.00 CPU (cgroup /ci)");
        let budgets = crate::budget::budgets(&points, &[None, None], &series, 2);
        let b = budgets[1].clone().unwrap();
        assert_eq!(b.causes.len(), 1, "{b:?}");
        assert_eq!(b.causes[0].kind, FindingKind::CpuThrottling);
        assert!((b.causes[0].share - 0.48).abs() < 1e-9, "{b:?}");
        points[1].budget = Some(b);
        let f = throttling_finding(&points, 2).unwrap();
        assert!((f.score - 0.48).abs() < 1e-9);
        assert!(f.evidence.contains("100% of its periods"), "{}", f.evidence);
        assert!(
            f.evidence.contains("0.96 CPU-seconds per second"),
            "{}",
            f.evidence
        );
        assert!(
            f.suggestion.contains("raise it to 2 CPUs"),
            "{}",
            f.suggestion
        );
        assert!(f.suggestion.contains("run 1 thread "), "{}", f.suggestion);
    }

    #[test]
    fn no_quota_or_no_throttling_is_no_series() {
        assert!(throttle_series(&[point(1, 1000.0, None), point(2, 2000.0, None)]).is_none());
        let quiet = [point(1, 1000.0, Some(0.0)), point(2, 2000.0, Some(0.0))];
        assert!(throttle_series(&quiet).is_none());
    }
}
