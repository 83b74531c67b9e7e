//! The passes [`assemble`](super::assemble) runs, in its order: points from the repeats,
//! speedups, the model, warnings; profiles and the findings they support; lock tables and
//! lock findings; the time budget and the scores; the findings' last touches; complexity.

use scalprof_model::locks::{RunQueueBehind, Scope};
use scalprof_model::vocabulary;
use scalprof_model::{
    ComplexityReport, Finding, FindingKind, Model, Point, PointProfile, Repeat, RunHeader,
    RunInputs, ScalingDiff, SweepParameter, ThroughputSource, Warning,
};

use super::warnings::{fixed_work, not_swept, unexplained_warning, warnings};
use super::{command_name, loss_is_real, point_work, repeat_throughput, summarize_point};
use crate::{budget, complexity, locks, scaling, usl};

/// A point's merged profile, by its value.
pub(super) fn profile_of(profiles: &[(u64, PointProfile)], v: u64) -> Option<&PointProfile> {
    profiles.iter().find(|(pv, _)| *pv == v).map(|(_, p)| p)
}

/// One point per swept value that has repeats, in the sweep's order.
pub(super) fn points(inputs: &RunInputs, source: ThroughputSource) -> Vec<Point> {
    let header = &inputs.header;
    let repeats = inputs.repeats.as_slice();
    let mut points: Vec<Point> = Vec::new();
    let mut values: Vec<u64> = header.sweep.values.clone();
    // Points measured but not in the declared sweep (should not happen) still show up.
    for r in repeats {
        if !values.contains(&r.value) {
            values.push(r.value);
        }
    }
    for value in values {
        let mut reps: Vec<Repeat> = repeats
            .iter()
            .filter(|r| r.value == value)
            .map(|r| r.repeat.clone())
            .collect();
        if reps.is_empty() {
            continue;
        }
        reps.sort_by_key(|r| r.index);
        points.push(summarize_point(value, reps, source));
    }
    points
}

/// Speedup against the first point with a throughput, scaled to its parameter value
/// (so a sweep starting at 2 threads still reads as "speedup over one thread").
pub(super) fn speedups(points: &mut [Point], threads: bool) {
    if let Some((v0, x0)) = points
        .iter()
        .filter(|_| threads)
        .find_map(|p| p.throughput.map(|x| (p.value as f64, x)))
    {
        for p in points.iter_mut() {
            if let Some(x) = p.throughput {
                let speedup = x / x0 * v0;
                p.speedup = Some(speedup);
                p.efficiency = Some(speedup / p.value as f64);
            }
        }
    }
    // The same at fixed work, from the wall times alone.
    if let Some((v0, w0)) = points
        .iter()
        .filter(|_| threads)
        .find_map(|p| p.wall_s.map(|w| (p.value as f64, w.median)))
    {
        for p in points {
            if let Some(w) = p.wall_s.filter(|w| w.median > 0.0) {
                p.wall_speedup = Some(w0 / w.median * v0);
            }
        }
    }
}

/// The USL (or Amdahl) fitted to every repeat's throughput. The USL models concurrency;
/// a size sweep gets power-law fits instead ([`complexity_report`]).
pub(super) fn model(
    points: &[Point],
    source: ThroughputSource,
    threads: bool,
    min_repeats: usize,
) -> Option<Model> {
    let observations: Vec<(f64, f64)> = points
        .iter()
        // A watched server's brief levels are listed, not fitted.
        .filter(|p| p.repeats.len() >= min_repeats)
        .flat_map(|p| {
            p.repeats.iter().filter_map(move |r| {
                repeat_throughput(p.value, r, source).map(|x| (p.value as f64, x))
            })
        })
        .collect();
    if threads {
        usl::fit(&observations).ok()
    } else {
        None
    }
}

/// The measurement warnings: noise, perturbation, fixed work; a sweep that swept nothing
/// first, since it makes every other line moot.
pub(super) fn measurement_warnings(
    header: &RunHeader,
    points: &[Point],
    source: ThroughputSource,
) -> Vec<Warning> {
    let mut warnings = warnings(header, points);
    warnings.extend(fixed_work(header, points, source));
    if let Some(w) = not_swept(header) {
        warnings.insert(0, w);
    }
    warnings
}

