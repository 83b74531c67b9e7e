//! Before/after comparison of two runs: per sweep point and metric, medians, ranges, the
//! difference of means with a 95% confidence interval, and Welch's t-test — ministat's
//! verdict, "No difference proven at 95.0% confidence", when there is none. Plus the lock
//! tables and findings that changed.

use scalprof_model::compare::{
    Comparison, Gate, LockChange, Metric, MetricComparison, PointComparison, Ratio,
};
use scalprof_model::locks::{LockRow, THE_OBSERVER};
use scalprof_model::suite::{
    SuiteComparison, SuiteDocument, TestComparison, TestResult, SUITE_COMPARE_SCHEMA,
};
use scalprof_model::Spread;
use scalprof_model::{Point, RunDocument};

use crate::summary::repeat_throughput;
pub use crate::welch::{welch, CONFIDENCE};

mod causes;
use causes::cause_changes;

fn metric(name: Metric, a: &[f64], b: &[f64]) -> Option<MetricComparison> {
    let (sa, sb) = (
        Spread::of(a.iter().copied())?,
        Spread::of(b.iter().copied())?,
    );
    let w = welch(a, b);
    let significant = w.is_some_and(|w| w.p_value < 1.0 - CONFIDENCE);
    let mean_a = a.iter().sum::<f64>() / a.len() as f64;
    let pct = |x: f64| {
        if mean_a != 0.0 {
            100.0 * x / mean_a
        } else {
            0.0
        }
    };
    let (difference_pct, verdict) = match w {
        None => (
            None,
            "not enough repeats to test (need 2 or more on each side)".to_string(),
        ),
        Some(w) if significant => (
            Some(pct(w.difference)),
            format!(
                "Difference at {:.1}% confidence: {:+.2}% ± {:.2}% (p = {:.2e})",
                CONFIDENCE * 100.0,
                pct(w.difference),
                pct((w.ci95[1] - w.ci95[0]) / 2.0),
                w.p_value
            ),
        ),
        Some(w) => (
            None,
            format!(
                "No difference proven at {:.1}% confidence (p = {:.2})",
                CONFIDENCE * 100.0,
                w.p_value
            ),
        ),
    };
    Some(MetricComparison {
        metric: name,
        a_median: sa.median,
        a_range: [sa.min, sa.max],
        b_median: sb.median,
        b_range: [sb.min, sb.max],
        a_n: a.len(),
        b_n: b.len(),
        welch: w,
        difference_pct,
        significant,
        verdict,
    })
}

fn per_repeat(doc: &RunDocument, p: &Point) -> Vec<(Metric, Vec<f64>)> {
    let ok: Vec<_> = p.repeats.iter().filter(|r| r.succeeded()).collect();
    vec![
        (
            Metric::Throughput,
            ok.iter()
                .filter_map(|r| repeat_throughput(p.value, r, doc.throughput.source))
                .collect(),
        ),
        (Metric::Wall, ok.iter().map(|r| r.wall_s).collect()),
        (Metric::User, ok.iter().map(|r| r.user_s).collect()),
        (Metric::Sys, ok.iter().map(|r| r.sys_s).collect()),
    ]
}

/// B's throughput over A's: Welch's interval on the logarithms of the per-repeat rates,
/// exponentiated (a ratio's interval is symmetric on a log scale, as hyperfine's "X ran
/// 3.82 ± 0.2 times faster" reads it). `points` is how many points are compared at once,
/// for the family-wise interval.
fn throughput_ratio(a: &[f64], b: &[f64], points: usize) -> Option<Ratio> {
    if a.iter().chain(b).any(|x| *x <= 0.0) {
        return None;
    }
    let (la, lb): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|x| x.ln()).collect(),
        b.iter().map(|x| x.ln()).collect(),
    );
    let (d, ci) = crate::welch::interval(&la, &lb, CONFIDENCE)?;
    let family = 1.0 - (1.0 - CONFIDENCE) / points.max(1) as f64;
    let (_, cf) = crate::welch::interval(&la, &lb, family)?;
    Some(Ratio {
        ratio: d.exp(),
        ci95: [ci[0].exp(), ci[1].exp()],
        ci_family: [cf[0].exp(), cf[1].exp()],
    })
}

