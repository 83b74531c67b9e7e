//! One workload's runs over commits (`scalprof history`), and the commits where its
//! scaling shifted. The JSON a CI or a dashboard reads: `scalprof.history/1`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub schema: String,
    pub label: String,
    /// The sweep parameter (`threads`).
    pub parameter: String,
    /// The largest point every run measured: the runs are compared there (`None`: they
    /// share no point with a throughput).
    pub value: Option<u64>,
    /// Oldest first.
    pub runs: Vec<HistoryRun>,
    /// In the order of the runs.
    pub change_points: Vec<ChangePoint>,
}

/// One run of the series, at the common point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryRun {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub created: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    /// The largest cause of lost thread-time at the common point, and its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_share: Option<f64>,
}

/// A commit where a metric shifted beyond the runs' own noise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    /// The first run after the shift, and its commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub run: String,
    /// `throughput` or `efficiency`.
    pub metric: String,
    /// The metric's mean over the runs of the segment before and after.
    pub before: f64,
    pub after: f64,
    /// after ÷ before − 1, with its 95% interval.
    pub change: f64,
    pub interval: [f64; 2],
    /// The permutation test's p-value for the split.
    pub p_value: f64,
    /// What appeared, grew, shrank or vanished between the runs on either side.
    pub causes: Vec<String>,
}
