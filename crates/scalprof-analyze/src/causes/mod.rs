//! The causes the time budget splits a point's thread-time into, one kind per file, behind
//! one trait ([`Cause`]): each gives its rows of thread-ns per unit of work (the budget's
//! series), may fold rows into others once all are in, and may make findings from the
//! budgets. The budget and the scoring iterate [`REGISTRY`]: a new kind of cause is its
//! [`FindingKind`] in the model plus one file here, listed below.

mod hotspots;
mod locks;
mod serial;
mod sharing;
mod stage;
pub mod throttling;

use scalprof_model::{Finding, FindingKind, Point, PointProfile, RunHeader, ScalingDiff};

use crate::budget::Series;

/// What a cause reads of a run to make its series.
pub(crate) struct Run<'a> {
    pub header: &'a RunHeader,
    pub points: &'a [Point],
    /// Each point's merged profile (`None` where none was taken).
    pub profiles: &'a [Option<&'a PointProfile>],
    /// Each point's work (operations, or the input size).
    pub work: &'a [f64],
    /// What grew between the first and the last point, when both were profiled.
    pub scaling_diff: Option<&'a ScalingDiff>,
    /// Functions another cause already names (a lock's callers and holders).
    pub claimed: &'a [String],
}

/// One kind of cause.
pub(crate) trait Cause: Sync {
    /// The finding kinds whose score and what-if come from this cause's budget rows.
    fn kinds(&self) -> &'static [FindingKind];

    /// Its rows of thread-ns per unit of work (or of shares), one per subject. A cause
    /// that makes its finding from the profile alone adds it to `findings`; a later cause
    /// may read the findings made so far (sharing costs its findings' lines).
    fn series(&self, run: &Run<'_>, findings: &mut Vec<Finding>) -> Vec<Series>;

    /// Rearranges the rows once every cause's are in.
    fn fold(&self, _series: &mut Vec<Series>, _points: &[Point]) {}

    /// Findings made from the points' budgets.
    fn findings(&self, _points: &[Point], _cpus: u32) -> Vec<Finding> {
        Vec::new()
    }
}

/// Every kind of cause, in the order their rows enter the budget.
pub(crate) const REGISTRY: [&dyn Cause; 6] = [
    &locks::Locks,
    &hotspots::Hotspots,
    &serial::Serial,
    &stage::Stage,
    &sharing::Sharing,
    &throttling::Throttling,
];

/// Whether findings of `kind` are scored from the budget (a share of the thread-time).
pub fn is_budgeted(kind: FindingKind) -> bool {
    REGISTRY.iter().any(|c| c.kinds().contains(&kind))
}
