//! Where one profile's time went, function by function (the view `perf report` and
//! `pprof -top` lead with), and which functions' own cost per operation changed between
//! two profiles. Both count as "what grew" counts: [`function_costs`].

use scalprof_model::profile::folded;
use scalprof_model::{PointProfile, TopFunction, TopFunctions};

use crate::scaling::function_costs;

/// A profile's `limit` functions with the most self time, then (for ties, and to fill the
/// list when fewer functions have self time) the most total time, then by name.
pub fn top_functions(profile: &PointProfile, limit: usize) -> TopFunctions {
    let c = function_costs(profile);
    let get = |m: &std::collections::HashMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let mut functions: Vec<TopFunction> = c
        .inclusive_weight
        .iter()
        .map(|(frame, &total_weight)| {
            let (function, in_kernel) = match folded::kernel(frame) {
                Some(name) => (name.to_string(), true),
                None => (frame.clone(), false),
            };
            TopFunction {
                function,
                in_kernel,
                self_samples: get(&c.self_samples, frame),
                total_samples: get(&c.inclusive_samples, frame),
                self_weight: get(&c.self_weight, frame),
                total_weight,
            }
        })
        .collect();
    functions.sort_by(|a, b| {
        b.self_weight
            .cmp(&a.self_weight)
            .then_with(|| b.total_weight.cmp(&a.total_weight))
            .then_with(|| a.function.cmp(&b.function))
            .then_with(|| a.in_kernel.cmp(&b.in_kernel))
    });
    functions.truncate(limit);
    TopFunctions {
        samples: c.total_samples,
        weight: c.total_weight,
        functions,
    }
}

/// A change in a function's self cost per operation smaller than this share of the larger
/// profile's cost per operation is not reported, however sure it is. Chosen between the
/// floor of the "what grew" rows (1%) and that of compare's causes (3%); not fitted.
pub const CHANGE_MIN_SHARE: f64 = 0.02;

/// A change must also exceed the sampling noise by this many standard deviations. A
/// function's sample count is about Poisson-distributed, σ ≈ √n (gprof's manual,
/// "Statistical Sampling Error"); with the normal approximation, three σ flags about 3 in
/// 1,000 functions of two equal runs by chance.
pub const CHANGE_SIGMAS: f64 = 3.0;

/// One function whose self cost per operation changed between two profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionChange {
    /// The folded frame (`_[k]` for a kernel function).
    pub frame: String,
    /// Self cost per operation before and after, in the profiles' weight unit.
    pub before_per_op: f64,
    pub after_per_op: f64,
}

