//! Complexity sweeps: each function's sampled cost per run against the input size, fitted
//! as cost ≈ a·nᵏ by least squares in log-log space (ordinary least squares on
//! (ln n, ln cost); the exponent's 95% interval from Student's t with m − 2 degrees of
//! freedom), the method of trend-prof (Goldsmith, Aiken & Wilkerson, "Measuring Empirical
//! Computational Complexity", FSE 2007).

use scalprof_model::locks::Scope;
use scalprof_model::profile::folded;
use scalprof_model::FindingKind;
use std::collections::HashSet;

use scalprof_model::{ComplexityDetails, FindingDetails};
use scalprof_model::{ComplexityReport, Finding, PointProfile, PowerFit};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::scaling::function_costs;

/// A function is superlinear when its exponent's whole 95% interval lies this far above
/// the exponent n log n shows over the swept sizes. A comparison sort is n log n (≈1.07–1.1
/// over a decade), and a function whose per-call cost grows as data outgrows the caches
/// reads a little above that; 0.15 keeps both quiet while n² (≈2) and n^1.5 stand out.
pub const NLOGN_MARGIN: f64 = 0.15;

/// The exponent k that a power law a·nᵏ fitted between the smallest and the largest size
/// gives to n·ln n: ln(n₁ ln n₁ / (n₀ ln n₀)) / ln(n₁ / n₀).
pub fn nlogn_exponent(sizes: &[u64]) -> f64 {
    let (Some(&lo), Some(&hi)) = (sizes.iter().min(), sizes.iter().max()) else {
        return 1.0;
    };
    let (n0, n1) = (lo.max(2) as f64, hi.max(2) as f64);
    if n1 <= n0 {
        return 1.0;
    }
    ((n1 * n1.ln()) / (n0 * n0.ln())).ln() / (n1 / n0).ln()
}
/// The C library's string and memory primitives (`__memcmp_evex_movbe`, `__strcmp_avx2`,
/// `__GI___strcoll_l`): their cost per call grows with the data they touch (longer
/// compares, caches outgrown), so their growth is the algorithm's that calls them. They
/// keep their own rows, and their cost also counts in the caller's, which the alarm judges.
pub fn is_data_primitive(function: &str) -> bool {
    let f = function.trim_start_matches('_');
    let f = f.strip_prefix("GI_").unwrap_or(f).trim_start_matches('_');
    [
        "memcmp",
        "bcmp",
        "memcpy",
        "memmove",
        "memset",
        "memchr",
        "memrchr",
        "strcmp",
        "strncmp",
        "strcasecmp",
        "strlen",
        "strnlen",
        "strcoll",
        "strchr",
        "strrchr",
        "strstr",
        "strcpy",
        "stpcpy",
        "wcscmp",
        "wcslen",
        "wmemcmp",
    ]
    .iter()
    .any(|p| {
        f.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
    })
}

/// A Python function as CPython 3.12+ names it for perf (`py::find_dup:/tmp/quad.py`).
pub fn is_python_frame(frame: &str) -> bool {
    frame.starts_with("py::")
}

/// Self cost of each function with the data primitives it called charged to it (the
/// primitives keep their own self cost too). Under a Python function, the interpreter's
/// internals are that function's cost: a quadratic `find_dup` was seven CPython functions
/// growing as n² (`long_richcompare`, `list_slice`, …) and never itself.
fn charged_self(p: &PointProfile) -> std::collections::HashMap<String, u64> {
    let mut out: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for f in &p.folded {
        // The first frame is the process name.
        let frames: Vec<&str> = folded::frames(&f.stack).collect();
        let Some(leaf) = frames.last() else { continue };
        if let Some(python) = frames.iter().rev().find(|fr| is_python_frame(fr)) {
            *out.entry(python.to_string()).or_default() += f.weight;
            continue;
        }
        *out.entry(leaf.to_string()).or_default() += f.weight;
        if is_data_primitive(leaf) {
            if let Some(caller) = frames.iter().rev().find(|fr| !is_data_primitive(fr)) {
                *out.entry(caller.to_string()).or_default() += f.weight;
            }
        }
    }
    out
}

