//! The candidate causes of a budget, each as its cost at every point of the sweep: locks
//! (waits and their on-CPU time), kernel hotspots, serial phases, shared cache lines, and
//! scalprof's own overhead.

use scalprof_model::locks::{LockKind, LockRow, RunQueueBehind, Scope};
use scalprof_model::profile::folded;
use scalprof_model::vocabulary::{blocking_call_of, in_user_lock};
use scalprof_model::{FindingKind, Point, PointProfile};

/// One candidate cause, with its cost at every point of the sweep.
#[derive(Clone, Debug)]
pub struct Series {
    pub kind: FindingKind,
    pub scope: Option<Scope>,
    pub subject: String,
    pub detail: String,
    /// Thread-ns per unit of work at each point (aligned with the points; `None` when not
    /// measured there).
    pub per_op: Vec<Option<f64>>,
    /// Or the share itself at each point (serial phases).
    pub shares: Option<Vec<Option<f64>>>,
    /// Of a serial phase's share, the part in which the lone thread ran late (the same
    /// work as threads that had finished): the echo of its waits, at each point.
    pub late: Option<Vec<Option<f64>>>,
}

/// CPU ns per unit of work, from the clean repeats' user + system time.
fn cpu_ns_per_op(p: &Point) -> Option<f64> {
    let x = p.throughput.filter(|&x| x > 0.0)?;
    let wall = p.wall_s?.median;
    let cpu = p.user_s?.median + p.sys_s?.median;
    (wall > 0.0).then(|| cpu / wall / x * 1e9)
}

/// Clean time per traced time at a point: waits are measured in the traced repeats, whose
/// every operation took `1 / (1 + perturbation)` times as long as in the clean ones (slower
/// when tracing costs, faster when the clean repeats were the disturbed ones); the budget's
/// thread-time comes from the clean repeats, so waits are scaled back to that clock.
fn dilation(p: &Point) -> f64 {
    p.perturbation.map_or(1.0, |x| (1.0 + x).clamp(0.25, 4.0))
}

/// The lock rows of every point as series: locks, and the condition variables and
/// semaphores whose waits are a handoff (an interpreter lock, a work queue). Joins and
/// barriers are the harness's structure, not a cause.
pub fn lock_series(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
) -> Vec<Series> {
    // The on-CPU part was sampled: convert it like every sampled cost.
    let scale = sampled_to_ns(points, profiles, work);
    let mut out: Vec<Series> = Vec::new();
    // Each series' lock code per unit (sampled) at the latest point that has it.
    let mut spin_at_last: Vec<f64> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let Some(lp) = &p.locks else { continue };
        for r in &lp.rows {
            if !is_budget_lock(r) || work[i] <= 0.0 {
                continue;
            }
            // Waits are on the traced clock (dilated back); the sampled on-CPU part is
            // already on the clean one (`sampled_to_ns` maps it to clean CPU per unit).
            let ns = r.total_wait_ns as f64 / work[i] * dilation(p)
                + r.spin_ns.unwrap_or(0) as f64 * scale[i].unwrap_or(dilation(p)) / work[i];
            let k = series_of(&mut out, r, points.len());
            if k == spin_at_last.len() {
                // A new series: no lock code of its own seen yet.
                spin_at_last.push(0.0);
            }
            if crate::locks::takes_futex_cpu(r) {
                spin_at_last[k] = r.spin_ns.unwrap_or(0) as f64 / work[i];
            }
            let s = &mut out[k];
            s.per_op[i] = Some(s.per_op[i].unwrap_or(0.0) + ns);
            s.detail = crate::locks::budget_detail(r, std::mem::take(&mut s.detail));
        }
    }
    let base = baseline_lock_code(profiles, &scale, work);
    start_futex_locks_at(&mut out, &spin_at_last, base);
    // A point without a row for a lock measured elsewhere had no waits on it.
    for s in &mut out {
        for (i, p) in points.iter().enumerate() {
            if p.locks.is_some() && s.per_op[i].is_none() {
                s.per_op[i] = Some(0.0);
            }
        }
    }
    out
}

