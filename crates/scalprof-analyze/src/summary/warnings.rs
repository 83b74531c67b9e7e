//! The run document's measurement warnings: too few points, a sweep that swept nothing, a
//! weak-scaling assumption the CPU time contradicts, other processes' CPU time, and an
//! unexplained share that needs a reason (a point's repeats' own are in `repeat_warnings`,
//! the profile's in `profile_warnings`).

use scalprof_model::{Point, RunHeader, ThroughputSource, Warning, WarningKind};

use super::machine_warnings::{limiting, oversubscribed_point};
use super::repeat_warnings::{
    failed_repeats, noisy_repeats, other_mode_repeats, outlier_repeats, perturbed_diagnosis,
    NOTED_SHARE,
};

/// Above this share of the last point's thread-time, "unexplained" needs a reason.
pub(super) const UNEXPLAINED_WARN: f64 = 0.10;

/// An unexplained share above 10% at the last point, with what may have left it so: too
/// few samples, truncated stacks, a perturbed traced repeat — or on-CPU growth that no
/// cause claims (the "what grew" tables show where it went).
pub(super) fn unexplained_warning(header: &RunHeader, points: &[Point]) -> Option<Warning> {
    let p = points.iter().rev().find(|p| p.budget.is_some())?;
    let b = p.budget.as_ref()?;
    if b.unexplained <= UNEXPLAINED_WARN {
        return None;
    }
    let mut why = Vec::new();
    if let Some(prof) = &p.profile {
        if prof.stats.samples < 200 {
            why.push(format!(
                "only {} samples at this point (a longer run or a higher --freq gives more)",
                prof.stats.samples
            ));
        }
        if prof.stats.samples > 0 && prof.stats.truncated_stacks * 10 > prof.stats.samples {
            why.push("many stacks were cut short (--stack-size 32k)".into());
        }
    }
    if let Some(x) = p.perturbation.filter(|x| x.abs() > 0.10) {
        why.push(format!(
            "the traced repeats ran {:.0}% {} than the clean ones, so what was traced is not quite what was timed",
            x.abs() * 100.0,
            if x < 0.0 { "slower" } else { "faster" }
        ));
    }
    if why.is_empty() {
        why.push(format!(
            "on-CPU time grew where no cause claims it yet: the \"what grew\" tables show where (scalprof show {} -v)",
            header.id
        ));
    }
    Some(Warning {
        kind: WarningKind::Unexplained,
        point: Some(p.value),
        message: format!(
            "{} {}: {:.0}% of the thread-time is unexplained: {}",
            header.sweep.parameter,
            p.value,
            b.unexplained * 100.0,
            why.join("; ")
        ),
    })
}

/// The command has no placeholder for the swept parameter (a watched server's points are
/// its own load: nothing to place).
pub(super) fn not_swept(header: &RunHeader) -> Option<Warning> {
    if !header.sweep.parameter.swept() {
        return None;
    }
    let p = header.sweep.parameter.as_str();
    let placeholder = format!("{{{p}}}");
    if header.sweep.values.len() < 2 || header.command.iter().any(|a| a.contains(&placeholder)) {
        return None;
    }
    Some(Warning {
        kind: WarningKind::NotSwept,
        point: None,
        message: format!(
            "the command has no {placeholder}: every point ran the same command, unless it reads SCALPROF_{} — put {placeholder} where the command takes its {p} count",
            p.to_uppercase()
        ),
    })
}

