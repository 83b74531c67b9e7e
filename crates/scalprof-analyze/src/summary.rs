//! From stored repeats to the run document: per-point throughput, speedup, efficiency,
//! spreads, the scaling model and typed measurement warnings.

use scalprof_model::{
    Point, Repeat, RunDocument, RunInputs, Sampling, Spread, ThroughputInfo, ThroughputSource,
    RUN_SCHEMA,
};

use crate::scaling;

mod machine_warnings;
mod passes;
mod profile_warnings;
mod repeat_warnings;
mod scaling_mode;
mod warnings;
pub use profile_warnings::unnamed_binaries;
use profile_warnings::{profile_warnings, python_without_names};
use scaling_mode::throughput_source;

/// Repeats of one point whose wall times spread more than this fraction of their median
/// are flagged (the issue's 10%; hyperfine warns on outliers in the same spirit).
pub const NOISY_SPREAD: f64 = 0.10;

/// Traced repeats whose throughput differs from the clean ones' by more than this
/// fraction describe a perturbed program: the findings say so. 5% is the tracing budget
/// scalprof holds itself to (the sampler alone costs 1–4% on a 2-CPU VM).
pub const PERTURBATION_LIMIT: f64 = 0.05;

/// Builds the run document from what the store keeps of a run: its header, repeats,
/// each point's merged profile and lock table (empty with --no-profile / --no-locks),
/// and the sharing sites read from its binaries.
pub fn assemble(inputs: &RunInputs) -> RunDocument {
    let mut doc = assemble_merged(inputs);
    crate::stability::add_intervals(&mut doc, inputs, assemble_merged);
    crate::experiment::attach(&mut doc, &inputs.experiments);
    doc
}

/// Whether the point at `value` is settled, as [`assemble`]'s document would say: the
/// sweep's question after each traced repeat, answered without assembling the variants
/// of the points already done.
pub fn settling_at(inputs: &RunInputs, value: u64) -> Option<scalprof_model::Settling> {
    crate::stability::settling_at(assemble_merged(inputs), inputs, value, assemble_merged)
}

/// The document from each point's merged repeats, without intervals.
fn assemble_merged(inputs: &RunInputs) -> RunDocument {
    let header = &inputs.header;
    let profiles = inputs.profiles.as_slice();
    let threads = header.sweep.parameter.scales();
    // Time: what throughput means, the points, speedups, the model, the warnings.
    let (source, inferred) = throughput_source(header, &inputs.repeats);
    let mut points = passes::points(inputs, source);
    passes::speedups(&mut points, threads);
    let min_repeats = if header.sweep.parameter.swept() {
        0
    } else {
        scalprof_model::MIN_LEVEL_WINDOWS
    };
    let mut model = passes::model(&points, source, threads, min_repeats);
    let mut warnings = passes::measurement_warnings(header, &points, source);
    // Profiles: what grew, and the findings the samples support.
    let with_work = passes::attach_profiles(&mut points, profiles, source);
    warnings.extend(profile_warnings(header, profiles, &inputs.packages));
    warnings.extend(python_without_names(header, profiles));
    let scaling_diff = scaling::scaling_diff(&with_work);
    let (mut findings, claimed) =
        passes::profile_findings(inputs, &points, &with_work, scaling_diff.as_ref(), threads);
    // Locks: each point's table, and the locks whose waits grew.
    passes::lock_tables(&mut points, inputs, source);
    passes::lock_findings(&mut findings, &points, profiles, source);
    if threads {
        warnings.extend(warnings::idle_wakeups(header, &points));
    }
    // Where the thread-time went, and the findings scored from it.
    if threads {
        warnings.extend(passes::time_budget(
            header,
            &mut points,
            &mut findings,
            profiles,
            source,
            scaling_diff.as_ref(),
            &claimed,
        ));
    }
    warnings.extend(passes::finish_findings(
        &mut findings,
        header,
        &points,
        profiles,
        threads,
    ));
    passes::add_prediction(model.as_mut().filter(|_| threads), inputs, &points);
    let complexity =
        passes::complexity_report(header, &points, profiles, &mut findings, &mut warnings);
    if threads {
        withhold_if_unswept(&mut findings, &mut warnings, &points);
    }
    let sampling = profiles.first().map(|(_, p)| Sampling {
        event: p.event.clone(),
        frequency: p.frequency,
    });

    RunDocument {
        schema: RUN_SCHEMA.to_string(),
        id: header.id.clone(),
        label: header.label.clone(),
        created: header.created.clone(),
        status: header.status,
        command: header.command.clone(),
        sweep: header.sweep.clone(),
        host: header.host.clone(),
        throughput: ThroughputInfo {
            source,
            unit: source.unit().to_string(),
            inferred,
            ops_regex: (source == ThroughputSource::Ops).then(|| header.ops_regex.clone()),
        },
        points,
        model,
        warnings,
        findings,
        output_dir: header.output_dir.clone(),
        sampling,
        scaling_diff,
        complexity,
        experiments: Vec::new(),
        commit: header.commit.clone(),
        observer: header.observer,
    }
}

/// The command has no `{threads}` and did not use more CPUs at the last point than at
/// the first (no more than 1.25× the CPU seconds per wall second, a quarter of a CPU
/// more: a second thread doing any real work adds more): it did not read SCALPROF_THREADS
/// either, and every point ran the same thing.
fn swept_nothing(warnings: &[scalprof_model::Warning], points: &[Point]) -> bool {
    if !warnings
        .iter()
        .any(|w| w.kind == scalprof_model::WarningKind::NotSwept)
    {
        return false;
    }
    let busy = |p: &Point| -> Option<f64> {
        let wall = p.wall_s?.median;
        let cpu = p.user_s?.median + p.sys_s?.median;
        (wall > 0.0).then_some(cpu / wall)
    };
    let measured: Vec<f64> = points.iter().filter_map(busy).collect();
    match (measured.first(), measured.last()) {
        (Some(&first), Some(&last)) => last <= first * 1.25,
        _ => true,
    }
}

