//! Serial phases: the share of each point's time in which one thread ran alone.

use scalprof_model::locks::Scope;
use scalprof_model::{Finding, FindingKind, Point, PointProfile};

use super::{Cause, Run};
use crate::budget::series::Series;

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

/// Serial phases: one thread on a CPU for a share s of the time costs the other N − 1
/// threads s·(N − 1)/N of the thread-time.
fn serial_series(points: &[Point], profiles: &[Option<&PointProfile>]) -> Option<Series> {
    let share_of = |f: fn(&scalprof_model::SerialStats) -> f64| -> Vec<Option<f64>> {
        points
            .iter()
            .zip(profiles)
            .map(|(p, prof)| {
                let prof = (*prof)?;
                let n = p.value as f64;
                (p.value >= 2 && prof.serial.bins >= 20).then(|| f(&prof.serial) * (n - 1.0) / n)
            })
            .collect()
    };
    let shares = share_of(scalprof_model::SerialStats::single_share);
    let late = share_of(scalprof_model::SerialStats::late_share);
    let last = profiles.iter().rev().flatten().next()?;
    shares.iter().any(Option::is_some).then(|| Series {
        run_queue: None,
        kind: FindingKind::SerialFraction,
        scope: Some(Scope::User),
        subject: last
            .serial
            .top_function
            .clone()
            .unwrap_or_else(|| "[serial phase]".into()),
        detail: "one thread on a CPU".into(),
        per_op: vec![None; points.len()],
        shares: Some(shares),
        late: Some(late),
    })
}
