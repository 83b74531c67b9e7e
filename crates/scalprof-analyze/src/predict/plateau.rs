//! A resource that saturated within the measured points: its throughput held, less the
//! decline measured on the 16-CPU recordings, instead of the USL read from one point.

use scalprof_model::prediction::{Bound, Limiting};
use scalprof_model::{FindingKind, Point};

use super::{grows, machine_s};

/// A saturated resource's throughput falls by this much per doubling of the threads
/// past the point it saturated at, up to 4 threads: with one waiter at a time (2
/// threads) no queue forms, and from 3 or 4 on the waiters queue and the hand-offs
/// lengthen. The median over the 15 saturated programs of the 16-CPU recordings that
/// have a 2-thread point (`second16.db`, `heldout16.db`): 4 threads ran at 0.87 of 2.
const PLATEAU_DECLINE_TO_FOUR: f64 = 0.13;
/// And past 4 threads (more cores, longer transfers): the median of the 23 saturated
/// programs of the three recordings from 4 to 16 threads is 0.93, 3.5% a doubling.
const PLATEAU_DECLINE_PER_DOUBLING: f64 = 0.035;
/// The curve has stopped rising at the last point when its throughput is within this
/// factor of the previous point's (the repeats' spread is a few percent).
const PLATEAU_RISE: f64 = 1.1;
/// A lock whose holds fill this share of the wall time at the last point is saturated.
const SATURATED_UTILIZATION: f64 = 0.8;

/// A curve that has stopped rising: the resource that saturated, the thread count it
/// saturated at and the throughput it passes there.
#[derive(Debug)]
pub(super) struct Plateau {
    /// The cause that saturated, where the budget names one.
    cause: Option<(FindingKind, String)>,
    from: u64,
    throughput: f64,
    /// A lock's hold bound, where it was the saturated resource.
    by_holds: bool,
}

impl Plateau {
    pub(super) fn at(&self, n: u64) -> f64 {
        let (from, n) = (self.from as f64, n as f64);
        let to_four = (n.min(4.0) / from).log2().max(0.0);
        let past_four = (n / from.max(4.0)).log2().max(0.0);
        self.throughput
            * (1.0 - PLATEAU_DECLINE_TO_FOUR).powf(to_four)
            * (1.0 - PLATEAU_DECLINE_PER_DOUBLING).powf(past_four)
    }

    pub(super) fn limiting(&self) -> Option<Limiting> {
        let (kind, subject) = self.cause.clone()?;
        Some(Limiting {
            kind,
            subject,
            from_threads: self.from,
        })
    }

    pub(super) fn method(&self, at: u64) -> String {
        let how = if self.by_holds {
            "its holds fill the wall time"
        } else {
            "the throughput stopped rising"
        };
        let to_four = if at < 4 {
            format!(
                "{:.0}% per doubling to 4 threads, then ",
                PLATEAU_DECLINE_TO_FOUR * 100.0
            )
        } else {
            String::new()
        };
        let what = self
            .cause
            .as_ref()
            .map_or("an unexplained cost", |(_, subject)| subject.as_str());
        format!(
            "saturated: {what} passes no more at {at} threads ({how}); held there, less \
             {to_four}{:.1}% per doubling",
            PLATEAU_DECLINE_PER_DOUBLING * 100.0
        )
    }
}

/// Whether the last point's curve has stopped rising at a cause that costs at least the
/// work itself (throughput within [`PLATEAU_RISE`] of the previous point's), or at a
/// lock whose holds fill [`SATURATED_UTILIZATION`] of the wall time. The plateau's
/// throughput is the last point's, without the waits for this machine's CPUs where it
/// had none to spare, and no higher than the hold bound.
pub(super) fn plateau(
    first: &Point,
    used: &[&Point],
    crowded: bool,
    bound: Option<&Bound>,
) -> Option<Plateau> {
    let last = *used.last()?;
    let previous = if used.len() >= 2 {
        used[used.len() - 2]
    } else {
        first
    };
    let (x, before) = (last.throughput?, previous.throughput?);
    let b = last.budget.as_ref()?;
    let clean = if crowded {
        x / (1.0 - left_out(last).unwrap_or(0.0)).max(0.5)
    } else {
        x
    };
    let held = bound.filter(|h| h.serial_ns_per_op * x / 1e9 >= SATURATED_UTILIZATION);
    if let Some(h) = held {
        return Some(Plateau {
            cause: Some((FindingKind::LockContention, h.subject.clone())),
            from: last.value,
            throughput: clean.min(h.throughput),
            by_holds: true,
        });
    }
    // What the added threads cost: the growing causes and what the budget could not
    // explain (a saturated resource no tracer names).
    let growing = || b.causes.iter().filter(|c| grows(c));
    let top = growing().max_by(|a, b| a.share.total_cmp(&b.share));
    let cost: f64 = growing().map(|c| c.share).sum::<f64>() + b.unexplained;
    // The largest named cost, unless the unexplained is larger.
    let cause = top
        .filter(|c| c.share >= b.unexplained)
        .map(|c| (c.kind, c.subject.clone()));
    (x <= before * PLATEAU_RISE && cost >= 0.5 * b.useful).then(|| Plateau {
        cause,
        from: last.value,
        throughput: bound.map_or(clean, |h| clean.min(h.throughput)),
        by_holds: false,
    })
}

/// The share of the last point's thread-time spent waiting for a CPU or taken by other
/// processes.
pub(super) fn left_out(last: &Point) -> Option<f64> {
    let b = last.budget.as_ref()?;
    Some(
        b.causes
            .iter()
            .filter(|c| machine_s(c))
            .map(|c| c.share)
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plateau_declines_faster_until_its_waiters_queue_then_slowly() {
        let p = |from| Plateau {
            cause: None,
            from,
            throughput: 100.0,
            by_holds: false,
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // From 2: 13% to 4 threads, then 3.5% a doubling.
        assert!(close(p(2).at(2), 100.0));
        assert!(close(p(2).at(4), 87.0));
        assert!(close(p(2).at(16), 87.0 * 0.965 * 0.965));
        // From 4 (or more), only the slow part.
        assert!(close(p(4).at(16), 100.0 * 0.965 * 0.965));
        assert!(close(p(8).at(16), 96.5));
        assert!(p(2).limiting().is_none());
        assert!(
            p(2).method(2).contains("an unexplained cost"),
            "{}",
            p(2).method(2)
        );
    }
}