/// Where the command swept nothing ([`swept_nothing`]), withholds the findings that
/// compare the points' work, and a warning says how many.
fn withhold_if_unswept(
    findings: &mut Vec<scalprof_model::Finding>,
    warnings: &mut Vec<scalprof_model::Warning>,
    points: &[Point],
) {
    if !swept_nothing(warnings, points) {
        return;
    }
    // sqlite3 without {threads} got "37% serial_fraction … parallelize": a
    // single-threaded program compared with itself has no scaling cause to name.
    let withheld = withhold_unswept(findings);
    if withheld > 0 {
        warnings.push(scalprof_model::Warning {
            kind: scalprof_model::WarningKind::FindingsWithheld,
            point: None,
            message: format!(
                "{withheld} finding{} withheld: the command has no {{threads}} and used no more CPUs at its last point than at its first, so every point ran the same thing (waits between threads are still named)",
                if withheld == 1 { "" } else { "s" }
            ),
        });
    }
}

/// Drops the findings that compare the points' work (a serial phase, a function or a path
/// that grew, a blocking call): at points that ran the same thing they are noise. Waits
/// between threads and shared cache lines stay, since a program that reads
/// SCALPROF_THREADS and serialises on a lock also uses one CPU at every point. How many
/// were dropped.
fn withhold_unswept(findings: &mut Vec<scalprof_model::Finding>) -> usize {
    use scalprof_model::FindingKind;
    let before = findings.len();
    findings.retain(|f| {
        matches!(
            f.kind,
            FindingKind::LockContention | FindingKind::FalseSharing | FindingKind::TrueSharing
        )
    });
    before - findings.len()
}

/// The kernel's name for the command's process: its file name, cut to the 15 bytes a
/// task's `comm` holds.
fn command_name(command: &[String]) -> String {
    let base = command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c))
        .unwrap_or("");
    let mut end = base.len().min(15);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    base[..end].to_string()
}

/// Whether the last point lost efficiency by more than the clean repeats can tell apart
/// from noise: more than the relative spread (max − min over median) of the first and
/// last points' throughput together, and more than 2% in any case. A loss of more than 10%
/// that even the most favourable pairing shows — the last point's fastest repeat against
/// the first point's slowest, short of linear by 2% — is real too: one repeat in another
/// regime (a lock that sometimes hands off smoothly) widens the range but does not hide a
/// loss every repeat has. With fewer than two measured points there is nothing to compare,
/// and findings stand on their own.
pub fn loss_is_real(points: &[Point]) -> bool {
    let measured: Vec<&Point> = points.iter().filter(|p| p.efficiency.is_some()).collect();
    let (Some(first), Some(last)) = (measured.first(), measured.last()) else {
        return true;
    };
    if measured.len() < 2 {
        return true;
    }
    let rel = |p: &Point| {
        p.throughput_spread
            .filter(|s| s.median > 0.0)
            .map_or(0.0, |s| (s.max - s.min) / s.median)
    };
    let loss = 1.0 - last.efficiency.unwrap_or(1.0);
    if loss > (rel(first) + rel(last)).max(0.02) {
        return true;
    }
    let ideal = last.value as f64 / first.value.max(1) as f64;
    let best = match (first.throughput_spread, last.throughput_spread) {
        (Some(a), Some(b)) if a.min > 0.0 && ideal > 0.0 => b.max / a.min / ideal,
        _ => 1.0,
    };
    loss > 0.10 && best < 0.98
}

/// The work a point's profiled repeats did, in throughput units (ops, thread-runs or
/// runs): what per-operation costs of profiles and lock tables are divided by. These are
/// the diagnosis repeats; runs stored before clean and traced repeats were separated
/// profiled their only repeats.
pub fn point_work(p: &Point, source: ThroughputSource) -> f64 {
    let diagnosed = if p.traced_repeats.is_empty() {
        &p.repeats
    } else {
        &p.traced_repeats
    };
    // The repeats whose profiles were merged (`scalprof_pipeline::load` keeps the same).
    scalprof_model::stability::kept(diagnosed)
        .into_iter()
        .map(|r| match source {
            ThroughputSource::Ops => r.ops.unwrap_or(0) as f64,
            ThroughputSource::Weak => p.value as f64,
            ThroughputSource::Strong => 1.0,
        })
        .sum()
}

/// Throughput of one repeat, `None` if it failed or cannot be computed.
pub fn repeat_throughput(value: u64, r: &Repeat, source: ThroughputSource) -> Option<f64> {
    if !r.succeeded() || r.wall_s <= 0.0 {
        return None;
    }
    let work = match source {
        ThroughputSource::Ops => r.ops? as f64,
        ThroughputSource::Weak => value as f64,
        ThroughputSource::Strong => 1.0,
    };
    (work > 0.0).then(|| work / r.wall_s)
}