/// Under weak scaling every thread brings its own share of work, so the CPU time grows
/// with the thread count. When it stays flat, the command did the same work at every
/// point, and the weak-scaling speedups are inflated by the thread count.
pub(super) fn fixed_work(
    header: &RunHeader,
    points: &[Point],
    source: ThroughputSource,
) -> Option<Warning> {
    if source != ThroughputSource::Weak || !header.sweep.parameter.scales() {
        return None;
    }
    if let Some(w) = slower_but_faster(header, points) {
        return Some(w);
    }
    // Only when the user said weak: an inferred choice says its reason in the header.
    header.scaling?;
    let cpu = |p: &Point| Some(p.user_s?.median + p.sys_s?.median);
    let first = points.iter().find(|p| cpu(p).is_some())?;
    let last = points.iter().rev().find(|p| cpu(p).is_some())?;
    let (c0, c1) = (cpu(first)?, cpu(last)?);
    let ratio = last.value as f64 / first.value as f64;
    // Weak scaling doubles the CPU time from 1 to 2 threads; allow for half of that.
    if ratio < 2.0 || c0 <= 0.0 || c1 / c0 > 1.0 + (ratio - 1.0) / 2.0 {
        return None;
    }
    Some(Warning {
        kind: WarningKind::FixedWork,
        point: None,
        message: format!(
            "the workload printed no ops, so weak scaling was assumed (each thread adds work), but its CPU time stayed at {c0:.2} → {c1:.2} s from {} to {} threads: if the command does the same work at every point, rerun with --scaling strong (the speedups above are inflated up to {ratio:.0}×)",
            first.value, last.value
        ),
    })
}

/// A weak-scaling speedup above 1 at a point whose every repeat took longer than every
/// repeat of the first: right only if each thread really added work; at fixed input the
/// command got slower. Said with both numbers and how to change the assumption.
fn slower_but_faster(header: &RunHeader, points: &[Point]) -> Option<Warning> {
    let first = points.iter().find(|p| p.wall_s.is_some())?;
    let last = points
        .iter()
        .rev()
        .find(|p| p.speedup.is_some_and(|s| s > 1.0) && p.wall_s.is_some())?;
    let (w0, w1) = (first.wall_s?, last.wall_s?);
    if last.value == first.value || w1.min <= w0.max {
        return None;
    }
    let how = if header.scaling.is_some() {
        "--scaling weak was given"
    } else {
        "inferred from the CPU time"
    };
    Some(Warning {
        kind: WarningKind::FixedWork,
        point: Some(last.value),
        message: format!(
            "the speedup {:.2}× at {} threads assumes each thread adds work (weak scaling, {how}), but the wall time grew {:.3} → {:.3} s: if the input is the same at every point, the speedup is {:.2}× — rerun with --scaling strong",
            last.speedup?,
            last.value,
            w0.median,
            w1.median,
            last.wall_speedup.unwrap_or(w0.median / w1.median),
        ),
    })
}

/// The checks made at each point, in the order their warnings are listed.
const POINT_CHECKS: &[fn(&RunHeader, &Point) -> Option<Warning>] = &[
    noisy_repeats,
    perturbed_diagnosis,
    interference,
    outlier_repeats,
    other_mode_repeats,
    super_linear,
    failed_repeats,
    oversubscribed_point,
];

/// The sweep's measurement warnings: each point's checks, then the sweep's own.
pub(super) fn warnings(header: &RunHeader, points: &[Point]) -> Vec<Warning> {
    let mut out = Vec::new();
    for p in points {
        out.extend(POINT_CHECKS.iter().filter_map(|check| check(header, p)));
    }
    out.extend(too_few_points(header, points));
    out.extend(single_repeat(header, points));
    out.extend(brief_levels(header, points));
    out
}

/// A watched server's levels with too few untraced windows to fit: listed, not fitted.
fn brief_levels(header: &RunHeader, points: &[Point]) -> Option<Warning> {
    if header.sweep.parameter.swept() {
        return None;
    }
    let brief: Vec<String> = points
        .iter()
        .filter(|p| p.repeats.len() < scalprof_model::MIN_LEVEL_WINDOWS)
        .map(|p| {
            let n = p.repeats.len();
            format!("{} ({n} window{})", p.value, if n == 1 { "" } else { "s" })
        })
        .collect();
    if brief.is_empty() {
        return None;
    }
    Some(Warning {
        kind: WarningKind::BriefLevel,
        point: None,
        message: format!(
            "levels seen for fewer than {} untraced windows are listed, not fitted: {} (watch longer, or with a shorter --window)",
            scalprof_model::MIN_LEVEL_WINDOWS,
            brief.join(", ")
        ),
    })
}