/// Whether a lock row is a cause for the budget. One long wait is an event (a join, a
/// start-up handshake), not contention.
fn is_budget_lock(r: &LockRow) -> bool {
    !(matches!(
        r.lock_type,
        LockKind::Join | LockKind::Barrier | LockKind::Idle | LockKind::GoWaitGroup
    ) || r.attributed_to.is_some()
        || r.peer_attached
        || r.count < crate::locks::LOCK_MIN_WAITS)
}

/// The index of the series of `r`'s lock in `out`, pushed (with `points` empty points)
/// when it has none yet: a reader-writer lock's two sides are one cause.
fn series_of(out: &mut Vec<Series>, r: &LockRow, points: usize) -> usize {
    if let Some(k) = out
        .iter()
        .position(|s| s.scope == Some(r.scope) && s.subject == r.name)
    {
        return k;
    }
    out.push(Series {
        kind: if r.lock_type.is_blocked_wait() {
            FindingKind::BlockedWait
        } else {
            FindingKind::LockContention
        },
        scope: Some(r.scope),
        subject: r.name.clone(),
        detail: r.lock_type.to_string(),
        per_op: vec![None; points],
        shares: None,
        late: None,
    });
    out.len() - 1
}

/// The baseline's lock code, in ns per unit: at the first point the locks are taken
/// uncontended, so they have no row, but libc's lock and unlock paths already cost CPU
/// there.
fn baseline_lock_code(
    profiles: &[Option<&PointProfile>],
    scale: &[Option<f64>],
    work: &[f64],
) -> Option<f64> {
    profiles
        .first()
        .copied()
        .flatten()
        .zip(scale.first().copied().flatten())
        .filter(|_| work.first().is_some_and(|&w| w > 0.0))
        .map(|(prof, sc)| {
            let w: u64 = prof
                .folded
                .iter()
                .filter(|f| in_user_lock(&f.stack))
                .map(|f| f.weight)
                .sum();
            w as f64 / work[0] * sc
        })
}

/// A futex lock's growth is measured from its part of the baseline's lock code `base`
/// (split like the lock code at the last point that has rows, `spin_at_last`), not from
/// zero.
fn start_futex_locks_at(out: &mut [Series], spin_at_last: &[f64], base: Option<f64>) {
    let futex_series: Vec<usize> = (0..out.len())
        .filter(|&k| out[k].scope == Some(Scope::User) && spin_at_last[k] > 0.0)
        .collect();
    let spin_total: f64 = futex_series.iter().map(|&k| spin_at_last[k]).sum();
    for &k in &futex_series {
        if out[k].per_op[0].is_none() {
            if let Some(base) = base {
                out[k].per_op[0] = Some(base * spin_at_last[k] / spin_total);
            }
        }
    }
}

/// Sampled on-CPU cost (profile units per work unit) → thread-ns per work unit at each
/// point: the clean CPU time per unit, spread in proportion to the samples.
pub(crate) fn sampled_to_ns(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
) -> Vec<Option<f64>> {
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let prof = profiles[i]?;
            // With --attach the samples include the attached processes' while the clean
            // CPU time is the command's alone; spreading it over the command's samples only
            // was tried and is unstable when the client is a thin one (15 samples against
            // the server's 656 in a debug run of loop_server): left for the sampling period.
            let total: f64 = prof.folded.iter().map(|f| f.weight as f64).sum::<f64>() / work[i];
            (total > 0.0 && work[i] > 0.0).then_some(())?;
            Some(cpu_ns_per_op(p)? / total)
        })
        .collect()
}