/// Each point's profile summary (the folded stacks stay in the store), and the points'
/// work with their profiles for the passes that compare them.
pub(super) fn attach_profiles<'a>(
    points: &mut [Point],
    profiles: &'a [(u64, PointProfile)],
    source: ThroughputSource,
) -> Vec<(u64, f64, &'a PointProfile)> {
    let mut with_work: Vec<(u64, f64, &PointProfile)> = Vec::new();
    for p in points {
        if let Some(prof) = profile_of(profiles, p.value) {
            let work = point_work(p, source);
            with_work.push((p.value, work, prof));
            let mut summary = prof.clone();
            summary.folded.clear();
            p.profile = Some(summary);
        }
    }
    with_work
}

/// The findings the profiles support: shared lines, hotspots and serial phases; and the
/// functions whose growth is a shared line's (the locked instructions are in them).
pub(super) fn profile_findings(
    inputs: &RunInputs,
    points: &[Point],
    with_work: &[(u64, f64, &PointProfile)],
    scaling_diff: Option<&ScalingDiff>,
    threads: bool,
) -> (Vec<Finding>, Vec<String>) {
    let profiles = inputs.profiles.as_slice();
    let mut findings = inputs.legacy_findings.clone();
    // Sharing: the locked writes whose cost grew, on the globals the converter resolved.
    if let Some(sharing) = inputs.sharing.as_ref().filter(|_| threads) {
        findings.extend(crate::sharing::sharing_findings(with_work, sharing));
    }
    let claimed: Vec<String> = findings
        .iter()
        .filter_map(|f| match &f.details {
            scalprof_model::FindingDetails::Sharing(d) => Some(d.functions.iter().cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    // Hotspots grow with concurrency; over input sizes, growth is complexity's.
    if let Some(d) = scaling_diff.filter(|_| threads) {
        findings.extend(scaling::kernel_hotspots(d));
        findings.extend(scaling::user_hotspots(d, &claimed));
    }
    let serial_input: Vec<(u64, Option<f64>, &PointProfile)> = points
        .iter()
        .filter_map(|p| profile_of(profiles, p.value).map(|prof| (p.value, p.efficiency, prof)))
        .collect();
    if threads {
        findings.extend(scaling::serial_fractions(&serial_input));
    }
    (findings, claimed)
}

/// Each point's lock table: the on-CPU time the profile saw in lock code, lock arrays as
/// one row, waits per operation.
pub(super) fn lock_tables(points: &mut [Point], inputs: &RunInputs, source: ThroughputSource) {
    for p in points {
        if let Some((_, lp)) = inputs.locks.iter().find(|(v, _)| *v == p.value) {
            let work = point_work(p, source);
            let mut lp = lp.clone();
            if let Some(prof) = profile_of(&inputs.profiles, p.value) {
                locks::attribute_spin(&mut lp.rows, prof);
                locks::attribute_futex_cpu(&mut lp.rows, prof);
                locks::attribute_syscall_cpu(&mut lp.rows, prof);
                locks::mark_off_path(&mut lp.rows, prof);
            }
            locks::group_objects(&mut lp.rows);
            scalprof_model::locks::sort_rows(&mut lp.rows);
            for r in &mut lp.rows {
                r.wait_ns_per_op = (work > 0.0).then(|| r.total_wait_ns as f64 / work);
                // The holds were timed in some of the traced repeats: their share of the
                // work (the repeats of a point do the same work).
                if let Some(h) = r.hold.as_mut() {
                    let timed = work * f64::from(h.repeats) / f64::from(lp.repeats.max(1));
                    h.acquisitions_per_op = (timed > 0.0).then(|| h.acquisitions as f64 / timed);
                }
            }
            lp.hold_timing_cost = hold_timing_cost(p, &lp.hold_timed_repeats, source);
            p.locks = Some(lp);
        }
    }
}

/// What the hold-timing interposer cost a point: the median throughput of its traced
/// repeats that timed the holds over that of those that did not, − 1. The same program,
/// traced alike but for the interposer: the difference is its cost, within the repeats'
/// noise (one against one, by default). Like the perturbation, on the repeats in the clean
/// ones' mode where any is left (`Point::other_mode`).
fn hold_timing_cost(p: &Point, timed: &[u32], source: ThroughputSource) -> Option<f64> {
    let kept = scalprof_model::stability::kept(&p.traced_repeats);
    let all_other = kept.iter().all(|r| p.other_mode.contains(&r.index));
    let median = |with: bool| {
        scalprof_model::Spread::of(
            kept.iter()
                .filter(|r| all_other || !p.other_mode.contains(&r.index))
                .filter(|r| timed.contains(&r.index) == with)
                .filter_map(|r| super::repeat_throughput(p.value, r, source)),
        )
        .map(|s| s.median)
    };
    let (with, without) = (median(true)?, median(false)?);
    (without > 0.0).then(|| with / without - 1.0)
}

/// The locks whose waits grew, added to the findings; a named lock's spin paths and the
/// futex system call's on-CPU time are the lock's, not kernel hotspots of their own.
pub(super) fn lock_findings(
    findings: &mut Vec<Finding>,
    points: &[Point],
    profiles: &[(u64, PointProfile)],
    source: ThroughputSource,
) {
    let mut lock_input: Vec<locks::LockPoint<'_>> = Vec::new();
    for p in points {
        if let Some(lp) = &p.locks {
            lock_input.push(locks::LockPoint {
                point: p,
                work: point_work(p, source),
                locks: lp,
            });
        }
    }
    let lock_findings = locks::lock_findings(&lock_input);
    if lock_findings.iter().any(|f| f.scope == Some(Scope::Kernel)) {
        // The spin paths of a named kernel lock are that lock, not a separate hotspot.
        findings.retain(|f| {
            f.kind != FindingKind::KernelHotspot || !vocabulary::is_spin_path(&f.subject)
        });
    }
    if lock_findings.iter().any(|f| f.scope == Some(Scope::User)) {
        // The futex system call's on-CPU time is the user locks' (counted in their
        // score), not a separate kernel hotspot.
        let last = points.last().and_then(|p| profile_of(profiles, p.value));
        findings.retain(|f| {
            f.kind != FindingKind::KernelHotspot
                || !(vocabulary::is_futex_path(&f.subject)
                    || last.is_some_and(|prof| locks::futex_share(prof, &f.subject) > 0.5))
        });
    }
    findings.extend(lock_findings);
}

/// The budget of each point, the findings scored from the last one, and the warning
/// when too much of it is unexplained.
#[allow(clippy::too_many_arguments)]
pub(super) fn time_budget(
    header: &RunHeader,
    points: &mut [Point],
    findings: &mut Vec<Finding>,
    profiles: &[(u64, PointProfile)],
    source: ThroughputSource,
    scaling_diff: Option<&ScalingDiff>,
    claimed: &[String],
) -> Option<Warning> {
    let work: Vec<f64> = points.iter().map(|p| point_work(p, source)).collect();
    let profs: Vec<Option<&PointProfile>> = points
        .iter()
        .map(|p| profile_of(profiles, p.value))
        .collect();
    let run = crate::causes::Run {
        header,
        points,
        profiles: &profs,
        work: &work,
        scaling_diff,
        claimed,
    };
    let mut series = Vec::new();
    for cause in crate::causes::REGISTRY {
        series.extend(cause.series(&run, findings));
    }
    for cause in crate::causes::REGISTRY {
        cause.fold(&mut series, points);
    }
    let observer = budget::observer_wait_ns(points, &work);
    let overhead: Vec<Option<f64>> = budget::overhead_ns(points, &profs, &work)
        .into_iter()
        .zip(observer)
        .map(|(sampled, waited)| match (sampled, waited) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        })
        .collect();
    let budgets = budget::budgets(points, &overhead, &series, header.host.cpus);
    for (p, b) in points.iter_mut().zip(budgets) {
        p.budget = b;
    }
    for cause in crate::causes::REGISTRY {
        findings.extend(cause.findings(points, header.host.cpus));
    }
    name_the_cpu_limit(header, findings);
    // Scored at the last point the tracer saw: a sweep stopped during a point's traced
    // repeats keeps that point's clean figures, but nothing there could name a cause.
    let traced = points.iter().rev().find(|p| !p.traced_repeats.is_empty());
    if let Some(last) = traced.or(points.last()) {
        crate::causes::score_findings(findings, last, header.host.cpus as u64);
    }
    unexplained_warning(header, points)
}

/// Waiting for a CPU where a CPU set, affinity mask or quota leaves the workload fewer
/// CPUs than the machine has: the advice says which limit ("give it more CPUs" is then
/// a change to that limit, not to the machine).
fn name_the_cpu_limit(header: &RunHeader, findings: &mut [Finding]) {
    let Some(l) = header.host.limits.as_ref() else {
        return;
    };
    let usable = u64::from(l.usable_cpus);
    if usable >= u64::from(header.host.cpus) {
        return;
    }
    for f in findings.iter_mut().filter(|f| {
        f.kind == FindingKind::BlockedWait && f.run_queue() == Some(RunQueueBehind::Own)
    }) {
        f.suggestion.push_str(&format!(
            "; the workload may use {usable} of the {} CPUs here, set by {}",
            header.host.cpus,
            super::machine_warnings::limiting(l, usable),
        ));
    }
}

/// A program that scales gets no scaling finding; a kernel hotspot says which processes
/// ran it when that is not only the command; heaviest first.
pub(super) fn finish_findings(
    findings: &mut Vec<Finding>,
    header: &RunHeader,
    points: &[Point],
    profiles: &[(u64, PointProfile)],
    threads: bool,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let withheld = threads && !loss_is_real(points);
    if withheld {
        // Nothing to explain: a program that scales gets no scaling finding.
        findings.retain(|f| f.kind == FindingKind::SuperlinearCost);
    }
    // The verdict and the findings never disagree silently: a cause the verdict shows
    // above 10% without a finding is said, and why.
    if let Some((last, b)) = points
        .last()
        .and_then(|p| p.budget.as_ref().map(|b| (p, b)))
        .filter(|_| threads)
    {
        for c in b.causes.iter().filter(|c| !c.foreign && c.share > 0.10) {
            if findings.iter().any(|f| f.id() == c.id()) {
                continue;
            }
            let why = if withheld {
                let spread = |p: &Point| {
                    p.throughput_spread
                        .filter(|s| s.median > 0.0)
                        .map_or(0.0, |s| (s.max - s.min) / s.median)
                };
                format!(
                    "the loss ({:.0}% of linear) is within the clean repeats' own spread ({:.0}% at {} {}, {:.0}% at {}), so no finding is reported; measure more repeats (--repeat 10) to tell",
                    (1.0 - last.efficiency.unwrap_or(1.0)) * 100.0,
                    spread(&points[0]) * 100.0,
                    points[0].value,
                    header.sweep.parameter,
                    spread(last) * 100.0,
                    last.value
                )
            } else {
                "no finding of its kind stood on its own evidence (see scalprof show -v)".into()
            };
            warnings.push(Warning {
                kind: scalprof_model::WarningKind::FindingsWithheld,
                point: Some(last.value),
                message: format!(
                    "{} {}: {} takes {:.0}% of the thread-time but is not a finding: {why}",
                    header.sweep.parameter,
                    last.value,
                    c.subject,
                    c.share * 100.0
                ),
            });
        }
    }
    // A kernel hotspot says which processes ran it, when that is not only the command
    // (a server observed with --attach, or several programs).
    if let Some(last) = points.last().and_then(|p| profile_of(profiles, p.value)) {
        let own = command_name(&header.command);
        for f in findings
            .iter_mut()
            .filter(|f| f.kind == FindingKind::KernelHotspot)
        {
            let procs = scaling::leaf_processes(last, &format!("{}_[k]", f.subject));
            if let Some(note) = scaling::processes_note(&procs, &own) {
                f.evidence += &note;
            }
        }
    }
    sort_findings(findings);
    warnings
}

fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.subject.cmp(&b.subject))
    });
}

