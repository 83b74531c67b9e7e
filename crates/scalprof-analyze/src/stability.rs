//! How much a verdict can be trusted: each budget share's interval over the traced
//! repeats, whether the repeats agree on each point's top cause, and the CPU time other
//! processes took from the points.
//!
//! The intervals come from assembling the document once per traced repeat: variant `j`
//! diagnoses every point after the first from its `j`-th traced repeat alone (its own
//! profile, lock table and traced throughput), against the merged first point. Every
//! share is then computed by the same code as the merged document's, so an interval can
//! never disagree with its point estimate about what a cause is.

use std::collections::{BTreeMap, HashMap};

use scalprof_model::locks::{LockProfile, RunQueueBehind, Scope};
use scalprof_model::stability::Interval;
use scalprof_model::Spread;
use scalprof_model::{
    Budget, Cause, FindingKind, ForeignProcess, Interference, Point, PointProfile, PointRepeat,
    Repeat, RepeatTrace, RunDocument, RunInputs, Settling,
};

/// A cause below this share of the last point's thread-time is not a finding.
pub const MIN_SHARE: f64 = 0.05;

/// The per-repeat profiles and lock tables worth keeping beside the merged ones: those of
/// the points after the first with at least two traced repeats.
pub fn per_repeat(
    first: Option<u64>,
    profiles: &[(u64, u32, PointProfile)],
    locks: &[(u64, u32, LockProfile)],
) -> Vec<RepeatTrace> {
    let mut by_repeat: BTreeMap<(u64, u32), RepeatTrace> = BTreeMap::new();
    fn slot(
        by_repeat: &mut BTreeMap<(u64, u32), RepeatTrace>,
        value: u64,
        index: u32,
    ) -> &mut RepeatTrace {
        by_repeat.entry((value, index)).or_insert(RepeatTrace {
            value,
            index,
            profile: None,
            locks: None,
        })
    }
    for (v, i, p) in profiles.iter().filter(|(v, ..)| Some(*v) != first) {
        slot(&mut by_repeat, *v, *i).profile = Some(p.clone());
    }
    for (v, i, l) in locks.iter().filter(|(v, ..)| Some(*v) != first) {
        slot(&mut by_repeat, *v, *i).locks = Some(l.clone());
    }
    // Only points with two or more repeats have an interval to give.
    let mut out: Vec<RepeatTrace> = by_repeat.into_values().collect();
    let repeats_of = |v: u64, out: &[RepeatTrace]| out.iter().filter(|r| r.value == v).count();
    let keep: Vec<bool> = out.iter().map(|r| repeats_of(r.value, &out) >= 2).collect();
    let mut keep = keep.into_iter();
    out.retain(|_| keep.next().unwrap_or(false));
    out
}

/// Each point's merged part (`merged`), or the chosen repeat's own where it has one: a
/// repeat that lost its profile or lock table (a collector that failed) keeps the merged
/// one, so that a missing part does not read as a cause gone to zero.
fn swapped<T: Clone>(merged: &[(u64, T)], own: impl Fn(u64) -> Option<T>) -> Vec<(u64, T)> {
    merged
        .iter()
        .map(|(v, m)| (*v, own(*v).unwrap_or_else(|| m.clone())))
        .collect()
}

/// The inputs of variant `j`: every point with per-repeat data diagnosed from its `j`-th
/// traced repeat only, and the values of those points. `None` when no point has a `j`-th
/// repeat.
fn variant(inputs: &RunInputs, j: usize) -> Option<(RunInputs, Vec<u64>)> {
    let mut chosen: Vec<&RepeatTrace> = Vec::new();
    let mut values: Vec<u64> = inputs.per_repeat.iter().map(|r| r.value).collect();
    values.dedup();
    for v in values {
        if let Some(r) = inputs.per_repeat.iter().filter(|r| r.value == v).nth(j) {
            chosen.push(r);
        }
    }
    if chosen.is_empty() {
        return None;
    }
    let replaced = |v: u64| chosen.iter().find(|r| r.value == v);
    let repeats: Vec<PointRepeat> = inputs
        .repeats
        .iter()
        .filter(|pr| {
            !pr.repeat.traced || replaced(pr.value).is_none_or(|r| r.index == pr.repeat.index)
        })
        .cloned()
        .collect();
    let profiles = swapped(&inputs.profiles, |v| replaced(v)?.profile.clone());
    let locks = swapped(&inputs.locks, |v| replaced(v)?.locks.clone());
    let alone = chosen.iter().map(|r| r.value).collect();
    let inputs = RunInputs {
        header: inputs.header.clone(),
        repeats,
        profiles,
        locks,
        sharing: inputs.sharing.clone(),
        legacy_findings: inputs.legacy_findings.clone(),
        per_repeat: Vec::new(),
        experiments: Vec::new(),
        packages: inputs.packages.clone(),
        predict_to: inputs.predict_to,
    };
    Some((inputs, alone))
}

