//! Serial phases: the share of each point's time in which one thread ran alone.

use scalprof_model::{Finding, FindingKind};

use super::{Cause, Run};
use crate::budget::series::{serial_series, Series};

pub(crate) struct Serial;

impl Cause for Serial {
    fn kinds(&self) -> &'static [FindingKind] {
        &[FindingKind::SerialFraction]
    }

    fn series(&self, run: &Run<'_>, _findings: &mut Vec<Finding>) -> Vec<Series> {
        serial_series(run.points, run.profiles)
            .into_iter()
            .collect()
    }
}
