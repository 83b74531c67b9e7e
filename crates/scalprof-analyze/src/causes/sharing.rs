//! Cache lines written by every thread: each sharing finding's instructions, costed per
//! unit of work at every point.

use scalprof_model::{Finding, FindingKind};

use super::{Cause, Run};
use crate::budget::series::{sharing_series, Series};

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
