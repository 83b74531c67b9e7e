//! The suite document (`scalprof.suite/1`, written by `scalprof suite --json`) and the
//! comparison of two suites (`scalprof compare A.json B.json`).

use serde::{Deserialize, Serialize};

use crate::compare::Comparison;
use crate::Host;

/// The value of the `schema` field of a suite document.
pub const SUITE_SCHEMA: &str = "scalprof.suite/1";
/// The value of the `schema` field of a suite comparison.
pub const SUITE_COMPARE_SCHEMA: &str = "scalprof.suite-compare/1";

/// The suite's results, one entry per test and mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteDocument {
    pub schema: String,
    pub host: Host,
    pub tests: Vec<TestResult>,
}

/// One test in one mode: an ordinary stored run (`run_id`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub name: String,
    /// threads or processes.
    pub mode: String,
    pub run_id: String,
    /// complete, failed (a repeat failed or timed out), interrupted.
    pub status: String,
    pub points: Vec<PointRate>,
    pub top_cause: Option<TopCause>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointRate {
    pub value: u64,
    /// Operations per second (median of the clean repeats); null where every repeat failed.
    pub throughput: Option<f64>,
    pub efficiency: Option<f64>,
    /// Operations per second of each clean repeat, so two suites can be compared from their
    /// documents alone (another machine, another store).
    #[serde(default)]
    pub repeats: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopCause {
    pub kind: String,
    pub subject: String,
    pub score: f64,
    /// What the subject is, when its name alone does not say (`posix-lock` for a file's
    /// record lock, `rwsem:W`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_type: Option<String>,
}

impl TestResult {
    /// `name (mode)`.
    pub fn key(&self) -> String {
        format!("{} ({})", self.name, self.mode)
    }
}

/// Two suites compared test by test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteComparison {
    pub schema: String,
    pub a_host: Host,
    pub b_host: Host,
    pub tests: Vec<TestComparison>,
    /// `name (mode)` of the tests only one suite ran.
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestComparison {
    pub name: String,
    pub mode: String,
    pub a_top_cause: Option<TopCause>,
    pub b_top_cause: Option<TopCause>,
    /// The runs' comparison: from the store when both runs are in it (locks and findings
    /// too), otherwise from the documents' repeats (throughput only).
    pub comparison: Comparison,
    /// Whether `comparison` came from the stored runs.
    pub from_store: bool,
}