/// "B is 7.02× faster [6.1–7.9×]" or "B is 1.28× slower […]".
pub fn ratio_words(r: &Ratio) -> String {
    if r.ratio >= 1.0 {
        format!(
            "{:.2}× faster [{:.2}–{:.2}×, 95%]",
            r.ratio, r.ci95[0], r.ci95[1]
        )
    } else {
        format!(
            "{:.2}× slower [{:.2}–{:.2}×, 95%]",
            1.0 / r.ratio,
            1.0 / r.ci95[1],
            1.0 / r.ci95[0]
        )
    }
}

/// The gate: B fails where its throughput is below A's by more than `pct` percent for the
/// whole family-wise interval (so a −7% ± 7% estimate from 2 repeats does not fail it).
pub fn gate(c: &Comparison, pct: f64) -> Gate {
    let limit = 1.0 - pct / 100.0;
    let mut slower = Vec::new();
    let mut untested = Vec::new();
    for p in &c.points {
        match &p.throughput_ratio {
            Some(r) if r.ci_family[1] < limit => slower.push(p.value),
            Some(_) => {}
            None => untested.push(p.value),
        }
    }
    Gate {
        threshold_pct: pct,
        failed: !slower.is_empty(),
        slower_points: slower,
        untested_points: untested,
    }
}

/// Compares run B against run A, point by point (points present in both).
pub fn compare(a: &RunDocument, b: &RunDocument) -> Comparison {
    let common = a
        .points
        .iter()
        .filter(|x| b.points.iter().any(|y| y.value == x.value))
        .count();
    let points: Vec<PointComparison> = a
        .points
        .iter()
        .filter_map(|pa| {
            let pb = b.points.iter().find(|p| p.value == pa.value)?;
            Some(compare_point((a, pa), (b, pb), common))
        })
        .collect();
    let keys = |d: &RunDocument| -> Vec<String> {
        d.findings
            .iter()
            .map(|f| format!("{}: {}", f.kind, f.subject))
            .collect()
    };
    let (ka, kb) = (keys(a), keys(b));
    let findings_appeared: Vec<String> = kb.iter().filter(|k| !ka.contains(k)).cloned().collect();
    let findings_disappeared: Vec<String> =
        ka.iter().filter(|k| !kb.contains(k)).cloned().collect();
    let verdict = verdict(
        &points,
        &a.sweep.parameter.to_string(),
        &findings_appeared,
        &findings_disappeared,
    );
    Comparison {
        schema: "scalprof.compare/1".into(),
        a: a.id.clone(),
        b: b.id.clone(),
        confidence: CONFIDENCE,
        points,
        findings_appeared,
        findings_disappeared,
        warnings: comparison_warnings(a, b),
        verdict,
        gate: None,
    }
}

/// One point of A against the same point of B: each metric, the throughput ratio (its
/// family-wise interval over the `common` points), the lock waits that changed and,
/// where a difference is shown, the causes that explain it.
fn compare_point(
    (a, pa): (&RunDocument, &Point),
    (b, pb): (&RunDocument, &Point),
    common: usize,
) -> PointComparison {
    let ma = per_repeat(a, pa);
    let mb = per_repeat(b, pb);
    let metrics = ma
        .iter()
        .zip(&mb)
        .filter_map(|((name, xa), (_, xb))| metric(*name, xa, xb))
        .collect();
    let rates = |d: &RunDocument, p: &Point| -> Vec<f64> {
        p.repeats
            .iter()
            .filter(|r| r.succeeded())
            .filter_map(|r| repeat_throughput(p.value, r, d.throughput.source))
            .collect()
    };
    let throughput_ratio = throughput_ratio(&rates(a, pa), &rates(b, pb), common);
    let efficiency = pa.efficiency.zip(pb.efficiency).map(|(x, y)| [x, y]);
    let locks = match (&pa.locks, &pb.locks) {
        (Some(la), Some(lb)) => lock_changes(&la.rows, &lb.rows),
        _ => Vec::new(),
    };
    // Causes are weighed only where a difference is shown (a ratio whose interval
    // excludes 1): against a change within the noise, any share is noise.
    let shown = throughput_ratio.is_some_and(|r| r.ci95[0] > 1.0 || r.ci95[1] < 1.0);
    PointComparison {
        value: pa.value,
        throughput_ratio,
        efficiency,
        metrics,
        locks,
        causes: if shown {
            cause_changes(a, pa, b, pb)
        } else {
            Vec::new()
        },
    }
}

