//! A workload's runs over commits, and the commits where its scaling shifted.
//!
//! Change points are found with E-divisive means (D. S. Matteson and N. A. James, "A
//! Nonparametric Approach for Multiple Change Point Analysis of Multivariate Data", JASA
//! 109, 2014), the method MongoDB's performance CI and Hunter/Otava use: the split of the
//! series that maximizes the energy distance between its two sides, kept when a
//! permutation test says so, then each side split again. The samples are the runs'
//! clean repeats, so the noise the test weighs a shift against is the repeats' own; a
//! split may only fall between two runs, with two runs or more on each side. A split is
//! then kept only where Welch's interval of the shift on the runs' medians excludes no
//! change, so that run-to-run noise beyond the repeats' does not make one either. No
//! fixed threshold.
//!
//! Written by hand: no maintained crate offers E-divisive; the statistic is a few sums.

use scalprof_model::history::{ChangePoint, History, HistoryRun};
use scalprof_model::{Point, RunDocument, SweepParameter};

use crate::summary::repeat_throughput;

/// The permutation test's level, and its permutations (as in the `ecp` package).
const SIGNIFICANCE: f64 = 0.05;
const PERMUTATIONS: usize = 199;

/// The history of `docs` (one label's runs, oldest first).
pub fn history(label: &str, docs: &[RunDocument]) -> History {
    let parameter = docs
        .first()
        .map_or(SweepParameter::Threads, |d| d.sweep.parameter);
    let value = common_point(docs);
    let samples = |metric: Metric| -> Vec<Vec<f64>> {
        docs.iter()
            .map(|d| value.map_or(Vec::new(), |v| metric.samples(d, v)))
            .collect()
    };
    let runs = docs
        .iter()
        .map(|d| {
            let point = value.and_then(|v| d.points.iter().find(|p| p.value == v));
            let top = point
                .and_then(|p| p.budget.as_ref())
                .and_then(|b| b.causes.iter().find(|c| !c.foreign));
            HistoryRun {
                run: d.id.clone(),
                commit: d.commit.clone(),
                created: d.created.clone(),
                throughput: point.and_then(|p| p.throughput),
                efficiency: point.and_then(|p| p.efficiency),
                top_cause: top.map(|c| c.subject.clone()),
                top_share: top.map(|c| c.share),
            }
        })
        .collect();
    let mut change_points = Vec::new();
    for metric in [Metric::Throughput, Metric::Efficiency] {
        let per_run = samples(metric);
        for (at, split) in change_points_of(&per_run) {
            let (before, after) = (&docs[at - 1], &docs[at]);
            change_points.push(ChangePoint {
                commit: after.commit.clone(),
                run: after.id.clone(),
                metric: metric.name().into(),
                before: split.before,
                after: split.after,
                change: split.change,
                interval: split.interval,
                p_value: split.p_value,
                causes: value.map_or(Vec::new(), |v| causes_between(before, after, v)),
            });
        }
    }
    change_points.sort_by_key(|c| docs.iter().position(|d| d.id == c.run));
    History {
        schema: "scalprof.history/1".into(),
        label: label.into(),
        parameter: parameter.to_string(),
        value,
        runs,
        change_points,
    }
}

/// The largest point every run measured a throughput at.
fn common_point(docs: &[RunDocument]) -> Option<u64> {
    let first = docs.first()?;
    first
        .points
        .iter()
        .filter(|p| p.throughput.is_some())
        .map(|p| p.value)
        .filter(|&v| {
            docs.iter().all(|d| {
                d.points
                    .iter()
                    .any(|p| p.value == v && p.throughput.is_some())
            })
        })
        .max()
}

#[derive(Clone, Copy)]
enum Metric {
    Throughput,
    Efficiency,
}

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Efficiency => "efficiency",
        }
    }

    /// Each clean repeat's value at point `v`: its throughput, or that over the first
    /// point's median, per thread.
    fn samples(self, d: &RunDocument, v: u64) -> Vec<f64> {
        let Some(p) = d.points.iter().find(|p| p.value == v) else {
            return Vec::new();
        };
        let rates = rates(d, p);
        match self {
            Metric::Throughput => rates,
            Metric::Efficiency => {
                let Some(first) = d.points.iter().find(|p| p.throughput.is_some()) else {
                    return Vec::new();
                };
                let x0 = first.throughput.unwrap_or(0.0);
                if x0 <= 0.0 {
                    return Vec::new();
                }
                let scale = first.value as f64 / (x0 * v.max(1) as f64);
                rates.iter().map(|x| x * scale).collect()
            }
        }
    }
}