/// Other processes took CPU time from the point's repeats: who, and how many repeats
/// were disturbed (and measured again).
fn interference(header: &RunHeader, p: &Point) -> Option<Warning> {
    let i = p.interference.as_ref()?;
    // A burst under the bar that measures a repeat again is still said, with its peak.
    let others = i.is_disturbed() || i.disturbed > 0 || i.peak >= NOTED_SHARE;
    // On a virtual machine: the share of all CPUs' time other tenants took.
    let wall = p.wall_s.map_or(0.0, |w| w.median);
    let steal = if wall > 0.0 {
        i.steal_s / (wall * f64::from(header.host.cpus.max(1)))
    } else {
        0.0
    };
    let stolen = steal >= STEAL_SHARE;
    if !others && !stolen {
        return None;
    }
    let mut said = Vec::new();
    if others {
        let who = if i.processes.is_empty() {
            "processes that started and ended within the repeats".to_string()
        } else {
            i.processes
                .iter()
                .map(|f| format!("{} {:.2} s, pid {}", f.comm, f.cpu_s, f.pid))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let disturbed = if i.disturbed > 0 {
            format!(
                "; {} of {} repeats were disturbed beyond {:.0}% (up to {} per point are measured again)",
                i.disturbed,
                p.repeats.len() + p.traced_repeats.len(),
                scalprof_model::stability::DISTURBED_SHARE * 100.0,
                scalprof_model::stability::MAX_RERUNS
            )
        } else {
            String::new()
        };
        // A burst in some repeats has a median of none: its peak is said, never "0%"
        // beside the seconds it took.
        let took = if i.peak > i.share && i.share < 0.005 {
            format!("up to {:.0}% in one repeat", i.peak * 100.0)
        } else if i.peak > i.share {
            format!(
                "{:.0}% (up to {:.0}% in one repeat)",
                i.share * 100.0,
                i.peak * 100.0
            )
        } else {
            format!("{:.0}%", i.share * 100.0)
        };
        said.push(format!(
            "other processes took {took} of the CPUs the workload could use ({who}){disturbed}",
        ));
    }
    if stolen {
        said.push(format!(
            "other virtual machines took {:.0}% of the CPUs' time (steal, /proc/stat): the hypervisor ran them on the CPUs this machine's threads seemed to run on",
            steal * 100.0
        ));
    }
    Some(Warning {
        kind: WarningKind::Interference,
        point: Some(p.value),
        message: format!(
            "{} {}: {}; measure on a quiet machine",
            header.sweep.parameter,
            p.value,
            said.join("; and ")
        ),
    })
}

/// Steal above this share of the CPUs' time is said: the noise of a shared runner.
const STEAL_SHARE: f64 = 0.03;

/// An efficiency above linear, and what usually makes one.
fn super_linear(header: &RunHeader, p: &Point) -> Option<Warning> {
    let e = p.efficiency.filter(|&e| e > 1.05)?;
    Some(Warning {
        kind: WarningKind::SuperLinear,
        point: Some(p.value),
        message: format!(
            "{} {}: efficiency {:.0}%, more than linear: the first point did not keep its CPU busy (it waited on I/O, a server or a client, which more {} overlap), or caches and batching cut the work per operation; the budget counts it all as useful",
            header.sweep.parameter,
            p.value,
            e * 100.0,
            header.sweep.parameter
        ),
    })
}

/// Fewer than three measured points of a thread sweep: too few for the USL.
fn too_few_points(header: &RunHeader, points: &[Point]) -> Option<Warning> {
    let cpus = header.host.cpus as u64;
    let measured = points.iter().filter(|p| p.throughput.is_some()).count();
    // A sweep that stopped before it measured anything: the stop says why, not this.
    let stopped_empty = measured == 0 && header.status != scalprof_model::RunStatus::Complete;
    if !(measured < 3 && !stopped_empty && header.sweep.parameter.scales()) {
        return None;
    }
    let usable = header
        .host
        .limits
        .as_ref()
        .map_or(cpus, |l| u64::from(l.usable_cpus).min(cpus));
    let widest = points.iter().map(|p| p.value).max().unwrap_or(0);
    let hint = if usable < cpus && usable < 3 {
        let l = header
            .host
            .limits
            .as_ref()
            .expect("usable < cpus only with limits");
        format!(
            " (the workload may use {usable} of the {cpus} CPUs here, set by {}{})",
            limiting(l, usable),
            if widest <= usable {
                format!(": sweep past it, e.g. -t 1,{cpus}, to measure what the limit costs",)
            } else {
                String::new()
            }
        )
    } else if cpus < 3 {
        format!(" (this machine has {cpus} CPUs: more points would oversubscribe it; run the sweep on a larger machine)")
    } else {
        " (sweep at least 3 values, e.g. -t 1,2,4)".to_string()
    };
    Some(Warning {
        kind: WarningKind::TooFewPoints,
        point: None,
        message: format!(
            "{measured} measured point{}: too few for the USL, {}{hint}",
            if measured == 1 { "" } else { "s" },
            if measured == 2 {
                "and two points fix any model exactly: the summary prints none (the document keeps the Amdahl fit)"
            } else {
                "no model fitted"
            }
        ),
    })
}

/// One repeat per point of a complete sweep: the spread between runs is unknown.
fn single_repeat(header: &RunHeader, points: &[Point]) -> Option<Warning> {
    // A sweep that stopped (a failed workload, Ctrl-C) has one repeat because it stopped,
    // not because one was asked for: that is said by the stop, not by this warning.
    let stopped = header.status != scalprof_model::RunStatus::Complete
        || points
            .iter()
            .any(|p| p.repeats.iter().any(|r| !r.succeeded()));
    if stopped || points.is_empty() || !points.iter().all(|p| p.repeats.len() == 1) {
        return None;
    }
    Some(Warning {
        kind: WarningKind::SingleRepeat,
        point: None,
        message:
            "one repeat per point: the spread between runs is unknown (use --repeat 3 or more)"
                .to_string(),
    })
}

/// Share of a point's thread-time per operation spent waking idle CPUs above which the
/// point is said to be latency-bound.
const IDLE_WAKEUP_SHARE: f64 = 0.2;

/// Points where wakeups onto idle CPUs are a large part of the thread-time per operation
/// (the lock tables' `waking an idle CPU` row against threads ÷ throughput).
pub(super) fn idle_wakeups(header: &RunHeader, points: &[Point]) -> Vec<Warning> {
    let mut out = Vec::new();
    for p in points {
        let Some(t) = p.throughput.filter(|&t| t > 0.0) else {
            continue;
        };
        let per_op = p.value as f64 / t * 1e9;
        let Some(wake) = p
            .locks
            .iter()
            .flat_map(|l| &l.rows)
            .find(|r| r.run_queue() == Some(scalprof_model::locks::RunQueueBehind::IdleWakeup))
            .and_then(|r| r.wait_ns_per_op)
        else {
            continue;
        };
        let share = wake / per_op;
        if share >= IDLE_WAKEUP_SHARE {
            out.push(Warning {
                kind: WarningKind::IdleWakeups,
                point: Some(p.value),
                message: format!(
                    "{} {}: {}{:.0}% of the thread-time per operation is waking idle CPUs ({} per op, from a wakeup until the woken thread ran): each hand-off between threads or processes (a request and its answer) lands on a sleeping CPU, so this point is latency-bound — send requests in batches or pipelines, and on your own hardware check the CPUs' idle states (`cpupower idle-info`)",
                    header.sweep.parameter,
                    p.value,
                    if p.value == 1 { "one request at a time: " } else { "" },
                    share * 100.0,
                    scalprof_model::units::human_ns(wake)
                ),
            });
        }
    }
    out
}