/// Adds to a document assembled from the merged repeats: every share's interval, the
/// findings' score intervals, and each point's settling. `assemble` is the function that
/// made `doc` (called again on each variant).
pub fn add_intervals(
    doc: &mut RunDocument,
    inputs: &RunInputs,
    assemble: impl Fn(&RunInputs) -> RunDocument,
) {
    // Only a thread sweep's points have budgets to give intervals to.
    if !doc.sweep.parameter.scales() {
        return;
    }
    let per_point = variant_budgets(inputs, None, assemble);
    let first = doc.points.first().map(|p| p.value);
    let last = doc.points.last().map(|p| p.value);
    for p in doc.points.iter_mut() {
        let variants = per_point.get(&p.value).map(Vec::as_slice).unwrap_or(&[]);
        add_point_intervals(p, variants, first, last);
    }
    // A finding's score is its cause's share at the last point.
    if let Some(last) = doc.points.last().and_then(|p| p.budget.as_ref()) {
        for f in &mut doc.findings {
            f.score_interval = last
                .causes
                .iter()
                .find(|c| c.id() == f.id())
                .and_then(|c| c.share_interval);
        }
    }
}

/// The settling of the point at `value` alone, as [`add_intervals`] would give it, from
/// the merged document `doc` (made by `assemble`): only the variants that diagnose this
/// point are assembled. Mid-sweep, after each traced repeat, this is what decides
/// whether another follows; the points already done are not assembled again per repeat.
pub fn settling_at(
    mut doc: RunDocument,
    inputs: &RunInputs,
    value: u64,
    assemble: impl Fn(&RunInputs) -> RunDocument,
) -> Option<Settling> {
    if !doc.sweep.parameter.scales() {
        return None;
    }
    let per_point = variant_budgets(inputs, Some(value), assemble);
    let first = doc.points.first().map(|p| p.value);
    let last = doc.points.last().map(|p| p.value);
    let p = doc.points.iter_mut().find(|p| p.value == value)?;
    let variants = per_point.get(&value).map(Vec::as_slice).unwrap_or(&[]);
    add_point_intervals(p, variants, first, last);
    p.settling.take()
}

/// Per point (by value): each variant's budget, for the points it diagnosed alone. With
/// `only`, just the variants that diagnose that point.
fn variant_budgets(
    inputs: &RunInputs,
    only: Option<u64>,
    assemble: impl Fn(&RunInputs) -> RunDocument,
) -> HashMap<u64, Vec<Budget>> {
    let mut per_point: HashMap<u64, Vec<Budget>> = HashMap::new();
    for j in 0.. {
        let Some((v, alone)) = variant(inputs, j) else {
            break;
        };
        if only.is_some_and(|value| !alone.contains(&value)) {
            // The repeats of a point are numbered from 0: none has a `j`-th, nor later.
            break;
        }
        for p in assemble(&v).points {
            if let Some(b) = p.budget.filter(|_| alone.contains(&p.value)) {
                per_point.entry(p.value).or_default().push(b);
            }
        }
    }
    per_point
}

/// One point's share intervals and settling, from its variants' budgets.
fn add_point_intervals(p: &mut Point, variants: &[Budget], first: Option<u64>, last: Option<u64>) {
    let traced = scalprof_model::stability::kept(&p.traced_repeats).len() as u32;
    let useful_interval = useful_interval(p);
    let Some(b) = p.budget.as_mut() else { return };
    b.useful_interval = useful_interval;
    let span = |merged: f64, each: &mut dyn Iterator<Item = f64>| -> Interval {
        crate::welch::share_interval(merged, &each.collect::<Vec<f64>>())
    };
    for c in &mut b.causes {
        let mut each = variants.iter().map(|v| {
            v.causes
                .iter()
                .find(|d| d.id() == c.id())
                .map_or(0.0, |d| d.share)
        });
        c.share_interval = Some(span(c.share, &mut each));
    }
    b.unexplained_interval = Some(span(
        b.unexplained,
        &mut variants.iter().map(|v| v.unexplained),
    ));
    if Some(p.value) != first {
        p.settling = Some(settle(b, variants, traced, Some(p.value) == last));
    }
}