fn rates(d: &RunDocument, p: &Point) -> Vec<f64> {
    p.repeats
        .iter()
        .filter(|r| r.succeeded())
        .filter_map(|r| repeat_throughput(p.value, r, d.throughput.source))
        .collect()
}

/// A kept split: the metric on either side, the relative change and its interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub before: f64,
    pub after: f64,
    pub change: f64,
    pub interval: [f64; 2],
    pub p_value: f64,
}

/// The change points of a series of runs (each its repeats' values): the index of the
/// first run after each, with its split, in order.
pub fn change_points_of(runs: &[Vec<f64>]) -> Vec<(usize, Split)> {
    let mut out = Vec::new();
    let mut rng = SplitMix(0x5ca1_ab1e);
    segment(runs, 0, &mut rng, &mut out);
    out.sort_by_key(|(at, _)| *at);
    out
}

/// Binary segmentation of `runs` (the first of which is run `offset` of the series).
fn segment(runs: &[Vec<f64>], offset: usize, rng: &mut SplitMix, out: &mut Vec<(usize, Split)>) {
    if runs.len() < 4 {
        return;
    }
    let x: Vec<f64> = runs.iter().flatten().copied().collect();
    // A split may fall only between runs, with two runs or more on each side: one run
    // alone is not told from run-to-run noise (the gate between the last two runs is
    // `compare --fail-if-slower`).
    let mut starts = Vec::new();
    let mut at = 0;
    for r in runs {
        starts.push(at);
        at += r.len();
    }
    let allowed: Vec<usize> = (2..runs.len().saturating_sub(1))
        .map(|k| starts[k])
        .filter(|&s| s >= 2 && x.len() - s >= 2)
        .collect();
    let Some((tau, q)) = best_split(&x, &allowed) else {
        return;
    };
    let mut shuffled = x.clone();
    let mut as_large = 0;
    for _ in 0..PERMUTATIONS {
        rng.shuffle(&mut shuffled);
        if best_split(&shuffled, &allowed).is_some_and(|(_, qp)| qp >= q) {
            as_large += 1;
        }
    }
    let p_value = (1 + as_large) as f64 / (1 + PERMUTATIONS) as f64;
    if p_value > SIGNIFICANCE {
        return;
    }
    let k = starts
        .iter()
        .position(|&s| s == tau)
        .expect("splits are run starts");
    let Some(split) = shift(&runs[..k], &runs[k..], p_value) else {
        return;
    };
    segment(&runs[..k], offset, rng, out);
    out.push((offset + k, split));
    segment(&runs[k..], offset + k, rng, out);
}

/// The shift between two sides, where its interval excludes no change: Welch's interval
/// on the logarithms of the runs' medians (each side has two runs or more).
fn shift(before: &[Vec<f64>], after: &[Vec<f64>], p_value: f64) -> Option<Split> {
    let logs = |side: &[Vec<f64>]| -> Vec<f64> {
        side.iter().filter_map(|r| median(r)).map(f64::ln).collect()
    };
    let (a, b) = (logs(before), logs(after));
    if a.iter().chain(&b).any(|x| !x.is_finite()) {
        return None;
    }
    let w = crate::welch::welch(&a, &b)?;
    if w.ci95[0] <= 0.0 && w.ci95[1] >= 0.0 {
        return None;
    }
    let mean = |side: &[Vec<f64>]| {
        let m: Vec<f64> = side.iter().filter_map(|r| median(r)).collect();
        m.iter().sum::<f64>() / m.len().max(1) as f64
    };
    Some(Split {
        before: mean(before),
        after: mean(after),
        change: w.difference.exp() - 1.0,
        interval: [w.ci95[0].exp() - 1.0, w.ci95[1].exp() - 1.0],
        p_value,
    })
}

fn median(x: &[f64]) -> Option<f64> {
    scalprof_model::Spread::of(x.iter().copied()).map(|s| s.median)
}

