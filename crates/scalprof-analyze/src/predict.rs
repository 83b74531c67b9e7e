//! The throughput expected at thread counts past the measured ones, from the measured
//! causes rather than from the curve's shape.
//!
//! The prediction is for a machine like the one that ran the sweep with a CPU for each
//! thread: the same speed per CPU and the same memory system, however few CPUs the sweep
//! had. The budget splits a point's thread-time per operation into the work itself (the
//! first point's cost) and the causes that added to it. Relative to the work, a cause's
//! cost at `n` threads is read as the USL's terms: `σ·(n−1)` for contention (a lock's
//! queue, a serial phase, a cache line that one core at a time may write) plus
//! `κ·n·(n−1)` for coherency, fitted per cause over the measured points within the CPUs
//! (σ alone from a single point past the first). What the budget could not explain, the
//! program's hot functions' added cost (the same work run slower: a shared cache, the
//! clock) and scalprof's own overhead are held at their cost per operation; waits for a
//! CPU and CPU
//! other processes took are left out where the sweep's last point had no spare CPU
//! (they are the small machine's, not the program's). Then
//!
//! ```text
//! X(n) = X(1) · n / (1 + fixed + Σ σ_c·(n−1) + κ_c·n·(n−1))
//! ```
//!
//! capped by the tightest lock's hold bound: a lock held `h` ns per operation passes at
//! most `1/h` operations per second, however many cores there are. Where the measured
//! curve has already stopped rising (a resource saturated: adding threads added only
//! queueing), the USL read from one point would keep falling; a saturated resource
//! passes its service rate, so the prediction stays at the last point's throughput,
//! less a small decline per doubling for the longer hand-offs of more cores
//! (asymptotic bounds, as in Lazowska et al.'s *Quantitative System Performance*).
//! No library does this; it is written here.

use scalprof_model::locks::{LockKind, LockRow};
use scalprof_model::prediction::{Bound, Limiting, PredictedPoint, Prediction};
use scalprof_model::{Cause, CauseId, FindingKind, Point, RunHeader};

mod plateau;
use plateau::{left_out, plateau};

/// The interval's width per doubling past the point the causes were read at, and per
/// thing the measured points could not show: the method's own error. Chosen by
/// `benches/predict.py` on the 16-CPU fixture as the width that holds every program's
/// measured 8 and 16 threads from its 1 and 4 (0.10 for counters_packed, the widest; 0.11
/// for the second recording from 1 and 2), rounded up; left one program out, that choice
/// holds 10 of the 11.
const ERROR_PER_DOUBLING: f64 = 0.12;
const ERROR_PER_UNSEEN: f64 = ERROR_PER_DOUBLING;
/// Unexplained thread-time above this share is said (it is held fixed per operation).
const UNEXPLAINED_SAID: f64 = 0.1;
/// Where a one-holder lock is contended at the last point, the interval's low end
/// reaches this share of the prediction: with more waiters than a small machine has,
/// each hand-off can go through the scheduler (a futex, a parked goroutine) or a
/// contended cache line (a spinlock), and a 2-thread point does not show it (a glibc
/// mutex held at 98% of the wall time on 2 CPUs ran at 26% of that throughput on 16;
/// Go's sync.Mutex at 16 threads at 29% of 2).
const CONVOY_LOW: f64 = 0.25;

/// One cause's growth, relative to the work's own cost per operation.
#[derive(Debug)]
struct Growth<'a> {
    id: CauseId<'a>,
    sigma: f64,
    kappa: f64,
}

impl Growth<'_> {
    fn at(&self, n: f64) -> f64 {
        self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0)
    }
}