/// `useful` (the efficiency) from the slowest to the fastest clean repeat.
fn useful_interval(p: &Point) -> Option<Interval> {
    let s = p.throughput_spread.filter(|s| s.median > 0.0)?;
    let e = p.efficiency?;
    Some([
        (e * s.min / s.median).clamp(0.0, 1.0),
        (e * s.max / s.median).clamp(0.0, 1.0),
    ])
}

/// Whether the point's verdict is settled: its top cause (the largest, if at least
/// [`MIN_SHARE`]) stands clear of the next one (their intervals do not overlap), and, at
/// the `last` point (where findings are scored), no cause's interval straddles the
/// reporting threshold. The intervals narrow with more
/// repeats, so more repeats settle a point unless two causes are truly as large.
pub fn settle(merged: &Budget, variants: &[Budget], traced: u32, last: bool) -> Settling {
    let mut causes: Vec<&scalprof_model::Cause> =
        merged.causes.iter().filter(|c| !c.foreign).collect();
    causes.sort_by(|a, b| b.share.total_cmp(&a.share));
    let interval = |c: &scalprof_model::Cause| c.share_interval.unwrap_or([c.share, c.share]);
    let mut out = Settling {
        traced_repeats: traced,
        settled: true,
        top: None,
        candidates: Vec::new(),
        reason: String::new(),
    };
    if variants.len() < 2 {
        out.top = causes
            .first()
            .filter(|c| c.share >= MIN_SHARE)
            .map(|c| c.subject.clone());
        return out;
    }
    let first = causes.first().copied();
    let second = causes.get(1).copied();
    match (first, second) {
        (Some(a), Some(b)) if interval(b)[1] >= MIN_SHARE && interval(a)[0] <= interval(b)[1] => {
            let (ia, ib) = (interval(a), interval(b));
            out.settled = false;
            out.candidates = vec![a.subject.clone(), b.subject.clone()];
            out.reason = format!(
                "the top two causes overlap ({:.0}–{:.0}% and {:.0}–{:.0}%)",
                ia[0] * 100.0,
                ia[1] * 100.0,
                ib[0] * 100.0,
                ib[1] * 100.0
            );
            return out;
        }
        (Some(a), _) if interval(a)[0] >= MIN_SHARE => out.top = Some(a.subject.clone()),
        _ => {}
    }
    if let Some(c) = causes.iter().filter(|_| last).find(|c| {
        let i = interval(c);
        i[0] < MIN_SHARE && i[1] >= MIN_SHARE
    }) {
        let i = interval(c);
        out.settled = false;
        out.candidates = vec![c.subject.clone()];
        out.reason = format!(
            "{} is on the edge of the {:.0}% threshold ({:.1}–{:.1}%)",
            c.subject,
            MIN_SHARE * 100.0,
            i[0] * 100.0,
            i[1] * 100.0
        );
    }
    out
}

/// The interference of a point's repeats: the median share, the heaviest processes (their
/// CPU time summed over the repeats), and how many repeats were disturbed.
pub fn point_interference<'a>(repeats: impl Iterator<Item = &'a Repeat>) -> Option<Interference> {
    let measured: Vec<&Interference> = repeats.filter_map(|r| r.interference.as_ref()).collect();
    if measured.is_empty() {
        return None;
    }
    let share = Spread::of(measured.iter().map(|i| i.share)).map_or(0.0, |s| s.median);
    let mut by_process: Vec<ForeignProcess> = Vec::new();
    for p in measured.iter().flat_map(|i| &i.processes) {
        match by_process
            .iter_mut()
            .find(|q| q.pid == p.pid && q.comm == p.comm)
        {
            Some(q) => q.cpu_s += p.cpu_s,
            None => by_process.push(p.clone()),
        }
    }
    by_process.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s));
    by_process.truncate(5);
    Some(Interference {
        steal_s: Spread::of(measured.iter().map(|i| i.steal_s)).map_or(0.0, |s| s.median),
        share,
        peak: measured.iter().map(|i| i.share).fold(0.0, f64::max),
        processes: by_process,
        disturbed: measured.iter().filter(|i| i.is_disturbed()).count() as u32,
    })
}