/// The self time of a function (a kernel one when `kernel`) at point `i`, in clean
/// thread-ns per unit: the samples whose leaf it is, less those that are a lock's own
/// on-CPU time (the futex call, libc's lock code) or a blocking call's.
pub(crate) fn self_ns(
    profiles: &[Option<&PointProfile>],
    work: &[f64],
    scale: &[Option<f64>],
    i: usize,
    function: &str,
    kernel: bool,
) -> Option<f64> {
    let prof = profiles[i]?;
    let weight: u64 = prof
        .folded
        .iter()
        .filter(|f| {
            // A runtime's own work is its name's, whatever its leaf (as the diff counts it).
            let work = scalprof_model::vocabulary::runtime_work(&f.stack);
            let leaf = folded::leaf(&f.stack);
            let name = match (work, folded::kernel(leaf)) {
                (Some(w), _) if !kernel => w,
                (Some(_), _) => return false,
                (None, Some(k)) if kernel => k,
                (None, None) if !kernel => leaf,
                _ => return false,
            };
            name == function && !in_user_lock(&f.stack) && blocking_call_of(&f.stack).is_none()
        })
        .map(|f| f.weight)
        .sum();
    Some(weight as f64 / work[i] * scale[i]?)
}

/// The critical section is the lock's: a user function that takes a contended lock (its
/// top caller or its top holder, at least half of the waits) and whose own time per op grew did that work
/// holding the lock, and it got slower because the data it guards move between CPUs with
/// the lock (hash_global_mutex: `table_lookup` +5% beside `table_lock`). Its growth joins
/// the lock's series rather than standing as a hotspot of its own.
pub fn fold_critical_sections(series: &mut Vec<Series>, points: &[Point]) {
    let Some(rows) = points
        .iter()
        .rev()
        .find_map(|p| p.locks.as_ref().map(|l| &l.rows))
    else {
        return;
    };
    let holder_of = |function: &str| -> Option<&str> {
        rows.iter()
            .filter(|r| r.scope == Scope::User && r.lock_type.is_lock())
            .find(|r| {
                // A JIT-compiled Java method is its profile frame (`void A.f(long)`) and
                // the lock's caller (`A.f`): its inlined monitor enter (a CAS on the
                // object's header, the spin) is the monitor's, in its own time.
                let java = scalprof_model::vocabulary::java_method(function);
                let main = |v: &[scalprof_model::locks::LockCaller]| {
                    v.first().is_some_and(|c| {
                        (c.function == function || c.function == java) && c.share >= 0.5
                    })
                };
                main(&r.callers) || main(&r.holders)
            })
            .map(|r| r.name.as_str())
    };
    let mut k = 0;
    while k < series.len() {
        let lock = (series[k].kind == FindingKind::UserHotspot)
            .then(|| holder_of(&series[k].subject))
            .flatten()
            .and_then(|name| {
                series.iter().position(|s| {
                    s.kind == FindingKind::LockContention
                        && s.scope == Some(Scope::User)
                        && s.subject == name
                })
            });
        match lock {
            Some(l) => {
                let section = series.remove(k);
                let l = if l > k { l - 1 } else { l };
                for (into, add) in series[l].per_op.iter_mut().zip(&section.per_op) {
                    if let Some(add) = add {
                        *into = Some(into.unwrap_or(0.0) + add);
                    }
                }
            }
            None => k += 1,
        }
    }
}

/// scalprof's own sampled cost (BPF programs, unwinding) in thread-ns per unit of work.
pub fn overhead_ns(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
) -> Vec<Option<f64>> {
    let scale = sampled_to_ns(points, profiles, work);
    (0..points.len())
        .map(|i| Some(profiles[i]?.stats.overhead_weight as f64 / work[i] * scale[i]?))
        .collect()
}

/// The time the program's threads waited for a CPU that scalprof's own threads held, in
/// thread-ns per unit of work (on the clean clock): the observer's cost, like its sampled
/// frames. Nothing of it happens in the clean repeats.
pub fn observer_wait_ns(points: &[Point], work: &[f64]) -> Vec<Option<f64>> {
    points
        .iter()
        .zip(work)
        .map(|(p, &w)| {
            let rows = &p.locks.as_ref()?.rows;
            let ns: u64 = rows
                .iter()
                .filter(|r| r.run_queue() == Some(RunQueueBehind::Observer))
                .map(|r| r.total_wait_ns)
                .sum();
            (w > 0.0).then(|| ns as f64 / w * dilation(p))
        })
        .collect()
}
