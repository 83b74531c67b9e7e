//! Lock findings: the locks whose waits and on-CPU time grew over the sweep, with their
//! evidence, callers and a suggestion that fits the lock.

use scalprof_model::locks::{LockKind, LockRow, RunQueueBehind, Scope};
use scalprof_model::{Finding, FindingDetails, FindingKind, LockDetails, Point};

mod advice;
mod evidence;

use super::merge::combine_sides;
use super::{LockPoint, LOCK_MIN_SCORE, LOCK_MIN_WAITS};
pub(crate) use evidence::budget_detail;

/// `lock_contention` findings. `points`: each point with a lock table, in sweep order.
///
/// A lock's score is the share of the lost thread-time per operation that the growth of
/// its wait per operation explains: with N threads, each operation costs N·wall/ops of
/// thread time; ideal scaling keeps that at the first point's value, and waiting is
/// thread time.
pub fn lock_findings(points: &[LockPoint<'_>]) -> Vec<Finding> {
    let Some(lost) = lost_thread_time(points) else {
        return Vec::new();
    };
    let last_rows = &points[points.len() - 1].locks.rows;
    let mut out = Vec::new();
    for lock in first_rows(points) {
        let rows = growth_rows(points, lock);
        let (Some(first), Some(last)) = (
            rows.iter().flatten().next(),
            rows.iter().rev().flatten().next(),
        ) else {
            continue;
        };
        let timer = first.is_timer_sleep_in_sweep(rows[0].as_ref(), points.len() == 1);
        if timer || !is_programs_cause(first) {
            continue;
        }
        let Some(score) = score(points, &rows, lost) else {
            continue;
        };
        let series = LockSeries::new(points, lock.scope, lock.name.clone(), &rows, last);
        out.push(series.finding(score, last_rows));
    }
    out
}

/// The thread time per operation lost between the first and the last point (for a single
/// point, all of it: its waits are compared with the whole thread time), when some was.
fn lost_thread_time(points: &[LockPoint<'_>]) -> Option<f64> {
    let last = points.last()?;
    let first = &points[0];
    // From the clean throughput (work units per second): N threads' time per unit.
    let thread_time_per_op =
        |p: &Point, work: f64| -> Option<f64> { p.thread_ns_per_op().filter(|_| work > 0.0) };
    let t_last = thread_time_per_op(last.point, last.work)?;
    let t_first = thread_time_per_op(first.point, first.work)?;
    let lost = if points.len() == 1 {
        t_last
    } else {
        t_last - t_first
    };
    (lost > 0.0).then_some(lost)
}

/// Every lock of the sweep once (its first row), in the order first seen: a reader-writer
/// lock's read and write sides are one lock.
fn first_rows<'a>(points: &[LockPoint<'a>]) -> Vec<&'a LockRow> {
    let mut firsts: Vec<&LockRow> = Vec::new();
    for at in points {
        for r in &at.locks.rows {
            if !firsts.iter().any(|f| f.id() == r.id()) {
                firsts.push(r);
            }
        }
    }
    firsts
}

