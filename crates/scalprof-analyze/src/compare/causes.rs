//! Which causes explain a difference between two runs at one point: each wait's and each
//! grown function's time per operation in A and B, weighed against the change in
//! thread-time per operation.

use scalprof_model::compare::CauseChange;
use scalprof_model::locks::{LockKind, RunQueueBehind};
use scalprof_model::profile::ScalingDiff;
use scalprof_model::vocabulary;
use scalprof_model::{Point, RunDocument};

/// Causes whose time per operation changed by at least this share of the change in
/// thread-time per operation are listed.
const CAUSE_MIN_SHARE: f64 = 0.03;

/// Which causes changed between A and B at one point, by time per operation: every wait
/// of the lock tables (a lock, the disk, a sleep, a wait for a CPU; not idle waits), and
/// the functions both profiles' "what grew" lists carry (on-CPU, ns per op). Each is
/// weighed against the change in thread-time per operation (threads ÷ throughput), so
/// "explains 78%" reads as the part of B's speedup (or slowdown) that cause accounts for.
pub(super) fn cause_changes(
    a: &RunDocument,
    pa: &Point,
    b: &RunDocument,
    pb: &Point,
) -> Vec<CauseChange> {
    if !a.sweep.parameter.scales() || !b.sweep.parameter.scales() {
        return Vec::new();
    }
    let per_op = |p: &Point| {
        p.throughput
            .filter(|&t| t > 0.0)
            .map(|t| p.value as f64 / t * 1e9)
    };
    let (Some(ta), Some(tb)) = (per_op(pa), per_op(pb)) else {
        return Vec::new();
    };
    let change = tb - ta;
    if change.abs() < f64::EPSILON {
        return Vec::new();
    }
    let mut causes = Causes::default();
    if pa.locks.is_some() && pb.locks.is_some() {
        for (name, w) in lock_waits(pa) {
            causes.add(name, w, 0.0);
        }
        for (name, w) in lock_waits(pb) {
            causes.add(name, 0.0, w);
        }
    }
    add_on_cpu(&mut causes, (a, pa), (b, pb));
    causes.explaining(change, ta.max(tb))
}

/// Causes by name, each with its time per operation in A and in B, in the order first
/// seen.
#[derive(Default)]
struct Causes(Vec<(String, f64, f64)>);

impl Causes {
    /// Adds `x` ns/op in A and `y` in B to the cause `name`.
    fn add(&mut self, name: String, x: f64, y: f64) {
        match self.0.iter_mut().find(|i| i.0 == name) {
            Some(i) => {
                i.1 += x;
                i.2 += y;
            }
            None => self.0.push((name, x, y)),
        }
    }

    /// The five causes that explain most of the `change` in thread-time per operation,
    /// each a share of it and a change worth a mention against `largest` (the larger
    /// thread-time per operation).
    fn explaining(self, change: f64, largest: f64) -> Vec<CauseChange> {
        let mut out: Vec<CauseChange> = self
            .0
            .into_iter()
            .map(|(cause, x, y)| CauseChange {
                cause,
                a_ns_per_op: x,
                b_ns_per_op: y,
                explains: (y - x) / change,
            })
            // A share of the change, and a change worth a mention (not 0 ns → 0 ns).
            .filter(|c| {
                c.explains >= CAUSE_MIN_SHARE
                    && (c.b_ns_per_op - c.a_ns_per_op).abs() >= 0.01 * largest
            })
            .collect();
        out.sort_by(|x, y| {
            y.explains
                .total_cmp(&x.explains)
                .then_with(|| x.cause.cmp(&y.cause))
        });
        out.truncate(5);
        out
    }
}

/// Waits, by row: a lock's traced wait and its sampled on-CPU cost (spinning, the lock
/// code), per operation.
fn lock_waits(p: &Point) -> Vec<(String, f64)> {
    p.locks
        .iter()
        .flat_map(|l| &l.rows)
        // Waking an idle CPU is part of the waits it ended, never a cause in a run's
        // budget; between two runs it is a difference of its own (a latency-bound
        // baseline, CPUs left idle by a flush).
        .filter(|r| {
            (r.attributed_to.is_none() || r.run_queue() == Some(RunQueueBehind::IdleWakeup))
                && r.lock_type != LockKind::Idle
        })
        .filter(|r| r.is_lock() || r.lock_type.is_blocked_wait())
        .filter_map(|r| Some((format!("{} {}", r.scope, r.name), r.cost_per_op()?)))
        .collect()
}