/// Waiting for a CPU while other processes took a share `s` of the CPUs the workload could
/// use (measured over its traced repeats, [`scalprof_model::Interference`]): up to `s` of
/// the thread-time waited behind them, whoever the scheduler's switch points named (a
/// thread woken while its sibling and a foreign process held the two CPUs is counted as
/// waiting behind its sibling). That part of the workload's own CPU wait is moved to the
/// foreign cause: interference, not the program's.
///
/// `s` is the share over the traced repeats the lock tables were summed from (the kept
/// ones), weighed by their wall time, as their waits are: a burst of another process in
/// one of three repeats is a third of its share there, where a median would make it none.
pub(crate) fn move_interference(causes: &mut Vec<Cause>, p: &Point, cpus: u32) {
    let Some(s) = traced_share(&p.traced_repeats) else {
        return;
    };
    // `s` is a share of the CPUs the workload could use, min(threads, CPUs); a cause's
    // share is of all its threads' time.
    let threads = p.value.max(1) as f64;
    let usable = if cpus > 0 {
        threads.min(f64::from(cpus))
    } else {
        threads
    };
    let s = s * usable / threads;
    let behind_others = |c: &Cause| c.foreign && c.run_queue() == Some(RunQueueBehind::Other);
    let already: f64 = causes
        .iter()
        .filter(|c| behind_others(c))
        .map(|c| c.share)
        .sum();
    let Some(own) = causes
        .iter_mut()
        .find(|c| c.run_queue() == Some(RunQueueBehind::Own))
    else {
        return;
    };
    let moved = (s - already).max(0.0).min(own.share);
    if moved <= 0.0 {
        return;
    }
    own.share -= moved;
    match causes.iter_mut().find(|c| behind_others(c)) {
        Some(f) => f.share += moved,
        None => causes.push(Cause {
            run_queue: Some(RunQueueBehind::Other),
            late_share: 0.0,
            kind: FindingKind::BlockedWait,
            scope: Some(Scope::Kernel),
            subject: RunQueueBehind::Other.row_name().into(),
            share: moved,
            share_interval: None,
            foreign: true,
            detail: "cpu-wait".into(),
        }),
    }
}