/// The locks whose wait per operation changed by more than 5% (and more than 1 ns)
/// between A's rows and B's, in the order first seen. The waits scalprof itself caused
/// are not the program's change.
fn lock_changes(la: &[LockRow], lb: &[LockRow]) -> Vec<LockChange> {
    // Each lock's first row.
    let mut firsts: Vec<&LockRow> = Vec::new();
    for r in la
        .iter()
        .chain(lb)
        .filter(|r| r.is_lock() && r.attributed_to.as_deref() != Some(THE_OBSERVER))
    {
        if !firsts.iter().any(|f| f.id() == r.id()) {
            firsts.push(r);
        }
    }
    let mut locks = Vec::new();
    for first in firsts {
        let wait = |rows: &[LockRow]| {
            rows.iter()
                .filter(|r| r.id() == first.id())
                .filter_map(|r| r.wait_ns_per_op)
                .sum::<f64>()
        };
        let (wa, wb) = (wait(la), wait(lb));
        if (wa - wb).abs() > 0.05 * wa.max(wb) && wa.max(wb) > 1.0 {
            locks.push(LockChange {
                lock: format!("{} {}", first.scope, first.name),
                a_wait_ns_per_op: wa,
                b_wait_ns_per_op: wb,
            });
        }
    }
    locks
}

/// What makes A and B measure different things: the command, the throughput's unit, the
/// host.
fn comparison_warnings(a: &RunDocument, b: &RunDocument) -> Vec<String> {
    let mut warnings = Vec::new();
    if a.command != b.command {
        warnings.push(format!(
            "A and B ran different commands (A: {}; B: {}): right for two builds of one program, otherwise the difference may be the command",
            a.command.join(" "),
            b.command.join(" ")
        ));
    }
    if a.throughput.unit != b.throughput.unit {
        warnings.push(format!(
            "throughput is in {} for A but {} for B: the throughput rows compare different measures",
            a.throughput.unit, b.throughput.unit
        ));
    }
    if a.host != b.host {
        warnings.push(format!(
            "A and B were measured on different hosts or kernels (A: Linux {}, {} CPUs; B: Linux {}, {} CPUs)",
            a.host.kernel, a.host.cpus, b.host.kernel, b.host.cpus
        ));
    }
    warnings
}

/// "B is 7.02× faster at 2 threads [6.10–7.95×, 95%]; efficiency 13% → 96%; gone:
/// false_sharing: vm_cnt" — from the last common point with a ratio.
fn verdict(
    points: &[PointComparison],
    parameter: &str,
    appeared: &[String],
    gone: &[String],
) -> String {
    let Some(p) = points.iter().rev().find(|p| p.throughput_ratio.is_some()) else {
        return match points.last() {
            Some(p) => format!(
                "not enough repeats to compare at {} {parameter} (2 or more on each side: --repeat 3)",
                p.value
            ),
            None => "no sweep point in common".into(),
        };
    };
    let r = p.throughput_ratio.expect("found above");
    let mut s = if r.ci95[0] <= 1.0 && r.ci95[1] >= 1.0 {
        format!(
            "no difference proven at {} {parameter} (B/A = {:.2} [{:.2}–{:.2}], 95%)",
            p.value, r.ratio, r.ci95[0], r.ci95[1]
        )
    } else {
        format!("B is {} at {} {parameter}", ratio_words(&r), p.value)
    };
    if let Some([ea, eb]) = p.efficiency {
        s += &format!("; efficiency {:.0}% → {:.0}%", ea * 100.0, eb * 100.0);
    }
    // The cause that explains most, and those that explain at least half as much (two
    // more at most): a difference often has two parts of a size (a flush and the CPU
    // wakeups it leaves behind).
    let first = p.causes.first().map_or(0.0, |c| c.explains.abs());
    for c in p
        .causes
        .iter()
        .take(3)
        .take_while(|c| c.explains.abs() >= first / 2.0)
    {
        s += &format!(
            "; {} {} → {} per op ({})",
            c.cause,
            scalprof_model::units::human_ns(c.a_ns_per_op),
            scalprof_model::units::human_ns(c.b_ns_per_op),
            if c.explains > 1.0 {
                format!("more than all of the change: {:.0}%", c.explains * 100.0)
            } else {
                format!("explains {:.0}%", c.explains * 100.0)
            }
        );
    }
    if !gone.is_empty() {
        s += &format!("; gone: {}", gone.join(", "));
    }
    if !appeared.is_empty() {
        s += &format!("; new: {}", appeared.join(", "));
    }
    s
}