fn summarize_point(value: u64, all: Vec<Repeat>, source: ThroughputSource) -> Point {
    let (traced_repeats, repeats): (Vec<Repeat>, Vec<Repeat>) =
        all.into_iter().partition(|r| r.traced);
    // A repeat other processes disturbed was measured again: the others count, if any.
    let ok = scalprof_model::stability::kept(&repeats);
    let interference = crate::stability::point_interference(repeats.iter().chain(&traced_repeats));
    // One repeat far from the others never decides the point alone.
    let outliers = outlier_repeats(value, &ok, source);
    let ok: Vec<&Repeat> = ok
        .into_iter()
        .filter(|r| !outliers.contains(&r.index))
        .collect();
    let wall = Spread::of(ok.iter().map(|r| r.wall_s));
    let user = Spread::of(ok.iter().map(|r| r.user_s));
    let sys = Spread::of(ok.iter().map(|r| r.sys_s));
    let tput = Spread::of(
        ok.iter()
            .filter_map(|r| repeat_throughput(value, r, source)),
    );
    let kept_traced = scalprof_model::stability::kept(&traced_repeats);
    let other_mode = other_mode_repeats(value, &ok, &kept_traced, source);
    // Traced against clean in the same mode, where a traced repeat ran in the clean ones'.
    // Every traced repeat with a throughput in another mode: compared across modes.
    let all_other = kept_traced
        .iter()
        .filter(|r| repeat_throughput(value, r, source).is_some())
        .all(|r| other_mode.contains(&r.index));
    let traced = Spread::of(
        kept_traced
            .iter()
            .filter(|r| all_other || !other_mode.contains(&r.index))
            .filter_map(|r| repeat_throughput(value, r, source)),
    );
    let perturbation = match (traced, tput) {
        (Some(t), Some(c)) if c.median > 0.0 => Some(t.median / c.median - 1.0),
        _ => None,
    };
    let perturbation_interval = match (traced, tput) {
        (Some(t), Some(c)) if c.min > 0.0 && c.max > 0.0 => {
            Some([t.min / c.max - 1.0, t.max / c.min - 1.0])
        }
        _ => None,
    };
    let counters = point_counters(&ok);
    Point {
        settling: None,
        interference,
        value,
        traced_repeats,
        perturbation,
        perturbation_interval,
        outliers,
        other_mode,
        throughput: tput.map(|s| s.median),
        speedup: None,
        efficiency: None,
        wall_speedup: None,
        wall_s: wall,
        user_s: user,
        sys_s: sys,
        throughput_spread: tput,
        repeats,
        profile: None,
        locks: None,
        budget: None,
        counters,
    }
}

/// Clean repeats whose throughput is an outlier among the point's: a modified z-score
/// (0.6745 · |x − median| / MAD) above 3.5, as Iglewicz and Hoaglin recommend (hyperfine
/// flags outliers the same way), and more than 25% off the median, since with three
/// repeats the MAD can be tiny. Only with at least three repeats, and never so many that
/// fewer than two are left.
fn outlier_repeats(value: u64, ok: &[&Repeat], source: ThroughputSource) -> Vec<u32> {
    let x: Vec<(u32, f64)> = ok
        .iter()
        .filter_map(|r| repeat_throughput(value, r, source).map(|x| (r.index, x)))
        .collect();
    if x.len() < 3 {
        return Vec::new();
    }
    let Some(m) = Spread::of(x.iter().map(|(_, v)| *v)).map(|s| s.median) else {
        return Vec::new();
    };
    let mad = Spread::of(x.iter().map(|(_, v)| (v - m).abs())).map_or(0.0, |s| s.median);
    let out: Vec<u32> = x
        .iter()
        .filter(|(_, v)| {
            let d = (v - m).abs();
            d > 0.25 * m && (mad == 0.0 || 0.6745 * d / mad > 3.5)
        })
        .map(|(i, _)| *i)
        .collect();
    if x.len() - out.len() < 2 {
        return Vec::new();
    }
    out
}

/// How many times more (or fewer) voluntary context switches than the clean repeats' median
/// a traced repeat makes in another mode; and the fewest, of the two, that can tell one.
const MODE_SWITCH_RATIO: f64 = 4.0;
const MODE_SWITCHES: f64 = 1000.0;

/// The traced repeats that ran in another mode than the clean ones `ok`: their voluntary
/// context switches [`MODE_SWITCH_RATIO`]× more or fewer than the clean repeats' median,
/// and their throughput more than 25% off the clean median. A program that can run as a
/// convoy (its threads handing a lock over through the scheduler at every acquisition)
/// or not falls into one or the other from run to run; a traced repeat in the other one
/// measures the mode, not the tracer.
fn other_mode_repeats(
    value: u64,
    ok: &[&Repeat],
    traced: &[&Repeat],
    source: ThroughputSource,
) -> Vec<u32> {
    let median = |v: Vec<f64>| Spread::of(v.into_iter()).map(|s| s.median);
    let (Some(switches), Some(x)) = (
        median(ok.iter().map(|r| r.voluntary_csw as f64).collect()),
        median(
            ok.iter()
                .filter_map(|r| repeat_throughput(value, r, source))
                .collect(),
        ),
    ) else {
        return Vec::new();
    };
    traced
        .iter()
        .filter(|r| {
            let s = r.voluntary_csw as f64;
            let (lo, hi) = (s.min(switches), s.max(switches));
            let apart = hi >= MODE_SWITCHES && hi > MODE_SWITCH_RATIO * lo.max(1.0);
            let off = repeat_throughput(value, r, source).is_some_and(|t| (t - x).abs() > 0.25 * x);
            apart && off
        })
        .map(|r| r.index)
        .collect()
}