/// The split of `x` among `allowed` with the largest energy statistic
/// Q = m·k/n · (2/(m·k)·Σ|left−right| − Σ|left pairs|/C(m,2) − Σ|right pairs|/C(k,2)).
/// O(n²): the sums move one sample from the right side to the left at a time.
fn best_split(x: &[f64], allowed: &[usize]) -> Option<(usize, f64)> {
    let n = x.len();
    if n < 4 || allowed.is_empty() {
        return None;
    }
    let mut within_right: f64 = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| (x[i] - x[j]).abs())
        .sum();
    let (mut within_left, mut between) = (0.0, 0.0);
    let mut best: Option<(usize, f64)> = None;
    for tau in 1..n - 1 {
        // Sample tau − 1 moves to the left side.
        let p = tau - 1;
        let to_left: f64 = x[..p].iter().map(|v| (v - x[p]).abs()).sum();
        let to_right: f64 = x[p + 1..].iter().map(|v| (v - x[p]).abs()).sum();
        within_left += to_left;
        between += to_right - to_left;
        within_right -= to_right;
        if !allowed.contains(&tau) {
            continue;
        }
        let (m, k) = (tau as f64, (n - tau) as f64);
        let pairs = |c: f64| c * (c - 1.0) / 2.0;
        let energy =
            2.0 * between / (m * k) - within_left / pairs(m) - within_right.max(0.0) / pairs(k);
        let q = m * k / n as f64 * energy;
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// What appeared, grew, shrank or vanished from run `a` to run `b` at point `v`: the
/// findings of one and not the other, and the causes that explain a tenth or more of
/// the change in the time per operation.
fn causes_between(a: &RunDocument, b: &RunDocument, v: u64) -> Vec<String> {
    let c = crate::compare::compare(a, b);
    let mut out: Vec<String> = c
        .findings_appeared
        .iter()
        .map(|f| format!("appeared: {f}"))
        .chain(
            c.findings_disappeared
                .iter()
                .map(|f| format!("vanished: {f}")),
        )
        .collect();
    if let Some(p) = c.points.iter().find(|p| p.value == v) {
        for cause in p.causes.iter().filter(|x| x.explains.abs() >= 0.10).take(3) {
            out.push(format!(
                "{}: {} {} → {} per op (explains {:.0}%)",
                if cause.b_ns_per_op > cause.a_ns_per_op {
                    "grew"
                } else {
                    "shrank"
                },
                cause.cause,
                scalprof_model::units::human_ns(cause.a_ns_per_op),
                scalprof_model::units::human_ns(cause.b_ns_per_op),
                cause.explains * 100.0
            ));
        }
    }
    out
}

/// A small deterministic generator (splitmix64): the same history gives the same change
/// points every time it is read.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    fn shuffle(&mut self, x: &mut [f64]) {
        for i in (1..x.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            x.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of 3 repeats around `levels`, with a ±`noise` relative wobble that differs
    /// between repeats and runs.
    fn series(levels: &[f64], noise: f64) -> Vec<Vec<f64>> {
        let mut rng = SplitMix(7);
        levels
            .iter()
            .map(|&l| {
                (0..3)
                    .map(|_| {
                        let u = (rng.next() % 10_000) as f64 / 10_000.0 * 2.0 - 1.0;
                        l * (1.0 + noise * u)
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_drop_in_the_middle_is_found_at_its_run_with_its_size() {
        let runs = series(&[100.0, 101.0, 99.0, 100.0, 60.0, 61.0, 59.0, 60.0], 0.03);
        let cps = change_points_of(&runs);
        assert_eq!(cps.len(), 1, "{cps:?}");
        let (at, s) = &cps[0];
        assert_eq!(*at, 4);
        assert!((s.change + 0.4).abs() < 0.03, "{s:?}");
        assert!(
            s.interval[0] < s.change && s.change < s.interval[1],
            "{s:?}"
        );
        assert!(s.interval[1] < 0.0, "{s:?}");
        assert!(s.p_value <= SIGNIFICANCE);
    }

    #[test]
    fn noise_alone_is_no_change_point() {
        // Ten runs of one level with 5% noise: no split survives.
        let runs = series(&[100.0; 10], 0.05);
        assert!(change_points_of(&runs).is_empty());
        // A step inside the repeats' own noise is not claimed either.
        let runs = series(&[100.0, 100.0, 100.0, 101.0, 101.0, 101.0], 0.05);
        assert!(change_points_of(&runs).is_empty());
    }

    #[test]
    fn two_shifts_are_both_found() {
        let runs = series(
            &[100.0, 100.0, 100.0, 70.0, 70.0, 70.0, 90.0, 90.0, 90.0],
            0.02,
        );
        let at: Vec<usize> = change_points_of(&runs).iter().map(|(a, _)| *a).collect();
        assert_eq!(at, vec![3, 6]);
    }

    #[test]
    fn the_energy_statistic_splits_where_the_level_changes() {
        let x = [1.0, 1.1, 0.9, 1.0, 5.0, 5.1, 4.9, 5.0];
        let (tau, q) = best_split(&x, &[2, 4, 6]).unwrap();
        assert_eq!(tau, 4);
        assert!(q > 0.0);
        assert!(best_split(&x, &[]).is_none());
    }
}