/// Points where B's throughput is shown lower than A's by more than `pct` percent (see
/// [`gate`]), with B's change in percent.
pub fn slower_points(c: &Comparison, pct: f64) -> Vec<(u64, f64)> {
    let g = gate(c, pct);
    c.points
        .iter()
        .filter(|p| g.slower_points.contains(&p.value))
        .filter_map(|p| Some((p.value, (p.throughput_ratio?.ratio - 1.0) * 100.0)))
        .collect()
}

/// Compares throughput alone, from per-repeat rates (a suite document's points), for runs
/// that are not in the store.
pub fn compare_rates(
    a_id: &str,
    a: &[(u64, Vec<f64>)],
    b_id: &str,
    b: &[(u64, Vec<f64>)],
) -> Comparison {
    let common = a
        .iter()
        .filter(|(v, _)| b.iter().any(|(w, _)| w == v))
        .count();
    let points: Vec<PointComparison> = a
        .iter()
        .filter_map(|(value, xa)| {
            let (_, xb) = b.iter().find(|(v, _)| v == value)?;
            Some(PointComparison {
                causes: Vec::new(),
                value: *value,
                throughput_ratio: throughput_ratio(xa, xb, common),
                efficiency: None,
                metrics: metric(Metric::Throughput, xa, xb).into_iter().collect(),
                locks: Vec::new(),
            })
        })
        .collect();
    let verdict = verdict(&points, "workers", &[], &[]);
    Comparison {
        schema: "scalprof.compare/1".into(),
        a: a_id.into(),
        b: b_id.into(),
        confidence: CONFIDENCE,
        points,
        findings_appeared: Vec::new(),
        findings_disappeared: Vec::new(),
        warnings: Vec::new(),
        verdict,
        gate: None,
    }
}