/// The counters of a point's successful clean repeats: the median of each (a PMU count only
/// when every repeat has it).
fn point_counters(ok: &[&Repeat]) -> Option<scalprof_model::Counters> {
    if ok.is_empty() {
        return None;
    }
    let med = |v: Vec<u64>| -> Option<u64> {
        (v.len() == ok.len())
            .then(|| Spread::of(v.iter().map(|&x| x as f64)))
            .flatten()
            .map(|s| s.median.round() as u64)
    };
    let counted = |f: &dyn Fn(&scalprof_model::EventCounts) -> Option<u64>| {
        med(ok
            .iter()
            .filter_map(|r| r.counts.as_ref().and_then(f))
            .collect())
    };
    let cycles = counted(&|c| c.cycles);
    let instructions = counted(&|c| c.instructions);
    Some(scalprof_model::Counters {
        context_switches: med(ok
            .iter()
            .map(|r| r.voluntary_csw + r.involuntary_csw)
            .collect())?,
        cpu_migrations: counted(&|c| Some(c.cpu_migrations)),
        page_faults: med(ok.iter().map(|r| r.minor_faults).collect())?,
        major_faults: med(ok.iter().map(|r| r.major_faults).collect())?,
        cycles,
        instructions,
        ipc: match (cycles, instructions) {
            (Some(c), Some(i)) if c > 0 => Some(i as f64 / c as f64),
            _ => None,
        },
        llc_misses: counted(&|c| c.llc_misses),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::warnings::unexplained_warning;
    use super::*;
    use scalprof_model::PointProfile;
    use scalprof_model::{Host, RunStatus, Sweep};
    use scalprof_model::{PointRepeat, RunHeader, WarningKind};

    /// A thread sweep's header over `values` (also the compare tests').
    pub(crate) fn header(values: Vec<u64>) -> RunHeader {
        RunHeader {
            id: "1".into(),
            label: "t".into(),
            created: "2026-01-01T00:00:00Z".into(),
            command: vec!["./x".into(), "{threads}".into()],
            status: RunStatus::Complete,
            sweep: Sweep {
                parameter: scalprof_model::SweepParameter::Threads,
                values,
            },
            host: Host {
                kernel: "6.18".into(),
                cpus: 2,
                cpu_model: "cpu".into(),
                pmu: false,
                limits: None,
                topology: None,
                sample_cost_ns: None,
                switch_cost: None,
            },
            scaling: Some(ThroughputSource::Weak),
            ops_regex: r"ops=(\d+)".into(),
            output_dir: "/tmp".into(),
            commit: None,
            observer: None,
        }
    }

    fn rep(value: u64, index: u32, wall: f64, ops: Option<u64>, exit: i32) -> PointRepeat {
        PointRepeat {
            value,
            repeat: Repeat {
                user_s: wall * value as f64,
                ops,
                exit_code: Some(exit),
                ..Repeat::ok(index, wall)
            },
        }
    }

    fn traced(mut r: PointRepeat) -> PointRepeat {
        r.repeat.traced = true;
        r
    }

    #[test]
    fn a_traced_repeat_that_escaped_the_clean_ones_convoy_is_not_the_tracer_s() {
        // mmap_churn at 2 threads: the clean repeats block 130 000 times a run as a convoy
        // (2.1 s); one traced repeat escaped it (7 000 blocks, 1.0 s), one did not (2.2 s).
        let at = |index, wall: f64, switches, is_traced| {
            let mut r = rep(2, index, wall, Some(1000), 0);
            r.repeat.voluntary_csw = switches;
            if is_traced {
                r = traced(r);
            }
            r
        };
        let clean = [(0, 2.07, 131_000), (1, 2.24, 133_000), (2, 2.19, 134_000)]
            .map(|(i, w, s)| at(i, w, s, false));
        let point = |traced_repeats: &[(u32, f64, u64)]| {
            let mut reps = vec![rep(1, 0, 1.0, Some(1000), 0)];
            reps.extend(clean.iter().cloned());
            reps.extend(traced_repeats.iter().map(|&(i, w, s)| at(i, w, s, true)));
            let doc = assemble(&RunInputs::timing(header(vec![1, 2]), reps));
            doc.points.into_iter().find(|p| p.value == 2).unwrap()
        };
        let p = point(&[(3, 2.33, 128_000), (4, 1.02, 6_900)]);
        assert_eq!(p.other_mode, [4]);
        // Against the traced repeat in the convoy: 2.19 / 2.33, 6% slower, not 31% faster.
        let x = p.perturbation.unwrap();
        assert!((x - (2.19 / 2.33 - 1.0)).abs() < 1e-9, "{x}");
        let doc_warning = |p: &Point| {
            warnings::warnings(&header(vec![1, 2]), std::slice::from_ref(p))
                .into_iter()
                .find(|w| w.message.contains("another mode"))
        };
        let w = doc_warning(&p).expect("the other mode is said");
        assert!(w.message.contains("traced repeat 5") && w.message.contains("left out"));
        // Every traced repeat escaped: compared across modes, and said so.
        let p = point(&[(3, 1.02, 6_900), (4, 1.05, 7_100)]);
        assert_eq!(p.other_mode, [3, 4]);
        assert!(p.perturbation.unwrap() > 0.9);
        assert!(doc_warning(&p).unwrap().message.contains("across modes"));
        // As many blocks, only faster (or as slow with other blocks): one mode.
        assert!(point(&[(3, 1.02, 128_000), (4, 2.2, 30_000)])
            .other_mode
            .is_empty());
        // Few switches either way tell no mode apart.
        let few = |s| at(5, 1.0, s, true);
        let mut reps = vec![rep(1, 0, 1.0, Some(1000), 0)];
        reps.extend([0, 1, 2].map(|i| {
            let mut r = rep(2, i, 2.0, Some(1000), 0);
            r.repeat.voluntary_csw = 10;
            r
        }));
        reps.push(few(900));
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), reps));
        assert!(doc.points[1].other_mode.is_empty());
    }

    #[test]
    fn a_command_without_its_placeholder_swept_nothing_unless_it_used_more_cpus() {
        // rep() gives each point `value` CPUs' worth of user time: 1 → 2, it did.
        let reps = vec![rep(1, 0, 1.0, None, 0), rep(2, 0, 1.0, None, 0)];
        let mut h = header(vec![1, 2]);
        h.command = vec!["sqlite3".into(), "db".into()];
        let doc = assemble(&RunInputs::timing(h.clone(), reps));
        assert!(doc.warnings.iter().any(|w| w.kind == WarningKind::NotSwept));
        assert!(!swept_nothing(&doc.warnings, &doc.points));
        // The same CPU time per wall second at both points: it did not read SCALPROF_THREADS.
        let mut flat = vec![rep(1, 0, 1.0, None, 0), rep(2, 0, 1.0, None, 0)];
        flat[1].repeat.user_s = 1.0;
        let doc = assemble(&RunInputs::timing(h, flat));
        assert!(swept_nothing(&doc.warnings, &doc.points));
        // Then findings that compare the points' work go, waits between threads stay.
        let finding = |kind| scalprof_model::Finding {
            kind,
            scope: None,
            subject: "x".into(),
            score: 0.3,
            score_interval: None,
            evidence: String::new(),
            suggestion: String::new(),
            details: Default::default(),
            what_if: None,
            experiment: None,
        };
        let mut findings = vec![
            finding(scalprof_model::FindingKind::SerialFraction),
            finding(scalprof_model::FindingKind::LockContention),
            finding(scalprof_model::FindingKind::UserHotspot),
        ];
        assert_eq!(withhold_unswept(&mut findings), 2);
        assert_eq!(
            findings[0].kind,
            scalprof_model::FindingKind::LockContention
        );
    }

    #[test]
    fn a_cpython_size_sweep_without_python_names_says_how_to_get_them() {
        let mut h = header(vec![1000, 2000]);
        h.sweep.parameter = scalprof_model::SweepParameter::Size;
        let profile = |stack: &str| PointProfile {
            folded: vec![scalprof_model::FoldedStack {
                stack: stack.into(),
                samples: 10,
                weight: 10_000,
            }],
            ..Default::default()
        };
        let says = |stack: &str| {
            let p = profile(stack);
            python_without_names(&h, &[(1000, p.clone()), (2000, p)]).is_some()
        };
        assert!(says("python3;_PyEval_EvalFrameDefault;long_richcompare"));
        assert!(!says(
            "python3;py::find_dup:q.py;_PyEval_EvalFrameDefault;long_richcompare"
        ));
        assert!(!says("sort;main;sortlines"));
    }

    #[test]
    fn fixed_work_under_assumed_weak_scaling_is_pointed_out() {
        let kinds = |reps: Vec<PointRepeat>| -> Vec<WarningKind> {
            assemble(&RunInputs::timing(header(vec![1, 2]), reps))
                .warnings
                .iter()
                .map(|w| w.kind)
                .collect()
        };
        // `sort --parallel`: the same CPU time at 1 and 2 threads, no ops printed.
        let mut fixed = vec![rep(1, 0, 1.2, None, 0), rep(2, 0, 0.7, None, 0)];
        fixed[1].repeat.user_s = 1.15;
        assert!(kinds(fixed).contains(&WarningKind::FixedWork));
        // Each thread brings its own work: CPU time doubles.
        let grows = vec![rep(1, 0, 1.0, None, 0), rep(2, 0, 1.0, None, 0)];
        assert!(!kinds(grows).contains(&WarningKind::FixedWork));
        // With ops the throughput is measured, not assumed.
        let mut ops = vec![rep(1, 0, 1.2, Some(100), 0), rep(2, 0, 0.7, Some(100), 0)];
        ops[1].repeat.user_s = 1.15;
        assert!(!kinds(ops).contains(&WarningKind::FixedWork));
    }

    #[test]
    fn a_size_sweep_gets_no_concurrency_model_or_kernel_hotspot() {
        let mut h = header(vec![1000, 2000, 4000, 8000]);
        h.sweep.parameter = scalprof_model::SweepParameter::Size;
        let reps: Vec<PointRepeat> = [1000u64, 2000, 4000, 8000]
            .iter()
            .map(|&v| rep(v, 0, v as f64 / 1000.0, None, 0))
            .collect();
        let doc = assemble(&RunInputs::timing(h.clone(), reps.clone()));
        assert!(doc.model.is_none());
        assert!(doc.points.iter().all(|p| p.speedup.is_none()));
        assert!(doc
            .warnings
            .iter()
            .all(|w| w.kind != WarningKind::TooFewPoints));
        // Without profiles there is no complexity to fit, and nothing to say of it; with
        // profiles at two sizes of four, the missing ones are named.
        assert!(doc
            .warnings
            .iter()
            .all(|w| !w.message.contains("complexity")));
        let prof = |v: u64| {
            (
                v,
                scalprof_model::PointProfile {
                    repeats: 1,
                    folded: vec![scalprof_model::FoldedStack {
                        stack: "p;main;rescan".into(),
                        samples: v,
                        weight: v * 1000,
                    }],
                    ..Default::default()
                },
            )
        };
        let mut inputs = RunInputs::timing(h, reps);
        inputs.profiles = vec![prof(4000), prof(8000)];
        let doc = assemble(&inputs);
        let said = doc
            .warnings
            .iter()
            .find(|w| w.message.starts_with("no complexity fit"))
            .unwrap_or_else(|| panic!("{:?}", doc.warnings));
        assert!(
            said.message.contains("none at 1000, 2000"),
            "{}",
            said.message
        );
    }

    #[test]
    fn throughput_comes_from_clean_repeats_and_perturbation_from_traced_ones() {
        let reps = vec![
            rep(1, 0, 1.0, Some(100), 0),
            rep(1, 1, 1.0, Some(100), 0),
            traced(rep(1, 2, 2.0, Some(100), 0)),
            rep(2, 0, 1.0, Some(200), 0),
            rep(2, 1, 1.0, Some(200), 0),
            traced(rep(2, 2, 1.02, Some(200), 0)),
        ];
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), reps.clone()));
        let (p1, p2) = (&doc.points[0], &doc.points[1]);
        assert_eq!((p1.repeats.len(), p1.traced_repeats.len()), (2, 1));
        assert_eq!(
            p1.throughput,
            Some(100.0),
            "the traced repeat is not counted"
        );
        assert!((p1.perturbation.unwrap() + 0.5).abs() < 1e-9);
        assert!((p2.perturbation.unwrap() - (1.0 / 1.02 - 1.0)).abs() < 1e-9);
        assert_eq!(p2.speedup, Some(2.0));
        // Per-op costs of profiles divide by the work of the profiled repeats.
        assert_eq!(point_work(p1, ThroughputSource::Ops), 100.0);
        // One warning, for the point traced 50% slower; 2% is within the budget.
        let perturbed: Vec<_> = doc
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::PerturbedDiagnosis)
            .collect();
        assert_eq!(perturbed.len(), 1, "{:?}", doc.warnings);
        assert_eq!(perturbed[0].point, Some(1));
        assert!(
            perturbed[0].message.contains("50% slower"),
            "{}",
            perturbed[0].message
        );
    }

    #[test]
    fn a_loss_within_the_noise_is_not_real() {
        let at = |tputs: &[(u64, f64)]| -> Vec<PointRepeat> {
            tputs
                .iter()
                .enumerate()
                .map(|(i, &(v, x))| rep(v, i as u32, 1.0, Some(x as u64), 0))
                .collect()
        };
        // 2 threads at 1.96× with repeats spreading 4%: nothing to explain.
        let scales = at(&[
            (1, 1000.0),
            (1, 1020.0),
            (1, 1000.0),
            (2, 1960.0),
            (2, 1920.0),
            (2, 1980.0),
        ]);
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), scales.clone()));
        assert!(!loss_is_real(&doc.points));
        // 1.5× with the same spread: a real loss.
        let slow = at(&[
            (1, 1000.0),
            (1, 1020.0),
            (1, 1000.0),
            (2, 1500.0),
            (2, 1480.0),
            (2, 1520.0),
        ]);
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), slow.clone()));
        assert!(loss_is_real(&doc.points));
        // mmap_lock at 2 threads: one repeat of three ran without contention (twice as
        // fast), yet even that one is far from linear. The loss is real.
        let bimodal = at(&[
            (1, 30330.0),
            (1, 29722.0),
            (1, 30440.0),
            (2, 17062.0),
            (2, 17885.0),
            (2, 34111.0),
        ]);
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), bimodal));
        assert!(loss_is_real(&doc.points));
    }

    #[test]
    fn scaling_is_inferred_from_the_cpu_time_when_not_given() {
        // (value, wall, cpu) per repeat; no ops printed.
        let reps = |rows: &[(u64, f64, f64)]| -> Vec<PointRepeat> {
            rows.iter()
                .enumerate()
                .map(|(i, &(v, wall, cpu))| {
                    let mut r = rep(v, i as u32, wall, None, 0);
                    r.repeat.user_s = cpu;
                    r
                })
                .collect()
        };
        let mut h = header(vec![1, 2]);
        h.scaling = None;
        // zstd -T{threads} on a fixed input: CPU flat, wall halves → strong, 1.84×.
        let fixed = reps(&[
            (1, 0.694, 0.71),
            (1, 0.70, 0.71),
            (2, 0.377, 0.74),
            (2, 0.38, 0.73),
        ]);
        let doc = assemble(&RunInputs::timing(h.clone(), fixed));
        assert_eq!(doc.throughput.source, ThroughputSource::Strong);
        assert!(doc
            .throughput
            .inferred
            .as_deref()
            .unwrap()
            .contains("strong scaling, inferred"));
        let s = doc.points[1].speedup.unwrap();
        assert!((s - 1.84).abs() < 0.05, "{s}");
        assert!(doc
            .warnings
            .iter()
            .all(|w| w.kind != WarningKind::FixedWork));
        // Python threads with a loop each, 50 ms of start-up: 0.15 → 0.20 s → weak.
        let added = reps(&[
            (1, 0.15, 0.15),
            (1, 0.15, 0.15),
            (2, 0.21, 0.20),
            (2, 0.2, 0.20),
        ]);
        let doc = assemble(&RunInputs::timing(h.clone(), added));
        assert_eq!(doc.throughput.source, ThroughputSource::Weak);
        // zstd -T2 -9 on 40 MB: splitting the input costs CPU (1.3×), but the wall time
        // fell: the same work finished sooner → strong, not "115% efficient".
        let split = reps(&[
            (1, 0.281, 0.29),
            (1, 0.255, 0.30),
            (2, 0.244, 0.43),
            (2, 0.233, 0.42),
        ]);
        let doc = assemble(&RunInputs::timing(h.clone(), split));
        assert_eq!(doc.throughput.source, ThroughputSource::Strong);
        assert!(doc.points[1].efficiency.unwrap() < 1.0);
        // Each thread adding work and scaling perfectly: the wall time stays within noise.
        let perfect = reps(&[
            (1, 0.150, 0.15),
            (1, 0.152, 0.15),
            (2, 0.146, 0.30),
            (2, 0.148, 0.30),
        ]);
        let doc = assemble(&RunInputs::timing(h.clone(), perfect));
        assert_eq!(doc.throughput.source, ThroughputSource::Weak);
        // xz -T{threads} on one file, a busy machine: splitting the input costs CPU
        // (1.22×) and the wall time grew; fixed work, 0.87×, not a weak "1.74×".
        let busy = reps(&[
            (1, 1.655, 1.70),
            (1, 1.62, 1.69),
            (1, 1.70, 1.72),
            (2, 1.901, 2.08),
            (2, 1.88, 2.00),
            (2, 1.95, 2.12),
        ]);
        let doc = assemble(&RunInputs::timing(h.clone(), busy));
        assert_eq!(doc.throughput.source, ThroughputSource::Strong);
        let p = &doc.points[1];
        assert!((p.speedup.unwrap() - 0.87).abs() < 0.01, "{:?}", p.speedup);
        assert!((p.speedup.unwrap() - p.wall_speedup.unwrap()).abs() < 1e-9);
        // The same on a machine a busy loop shares (half the CPUs its 2 threads needed):
        // preemptions cost xz CPU time, 1.33× in every repeat, and the wall time grew.
        // Without the sharing the growth reads as work added; with it, as fixed work.
        let shared = |share: f64| {
            let mut r = reps(&[
                (1, 0.300, 0.27),
                (1, 0.301, 0.27),
                (1, 0.302, 0.27),
                (2, 0.361, 0.37),
                (2, 0.362, 0.36),
                (2, 0.363, 0.38),
            ]);
            for x in r.iter_mut().filter(|x| x.value == 2) {
                x.repeat.interference = Some(scalprof_model::Interference {
                    share,
                    ..Default::default()
                });
            }
            assemble(&RunInputs::timing(h.clone(), r)).throughput
        };
        assert_eq!(shared(0.0).source, ThroughputSource::Weak);
        let t = shared(0.5);
        assert_eq!(t.source, ThroughputSource::Strong);
        let why = t.inferred.unwrap();
        assert!(why.contains("took 50% of the CPUs"), "{why}");
        assert!(why.contains("1.59×"), "{why}");
        // Weak only when every pairing of repeats shows the growth: one repeat at 2
        // threads as cheap as the dearest at 1 leaves it fixed work.
        let unstable = reps(&[
            (1, 0.15, 0.15),
            (1, 0.15, 0.17),
            (2, 0.20, 0.20),
            (2, 0.20, 0.20),
        ]);
        let doc = assemble(&RunInputs::timing(h.clone(), unstable));
        assert_eq!(doc.throughput.source, ThroughputSource::Strong);
        // Weak given, and the wall time grew at every repeat: the speedup above 1 is
        // said to hold only if each thread adds work, with the fixed-work figure.
        let mut weak = header(vec![1, 2]);
        weak.scaling = Some(ThroughputSource::Weak);
        let grew = reps(&[
            (1, 1.655, 1.70),
            (1, 1.66, 1.7),
            (2, 1.901, 2.08),
            (2, 1.9, 2.0),
        ]);
        let doc = assemble(&RunInputs::timing(weak, grew));
        let w = doc
            .warnings
            .iter()
            .find(|w| w.kind == WarningKind::FixedWork)
            .expect("a weak speedup above 1 with a longer wall time is warned about");
        assert!(w.message.contains("0.87×"), "{}", w.message);
        assert!(w.message.contains("1.74×"), "{}", w.message);
        // Said explicitly, the user's choice stands (and a flat CPU time is warned about).
        let mut weak = header(vec![1, 2]);
        weak.scaling = Some(ThroughputSource::Weak);
        let fixed = reps(&[(1, 0.694, 0.71), (2, 0.377, 0.74)]);
        let doc = assemble(&RunInputs::timing(weak, fixed));
        assert_eq!(doc.throughput.source, ThroughputSource::Weak);
        assert!(doc.throughput.inferred.is_none());
    }

    #[test]
    fn stripped_binaries_are_named_once_with_the_package_to_install() {
        let stack = |s: &str, n: u64| scalprof_model::FoldedStack {
            stack: s.into(),
            samples: n,
            weight: n * 1000,
        };
        let profile = PointProfile {
            event: "cpu-clock".into(),
            frequency: 999,
            stats: scalprof_model::ProfileStats {
                samples: 100,
                frames: 500,
                unresolved_frames: 300,
                kernel_stacks: true,
                ..Default::default()
            },
            folded: vec![
                stack(
                    "pigz;clone3;start_thread;[pigz];deflate;[libz.so.1.2.13]",
                    95,
                ),
                stack("pigz;main;write_all", 5),
            ],
            ..Default::default()
        };
        let mut inputs = RunInputs::timing(
            header(vec![1, 2]),
            vec![rep(1, 0, 1.0, Some(1), 0), rep(2, 0, 1.0, Some(2), 0)],
        );
        inputs.profiles = vec![(1, profile.clone()), (2, profile)];
        // The package that installed each, as the host's package manager says.
        inputs.packages = vec![("libz.so.1.2.13".into(), "zlib1g".into())];
        let doc = assemble(&inputs);
        let w: Vec<&str> = doc
            .warnings
            .iter()
            .filter(|w| w.message.contains("without names"))
            .map(|w| w.message.as_str())
            .collect();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("pigz (in 95% of samples)"), "{}", w[0]);
        assert!(w[0].contains("apt-get install zlib1g-dbgsym"), "{}", w[0]);
        assert!(
            !w[0].contains("pigz-dbgsym"),
            "a guess from the file name: {}",
            w[0]
        );
    }

    #[test]
    fn a_large_unexplained_share_says_why() {
        let h = header(vec![1, 2]);
        let doc = assemble(&RunInputs::timing(
            h.clone(),
            vec![rep(1, 0, 1.0, Some(10), 0), rep(2, 0, 1.5, Some(20), 0)],
        ));
        let mut points = doc.points.clone();
        let budget = |unexplained: f64| scalprof_model::Budget {
            useful_interval: None,
            unexplained_interval: None,
            useful: 1.0 - unexplained,
            overhead: 0.0,
            unexplained,
            causes: Vec::new(),
        };
        points[1].budget = Some(budget(0.05));
        assert!(unexplained_warning(&h, &points).is_none());
        points[1].budget = Some(budget(0.30));
        let w = unexplained_warning(&h, &points).unwrap();
        assert!(
            w.message.contains("30% of the thread-time is unexplained"),
            "{}",
            w.message
        );
        assert!(w.message.contains("what grew"), "{}", w.message);
        points[1].perturbation = Some(-0.48);
        let w = unexplained_warning(&h, &points).unwrap();
        assert!(w.message.contains("ran 48% slower"), "{}", w.message);
    }

    #[test]
    fn a_command_without_the_placeholder_is_warned_about_first() {
        let mut h = header(vec![1, 2]);
        h.command = vec!["sleep".into(), "0.1".into()];
        let doc = assemble(&RunInputs::timing(
            h,
            vec![rep(1, 0, 0.1, None, 0), rep(2, 0, 0.1, None, 0)],
        ));
        assert_eq!(doc.warnings[0].kind, WarningKind::NotSwept);
        let doc = assemble(&RunInputs::timing(
            header(vec![1, 2]),
            vec![rep(1, 0, 0.1, None, 0)],
        ));
        assert!(doc.warnings.iter().all(|w| w.kind != WarningKind::NotSwept));
    }

    #[test]
    fn ops_throughput_speedup_and_efficiency() {
        let reps = vec![
            rep(1, 0, 1.0, Some(100), 0),
            rep(1, 1, 1.1, Some(100), 0),
            rep(1, 2, 0.9, Some(100), 0),
            rep(2, 0, 2.0, Some(200), 0),
            rep(2, 1, 2.0, Some(200), 0),
            rep(2, 2, 2.0, Some(200), 0),
        ];
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), reps.clone()));
        assert_eq!(doc.throughput.source, ThroughputSource::Ops);
        assert_eq!(doc.points.len(), 2);
        assert!((doc.points[0].throughput.unwrap() - 100.0).abs() < 1e-9);
        assert!((doc.points[1].throughput.unwrap() - 100.0).abs() < 1e-9);
        assert!((doc.points[1].speedup.unwrap() - 1.0).abs() < 1e-9);
        assert!((doc.points[1].efficiency.unwrap() - 0.5).abs() < 1e-9);
        let kinds: Vec<WarningKind> = doc.warnings.iter().map(|w| w.kind).collect();
        assert!(kinds.contains(&WarningKind::NoisyRepeats), "{kinds:?}");
        assert!(kinds.contains(&WarningKind::TooFewPoints));
        let m = doc.model.unwrap();
        assert_eq!(m.kind, scalprof_model::ModelKind::Amdahl);
        assert!(
            m.sigma > 0.9,
            "two threads doing no better than one: σ≈1, got {}",
            m.sigma
        );
    }

    #[test]
    fn weak_scaling_without_ops_and_failed_repeats_are_not_counted() {
        let reps = vec![
            rep(1, 0, 1.0, None, 0),
            rep(2, 0, 1.0, None, 0),
            rep(2, 1, 0.1, None, 3),
            rep(4, 0, 1.0, None, 0),
        ];
        let doc = assemble(&RunInputs::timing(header(vec![1, 2, 4]), reps.clone()));
        assert_eq!(doc.throughput.source, ThroughputSource::Weak);
        assert!((doc.points[1].throughput.unwrap() - 2.0).abs() < 1e-9);
        assert!((doc.points[2].efficiency.unwrap() - 1.0).abs() < 1e-9);
        let kinds: Vec<WarningKind> = doc.warnings.iter().map(|w| w.kind).collect();
        assert!(kinds.contains(&WarningKind::FailedRepeats));
        assert!(kinds.contains(&WarningKind::OversubscribedPoint));
        assert!(!kinds.contains(&WarningKind::TooFewPoints));
        assert_eq!(doc.model.unwrap().kind, scalprof_model::ModelKind::Usl);
    }

    #[test]
    fn a_point_whose_repeats_all_failed_has_no_throughput() {
        let reps = vec![rep(1, 0, 1.0, Some(10), 0), rep(2, 0, 1.0, Some(10), 1)];
        let doc = assemble(&RunInputs::timing(header(vec![1, 2]), reps.clone()));
        assert_eq!(doc.points[1].throughput, None);
        assert_eq!(doc.points[1].efficiency, None);
        assert!(doc.model.is_none(), "one usable point cannot be fitted");
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        let s = Spread::of([3.0, 1.0, 2.0].into_iter()).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of([4.0, 1.0, 2.0, 3.0].into_iter()).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Spread::of(std::iter::empty()).is_none());
    }

    #[test]
    fn a_watched_levels_brief_points_are_listed_not_fitted() {
        use scalprof_model::{Repeat, SweepParameter};
        let mut h = header(vec![1, 2, 3]);
        h.sweep.parameter = SweepParameter::Concurrency;
        h.scaling = None;
        let mut reps = Vec::new();
        // Levels 1 and 2 seen for 4 windows each, 3 for one (an outlier of a curve).
        for (value, windows, per_s) in [(1u64, 4u32, 1000.0), (2, 4, 1800.0), (3, 1, 100.0)] {
            for index in 0..windows {
                reps.push(PointRepeat {
                    value,
                    repeat: Repeat {
                        ops: Some(per_s as u64),
                        ..Repeat::ok(index, 1.0)
                    },
                });
            }
        }
        let doc = assemble(&RunInputs::timing(h, reps));
        let brief: Vec<_> = doc
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKind::BriefLevel)
            .collect();
        assert_eq!(brief.len(), 1, "{:?}", doc.warnings);
        assert!(
            brief[0].message.contains("3 (1 window)"),
            "{}",
            brief[0].message
        );
        assert!(doc.points.iter().any(|p| p.value == 3), "listed");
    }
}