/// The share of the CPUs the workload could use that other processes took over the kept
/// traced repeats, weighed by each repeat's wall time; `None` where none was measured.
fn traced_share(traced: &[Repeat]) -> Option<f64> {
    let measured: Vec<(f64, f64)> = scalprof_model::stability::kept(traced)
        .into_iter()
        .filter_map(|r| Some((r.interference.as_ref()?.share, r.wall_s.max(0.0))))
        .collect();
    let wall: f64 = measured.iter().map(|(_, w)| w).sum();
    if measured.is_empty() || wall <= 0.0 {
        return None;
    }
    Some(measured.iter().map(|(s, w)| s * w).sum::<f64>() / wall)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::locks::{CPU_WAIT, CPU_WAIT_OTHER};
    use scalprof_model::{Cause, FindingKind};

    fn budget(causes: &[(&str, f64)]) -> Budget {
        Budget {
            useful: 0.5,
            useful_interval: None,
            overhead: 0.0,
            unexplained: 0.0,
            unexplained_interval: None,
            causes: causes
                .iter()
                .map(|&(s, share)| Cause {
                    run_queue: None,
                    late_share: 0.0,
                    kind: FindingKind::LockContention,
                    scope: Some(Scope::User),
                    subject: s.into(),
                    share,
                    share_interval: None,
                    foreign: false,
                    detail: String::new(),
                })
                .collect(),
        }
    }

    fn with_intervals(mut b: Budget, variants: &[Budget]) -> Budget {
        for c in &mut b.causes {
            let each = variants.iter().map(|v| {
                v.causes
                    .iter()
                    .find(|d| d.id() == c.id())
                    .map_or(0.0, |d| d.share)
            });
            c.share_interval =
                Some(each.fold([c.share, c.share], |[l, h], x| [l.min(x), h.max(x)]));
        }
        b
    }

    #[test]
    fn repeats_that_agree_on_a_clear_top_cause_settle() {
        let v = [
            budget(&[("a", 0.40), ("b", 0.02)]),
            budget(&[("a", 0.44), ("b", 0.03)]),
        ];
        let merged = with_intervals(budget(&[("a", 0.42), ("b", 0.025)]), &v);
        let s = settle(&merged, &v, 2, true);
        assert!(s.settled, "{s:?}");
        assert_eq!(s.top.as_deref(), Some("a"));
        assert_eq!(s.traced_repeats, 2);
    }

    #[test]
    fn repeats_that_rank_two_causes_either_way_are_unsettled_with_both_named() {
        let v = [
            budget(&[("a", 0.30), ("b", 0.20)]),
            budget(&[("b", 0.31), ("a", 0.22)]),
        ];
        let merged = with_intervals(budget(&[("a", 0.26), ("b", 0.255)]), &v);
        let s = settle(&merged, &v, 2, true);
        assert!(!s.settled);
        assert_eq!(s.candidates, ["a", "b"]);
        assert!(s.reason.contains("overlap"), "{s:?}");
        assert_eq!(s.top, None);
    }

    #[test]
    fn more_repeats_that_agree_narrow_the_intervals_and_settle() {
        // Two repeats 0.30/0.22 and 0.22/0.14: the intervals overlap.
        let two = [
            budget(&[("a", 0.30), ("b", 0.14)]),
            budget(&[("a", 0.22), ("b", 0.22)]),
        ];
        let merged = with_intervals(budget(&[("a", 0.26), ("b", 0.18)]), &two);
        assert!(!settle(&merged, &two, 2, true).settled);
        // Six that scatter the same way around the same means: they stand apart.
        let six: Vec<Budget> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    budget(&[("a", 0.28), ("b", 0.16)])
                } else {
                    budget(&[("a", 0.24), ("b", 0.20)])
                }
            })
            .collect();
        let merged = with_intervals(budget(&[("a", 0.26), ("b", 0.18)]), &six);
        let s = settle(&merged, &six, 6, true);
        assert!(s.settled, "{s:?} {merged:?}");
    }

    #[test]
    fn a_cause_on_the_threshold_is_unsettled_and_a_program_that_scales_is_not() {
        // One repeat sees a 6% cause, the other 3%: it may or may not be a finding.
        let v = [
            budget(&[("a", 0.30), ("b", 0.06)]),
            budget(&[("a", 0.31), ("b", 0.03)]),
        ];
        let merged = with_intervals(budget(&[("a", 0.3), ("b", 0.045)]), &v);
        let s = settle(&merged, &v, 2, true);
        assert!(!s.settled && s.candidates == ["b"], "{s:?}");
        // The top cause is clear all the same.
        assert_eq!(s.top.as_deref(), Some("a"));
        // No cause near 5% in any repeat: a program that scales is settled.
        let v = [budget(&[("a", 0.01)]), budget(&[("a", 0.012), ("b", 0.02)])];
        let merged = with_intervals(budget(&[("a", 0.011), ("b", 0.01)]), &v);
        let s = settle(&merged, &v, 2, true);
        assert!(s.settled && s.top.is_none(), "{s:?}");
    }

    #[test]
    fn a_variant_diagnoses_each_point_from_its_own_jth_repeat_and_keeps_merged_parts() {
        use scalprof_model::locks::LockRow;
        let table = |name: &str| LockProfile {
            rows: vec![LockRow::new(
                Scope::User,
                name,
                scalprof_model::locks::LockKind::Mutex,
            )],
            ..Default::default()
        };
        let traced = |value, index| PointRepeat {
            value,
            repeat: Repeat {
                traced: true,
                ..Repeat::ok(index, 1.0)
            },
        };
        let mut inputs = RunInputs::timing(
            crate::summary::tests::header(vec![1, 2]),
            vec![traced(1, 3), traced(2, 3), traced(2, 4)],
        );
        inputs.locks = vec![(1, table("base")), (2, table("merged"))];
        inputs.profiles = vec![(2, PointProfile::default())];
        inputs.per_repeat = vec![
            RepeatTrace {
                value: 2,
                index: 3,
                profile: None,
                locks: Some(table("third")),
            },
            RepeatTrace {
                value: 2,
                index: 4,
                profile: None,
                locks: None,
            },
        ];
        let name = |v: &RunInputs, at: u64| {
            v.locks.iter().find(|(p, _)| *p == at).unwrap().1.rows[0]
                .name
                .clone()
        };
        let (v0, alone) = variant(&inputs, 0).unwrap();
        assert_eq!(alone, [2]);
        // The baseline stays merged; point 2 is its repeat 3 alone.
        assert_eq!(
            (name(&v0, 1), name(&v0, 2)),
            ("base".into(), "third".into())
        );
        let traced_at_2: Vec<u32> = v0
            .repeats
            .iter()
            .filter(|r| r.value == 2 && r.repeat.traced)
            .map(|r| r.repeat.index)
            .collect();
        assert_eq!(traced_at_2, [3]);
        // Repeat 4 lost its lock table: the merged one stands in for it.
        let (v1, _) = variant(&inputs, 1).unwrap();
        assert_eq!(name(&v1, 2), "merged");
        assert_eq!(v1.profiles.len(), 1);
        assert!(variant(&inputs, 2).is_none());
    }

    #[test]
    fn only_points_after_the_first_with_two_repeats_keep_their_own_traces() {
        let p = PointProfile::default();
        let l = LockProfile::default();
        let kept = per_repeat(
            Some(1),
            &[
                (1, 3, p.clone()),
                (1, 4, p.clone()),
                (2, 3, p.clone()),
                (2, 4, p.clone()),
                (4, 3, p.clone()),
            ],
            &[(2, 4, l.clone()), (4, 3, l)],
        );
        let got: Vec<(u64, u32, bool, bool)> = kept
            .iter()
            .map(|r| (r.value, r.index, r.profile.is_some(), r.locks.is_some()))
            .collect();
        assert_eq!(got, [(2, 3, true, false), (2, 4, true, true)]);
    }

    fn traced(index: u32, share: f64) -> Repeat {
        Repeat {
            index,
            wall_s: 1.0,
            user_s: 2.0,
            sys_s: 0.0,
            ops: Some(1000),
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            voluntary_csw: 0,
            involuntary_csw: 0,
            minor_faults: 0,
            major_faults: 0,
            counts: None,
            stdout_path: None,
            stderr_path: None,
            traced: true,
            interference: Some(Interference {
                share,
                ..Default::default()
            }),
            throttling: None,
        }
    }

    #[test]
    fn a_burst_in_one_traced_repeat_is_interference_not_the_program_s_cpu_wait() {
        // 2 threads on 2 CPUs; another process took 9% of the usable CPUs in one of three
        // traced repeats (under the 10% bar that measures a repeat again; a median of
        // none): the program's own CPU wait, 3% of its threads' time, was that burst's.
        let mut point = scalprof_analyze_point(2);
        point.traced_repeats = vec![traced(0, 0.0), traced(1, 0.09), traced(2, 0.0)];
        let mut causes = budget(&[]).causes;
        causes.push(Cause {
            run_queue: Some(RunQueueBehind::Own),
            late_share: 0.0,
            kind: FindingKind::BlockedWait,
            scope: Some(Scope::Kernel),
            subject: CPU_WAIT.into(),
            share: 0.03,
            share_interval: None,
            foreign: false,
            detail: "cpu-wait".into(),
        });
        move_interference(&mut causes, &point, 2);
        let own = causes.iter().find(|c| c.subject == CPU_WAIT).unwrap();
        let other = causes.iter().find(|c| c.subject == CPU_WAIT_OTHER).unwrap();
        assert!(own.share < 0.001, "{causes:?}");
        assert!(
            (other.share - 0.03).abs() < 1e-9 && other.foreign,
            "{causes:?}"
        );
        // The point's interference says the burst, not a median of none.
        let i = point_interference(point.traced_repeats.iter()).unwrap();
        assert_eq!(i.share, 0.0);
        assert!((i.peak - 0.09).abs() < 1e-12);
        // A burst past the bar: that repeat is left out of the lock tables (it was
        // measured again), and of the share moved with them.
        point.traced_repeats = vec![traced(0, 0.0), traced(1, 0.3), traced(2, 0.0)];
        assert_eq!(traced_share(&point.traced_repeats), Some(0.0));
    }

    fn scalprof_analyze_point(value: u64) -> Point {
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
            throughput: Some(1.0),
            speedup: None,
            efficiency: None,
            wall_speedup: None,
            wall_s: None,
            user_s: None,
            sys_s: None,
            throughput_spread: None,
            profile: None,
            locks: None,
            budget: None,
            counters: None,
        }
    }
}
