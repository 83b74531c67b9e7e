//! The before/after comparison document (`scalprof compare --json`).

use serde::{Deserialize, Serialize};

/// The result of Welch's t-test on one metric.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// mean(b) − mean(a)
    pub difference: f64,
    pub ci95: [f64; 2],
    pub t: f64,
    pub dof: f64,
    pub p_value: f64,
}

/// What a comparison measures at a point: the workload's throughput and the clean
/// repeats' wall, user and system time. Serialized as its contract name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Metric {
    #[serde(rename = "throughput")]
    Throughput,
    #[serde(rename = "wall_s")]
    Wall,
    #[serde(rename = "user_s")]
    User,
    #[serde(rename = "sys_s")]
    Sys,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Wall => "wall_s",
            Metric::User => "user_s",
            Metric::Sys => "sys_s",
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One metric at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: Metric,
    pub a_median: f64,
    pub a_range: [f64; 2],
    pub b_median: f64,
    pub b_range: [f64; 2],
    pub a_n: usize,
    pub b_n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub welch: Option<Welch>,
    /// The difference as a percentage of A's mean (ministat), when proven.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difference_pct: Option<f64>,
    pub significant: bool,
    pub verdict: String,
}

/// B's throughput as a multiple of A's at one point, with its confidence intervals.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// exp(mean ln B − mean ln A): the geometric means' ratio.
    pub ratio: f64,
    /// 95% interval of the ratio at this point alone.
    pub ci95: [f64; 2],
    /// The interval widened for all the points compared at once (Bonferroni: each at
    /// 1 − 0.05/k), which `--fail-if-slower` tests.
    pub ci_family: [f64; 2],
}

/// The CI gate (`--fail-if-slower PCT`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub threshold_pct: f64,
    /// Points where B is slower than A by more than the threshold, at the family-wise
    /// confidence: the whole interval lies below 1 − PCT/100.
    pub slower_points: Vec<u64>,
    /// Points with too few repeats to test (fewer than 2 on a side).
    pub untested_points: Vec<u64>,
    pub failed: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointComparison {
    pub value: u64,
    /// B's throughput over A's, when both sides have 2 or more repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_ratio: Option<Ratio>,
    /// Efficiency (speedup per thread) of A and B at this point, when both have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<[f64; 2]>,
    pub metrics: Vec<MetricComparison>,
    /// Lock waits per operation that changed: (lock, A ns/op, B ns/op).
    pub locks: Vec<LockChange>,
    /// The causes whose time per operation changed most, and how much of the change in
    /// thread-time per operation each accounts for (thread sweeps with lock tables or
    /// profiles on both sides).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<CauseChange>,
}

/// One cause's time per operation in A and B (thread-time: waits, or a function's on-CPU
/// time), and its share of the change in thread-time per operation from A to B.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CauseChange {
    pub cause: String,
    pub a_ns_per_op: f64,
    pub b_ns_per_op: f64,
    /// (B − A) of this cause ÷ (B − A) of the whole thread-time per operation.
    pub explains: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockChange {
    pub lock: String,
    pub a_wait_ns_per_op: f64,
    pub b_wait_ns_per_op: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub schema: String,
    pub a: String,
    pub b: String,
    pub confidence: f64,
    pub points: Vec<PointComparison>,
    /// Findings (kind: subject) present in B but not in A, and the reverse.
    pub findings_appeared: Vec<String>,
    pub findings_disappeared: Vec<String>,
    /// What makes A and B not like for like: different commands, throughput units or hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// One line: how B's throughput compares at the last common point, and what changed.
    #[serde(default)]
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
}