/// The prediction up to `target` threads (default: the run's CPUs × 4), from the
/// measured points within the CPUs; `None` for a size sweep, without a point past the
/// first within the CPUs, or when the target is not past it.
pub fn predict(header: &RunHeader, points: &[Point], target: Option<u64>) -> Option<Prediction> {
    let cpus = u64::from(header.host.cpus.max(1));
    let target = target.unwrap_or(cpus * 4);
    let first = points.first()?;
    let x1 = first.throughput? / first.value.max(1) as f64;
    let room = within(header, cpus);
    let used: Vec<&Point> = points[1..]
        .iter()
        .filter(|p| p.value <= room && p.value > first.value)
        .filter(|p| p.throughput.is_some() && p.budget.as_ref().is_some_and(|b| b.useful > 0.0))
        .collect();
    let last = *used.last()?;
    if target <= last.value || x1 <= 0.0 {
        return None;
    }
    let scale = first.value.max(1) as f64;
    let growth = growths(&used, scale);
    // The last point had no spare CPU: its waits for one are this machine's.
    let crowded = last.value >= room;
    let fixed = fixed_cost(last, crowded);
    let bound = hold_bound(points, &used);
    let plateau = plateau(first, &used, crowded, bound.as_ref());
    let curve = |n: u64| {
        if let Some(p) = &plateau {
            return p.at(n);
        }
        let m = n as f64 / scale;
        let usl = x1 * n as f64 / (1.0 + fixed + growth.iter().map(|g| g.at(m)).sum::<f64>());
        bound.as_ref().map_or(usl, |b| usl.min(b.throughput))
    };
    let convoy = convoy(last, &growth);
    let mut unseen = unseen(header, &used, &growth, bound.as_ref(), target);
    if let Some(share) = left_out(last).filter(|s| crowded && *s >= 0.05) {
        unseen.push(format!(
            "{:.0}% of the thread-time at {} threads waited for this machine's CPUs (or \
             went to other processes): left out, as a machine with a CPU per thread \
             would not have it",
            share * 100.0,
            last.value
        ));
    }
    if let Some(name) = &convoy {
        unseen.push(format!(
            "{name} has one holder at a time: with more waiters than {} threads, each \
             hand-off may go through the scheduler or a contended cache line and pass far \
             fewer operations (the interval reaches {:.0}% of the prediction)",
            last.value,
            CONVOY_LOW * 100.0
        ));
    }
    let spread = last.throughput_spread.filter(|s| s.median > 0.0);
    let points = thread_counts(last.value, target)
        .map(|n| {
            let x = curve(n);
            let doublings = (n as f64 / last.value as f64).log2();
            let e = ERROR_PER_DOUBLING * doublings + ERROR_PER_UNSEEN * unseen.len() as f64;
            let (lo, hi) = spread.map_or((1.0, 1.0), |s| (s.min / s.median, s.max / s.median));
            let low = if convoy.is_some() {
                CONVOY_LOW.min((1.0 - e).max(0.1))
            } else {
                (1.0 - e).max(0.1)
            };
            PredictedPoint {
                threads: n,
                throughput: x,
                interval: [x * lo * low, x * hi * (1.0 + e)],
            }
        })
        .collect();
    let limiting = match &plateau {
        Some(p) => p.limiting(),
        None => limiting(&growth, bound.as_ref(), &curve, scale, target),
    };
    let method = match &plateau {
        Some(p) => p.method(last.value),
        None => method(&growth, bound.as_ref(), last.value),
    };
    Some(Prediction {
        points,
        limiting,
        method,
        from_point: last.value,
        // + 0.0: an empty sum is −0.0.
        sigma: growth.iter().map(|g| g.sigma).sum::<f64>() + 0.0,
        kappa: growth.iter().map(|g| g.kappa).sum::<f64>() + 0.0,
        bound,
        unseen,
    })
}

