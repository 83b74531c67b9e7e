//! Locks and waits: each lock table row's wait (and spin) per unit of work; a user lock's
//! critical section, when its own function grew, folds into the lock.

use scalprof_model::locks::{LockKind, LockRow, Scope};
use scalprof_model::vocabulary::in_user_lock;
use scalprof_model::{CauseId, Finding, FindingKind, Point, PointProfile};

use super::{Cause, Run};
use crate::budget::series::{dilation, sampled_to_ns, Series};

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

/// The lock rows of every point as series: locks, and the condition variables and
/// semaphores whose waits are a handoff (an interpreter lock, a work queue). Joins and
/// barriers are the harness's structure, not a cause.
fn lock_series(points: &[Point], profiles: &[Option<&PointProfile>], work: &[f64]) -> Vec<Series> {
    // The on-CPU part was sampled: convert it like every sampled cost.
    let scale = sampled_to_ns(points, profiles, work);
    let mut out: Vec<Series> = Vec::new();
    // Each series' lock code per unit (sampled) at the latest point that has it.
    let mut spin_at_last: Vec<f64> = Vec::new();
    // Per series, the point and the wait of the row its detail is from.
    let mut detail_from: Vec<(usize, u64)> = Vec::new();
    let traced: Vec<_> = points.iter().filter_map(|p| p.locks.as_ref()).collect();
    let at_first = |r: &LockRow| traced[0].rows.iter().find(|f| f.id() == r.id());
    for (i, p) in points.iter().enumerate() {
        let Some(lp) = &p.locks else { continue };
        for r in &lp.rows {
            // A housekeeping thread's period waits for nothing.
            let timer = r.is_timer_sleep_in_sweep(at_first(r), traced.len() == 1);
            if timer || !is_budget_lock(r) || work[i] <= 0.0 {
                continue;
            }
            // Waits are on the traced clock (dilated back); the sampled on-CPU part is
            // already on the clean one (`sampled_to_ns` maps it to clean CPU per unit).
            let ns = r.cost_per_op_over(work[i], dilation(p), scale[i].unwrap_or(dilation(p)));
            let k = series_of(&mut out, r, points.len());
            if k == spin_at_last.len() {
                // A new series: no lock code of its own seen yet.
                spin_at_last.push(0.0);
                detail_from.push((i, 0));
            }
            if crate::locks::takes_futex_cpu(r) {
                spin_at_last[k] = r.spin_ns.unwrap_or(0) as f64 / work[i];
            }
            let s = &mut out[k];
            s.per_op[i] = Some(s.per_op[i].unwrap_or(0.0) + ns);
            // The detail is the latest point's longest-waited side (a reader-writer lock's,
            // a channel's).
            if detail_from[k].0 < i || r.total_wait_ns >= detail_from[k].1 {
                detail_from[k] = (i, r.total_wait_ns);
                s.detail = crate::locks::budget_detail(r, std::mem::take(&mut s.detail));
            }
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
    if let Some(k) = out.iter().position(|s| s.id() == r.id()) {
        return k;
    }
    out.push(Series {
        run_queue: r.run_queue(),
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

/// The critical section is the lock's: a user function that takes a contended lock (its
/// top caller or its top holder, at least half of the waits) and whose own time per op grew did that work
/// holding the lock, and it got slower because the data it guards move between CPUs with
/// the lock (hash_global_mutex: `table_lookup` +5% beside `table_lock`). Its growth joins
/// the lock's series rather than standing as a hotspot of its own.
fn fold_critical_sections(series: &mut Vec<Series>, points: &[Point]) {
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
                let lock = CauseId {
                    kind: FindingKind::LockContention,
                    scope: Some(Scope::User),
                    subject: name,
                };
                series.iter().position(|s| s.id() == lock)
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

#[cfg(test)]
mod tests {
    use scalprof_model::locks::{LockAddress, LockKind, RunQueueBehind, Scope, CPU_WAIT_OBSERVER};
    use scalprof_model::{FindingKind, Point};

    use super::{fold_critical_sections, lock_series};
    use crate::budget::tests::{lock, point};
    use crate::budget::{budgets, observer_wait_ns, Series};

    #[test]
    fn waits_from_a_slower_traced_run_are_scaled_back_to_the_clean_clock() {
        use scalprof_model::locks::{LockProfile, LockRow};
        let with_lock = |mut p: Point, wait_ns: u64, perturbation: Option<f64>| {
            p.perturbation = perturbation;
            p.locks = Some(LockProfile {
                rows: vec![LockRow {
                    address: scalprof_model::locks::LockAddress::Traced(0x1),
                    count: 1000,
                    total_wait_ns: wait_ns,
                    max_wait_ns: 1,
                    ..LockRow::new(Scope::User, "table_lock", LockKind::Mutex)
                }],
                ..Default::default()
            });
            p
        };
        // 1000 units of work per point. The traced repeats at 2 threads ran 20% slower,
        // so their 500 µs of wait per unit is 400 µs of the clean run's time.
        let points = [
            with_lock(point(1, 1000.0, 1.0), 0, None),
            with_lock(point(2, 1250.0, 0.625), 500_000_000, Some(-0.2)),
        ];
        let series = lock_series(&points, &[None, None], &[1000.0, 1000.0]);
        assert_eq!(series.len(), 1);
        assert!(
            (series[0].per_op[1].unwrap() - 400_000.0).abs() < 1e-6,
            "{series:?}"
        );
        // The share is then the clean run's: 0.4 ms of 1.6 ms.
        let b = budgets(&points, &[None, None], &series, 0)[1]
            .clone()
            .unwrap();
        assert!((b.causes[0].share - 0.25).abs() < 1e-9, "{b:?}");

        // 100 ms behind scalprof's own threads: the observer's cost, not a cause.
        let mut points = points;
        let rows = &mut points[1].locks.as_mut().unwrap().rows;
        let mut observer = rows[0].clone();
        observer.scope = Scope::Kernel;
        observer.name = CPU_WAIT_OBSERVER.into();
        observer.lock_type = LockKind::CpuWait;
        observer.address = LockAddress::RunQueue(RunQueueBehind::Observer);
        observer.total_wait_ns = 100_000_000;
        observer.attributed_to = Some(scalprof_model::locks::THE_OBSERVER.into());
        rows.push(observer);
        assert_eq!(
            lock_series(&points, &[None, None], &[1000.0, 1000.0]).len(),
            1
        );
        let waited = observer_wait_ns(&points, &[1000.0, 1000.0]);
        assert_eq!(waited[0], Some(0.0));
        assert!((waited[1].unwrap() - 80_000.0).abs() < 1e-6, "{waited:?}");
        // 80 µs of 1.6 ms per unit: 5% of the thread-time is scalprof's.
        let b = budgets(&points, &waited, &series, 0)[1].clone().unwrap();
        assert!((b.overhead - 0.05).abs() < 1e-9, "{b:?}");
    }

    #[test]
    fn a_lock_s_code_counts_from_its_uncontended_cost_and_is_not_a_sleeper_s() {
        use scalprof_model::locks::{LockProfile, LockRow};
        use scalprof_model::{FoldedStack, PointProfile};
        let prof = |stacks: &[(&str, u64)]| PointProfile {
            folded: stacks
                .iter()
                .map(|&(stack, weight)| FoldedStack {
                    stack: stack.into(),
                    samples: weight / 1_000_000,
                    weight,
                })
                .collect(),
            ..Default::default()
        };
        let row = |name: &str, lock_type: LockKind, wait: u64| LockRow {
            address: scalprof_model::locks::LockAddress::Traced(0x1),
            count: 1000,
            total_wait_ns: wait,
            max_wait_ns: wait,
            ..LockRow::new(Scope::User, name, lock_type)
        };
        // 1000 units per point. At 1 thread the uncontended lock code is 20% of 1 ms of
        // CPU per unit; at 2 threads (1.6 ms per unit) it is 600 of 1400 sampled ms.
        let p0 = prof(&[
            ("p;worker", 800_000_000),
            ("p;worker;pthread_mutex_lock", 200_000_000),
        ]);
        let p1 = prof(&[
            ("p;worker", 800_000_000),
            ("p;worker;pthread_mutex_lock", 600_000_000),
        ]);
        let mut points = [point(1, 1000.0, 1.0), point(2, 1250.0, 0.625)];
        points[0].locks = Some(LockProfile::default());
        // The main thread sleeps 8 s while the workers contend: its sleep takes none of
        // their lock code. The traced repeat ran twice as fast as the clean ones.
        let mut rows = vec![
            row("table_lock", LockKind::Mutex, 100_000_000),
            row("sleep in main", LockKind::Sleep, 8_000_000_000),
        ];
        crate::locks::attribute_futex_cpu(&mut rows, &p1);
        assert_eq!(rows[0].spin_ns, Some(600_000_000));
        assert_eq!(rows[1].spin_ns, None);
        points[1].locks = Some(LockProfile {
            rows,
            ..Default::default()
        });
        points[1].perturbation = Some(1.0);
        let series = lock_series(&points, &[Some(&p0), Some(&p1)], &[1000.0, 1000.0]);
        let lock = series.iter().find(|s| s.subject == "table_lock").unwrap();
        // Baseline: 200 µs of lock code. At 2: the wait (100 µs, doubled back to the clean
        // clock) plus the lock code on the clean clock (600 µs × 1.6/1.4), not doubled.
        assert!(
            (lock.per_op[0].unwrap() - 200_000.0).abs() < 1e-6,
            "{lock:?}"
        );
        let at2 = 200_000.0 + 600_000.0 * 1.6 / 1.4;
        assert!((lock.per_op[1].unwrap() - at2).abs() < 1e-6, "{lock:?}");
    }

    #[test]
    fn a_long_sleep_that_only_more_threads_have_is_a_back_off_not_a_timer() {
        use scalprof_model::locks::{LockProfile, LockRow};
        // 40 sleeps of 15 ms on average: a timer's length (SQLite's busy handler's).
        let sleep = LockRow {
            address: LockAddress::Traced(0x1),
            count: 40,
            total_wait_ns: 600_000_000,
            max_wait_ns: 50_000_000,
            ..LockRow::new(Scope::User, "sleep in busy_handler", LockKind::Sleep)
        };
        let table = |rows: Vec<LockRow>| {
            Some(LockProfile {
                rows,
                ..Default::default()
            })
        };
        let sweep = |first: Vec<LockRow>| {
            let mut points = [point(1, 1000.0, 1.0), point(2, 1000.0, 0.5)];
            points[0].locks = table(first);
            points[1].locks = table(vec![sleep.clone()]);
            lock_series(&points, &[None, None], &[1000.0, 1000.0])
        };
        // None at 1 thread: the waiting for the other writer, a cause.
        let backoff = sweep(Vec::new());
        assert_eq!(backoff.len(), 1, "{backoff:?}");
        assert_eq!(backoff[0].per_op[0], Some(0.0));
        assert!(backoff[0].per_op[1].unwrap() > 0.0);
        // The same sleep at 1 thread too: a thread's period, waiting for nothing.
        assert!(sweep(vec![sleep.clone()]).is_empty());
        // At 1 thread 1 ms sleeps, at 2 lengthened to 15 ms: a back-off that grew.
        let short = LockRow {
            total_wait_ns: 40_000_000,
            ..sleep.clone()
        };
        assert_eq!(sweep(vec![short]).len(), 1);
        // One traced point: its length alone says timer.
        let mut one = [point(2, 1000.0, 0.5)];
        one[0].locks = table(vec![sleep.clone()]);
        assert!(lock_series(&one, &[None], &[1000.0]).is_empty());
    }

    #[test]
    fn a_lock_holder_s_own_growth_is_the_lock_s() {
        use scalprof_model::locks::{LockCaller, LockProfile, LockRow};
        let mut points = [point(1, 1000.0, 1.0), point(2, 1250.0, 0.625)];
        let row = |name: &str, caller: &str, share: f64| LockRow {
            address: scalprof_model::locks::LockAddress::Traced(0x1),
            count: 1000,
            total_wait_ns: 1,
            max_wait_ns: 1,
            callers: vec![LockCaller {
                function: caller.into(),
                share,
                state: None,
                stack: None,
            }],
            ..LockRow::new(Scope::User, name, LockKind::Mutex)
        };
        points[1].locks = Some(LockProfile {
            rows: vec![
                row("table_lock", "table_lookup", 0.9),
                row("other", "parse", 0.3),
            ],
            ..Default::default()
        });
        let hotspot = |f: &str, per_op: [f64; 2]| Series {
            run_queue: None,
            kind: FindingKind::UserHotspot,
            ..lock(f, per_op)
        };
        let mut series = vec![
            hotspot("table_lookup", [10.0, 60.0]),
            lock("table_lock", [0.0, 400.0]),
            lock("other", [0.0, 100.0]),
            // Takes `other` for under half of its waits: its growth stays its own.
            hotspot("parse", [5.0, 25.0]),
        ];
        fold_critical_sections(&mut series, &points);
        let subjects: Vec<&str> = series.iter().map(|s| s.subject.as_str()).collect();
        assert_eq!(subjects, ["table_lock", "other", "parse"]);
        assert_eq!(series[0].per_op, [Some(10.0), Some(460.0)]);
    }
}