/// One lock's row at each point, its sides combined (`None` where it was not waited for).
fn growth_rows(points: &[LockPoint<'_>], lock: &LockRow) -> Vec<Option<LockRow>> {
    points
        .iter()
        .map(|at| combine_sides(at.locks.rows.iter().filter(|r| r.id() == lock.id())))
        .collect()
}

/// Whether a lock's waits can be the program's own cause. Condition variables and
/// semaphores are handoffs (an interpreter lock, a queue) and count; joins and barriers
/// are the harness's structure and do not.
fn is_programs_cause(row: &LockRow) -> bool {
    !(matches!(
        row.lock_type,
        LockKind::Join | LockKind::Barrier | LockKind::Idle | LockKind::GoWaitGroup
    )
        // A wait for an attached server's answer is the server's time, which its own
        // rows break down.
        || row.attributed_to.is_some()
        || row.peer_attached
        // Time behind other processes is interference, never the program's cause.
        || row.run_queue() == Some(RunQueueBehind::Other))
}

/// Each point's cost of one lock per work unit: `cost` of its row over the work.
fn per_op(
    rows: &[Option<LockRow>],
    points: &[LockPoint<'_>],
    cost: impl Fn(&LockRow) -> u64,
) -> Vec<f64> {
    rows.iter()
        .zip(points)
        .map(|(r, at)| {
            r.as_ref()
                .map_or(0.0, |r| cost(r) as f64 / at.work.max(1e-300))
        })
        .collect()
}

/// The share of the `lost` thread time that the growth of a lock's cost per operation
/// (its waits and its on-CPU time) explains, when it makes a finding.
fn score(points: &[LockPoint<'_>], rows: &[Option<LockRow>], lost: f64) -> Option<f64> {
    let single = points.len() == 1;
    let per_op = per_op(rows, points, |r| r.total_wait_ns + r.spin_ns.unwrap_or(0));
    let growth = if single {
        per_op[0]
    } else {
        per_op[per_op.len() - 1] - per_op[0]
    };
    let score = (growth / lost).clamp(0.0, 1.0);
    let last_count = rows.last().and_then(Option::as_ref).map_or(0, |r| r.count);
    // Over a sweep the budget scores and keeps the findings (`causes::score_findings`);
    // a single point has no budget, so its own share decides.
    let dropped = (single && score < LOCK_MIN_SCORE) || score <= 0.0 || last_count < LOCK_MIN_WAITS;
    (!dropped).then_some(score)
}

/// One lock across the sweep, as its finding tells it.
struct LockSeries<'a> {
    scope: Scope,
    name: String,
    /// The lock's row at the last point that has one.
    last: &'a LockRow,
    single: bool,
    /// The sweep's points (thread counts).
    values: Vec<u64>,
    /// Waits at each point.
    counts: Vec<u64>,
    /// One meaning of "wait per op" everywhere (the evidence, the finding's details, the
    /// lock rows' wait_ns_per_op): the blocked wait. The on-CPU time spent in the lock
    /// (spinning, lock code, the futex path) is said beside it; the score counts both.
    wait_per_op: Vec<f64>,
    cpu_per_op: Vec<f64>,
}

impl<'a> LockSeries<'a> {
    /// The series of the lock `scope`/`name`, whose rows at each point are `rows`.
    fn new(
        points: &[LockPoint<'_>],
        scope: Scope,
        name: String,
        rows: &[Option<LockRow>],
        last: &'a LockRow,
    ) -> Self {
        LockSeries {
            scope,
            name,
            last,
            single: points.len() == 1,
            values: points.iter().map(|at| at.point.value).collect(),
            counts: rows
                .iter()
                .map(|r| r.as_ref().map_or(0, |r| r.count))
                .collect(),
            wait_per_op: per_op(rows, points, |r| r.total_wait_ns),
            cpu_per_op: per_op(rows, points, |r| r.spin_ns.unwrap_or(0)),
        }
    }

    /// The finding, scored `score`; `rows` are the last point's lock rows, where the
    /// holders' own waits are.
    fn finding(self, score: f64, rows: &[LockRow]) -> Finding {
        let last = self.last;
        Finding {
            score_interval: None,
            kind: if last.lock_type.is_blocked_wait() {
                FindingKind::BlockedWait
            } else {
                FindingKind::LockContention
            },
            scope: Some(self.scope),
            subject: self.name.clone(),
            score,
            evidence: self.evidence(rows),
            suggestion: self.advice(rows),
            details: FindingDetails::Lock(LockDetails {
                lock_type: last.lock_type.clone(),
                address: last.address.clone(),
                callers: last.callers.clone(),
                points: self.values,
                wait_ns_per_op: self.wait_per_op,
                on_cpu_ns_per_op: self.cpu_per_op,
                holders: last.holders.clone(),
                holder_running: last.holder_running,
                holder_waits: last.holder_waits.clone(),
                count: self.counts,
                max_wait_ns: last.max_wait_ns,
                hold: last.hold.clone(),
            }),
            what_if: None,
            experiment: None,
        }
    }
}