/// Functions with less than this share of the largest point's cost are not fitted.
const MIN_SHARE: f64 = 0.01;

/// Fits y = a·xᵏ to points with x, y > 0. `None` with fewer than 3 such points.
pub fn power_fit(points: &[(f64, f64)]) -> Option<PowerFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    let m = pts.len();
    if m < 3 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / m as f64;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / m as f64;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let k = sxy / sxx;
    let ln_a = my - k * mx;
    let sse: f64 = pts.iter().map(|p| (p.1 - ln_a - k * p.0).powi(2)).sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    let dof = m as f64 - 2.0;
    let se = (sse / dof / sxx).sqrt();
    let t = StudentsT::new(0.0, 1.0, dof).ok()?.inverse_cdf(0.975);
    Some(PowerFit {
        exponent: k,
        ci95: [k - t * se, k + t * se],
        coefficient: ln_a.exp(),
        r2,
        points: m,
    })
}

/// `points`: (input size, repeats merged into the profile, profile). Costs are per run.
pub fn complexity(points: &[(u64, u32, &PointProfile)]) -> Option<ComplexityReport> {
    if points.len() < 3 {
        return None;
    }
    let costs: Vec<_> = points.iter().map(|(_, _, p)| function_costs(p)).collect();
    let charged: Vec<_> = points.iter().map(|(_, _, p)| charged_self(p)).collect();
    let per_run = |w: u64, i: usize| w as f64 / f64::from(points[i].1.max(1));
    let total: Vec<(f64, f64)> = costs
        .iter()
        .enumerate()
        .map(|(i, c)| (points[i].0 as f64, per_run(c.total_weight, i)))
        .collect();
    let overall = power_fit(&total)?;
    let last = costs.len() - 1;
    let mut names: HashSet<&String> = HashSet::new();
    for c in &charged {
        names.extend(c.keys());
    }
    let mut functions = Vec::new();
    for name in names {
        let self_last = per_run(charged[last].get(name).copied().unwrap_or(0), last);
        if self_last < MIN_SHARE * total[last].1 {
            continue;
        }
        let series = |f: &dyn Fn(usize) -> u64| -> Vec<(f64, f64)> {
            (0..costs.len())
                .map(|i| (points[i].0 as f64, per_run(f(i), i)))
                .collect()
        };
        // A caller's cost includes the data primitives it called (see is_data_primitive).
        let self_cost = series(&|i| charged[i].get(name).copied().unwrap_or(0));
        let incl_cost = series(&|i| costs[i].inclusive_weight.get(name).copied().unwrap_or(0));
        // Sizes where the function was not sampled are left out of the fit, not divided by.
        let absent_below = self_cost
            .iter()
            .take_while(|(_, c)| *c == 0.0)
            .last()
            .map(|(n, _)| *n as u64);
        let Some(fit) = power_fit(&self_cost) else {
            continue;
        };
        let (function, kernel) = match folded::kernel(name) {
            Some(n) => (n.to_string(), true),
            None => (name.clone(), false),
        };
        functions.push(scalprof_model::FunctionComplexity {
            function,
            in_kernel: kernel,
            self_cost: self_cost.iter().map(|p| p.1).collect(),
            inclusive_cost: incl_cost.iter().map(|p| p.1).collect(),
            fit,
            absent_below,
        });
    }
    functions.sort_by(|a, b| {
        b.fit
            .exponent
            .total_cmp(&a.fit.exponent)
            .then_with(|| a.function.cmp(&b.function))
    });
    Some(ComplexityReport {
        sizes: points.iter().map(|p| p.0).collect(),
        total_cost: total.iter().map(|p| p.1).collect(),
        overall,
        functions,
    })
}

