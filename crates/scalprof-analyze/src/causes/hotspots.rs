//! Kernel and user functions whose own cost per unit of work grew ("what grew"), less
//! those another cause already names.

use scalprof_model::{Finding, FindingKind};

use super::{Cause, Run};
use crate::budget::series::{hotspot_series, Series};

pub(crate) struct Hotspots;

impl Cause for Hotspots {
    fn kinds(&self) -> &'static [FindingKind] {
        &[FindingKind::KernelHotspot, FindingKind::UserHotspot]
    }

    fn series(&self, run: &Run<'_>, _findings: &mut Vec<Finding>) -> Vec<Series> {
        run.scaling_diff.map_or_else(Vec::new, |diff| {
            hotspot_series(run.points, run.profiles, run.work, diff, run.claimed)
        })
    }
}