/// The contended one-holder lock among the growing causes at the last point, where one
/// costs at least a fifth of the work: its name.
fn convoy(last: &Point, growth: &[Growth<'_>]) -> Option<String> {
    let b = last.budget.as_ref()?;
    let rows = &last.locks.as_ref()?.rows;
    b.causes
        .iter()
        .filter(|c| c.kind == FindingKind::LockContention && c.share >= 0.2 * b.useful)
        .filter(|c| growth.iter().any(|g| g.id == c.id()))
        .find_map(|c| {
            let r = rows.iter().find(|r| r.id() == c.id())?;
            hands_off(&r.lock_type).then(|| r.name.clone())
        })
}

/// A lock with one holder at a time: its hand-offs lengthen with the waiters, whether
/// they sleep (a futex, a parked goroutine) or spin (a kernel spinlock's cache line).
fn hands_off(kind: &LockKind) -> bool {
    kind.one_holder() == Some(true)
}

/// The largest thread count the run could give a CPU each: the online CPUs, less a CPU
/// set or quota that holds fewer.
fn within(header: &RunHeader, cpus: u64) -> u64 {
    let Some(l) = &header.host.limits else {
        return cpus;
    };
    let quota = l.cpu_quota.map_or(cpus, |q| q.ceil().max(1.0) as u64);
    let set = l.cpuset_cpus.map_or(cpus, u64::from);
    cpus.min(quota).min(set)
}

/// Every power of two past `from` and below `target`, then `target`.
fn thread_counts(from: u64, target: u64) -> impl Iterator<Item = u64> {
    (0..63)
        .map(|k| 1u64 << k)
        .filter(move |&n| n > from && n < target)
        .chain(std::iter::once(target))
}

/// Whether a cause's cost per operation grows with the threads. CPU taken by other
/// processes and waits for a CPU are this machine's, not the program's. A hot function
/// of the program's own that costs more per operation (a shared cache, the clock) is
/// the work run slower: held at its cost, not grown as a queue.
fn grows(c: &Cause) -> bool {
    !c.foreign && c.run_queue().is_none() && c.kind != FindingKind::UserHotspot
}

/// A cause held at its cost per operation that is this machine's rather than the
/// program's: left out where the sweep's last point had no CPU to spare.
fn machine_s(c: &Cause) -> bool {
    c.foreign || c.run_queue().is_some()
}

/// Each growing cause's σ and κ, fitted over the points (relative to the work).
fn growths<'a>(used: &[&'a Point], scale: f64) -> Vec<Growth<'a>> {
    let mut out: Vec<Growth<'a>> = Vec::new();
    for p in used {
        let Some(b) = &p.budget else { continue };
        for c in b.causes.iter().filter(|c| grows(c)) {
            if !out.iter().any(|g| g.id == c.id()) {
                out.push(Growth {
                    id: c.id(),
                    sigma: 0.0,
                    kappa: 0.0,
                });
            }
        }
    }
    for g in &mut out {
        // (n−1, n(n−1), relative cost) at each point; a point without the cause: 0.
        let obs: Vec<(f64, f64, f64)> = used
            .iter()
            .filter_map(|p| {
                let b = p.budget.as_ref()?;
                let share = b
                    .causes
                    .iter()
                    .find(|c| c.id() == g.id)
                    .map_or(0.0, |c| c.share);
                let n = p.value as f64 / scale;
                Some((n - 1.0, n * (n - 1.0), share / b.useful))
            })
            .collect();
        (g.sigma, g.kappa) = fit(&obs);
    }
    out
}

/// Least squares of `r = σ·a + κ·b` with σ, κ ≥ 0; σ alone from one observation.
fn fit(obs: &[(f64, f64, f64)]) -> (f64, f64) {
    let sum = |f: &dyn Fn(&(f64, f64, f64)) -> f64| obs.iter().map(f).sum::<f64>();
    let (aa, bb, ab) = (
        sum(&|o| o.0 * o.0),
        sum(&|o| o.1 * o.1),
        sum(&|o| o.0 * o.1),
    );
    let (ar, br) = (sum(&|o| o.0 * o.2), sum(&|o| o.1 * o.2));
    let sigma_only = if aa > 0.0 { (ar / aa).max(0.0) } else { 0.0 };
    if obs.len() < 2 {
        return (sigma_only, 0.0);
    }
    let det = aa * bb - ab * ab;
    if det.abs() > f64::EPSILON * aa * bb {
        let sigma = (ar * bb - br * ab) / det;
        let kappa = (aa * br - ab * ar) / det;
        if sigma >= 0.0 && kappa >= 0.0 {
            return (sigma, kappa);
        }
    }
    let kappa_only = if bb > 0.0 { (br / bb).max(0.0) } else { 0.0 };
    let sse = |s: f64, k: f64| sum(&|o| (o.2 - s * o.0 - k * o.1).powi(2));
    if sse(0.0, kappa_only) < sse(sigma_only, 0.0) {
        (0.0, kappa_only)
    } else {
        (sigma_only, 0.0)
    }
}

/// What is held at its cost per operation at the last point used, relative to the work:
/// the unexplained, scalprof's overhead, the program's hot functions' added cost and,
/// unless the point had no spare CPU (`crowded`), the waits for a CPU and the CPU
/// other processes took.
fn fixed_cost(last: &Point, crowded: bool) -> f64 {
    let Some(b) = &last.budget else { return 0.0 };
    let held: f64 = b
        .causes
        .iter()
        .filter(|c| !(grows(c) || crowded && machine_s(c)))
        .map(|c| c.share)
        .sum();
    (held + b.unexplained + b.overhead) / b.useful
}