/// The functions whose self cost per operation changed from `before` to `after` beyond
/// sampling noise and by at least [`CHANGE_MIN_SHARE`] of the cost per operation, the
/// largest change first. `*_work`: the operations each profile's repeats did. Empty when
/// either did no work.
pub fn changed_functions(
    before: &PointProfile,
    before_work: f64,
    after: &PointProfile,
    after_work: f64,
) -> Vec<FunctionChange> {
    if before_work <= 0.0 || after_work <= 0.0 {
        return Vec::new();
    }
    let (a, b) = (function_costs(before), function_costs(after));
    let floor = CHANGE_MIN_SHARE
        * (a.total_weight as f64 / before_work).max(b.total_weight as f64 / after_work);
    let mut frames: Vec<&String> = a.self_weight.keys().chain(b.self_weight.keys()).collect();
    frames.sort();
    frames.dedup();
    let side = |c: &crate::scaling::FunctionCosts, frame: &str, work: f64| {
        let weight = c.self_weight.get(frame).copied().unwrap_or(0) as f64;
        let samples = c.self_samples.get(frame).copied().unwrap_or(0);
        let per_op = weight / work;
        // The cost's standard error: its relative error is 1/√n (n samples).
        let variance = per_op * per_op / samples.max(1) as f64;
        (per_op, variance)
    };
    let mut out: Vec<FunctionChange> = frames
        .into_iter()
        .filter_map(|frame| {
            let (x, vx) = side(&a, frame, before_work);
            let (y, vy) = side(&b, frame, after_work);
            let change = (y - x).abs();
            (change >= floor && change >= CHANGE_SIGMAS * (vx + vy).sqrt()).then(|| {
                FunctionChange {
                    frame: frame.clone(),
                    before_per_op: x,
                    after_per_op: y,
                }
            })
        })
        .collect();
    out.sort_by(|p, q| {
        let d = |c: &FunctionChange| (c.after_per_op - c.before_per_op).abs();
        d(q).total_cmp(&d(p)).then_with(|| p.frame.cmp(&q.frame))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::FoldedStack;

    /// A cpu-clock profile at 1 ms per sample: (stack, samples).
    fn prof(stacks: &[(&str, u64)]) -> PointProfile {
        PointProfile {
            event: "cpu-clock".into(),
            folded: stacks
                .iter()
                .map(|(s, n)| FoldedStack {
                    stack: s.to_string(),
                    samples: *n,
                    weight: n * 1_000_000,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn top_functions_rank_by_self_time_and_count_recursion_once() {
        let p = prof(&[
            ("prog;main;work;work;hash", 60),
            ("prog;main;work", 30),
            ("prog;main;write;vfs_write_[k]", 10),
        ]);
        let top = top_functions(&p, 10);
        assert_eq!((top.samples, top.weight), (100, 100_000_000));
        let rows: Vec<(&str, bool, u64, u64)> = top
            .functions
            .iter()
            .map(|f| {
                (
                    f.function.as_str(),
                    f.in_kernel,
                    f.self_samples,
                    f.total_samples,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("hash", false, 60, 60),
                ("work", false, 30, 90),
                ("vfs_write", true, 10, 10),
                // No self time: after those that have some, most total time first.
                ("main", false, 0, 100),
                ("write", false, 0, 10),
            ]
        );
        assert_eq!(top.functions[1].total_weight, 90_000_000);
        // The process name is no function.
        assert!(!top.functions.iter().any(|f| f.function == "prog"));
        assert_eq!(top_functions(&p, 2).functions.len(), 2);
        assert_eq!(
            top_functions(&PointProfile::default(), 5),
            TopFunctions::default()
        );
    }

    #[test]
    fn equal_runs_change_nothing_per_operation() {
        // Twice the work and about twice the samples, within sampling noise.
        let a = prof(&[("p;worker", 1000), ("p;worker;memcpy", 100)]);
        let b = prof(&[("p;worker", 2040), ("p;worker;memcpy", 190)]);
        assert_eq!(changed_functions(&a, 1000.0, &b, 2000.0), []);
    }

    #[test]
    fn a_function_that_grew_per_operation_is_named() {
        let a = prof(&[("p;worker", 1000), ("p;worker;lock_wait_[k]", 10)]);
        let b = prof(&[("p;worker", 1000), ("p;worker;lock_wait_[k]", 400)]);
        let changed = changed_functions(&a, 1000.0, &b, 1000.0);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0].frame, "lock_wait_[k]");
        assert_eq!(changed[0].before_per_op, 10_000.0);
        assert_eq!(changed[0].after_per_op, 400_000.0);
    }

    #[test]
    fn a_sure_but_tiny_change_or_a_large_but_noisy_one_is_not_named() {
        // 1% of the cost per op, with a million samples: beyond noise, below the floor.
        let a = prof(&[("p;worker", 1_000_000), ("p;other", 10_000)]);
        let b = prof(&[("p;worker", 1_000_000), ("p;other", 20_000)]);
        assert_eq!(changed_functions(&a, 1.0, &b, 1.0), []);
        // Four samples to nine: large against the total, within √n of noise.
        let a = prof(&[("p;worker", 40), ("p;rare", 4)]);
        let b = prof(&[("p;worker", 40), ("p;rare", 9)]);
        assert_eq!(changed_functions(&a, 1.0, &b, 1.0), []);
        // No work on a side: nothing to compare.
        assert_eq!(changed_functions(&a, 0.0, &b, 1.0), []);
    }
}