/// `superlinear_cost` findings: functions whose exponent's interval lies above n log n's
/// exponent over the sizes plus [`NLOGN_MARGIN`]; not the data primitives, whose growth is
/// judged in their callers'. Score: the function's share of the cost
/// at the largest size.
pub fn superlinear(report: &ComplexityReport, unit: &str) -> Vec<Finding> {
    let last_total = *report.total_cost.last().unwrap_or(&0.0);
    report
        .functions
        .iter()
        .filter(|f| f.fit.ci95[0] > nlogn_exponent(&report.sizes) + NLOGN_MARGIN)
        .filter(|f| !is_data_primitive(&f.function))
        .map(|f| {
            let share = if last_total > 0.0 {
                f.self_cost.last().copied().unwrap_or(0.0) / last_total
            } else {
                0.0
            };
            Finding { score_interval: None,
                kind: FindingKind::SuperlinearCost,
                scope: Some(if f.in_kernel { Scope::Kernel } else { Scope::User }),
                subject: f.function.clone(),
                score: share.clamp(0.0, 1.0),
                evidence: format!(
                    "self cost grows as n^{:.2} (95% interval {:.2}–{:.2}, R² {:.3}) from n={} to n={}, against n^{:.2} for the whole workload; {:.0}% of the cost at the largest size",
                    f.fit.exponent,
                    f.fit.ci95[0],
                    f.fit.ci95[1],
                    f.fit.r2,
                    report.sizes[0],
                    report.sizes[report.sizes.len() - 1],
                    report.overall.exponent,
                    share * 100.0
                ),
                suggestion: "look for a loop that restarts from the beginning for every element (a scan, a search, a list walk) and make it resume, index or batch".into(),
                details: FindingDetails::Complexity(ComplexityDetails {
                    exponent: f.fit.exponent,
                    ci95: f.fit.ci95,
                    r2: f.fit.r2,
                    sizes: report.sizes.clone(),
                    self_cost: f.self_cost.clone(),
                    unit: unit.to_string(),
                }),
                what_if: None,
                experiment: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_power_laws_are_recovered() {
        let pts: Vec<(f64, f64)> = [1000.0, 2000.0, 4000.0, 8000.0]
            .iter()
            .map(|&n| (n, 3.0 * n * n))
            .collect();
        let f = power_fit(&pts).unwrap();
        assert!((f.exponent - 2.0).abs() < 1e-9);
        assert!((f.coefficient - 3.0).abs() < 1e-6);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        // n log n over a decade reads as a little above 1.
        let pts: Vec<(f64, f64)> = [5000.0, 10000.0, 20000.0, 40000.0]
            .iter()
            .map(|&n| (n, n * f64::ln(n)))
            .collect();
        let f = power_fit(&pts).unwrap();
        assert!(f.exponent > 1.05 && f.exponent < 1.15, "{f:?}");
    }

    #[test]
    fn a_data_primitive_is_judged_in_its_caller() {
        assert!(is_data_primitive("__memcmp_evex_movbe"));
        assert!(is_data_primitive("__GI___strcoll_l"));
        assert!(is_data_primitive("memcpy"));
        assert!(!is_data_primitive("memcached_get"));
        assert!(!is_data_primitive("expire_flows"));
        // A sort: comparisons n log n, each memcmp slower as the data outgrows the caches
        // (n^1.4 alone); the sort itself stays n log n. Then a quadratic scan whose own
        // time is small, calling memcmp n² times: the scan is named, memcmp is not.
        let sizes = [250_000u64, 500_000, 1_000_000, 2_000_000];
        let prof = |_n: u64, stacks: &[(&str, f64)]| PointProfile {
            folded: stacks
                .iter()
                .map(|&(s, w)| scalprof_model::FoldedStack {
                    stack: s.to_string(),
                    samples: 1,
                    weight: w as u64,
                })
                .collect(),
            ..Default::default()
        };
        let nf = |n: u64| n as f64;
        let sort: Vec<PointProfile> = sizes
            .iter()
            .map(|&n| {
                prof(
                    n,
                    &[
                        ("sort;main;sortlines", 400.0 * nf(n) * nf(n).ln()),
                        (
                            "sort;main;sortlines;__memcmp_evex_movbe",
                            5.0 * nf(n).powf(1.4),
                        ),
                    ],
                )
            })
            .collect();
        let pts: Vec<(u64, u32, &PointProfile)> =
            sizes.iter().zip(&sort).map(|(&n, p)| (n, 1, p)).collect();
        let report = complexity(&pts).unwrap();
        assert!(report
            .functions
            .iter()
            .any(|f| f.function == "__memcmp_evex_movbe"));
        assert!(
            superlinear(&report, "ns").is_empty(),
            "{:?}",
            superlinear(&report, "ns")
        );
        let scan: Vec<PointProfile> = sizes
            .iter()
            .map(|&n| {
                prof(
                    n,
                    &[
                        ("p;main;dedup", 0.001 * nf(n) * nf(n)),
                        ("p;main;dedup;memcmp", 0.01 * nf(n) * nf(n)),
                        ("p;main;read_input", 100.0 * nf(n)),
                    ],
                )
            })
            .collect();
        let pts: Vec<(u64, u32, &PointProfile)> =
            sizes.iter().zip(&scan).map(|(&n, p)| (n, 1, p)).collect();
        let named: Vec<String> = superlinear(&complexity(&pts).unwrap(), "ns")
            .into_iter()
            .map(|f| f.subject)
            .collect();
        assert_eq!(named, vec!["dedup".to_string()]);
        // CPython 3.12+ with its perf trampolines: the interpreter's functions under
        // find_dup are find_dup's cost, named once, as the Python function.
        let py: Vec<PointProfile> = sizes
            .iter()
            .map(|&n| {
                let under = "python3;_start;py::main:q.py;_PyEval_EvalFrameDefault;py::find_dup:q.py;_PyEval_EvalFrameDefault";
                prof(
                    n,
                    &[
                        (format!("{under};long_richcompare").as_str(), 0.01 * nf(n) * nf(n)),
                        (format!("{under};list_slice;memcpy").as_str(), 0.005 * nf(n) * nf(n)),
                        ("python3;_start;py::main:q.py;PyList_New", 100.0 * nf(n)),
                    ],
                )
            })
            .collect();
        let pts: Vec<(u64, u32, &PointProfile)> =
            sizes.iter().zip(&py).map(|(&n, p)| (n, 1, p)).collect();
        let named: Vec<String> = superlinear(&complexity(&pts).unwrap(), "ns")
            .into_iter()
            .map(|f| f.subject)
            .collect();
        assert_eq!(named, vec!["py::find_dup:q.py".to_string()]);
    }

    #[test]
    fn n_log_n_has_its_exponent_over_the_sizes() {
        // Over 5000..40000, n ln n fits as n^1.105.
        let k = nlogn_exponent(&[5000, 10000, 20000, 40000]);
        assert!((k - 1.105).abs() < 0.002, "{k}");
        let pts: Vec<(f64, f64)> = [5000.0, 40000.0]
            .iter()
            .map(|&n| (n, n * f64::ln(n)))
            .collect();
        let direct = (pts[1].1 / pts[0].1).ln() / (8.0f64).ln();
        assert!((k - direct).abs() < 1e-12);
        // Over 250k..2M lines (GNU sort's sweep) it is lower: ≈1.07.
        assert!((nlogn_exponent(&[250_000, 2_000_000]) - 1.07).abs() < 0.01);
    }

    #[test]
    fn zeros_and_short_series_are_handled() {
        assert!(power_fit(&[(1.0, 1.0), (2.0, 2.0)]).is_none());
        // A function absent at the smallest size: fitted on the rest, no division by zero.
        let f = power_fit(&[(1000.0, 0.0), (2000.0, 4.0), (4000.0, 16.0), (8000.0, 64.0)]).unwrap();
        assert_eq!(f.points, 3);
        assert!((f.exponent - 2.0).abs() < 1e-9);
    }
}