/// The tightest hold bound over the points: of each lock, its smallest serial time per
/// operation (holds lengthen under contention, so the least contended point's is the
/// truest); of the locks, the largest (the one that passes the fewest operations).
/// A lock is left out where its holds do not read as a cost per operation: taken a
/// number of times per run rather than per operation (a housekeeping thread's), or held
/// longer than the wall time at a measured point (sampled holds that missed the short
/// ones).
fn hold_bound(all: &[Point], used: &[&Point]) -> Option<Bound> {
    let mut least: Vec<(&LockRow, f64)> = Vec::new();
    let rows = used
        .iter()
        .filter_map(|p| p.locks.as_ref())
        .flat_map(|l| &l.rows)
        .filter(|r| bounds(all, r));
    for r in rows {
        let Some(serial) = serial_ns_per_op(r) else {
            continue;
        };
        match least.iter_mut().find(|(l, _)| l.id() == r.id()) {
            Some(seen) if serial < seen.1 => *seen = (r, serial),
            Some(_) => {}
            None => least.push((r, serial)),
        }
    }
    least
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(r, serial)| Bound {
            scope: Some(r.scope),
            subject: r.name.clone(),
            serial_ns_per_op: serial,
            throughput: 1e9 / serial,
        })
}

/// Holds a mean must come from before it bounds the throughput. A lock taken a few dozen
/// times a run (a housekeeper's, 33 times with 1 hold timed in `second16.db`'s side_lock)
/// gives no mean of a cost per operation.
const MIN_TIMED_HOLDS: u64 = 16;

/// Whether a lock row's holds give a bound: one holder at a time, enough timed holds
/// taken per operation ([`per_operation`]).
fn bounds(all: &[Point], r: &LockRow) -> bool {
    r.lock_type.one_holder() == Some(true)
        && r.hold
            .as_ref()
            .is_some_and(|h| h.sampled >= MIN_TIMED_HOLDS)
        && serial_ns_per_op(r).is_some()
        && per_operation(all, r)
}

/// A lock row's mean hold × acquisitions per operation.
fn serial_ns_per_op(r: &LockRow) -> Option<f64> {
    let h = r.hold.as_ref()?;
    let serial = h.mean_ns * h.acquisitions_per_op.filter(|a| *a > 0.0)?;
    (serial > 0.0).then_some(serial)
}

/// Whether the lock `name`'s holds are a cost per operation at every point that timed
/// them: taken about as often per operation at each (within 25%: a lock taken so many
/// times a second, as a housekeeping thread takes one, is taken half as often per
/// operation where twice the operations run), and held no longer than the wall time
/// (20% slack: the holds come from the traced repeats, the throughput from the clean
/// ones, and a saturated lock is held all the time).
fn per_operation(all: &[Point], row: &LockRow) -> bool {
    let mut per_op: Vec<f64> = Vec::new();
    for p in all {
        let Some(r) = p
            .locks
            .as_ref()
            .and_then(|l| l.rows.iter().find(|r| r.id() == row.id()))
        else {
            continue;
        };
        let (Some(serial), Some(x)) = (serial_ns_per_op(r), p.throughput) else {
            continue;
        };
        if serial * x / 1e9 > 1.2 {
            return false;
        }
        per_op.extend(r.hold.as_ref().and_then(|h| h.acquisitions_per_op));
    }
    let lo = per_op.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per_op.iter().copied().fold(0.0, f64::max);
    hi <= 1.25 * lo
}