/// Size sweeps: power-law fits per function, and the superlinear ones as findings.
pub(super) fn complexity_report(
    header: &RunHeader,
    points: &[Point],
    profiles: &[(u64, PointProfile)],
    findings: &mut Vec<Finding>,
    warnings: &mut Vec<scalprof_model::Warning>,
) -> Option<ComplexityReport> {
    let complexity = if header.sweep.parameter == SweepParameter::Size {
        let input: Vec<(u64, u32, &PointProfile)> = points
            .iter()
            .filter_map(|p| profile_of(profiles, p.value).map(|prof| (p.value, prof.repeats, prof)))
            .collect();
        let report = complexity::complexity(&input);
        if report.is_none() && !input.is_empty() {
            // A size sweep whose functions are not fitted says why, never nothing (one
            // recorded without profiles has nothing to fit, as the user chose).
            warnings.push(no_complexity(points, &input));
        }
        report
    } else {
        None
    };
    if let Some(c) = &complexity {
        let unit = if profiles.first().is_some_and(|p| p.1.event == "cycles") {
            "cycles/run"
        } else {
            "ns/run"
        };
        findings.extend(complexity::superlinear(c, unit));
        sort_findings(findings);
    }
    complexity
}

/// Why a size sweep has no complexity table: too few sizes with a profile (which lack one),
/// or costs no power law fits.
fn no_complexity(points: &[Point], input: &[(u64, u32, &PointProfile)]) -> scalprof_model::Warning {
    let missing: Vec<String> = points
        .iter()
        .filter(|p| !input.iter().any(|i| i.0 == p.value))
        .map(|p| p.value.to_string())
        .collect();
    let message = if input.len() < 3 {
        format!(
            "no complexity fit: {} of {} sizes have a profile (none at {}), and a power law needs 3; rerun with more repeats (--repeat 5) or more sizes",
            input.len(),
            points.len(),
            if missing.is_empty() { "-".to_string() } else { missing.join(", ") }
        )
    } else {
        format!(
            "no complexity fit: the sampled cost at {} sizes is zero at some size or does not grow with it; rerun with a higher --freq or larger sizes",
            input.len()
        )
    };
    scalprof_model::Warning {
        kind: scalprof_model::WarningKind::ProfileQuality,
        point: None,
        message,
    }
}