/// The lock code and the system-call path: the locks' cost, counted with their waits.
fn is_lock_machinery(f: &str) -> bool {
    vocabulary::is_user_lock_code(f)
        || vocabulary::is_futex_path(f)
        || vocabulary::is_spin_path(f)
        || vocabulary::is_lock_internal(f)
        || f.starts_with("do_syscall")
        || f.starts_with("entry_SYSCALL")
}

/// Adds the on-CPU functions both runs' "what grew" knows at this point (in ns/op), named
/// by the cache line a sharing finding gave them to, if any.
fn add_on_cpu(
    causes: &mut Causes,
    (a, pa): (&RunDocument, &Point),
    (b, pb): (&RunDocument, &Point),
) {
    let (Some(da), Some(db)) = (&a.scaling_diff, &b.scaling_diff) else {
        return;
    };
    if da.unit != "ns/op" || db.unit != "ns/op" {
        return;
    }
    let at = |d: &ScalingDiff, v: u64| d.points.iter().position(|&x| x == v);
    let (Some(ia), Some(ib)) = (at(da, pa.value), at(db, pb.value)) else {
        return;
    };
    for fa in da
        .user
        .iter()
        .chain(&da.kernel)
        .filter(|f| !is_lock_machinery(&f.function))
    {
        let Some(fb) = db
            .user
            .iter()
            .chain(&db.kernel)
            .find(|f| f.function == fa.function)
        else {
            continue;
        };
        if let (Some(&x), Some(&y)) = (fa.self_per_op.get(ia), fb.self_per_op.get(ib)) {
            let name =
                match shared_line_of(a, &fa.function).or_else(|| shared_line_of(b, &fa.function)) {
                    Some(line) => format!("{line} (on CPU in {})", fa.function),
                    None => format!("on CPU in {}", fa.function),
                };
            causes.add(name, x, y);
        }
    }
}

/// The cache line a function's on-CPU growth was given to by a sharing finding
/// (`false_sharing vm_cnt`), if any.
fn shared_line_of(d: &RunDocument, function: &str) -> Option<String> {
    d.findings.iter().find_map(|f| match &f.details {
        scalprof_model::FindingDetails::Sharing(s) if s.functions.iter().any(|x| x == function) => {
            Some(format!("{} {}", f.kind, f.subject))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::locks::Scope;
    use scalprof_model::locks::{LockProfile, LockRow};

    /// A thread-sweep document with one point at 2 threads: its throughput and the
    /// waits per operation of its lock table.
    fn doc(throughput: f64, rows: Vec<(&str, LockKind, f64)>) -> RunDocument {
        use scalprof_model::{PointRepeat, Repeat, RunInputs};
        let header = crate::summary::tests::header(vec![2]);
        let repeats = vec![PointRepeat {
            value: 2,
            repeat: Repeat {
                ops: Some(1000),
                ..Repeat::ok(0, 0.1)
            },
        }];
        let mut d = crate::assemble(&RunInputs::timing(header, repeats));
        let p = &mut d.points[0];
        p.throughput = Some(throughput);
        p.locks = Some(LockProfile {
            rows: rows
                .into_iter()
                .map(|(name, kind, per_op)| LockRow {
                    count: 10,
                    total_wait_ns: 1000,
                    wait_ns_per_op: Some(per_op),
                    ..LockRow::new(Scope::User, name, kind)
                })
                .collect(),
            ..Default::default()
        });
        d
    }

    #[test]
    fn a_change_is_explained_by_the_causes_whose_time_per_op_moved() {
        // A: 2 threads at 5k ops/s = 400 µs of thread-time per op, 300 µs of it in the
        // WAL flush; B: 20k ops/s = 100 µs, no flush. ΔT = −300 µs, all the flush's.
        let a = doc(
            5_000.0,
            vec![
                (
                    "disk I/O (fdatasync pg_wal/*) in XLogFlush",
                    LockKind::DiskIo,
                    300_000.0,
                ),
                ("idle wait", LockKind::Idle, 50_000.0),
                ("table_lock", LockKind::Mutex, 10_000.0),
            ],
        );
        let b = doc(20_000.0, vec![("table_lock", LockKind::Mutex, 10_000.0)]);
        let c = cause_changes(&a, &a.points[0], &b, &b.points[0]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            c[0].cause,
            "user disk I/O (fdatasync pg_wal/*) in XLogFlush"
        );
        assert!((c[0].explains - 1.0).abs() < 1e-9, "{c:?}");
        // Idle waits and unchanged locks explain nothing; the reverse comparison is a
        // slowdown the flush explains just as well.
        let back = cause_changes(&b, &b.points[0], &a, &a.points[0]);
        assert!((back[0].explains - 1.0).abs() < 1e-9, "{back:?}");
    }
}
