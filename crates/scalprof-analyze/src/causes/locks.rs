//! Locks and waits: each lock table row's wait (and spin) per unit of work; a user lock's
//! critical section, when its own function grew, folds into the lock.

use scalprof_model::{Finding, FindingKind, Point};

use super::{Cause, Run};
use crate::budget::series::{fold_critical_sections, lock_series, Series};

pub(crate) struct Locks;

impl Cause for Locks {
    fn kinds(&self) -> &'static [FindingKind] {
        &[FindingKind::LockContention, FindingKind::BlockedWait]
    }

    fn series(&self, run: &Run<'_>, _findings: &mut Vec<Finding>) -> Vec<Series> {
        lock_series(run.points, run.profiles, run.work)
    }

    fn fold(&self, series: &mut Vec<Series>, points: &[Point]) {
        fold_critical_sections(series, points);
    }
}
