//! Cache lines written by every thread: each sharing finding's instructions, costed per
//! unit of work at every point.

use scalprof_model::{Finding, FindingKind, Point, PointProfile};

use super::{Cause, Run};
use crate::budget::series::{sampled_to_ns, self_ns, Series};

pub(crate) struct Sharing;

impl Cause for Sharing {
    fn kinds(&self) -> &'static [FindingKind] {
        &[FindingKind::FalseSharing, FindingKind::TrueSharing]
    }

    fn series(&self, run: &Run<'_>, findings: &mut Vec<Finding>) -> Vec<Series> {
        findings
            .iter()
            .filter(|f| self.kinds().contains(&f.kind))
            .filter_map(|f| sharing_series(run.points, run.profiles, run.work, f))
            .collect()
    }
}

/// A sharing finding's growth (profile units per op, first → last point) as a series.
fn sharing_series(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
    finding: &Finding,
) -> Option<Series> {
    let last = points.len() - 1;
    let scale = sampled_to_ns(points, profiles, work);
    let s1 = scale[last]?;
    // The finding's score is its growth over the last point's sampled cost per op.
    let prof = profiles[last]?;
    let total: f64 = prof.folded.iter().map(|f| f.weight as f64).sum::<f64>() / work[last];
    let sampled_growth = finding.score * total * s1;
    // Samples skid past the locked instruction onto the ones after it (cpu-clock has no
    // precise attribution): the whole self growth of the functions it is in is the line's,
    // when larger than what landed on the instruction itself.
    let functions: &[String] = match &finding.details {
        scalprof_model::FindingDetails::Sharing(d) => &d.functions,
        _ => &[],
    };
    let at = |i: usize| -> Option<f64> {
        functions
            .iter()
            .map(|f| self_ns(profiles, work, &scale, i, f, false))
            .sum()
    };
    // The functions' growth since the first point, at point `i`.
    let function_growth = |i: usize| -> Option<f64> {
        if functions.is_empty() {
            return None;
        }
        at(i).zip(at(0)).map(|(b, a)| (b - a).max(0.0))
    };
    let mut per_op = vec![None; points.len()];
    per_op[0] = Some(0.0);
    // Between the first and the last point the line's transfers cost what the functions
    // that write it grew by there: the line is shared at 4 and 8 threads as at 16, and
    // its cost is a cause at each point, not only where the finding was measured.
    for (i, slot) in per_op.iter_mut().enumerate().take(last).skip(1) {
        *slot = function_growth(i);
    }
    per_op[last] = Some(sampled_growth.max(function_growth(last).unwrap_or(0.0)));
    Some(Series {
        run_queue: None,
        kind: finding.kind,
        scope: finding.scope,
        subject: finding.subject.clone(),
        detail: "locked writes to one cache line".into(),
        per_op,
        shares: None,
        late: None,
    })
}