/// The growing cause that costs the most at the target, from the thread count where it
/// costs as much as the work itself; else the hold bound's lock, from where it binds.
fn limiting(
    growth: &[Growth<'_>],
    bound: Option<&Bound>,
    curve: &dyn Fn(u64) -> f64,
    scale: f64,
    target: u64,
) -> Option<Limiting> {
    let at_target = target as f64 / scale;
    let top = growth
        .iter()
        .max_by(|a, b| a.at(at_target).total_cmp(&b.at(at_target)));
    let from = |g: &Growth<'_>| (2..=target).find(|&n| g.at(n as f64 / scale) >= 1.0);
    if let Some((g, n)) = top.and_then(|g| Some((g, from(g)?))) {
        return Some(Limiting {
            kind: g.id.kind,
            subject: g.id.subject.to_string(),
            from_threads: n,
        });
    }
    let b = bound?;
    let n = (2..=target).find(|&n| curve(n) >= b.throughput * (1.0 - 1e-9))?;
    Some(Limiting {
        kind: FindingKind::LockContention,
        subject: b.subject.clone(),
        from_threads: n,
    })
}

fn method(growth: &[Growth<'_>], bound: Option<&Bound>, at: u64) -> String {
    let named = growth.iter().filter(|g| g.sigma + g.kappa > 0.0).count();
    let mut s = match named {
        0 => format!("linear: no cause's cost grew by {at} threads"),
        1 => format!("USL from the cost of 1 cause at {at} threads"),
        n => format!("USL from the costs of {n} causes at {at} threads"),
    };
    if let Some(b) = bound {
        s += &format!(
            ", bounded by {}'s holds ({:.0} ns per operation)",
            b.subject, b.serial_ns_per_op
        );
    }
    s
}

/// What the measured points could not show.
fn unseen(
    header: &RunHeader,
    used: &[&Point],
    growth: &[Growth<'_>],
    bound: Option<&Bound>,
    target: u64,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(last) = used.last() else {
        return out;
    };
    if used.len() == 1 {
        out.push(format!(
            "one point past the first ({} threads): each cause's cost taken to grow in \
             proportion to the threads; one that grows faster on more cores (a cache \
             line's transfers) bends the curve down sooner",
            last.value
        ));
    }
    if let Some(b) = last
        .budget
        .as_ref()
        .filter(|b| b.unexplained >= UNEXPLAINED_SAID)
    {
        out.push(format!(
            "{:.0}% of the thread-time at {} threads was unexplained: held at its cost per \
             operation",
            b.unexplained * 100.0,
            last.value
        ));
    }
    // The lock that bounds the throughput, where its waits did not show it yet.
    if let Some(b) = bound {
        let contended = growth.iter().any(|g| g.id == b.id() && g.sigma > 0.0);
        if !contended {
            out.push(format!(
                "{} was not contended at {} threads: a bound from its hold times only",
                b.subject, last.value
            ));
        }
    }
    // A lock word or a contended line passed between CPUs that share one last-level
    // cache: on the 2-CPU VM that shares its L3, counters_packed ran at 0.77x at 2
    // threads and index_rebuild at 0.74x; on the 16-CPU machine at 0.44x and 0.37x. Only
    // where the whole machine is one such cache: on one of several (two sockets, AMD's
    // core complexes) the scheduler spreads the threads over them.
    let contended = bound.is_some() || growth.iter().any(|g| g.sigma + g.kappa > 0.0);
    let shared = header.host.topology.as_ref().and_then(|t| t.llc_cpus);
    let cpus = u64::from(header.host.cpus);
    if let Some(llc) =
        shared.filter(|&k| contended && cpus <= u64::from(k) && target > u64::from(k))
    {
        out.push(format!(
            "the {llc} CPUs the points ran on share one last-level cache: a contended lock \
             or cache line passed between them without leaving it; between cores that do \
             not share one (another cache, another socket) each pass takes longer, and \
             contention can cost more than {} threads here show",
            last.value
        ));
    }
    if target > u64::from(header.host.cpus) {
        out.push(format!(
            "{} measured CPUs: the prediction is for a machine like this one with {target} CPUs \
             (the same speed per CPU, the same memory system); what more cores add \
             (sockets, NUMA distance, SMT siblings) is not in it",
            header.host.cpus
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_and_kappa_are_fitted_and_never_negative() {
        // r = 0.5(n−1) + 0.1·n(n−1) at n = 2, 4, 8.
        let obs: Vec<(f64, f64, f64)> = [2.0f64, 4.0, 8.0]
            .iter()
            .map(|n| {
                (
                    n - 1.0,
                    n * (n - 1.0),
                    0.5 * (n - 1.0) + 0.1 * n * (n - 1.0),
                )
            })
            .collect();
        let (s, k) = fit(&obs);
        assert!((s - 0.5).abs() < 1e-9 && (k - 0.1).abs() < 1e-9, "{s} {k}");
        // A cost that shrinks with the threads grows by nothing.
        assert_eq!(fit(&[(1.0, 2.0, -0.3), (3.0, 12.0, -0.5)]), (0.0, 0.0));
        // One observation: σ alone.
        assert_eq!(fit(&[(3.0, 12.0, 1.5)]), (0.5, 0.0));
    }

    #[test]
    fn thread_counts_are_the_powers_of_two_past_the_measured_and_the_target() {
        assert_eq!(thread_counts(4, 16).collect::<Vec<_>>(), [8, 16]);
        assert_eq!(thread_counts(2, 24).collect::<Vec<_>>(), [4, 8, 16, 24]);
        assert_eq!(thread_counts(16, 64).collect::<Vec<_>>(), [32, 64]);
    }

    #[test]
    fn a_read_side_does_not_serialize() {
        use scalprof_model::locks::{LockKind, Side};
        assert_eq!(LockKind::Mutex.one_holder(), Some(true));
        assert_eq!(LockKind::Rwlock(Some(Side::Write)).one_holder(), Some(true));
        assert_eq!(LockKind::Rwlock(Some(Side::Read)).one_holder(), Some(false));
        assert_eq!(LockKind::Rwlock(None).one_holder(), None);
        assert_eq!(LockKind::Condvar.one_holder(), Some(false));
    }
}