/// Compares two suites test by test (tests are matched by name and mode). `stored` returns
/// the full comparison of two tests' runs when both are in the store and are the runs the
/// documents describe; otherwise the tests are compared from the documents' repeats.
pub fn compare_suites(
    a: &SuiteDocument,
    b: &SuiteDocument,
    mut stored: impl FnMut(&TestResult, &TestResult) -> Option<Comparison>,
) -> SuiteComparison {
    let rates = |t: &TestResult| -> Vec<(u64, Vec<f64>)> {
        t.points
            .iter()
            .map(|p| (p.value, p.repeats.clone()))
            .collect()
    };
    let same = |x: &TestResult, y: &TestResult| x.name == y.name && x.mode == y.mode;
    let mut tests = Vec::new();
    for ta in &a.tests {
        let Some(tb) = b.tests.iter().find(|tb| same(ta, tb)) else {
            continue;
        };
        let (comparison, from_store) = match stored(ta, tb) {
            Some(c) => (c, true),
            None => (
                compare_rates(&ta.run_id, &rates(ta), &tb.run_id, &rates(tb)),
                false,
            ),
        };
        tests.push(TestComparison {
            name: ta.name.clone(),
            mode: ta.mode.clone(),
            a_top_cause: ta.top_cause.clone(),
            b_top_cause: tb.top_cause.clone(),
            comparison,
            from_store,
        });
    }
    let only = |x: &SuiteDocument, y: &SuiteDocument| -> Vec<String> {
        x.tests
            .iter()
            .filter(|t| !y.tests.iter().any(|u| same(t, u)))
            .map(TestResult::key)
            .collect()
    };
    SuiteComparison {
        schema: SUITE_COMPARE_SCHEMA.into(),
        a_host: a.host.clone(),
        b_host: b.host.clone(),
        tests,
        only_in_a: only(a, b),
        only_in_b: only(b, a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_names_every_cause_of_a_size_with_the_first() {
        let change = |cause: &str, a: f64, explains: f64| scalprof_model::compare::CauseChange {
            cause: cause.into(),
            a_ns_per_op: a,
            b_ns_per_op: 0.0,
            explains,
        };
        let point = PointComparison {
            causes: vec![
                change("kernel waiting for a CPU", 258e3, 0.22),
                change("user disk I/O (fdatasync pg_wal/*)", 69e3, 0.14),
                change("kernel waking an idle CPU", 20e3, 0.10),
                change("on CPU in exec_simple_query", 9e3, 0.04),
            ],
            value: 2,
            throughput_ratio: throughput_ratio(&[2.8, 2.9, 2.8], &[9.2, 9.3, 9.4], 1),
            efficiency: None,
            metrics: Vec::new(),
            locks: Vec::new(),
        };
        let v = verdict(&[point], "threads", &[], &[]);
        assert!(
            v.contains("waiting for a CPU 258.0 µs → 0 ns per op (explains 22%)"),
            "{v}"
        );
        assert!(
            v.contains("fdatasync pg_wal/*) 69.0 µs → 0 ns per op (explains 14%)"),
            "{v}"
        );
        // Under half of the first: in the point's list, not in the headline.
        assert!(
            !v.contains("idle CPU") && !v.contains("exec_simple_query"),
            "{v}"
        );
    }

    /// Reference: SciPy 1.x `stats.ttest_ind(b, a, equal_var=False)` and its
    /// `confidence_interval(0.95)` → t 7.21605, df 7.17415, p 1.55497e-4, CI 0.72783 .. 1.43217.
    #[test]
    fn the_gate_fires_only_on_a_slowdown_shown_beyond_its_threshold() {
        let pc = |value: u64, a: &[f64], b: &[f64], k: usize| PointComparison {
            causes: Vec::new(),
            value,
            throughput_ratio: throughput_ratio(a, b, k),
            efficiency: None,
            metrics: Vec::new(),
            locks: Vec::new(),
        };
        let cmp = |points: Vec<PointComparison>| Comparison {
            schema: "scalprof.compare/1".into(),
            a: "1".into(),
            b: "2".into(),
            confidence: CONFIDENCE,
            points,
            findings_appeared: Vec::new(),
            findings_disappeared: Vec::new(),
            warnings: Vec::new(),
            verdict: String::new(),
            gate: None,
        };
        // The case: −7.3% from 2 repeats, ± about 7%: not shown beyond 5%.
        let c = cmp(vec![
            pc(1, &[100.0, 101.0], &[100.0, 100.5], 2),
            pc(2, &[180.0, 190.0], &[168.0, 174.5], 2),
        ]);
        let g = gate(&c, 5.0);
        assert!(!g.failed, "{:?}", c.points[1].throughput_ratio);
        // A 2.8× slowdown with tight repeats is.
        let c = cmp(vec![
            pc(1, &[100.0, 101.0, 99.0], &[100.0, 100.5, 99.5], 2),
            pc(2, &[385.0, 369.0, 389.0], &[135.0, 133.0, 136.0], 2),
        ]);
        let g = gate(&c, 5.0);
        assert!(g.failed);
        assert_eq!(g.slower_points, [2]);
        // One repeat a side cannot be tested, and says so.
        let c = cmp(vec![pc(1, &[100.0], &[50.0], 1)]);
        let g = gate(&c, 5.0);
        assert!(!g.failed);
        assert_eq!(g.untested_points, [1]);
        // The ratio's interval is the geometric one: 2× faster reads 2.00×.
        let r = throughput_ratio(&[10.0, 10.0, 10.0], &[20.0, 20.0, 20.0], 1).unwrap();
        assert!((r.ratio - 2.0).abs() < 1e-9);
        assert!(ratio_words(&r).starts_with("2.00× faster"));
    }

    #[test]
    fn welch_matches_scipy() {
        let a = [10.1, 9.8, 10.3, 10.0, 9.9];
        let b = [11.2, 10.9, 11.5, 11.1, 10.8];
        let w = welch(&a, &b).unwrap();
        assert!((w.difference - 1.08).abs() < 1e-9, "{w:?}");
        assert!((w.t - 7.216_053_5).abs() < 1e-6, "{w:?}");
        assert!((w.dof - 7.174_149_3).abs() < 1e-6, "{w:?}");
        assert!((w.p_value - 1.554_968e-4).abs() < 1e-9, "{w:?}");
        assert!((w.ci95[0] - 0.727_829_5).abs() < 1e-6, "{w:?}");
        assert!((w.ci95[1] - 1.432_170_5).abs() < 1e-6, "{w:?}");
    }

    #[test]
    fn no_difference_between_equal_samples() {
        let a = [1.0, 1.1, 0.9, 1.05, 0.95];
        let m = metric(Metric::Wall, &a, &a).unwrap();
        assert!(!m.significant);
        assert!(
            m.verdict
                .starts_with("No difference proven at 95.0% confidence"),
            "{}",
            m.verdict
        );
        let b: Vec<f64> = a.iter().map(|x| x * 2.0).collect();
        let m = metric(Metric::Wall, &a, &b).unwrap();
        assert!(m.significant);
        assert!((m.difference_pct.unwrap() - 100.0).abs() < 1e-9);
        assert!(metric(Metric::Wall, &[1.0], &[2.0])
            .unwrap()
            .verdict
            .contains("not enough"));
    }

    fn suite(kernel: &str, tests: &[(&str, &str, &[f64], Option<&str>)]) -> SuiteDocument {
        use scalprof_model::suite::{PointRate, TopCause};
        SuiteDocument {
            schema: scalprof_model::suite::SUITE_SCHEMA.into(),
            host: scalprof_model::Host {
                kernel: kernel.into(),
                cpus: 2,
                cpu_model: "x".into(),
                pmu: false,
                limits: None,
                topology: None,
                sample_cost_ns: None,
                switch_cost: None,
            },
            tests: tests
                .iter()
                .enumerate()
                .map(|(i, (name, mode, at2, cause))| TestResult {
                    name: (*name).into(),
                    mode: (*mode).into(),
                    run_id: (i + 1).to_string(),
                    status: "complete".into(),
                    points: vec![
                        PointRate {
                            value: 1,
                            throughput: Some(100.0),
                            efficiency: Some(1.0),
                            repeats: vec![99.0, 100.0, 101.0],
                        },
                        PointRate {
                            value: 2,
                            throughput: Some(at2[1]),
                            efficiency: Some(at2[1] / 200.0),
                            repeats: at2.to_vec(),
                        },
                    ],
                    top_cause: cause.map(|s| TopCause {
                        kind: "lock_contention".into(),
                        subject: s.into(),
                        score: 0.4,
                        lock_type: None,
                    }),
                })
                .collect(),
        }
    }

    #[test]
    fn suites_are_compared_test_by_test_from_their_repeats() {
        let a = suite(
            "6.18",
            &[
                (
                    "mmap_munmap",
                    "threads",
                    &[110.0, 112.0, 114.0],
                    Some("mmap_lock"),
                ),
                ("lseek", "threads", &[199.0, 200.0, 201.0], None),
                ("brk", "threads", &[150.0, 151.0, 152.0], None),
            ],
        );
        let b = suite(
            "6.19",
            &[
                ("lseek", "threads", &[198.0, 201.0, 200.0], None),
                ("mmap_munmap", "threads", &[180.0, 182.0, 184.0], None),
                ("mmap_munmap", "processes", &[190.0, 195.0, 200.0], None),
            ],
        );
        let mut asked = Vec::new();
        let c = compare_suites(&a, &b, |x, y| {
            asked.push((x.run_id.clone(), y.run_id.clone()));
            None
        });
        assert_eq!(c.schema, SUITE_COMPARE_SCHEMA);
        assert_eq!(asked, [("1".into(), "2".into()), ("2".into(), "1".into())]);
        assert_eq!(c.only_in_a, ["brk (threads)"]);
        assert_eq!(c.only_in_b, ["mmap_munmap (processes)"]);
        let at2 = |name: &str| {
            let t = c.tests.iter().find(|t| t.name == name).unwrap();
            assert!(!t.from_store);
            t.comparison.points[1].metrics[0].clone()
        };
        let m = at2("mmap_munmap");
        assert!(m.significant, "{m:?}");
        assert!((m.difference_pct.unwrap() - 62.5).abs() < 0.1, "{m:?}");
        assert!(!at2("lseek").significant);
        let t = &c.tests[0];
        assert_eq!(t.a_top_cause.as_ref().unwrap().subject, "mmap_lock");
        assert!(t.b_top_cause.is_none());
        // The full comparison from the store is used when there is one.
        let c = compare_suites(&a, &b, |x, y| {
            Some(compare_rates(&x.run_id, &[], &y.run_id, &[]))
        });
        assert!(c
            .tests
            .iter()
            .all(|t| t.from_store && t.comparison.points.is_empty()));
    }
}