/// The model's prediction past the measured points (a thread sweep's).
pub(super) fn add_prediction(model: Option<&mut Model>, inputs: &RunInputs, points: &[Point]) {
    if let Some(m) = model {
        m.prediction = crate::predict::predict(&inputs.header, points, inputs.predict_to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::Repeat;

    #[test]
    fn the_interposer_s_cost_is_its_repeats_against_the_others() {
        let traced = |index, wall_s| Repeat {
            traced: true,
            ..Repeat::ok(index, wall_s)
        };
        let mut p = crate::budget::tests::point(2, 1.0, 1.0);
        // The first traced repeat without the interposer; two with it, 25% and 15% longer.
        p.traced_repeats = vec![traced(0, 1.0), traced(1, 1.25), traced(2, 1.15)];
        let cost = hold_timing_cost(&p, &[1, 2], ThroughputSource::Weak).unwrap();
        // The median of their throughputs against the one without.
        let with = (1.0 / 1.25 + 1.0 / 1.15) / 2.0;
        assert!((cost - (with - 1.0)).abs() < 1e-9, "{cost}");
        // All traced repeats alike: nothing to measure it against.
        assert_eq!(hold_timing_cost(&p, &[], ThroughputSource::Weak), None);
        assert_eq!(
            hold_timing_cost(&p, &[0, 1, 2], ThroughputSource::Weak),
            None
        );
    }
}
