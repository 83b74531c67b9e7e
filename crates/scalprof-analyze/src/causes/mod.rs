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

use scalprof_model::{
    Finding, FindingKind, Point, PointProfile, RunHeader, ScalingDiff, WhatIf, LISTED_SHARE,
};

use crate::budget::series::Series;
use crate::stability::MIN_SHARE;

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

/// Scores the findings from the last point's budget: a finding's score is its cause's
/// share (the efficiency points it costs), and its what-if the speedup without it — at
/// most the point's thread count and the machine's `cpus` (0: unknown), since removing a
/// cause cannot run more threads at once than there are CPUs. A budgeted finding whose
/// cause is below [`MIN_SHARE`] is dropped.
pub fn score_findings(findings: &mut Vec<Finding>, last: &Point, cpus: u64) {
    let Some(b) = &last.budget else { return };
    findings.retain_mut(|f| {
        if !is_budgeted(f.kind) {
            return true;
        }
        let Some(c) = b.causes.iter().find(|c| c.id() == f.id()) else {
            return false;
        };
        f.score = c.share;
        if c.late_share >= LISTED_SHARE {
            f.evidence.push_str(&format!(
                "; the thread it held back then ran alone at the end, with no more work than \
                 the threads that had finished: {:.0} of these {:.0} points are that lone run",
                c.late_share * 100.0,
                c.share * 100.0
            ));
        }
        let ceiling = if cpus > 0 {
            last.value.min(cpus)
        } else {
            last.value
        } as f64;
        f.what_if = Some(WhatIf {
            value: last.value,
            speedup: ((b.useful + c.share) * last.value as f64).min(ceiling),
        });
        c.share >= MIN_SHARE
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_a_cause_of_the_registry_but_the_size_sweeps() {
        // Superlinear cost is found by fitting each function's cost to the input size
        // (`complexity`), not from a budget of the thread-time.
        for kind in FindingKind::ALL {
            let causes = REGISTRY
                .iter()
                .filter(|c| c.kinds().contains(&kind))
                .count();
            let expected = usize::from(kind != FindingKind::SuperlinearCost);
            assert_eq!(
                causes, expected,
                "{kind}: in {causes} causes of the registry"
            );
        }
    }
    use crate::budget::budgets;
    use crate::budget::tests::{lock, point};
    use scalprof_model::locks::Scope;

    /// A lock finding before scoring (its score is the budget's to set).
    fn lock_finding(scope: Scope, subject: &str) -> Finding {
        Finding {
            score_interval: None,
            kind: FindingKind::LockContention,
            scope: Some(scope),
            subject: subject.into(),
            score: 1.0,
            evidence: String::new(),
            suggestion: String::new(),
            details: Default::default(),
            what_if: None,
            experiment: None,
        }
    }

    #[test]
    fn a_program_that_scales_cannot_score_high() {
        // page_fault1: 1.93× at 2 threads; a lock whose wait grew explains at most the 3.5%.
        let mut points = vec![point(1, 1000.0, 1.0), point(2, 1930.0, 0.965)];
        let series = [lock("mmap_lock", [10.0, 100_000.0])];
        points[1].budget = budgets(&points, &[None, None], &series, 0)[1].clone();
        let mut findings = vec![lock_finding(Scope::Kernel, "mmap_lock")];
        assert!(points[1].budget.as_ref().unwrap().causes[0].share <= 0.035 + 1e-9);
        score_findings(&mut findings, &points[1], 0);
        assert!(
            findings.is_empty(),
            "below 5% of the thread-time: no finding"
        );
    }

    #[test]
    fn a_finding_gets_its_share_and_what_if() {
        let mut points = vec![point(1, 1000.0, 1.0), point(2, 1000.0, 0.5)];
        let series = [lock("table_lock", [0.0, 800_000.0])];
        points[1].budget = budgets(&points, &[None, None], &series, 0)[1].clone();
        let mut findings = vec![lock_finding(Scope::User, "table_lock")];
        score_findings(&mut findings, &points[1], 0);
        assert!((findings[0].score - 0.4).abs() < 1e-9);
        let w = findings[0].what_if.unwrap();
        assert_eq!(w.value, 2);
        assert!((w.speedup - 1.8).abs() < 1e-9);
    }
}
