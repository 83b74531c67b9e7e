//! A single-threaded stage: one thread that serves every unit (a client's one thread for
//! all its connections, a server's event loop), in the command or an attached process.
//! Its finding is a serial fraction's; a thread-count sweep only.

use scalprof_model::{Finding, FindingKind};

use super::{Cause, Run};
use crate::budget::series::Series;

pub(crate) struct Stage;

impl Cause for Stage {
    fn kinds(&self) -> &'static [FindingKind] {
        &[]
    }

    fn series(&self, run: &Run<'_>, findings: &mut Vec<Finding>) -> Vec<Series> {
        if !run.header.sweep.parameter.scales() {
            return Vec::new();
        }
        let series = crate::stage::stage_series(run.points, run.profiles);
        let last = run
            .points
            .last()
            .zip(run.profiles.last().copied().flatten());
        let cpus = run.header.host.cpus as u64;
        findings.extend(last.and_then(|(p, prof)| crate::stage::stage_finding(p, prof, cpus)));
        series
    }
}
