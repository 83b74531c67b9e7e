//! Lock findings: the locks whose waits and on-CPU time grew over the sweep, with their
//! evidence, callers and a suggestion that fits the lock.

use scalprof_model::locks::{
    LockAddress, LockCaller, LockKind, LockProfile, LockRow, Scope, Side, CPU_WAIT_OTHER,
};
use scalprof_model::units::human_ns;
use scalprof_model::vocabulary::Pat::{self, Exact, Prefix};
use scalprof_model::{Finding, FindingDetails, FindingKind, LockDetails, Point};

use super::merge::combine_sides;
use super::{LOCK_MIN_SCORE, LOCK_MIN_WAITS};

/// `lock_contention` findings. `points`: (point, work, lock profile), in sweep order.
///
/// A lock's score is the share of the lost thread-time per operation that the growth of
/// its wait per operation explains: with N threads, each operation costs N·wall/ops of
/// thread time; ideal scaling keeps that at the first point's value, and waiting is
/// thread time.
pub fn lock_findings(points: &[(&Point, f64, &LockProfile)]) -> Vec<Finding> {
    let Some(lost) = lost_thread_time(points) else {
        return Vec::new();
    };
    let last_rows = &points[points.len() - 1].2.rows;
    let mut out = Vec::new();
    for (scope, name) in lock_names(points) {
        let rows = growth_rows(points, scope, &name);
        let (Some(first), Some(last)) = (
            rows.iter().flatten().next(),
            rows.iter().rev().flatten().next(),
        ) else {
            continue;
        };
        if !is_programs_cause(first) {
            continue;
        }
        let Some(score) = score(points, &rows, lost) else {
            continue;
        };
        let series = LockSeries::new(points, scope, name, &rows, last);
        out.push(series.finding(score, last_rows));
    }
    out
}

/// The thread time per operation lost between the first and the last point (for a single
/// point, all of it: its waits are compared with the whole thread time), when some was.
fn lost_thread_time(points: &[(&Point, f64, &LockProfile)]) -> Option<f64> {
    let &(last_point, last_work, _) = points.last()?;
    let (first_point, first_work, _) = points[0];
    // From the clean throughput (work units per second): N threads' time per unit.
    let thread_time_per_op = |p: &Point, work: f64| -> Option<f64> {
        let x = p.throughput?;
        (work > 0.0 && x > 0.0).then(|| p.value as f64 * 1e9 / x)
    };
    let t_last = thread_time_per_op(last_point, last_work)?;
    let t_first = thread_time_per_op(first_point, first_work)?;
    let lost = if points.len() == 1 {
        t_last
    } else {
        t_last - t_first
    };
    (lost > 0.0).then_some(lost)
}

/// Every lock of the sweep once, in the order first seen: a reader-writer lock's read and
/// write sides are one lock.
fn lock_names(points: &[(&Point, f64, &LockProfile)]) -> Vec<(Scope, String)> {
    let mut names: Vec<(Scope, String)> = Vec::new();
    for (_, _, lp) in points {
        for r in &lp.rows {
            let k = (r.scope, r.name.clone());
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    names
}

/// One lock's row at each point, its sides combined (`None` where it was not waited for).
fn growth_rows(
    points: &[(&Point, f64, &LockProfile)],
    scope: Scope,
    name: &str,
) -> Vec<Option<LockRow>> {
    points
        .iter()
        .map(|(_, _, lp)| {
            combine_sides(
                lp.rows
                    .iter()
                    .filter(|r| r.scope == scope && r.name == name),
            )
        })
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
        || crate::stability::is_foreign(Some(row.scope), &row.name))
}

/// Each point's cost of one lock per work unit: `cost` of its row over the work.
fn per_op(
    rows: &[Option<LockRow>],
    points: &[(&Point, f64, &LockProfile)],
    cost: impl Fn(&LockRow) -> u64,
) -> Vec<f64> {
    rows.iter()
        .zip(points)
        .map(|(r, (_, work, _))| {
            r.as_ref()
                .map_or(0.0, |r| cost(r) as f64 / work.max(1e-300))
        })
        .collect()
}

/// The share of the `lost` thread time that the growth of a lock's cost per operation
/// (its waits and its on-CPU time) explains, when it makes a finding.
fn score(
    points: &[(&Point, f64, &LockProfile)],
    rows: &[Option<LockRow>],
    lost: f64,
) -> Option<f64> {
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
        points: &[(&Point, f64, &LockProfile)],
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
            values: points.iter().map(|(p, _, _)| p.value).collect(),
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

    /// What was measured of the lock, then who held it and what its holders did.
    fn evidence(&self, rows: &[LockRow]) -> String {
        let last = self.last;
        let process = last
            .process
            .as_ref()
            .map_or(String::new(), |p| format!("in {p} (attached): "));
        let measured = if last.address == LockAddress::Sampled {
            self.sampled_text()
        } else {
            self.waits_text()
        };
        let woken = last
            .woken_by
            .as_ref()
            .map_or(String::new(), |p| format!("; woken by {p}"));
        let holder_blocks = if last.holder_waits.is_empty() {
            holder_wait(last, rows).map_or(String::new(), |(h, w)| {
                format!("; its holder {h} also blocks in {}", w.name)
            })
        } else {
            String::new()
        };
        process + &measured + &woken + &held_text(last) + &chain_text(last, rows) + &holder_blocks
    }

    /// A spinlock is not traced: its row is made of the samples that spun.
    fn sampled_text(&self) -> String {
        format!(
            "{}, sampled (spinlocks are not traced): on-CPU spinning per op {} at {} threads; \
             {} samples{}",
            self.last.lock_type,
            fmt_list(&self.cpu_per_op),
            self.values.last().expect("point"),
            self.last.count,
            callers_text(self.last),
        )
    }

    /// A traced lock's waits per operation over the sweep, their count, average and
    /// largest, and the on-CPU time in the lock when there is some.
    fn waits_text(&self) -> String {
        let last = self.last;
        let was = if self.single {
            String::new()
        } else {
            format!(
                " (was {} at {})",
                human_ns(self.wait_per_op[0]),
                self.values[0]
            )
        };
        let on_cpu = if self.cpu_per_op.iter().any(|x| *x >= 1.0) {
            format!(", on-CPU in it {} per op", fmt_list(&self.cpu_per_op))
        } else {
            String::new()
        };
        let waits = if last.lock_type.is_blocked_wait() {
            "waits"
        } else {
            "contended waits"
        };
        format!(
            "{}: wait per op {} at {} threads{was}{on_cpu}; {} {waits}, avg {}, max {}{}{}",
            last.lock_type,
            fmt_list(&self.wait_per_op),
            self.values.last().expect("point"),
            last.count,
            human_ns(last.avg_wait_ns()),
            // The largest wait is at least the average (they come from separate
            // aggregations: a dropped ring record can leave max below avg).
            human_ns((last.max_wait_ns as f64).max(last.avg_wait_ns())),
            hold_text(last),
            callers_text(last),
        )
    }

    /// What to try: against what the holders were seen doing when that explains the
    /// wait, else against the kind of lock ([`suggestion`]).
    fn advice(&self, rows: &[LockRow]) -> String {
        let (last, name) = (self.last, &self.name);
        // A runtime's own lock (CPython's GIL, the Go scheduler's): not the program's to
        // shard or to hold for less.
        if is_interpreter_lock(self.scope, name)
            || (self.scope == Scope::User && GO_RUNTIME_LOCK.matches(name))
        {
            return suggestion(&last.lock_type, self.scope, name);
        }
        if let Some(text) = idle_advice(name, last) {
            return text;
        }
        if let Some((h, link, share)) = blocked_holder(last, rows) {
            return format!(
                "{h} holds {name} while it waits for {link} ({:.0}% of the waiters' wait): \
                 do the blocking call outside the lock, or batch it (one flush for many \
                 appends, group commit); sharding {name} would not shorten it",
                share * 100.0
            );
        }
        if let Some((h, w)) = holder_wait(last, rows).filter(|_| last.holder_waits.is_empty()) {
            return format!(
                "{h}, which holds {name} for most of the wait, also blocks in {}: if it does \
                 so while holding {name}, the waiters wait for that too. Do the blocking call \
                 outside the lock, or batch it (one flush for many appends, group commit); \
                 sharding {name} would not shorten it",
                w.name
            );
        }
        if let Some(h) = long_holder(last) {
            // A rare long holder: the waiters queue behind one critical section.
            return format!(
                "the waiters wait behind {h}, which holds {name} for {:.0}% of the wait while \
                 it is called for {:.0}% of the waits: move its work out of the lock (build \
                 the result aside, then swap it in under {name}) or split it into short \
                 steps; sharding {name} would not shorten it",
                share_of(&last.holders, &h) * 100.0,
                share_of(&last.callers, &h) * 100.0
            );
        }
        if matches!(last.address, LockAddress::Array { .. }) && last.lock_type.is_lock() {
            // A lock array (`group_objects`): already sharded.
            return format!(
                "{name} is already an array of locks and the waits are few: the cost is the \
                 lock words moving between CPUs. Partition the work per thread or CPU so each \
                 thread keeps to its own locks; more shards do not help when every thread \
                 touches every shard"
            );
        }
        suggestion(&last.lock_type, self.scope, name)
    }
}

/// The advice for an idle wait ([`idle_wait`]): look at what feeds the sleepers.
fn idle_advice(name: &str, last: &LockRow) -> Option<String> {
    let avg_ns = idle_wait(last)?;
    // A condition variable's holders held its mutex to signal it; its callers
    // are the sleepers themselves.
    let feeder = last
        .holders
        .first()
        .map_or(String::new(), |h| format!(" ({} signals it)", h.function));
    Some(format!(
        "{name} is a condition variable its threads sleep on for long stretches (avg \
         {}) while its mutex is held only briefly: they wait for work or for a result \
         (an idle worker pool), not for each other. Sharding it would not help; look \
         at what feeds them{feeder}: a producer or a phase that runs alone (reading \
         the input, writing the output) that is slower than the workers, or more \
         workers than there is work",
        human_ns(avg_ns)
    ))
}

/// A condition variable its waiters sleep on for a millisecond or more at a time while
/// its mutex is held for under a hundredth of that: threads waiting for work (xz's worker
/// pool: 34 waits of 66 ms on average, the mutex held 44 ns), not contention. The average
/// wait, if so.
fn idle_wait(row: &LockRow) -> Option<f64> {
    if row.lock_type != LockKind::Condvar || row.count == 0 {
        return None;
    }
    let avg = row.total_wait_ns as f64 / row.count as f64;
    let brief = row
        .hold
        .as_ref()
        .is_none_or(|h| (h.p50_ns as f64) * 100.0 < avg);
    (avg >= 1e6 && brief).then_some(avg)
}

/// "; callers: F (N%), G (M%)", or nothing when the row has no callers.
fn callers_text(row: &LockRow) -> String {
    if row.callers.is_empty() {
        return String::new();
    }
    let callers: Vec<String> = row
        .callers
        .iter()
        .map(|c| format!("{} ({:.0}%)", c.function, c.share * 100.0))
        .collect();
    format!("; callers: {}", callers.join(", "))
}

/// Which locks one row of [`ADVICE`] is for.
enum LockMatch {
    /// Waits of these kinds.
    Kinds(&'static [LockKind]),
    /// Waits of this kind on a lock whose name matches.
    KindNamed(LockKind, Pat),
    /// Locks in this scope whose name matches.
    ScopeNamed(Scope, Pat),
    /// Locks in this scope.
    InScope(Scope),
    /// Locks whose name matches (the kernel's conventional names).
    Named(Pat),
    /// Any lock.
    Any,
}

impl LockMatch {
    /// Whether a lock of this kind, scope and name is one this row is for.
    fn matches(&self, kind: &LockKind, scope: Scope, name: &str) -> bool {
        match self {
            LockMatch::Kinds(kinds) => kinds.contains(kind),
            LockMatch::KindNamed(k, pat) => k == kind && pat.matches(name),
            LockMatch::ScopeNamed(s, pat) => *s == scope && pat.matches(name),
            LockMatch::InScope(s) => *s == scope,
            LockMatch::Named(pat) => pat.matches(name),
            LockMatch::Any => true,
        }
    }
}

/// CPython keeps its global interpreter lock in `_PyRuntime` (its mutex and condition
/// variable, one object).
const INTERPRETER_LOCK: Pat = Prefix("_PyRuntime");

/// The Go runtime's own locks (`runtime.sched`, `runtime.mheap_`): not the program's to
/// shard.
const GO_RUNTIME_LOCK: Pat = Prefix("runtime.");

/// CPython's GIL: sharding it is not an option.
const GIL_ADVICE: &str = "this is CPython's GIL: Python threads run Python code one at a time. \
     Use processes (multiprocessing, concurrent.futures.ProcessPoolExecutor), a free-threaded \
     CPython (3.13t), or move the hot loop into code that releases the GIL (NumPy, a C \
     extension)";

/// What to try against each kind of wait, as perf keeps its `lock_type_table[]`: the
/// first row that matches the lock advises, `{name}` standing for the lock's name.
const ADVICE: &[(LockMatch, &str)] = &[
    (
        LockMatch::Kinds(&[LockKind::Sleep]),
        "the threads sleep while they wait (a retry loop around a try-lock, a busy handler): \
         block on the resource instead (a lock, a condition variable) so the waiter wakes \
         when it is free, or shorten what the holder does",
    ),
    (
        LockMatch::Kinds(&[LockKind::DiskIo]),
        "the threads wait for the disk: batch the flushes (group commit), write \
         asynchronously, or move the file to faster storage",
    ),
    (
        LockMatch::KindNamed(LockKind::CpuWait, Exact(CPU_WAIT_OTHER)),
        "other processes on the machine took the CPUs while the workload was runnable: \
         measure on a quiet machine, or keep the sweep's largest point below the CPUs left \
         free",
    ),
    (
        LockMatch::Kinds(&[LockKind::CpuWait]),
        "more runnable threads than CPUs: run at most one busy thread per CPU (size the pool \
         to the CPUs the process may use), or give the workload more CPUs",
    ),
    (
        LockMatch::Kinds(&[LockKind::Io, LockKind::Syscall]),
        "the threads wait in {name}: overlap the waits (more requests in flight) or feed the \
         other side faster",
    ),
    (
        LockMatch::Kinds(&[LockKind::PosixLock, LockKind::Flock]),
        "every writer takes a lock on {name}: lock smaller byte ranges, give each writer its \
         own file, or batch more work per lock",
    ),
    // Sharding CPython's global interpreter lock is not an option.
    (
        LockMatch::ScopeNamed(Scope::User, INTERPRETER_LOCK),
        GIL_ADVICE,
    ),
    (LockMatch::ScopeNamed(Scope::User, Exact("GIL")), GIL_ADVICE),
    (
        LockMatch::ScopeNamed(Scope::User, GO_RUNTIME_LOCK),
        "{name} is a lock of the Go runtime itself (the scheduler's, the heap's): goroutines \
         start, park and wake very often, or the GC starts and stops its workers. Use fewer, \
         longer-lived goroutines (a worker pool), hand work over in batches, and allocate \
         less per operation",
    ),
    (
        LockMatch::Kinds(&[
            LockKind::GoMutex,
            LockKind::GoRwMutex(None),
            LockKind::GoRwMutex(Some(Side::Read)),
            LockKind::GoRwMutex(Some(Side::Write)),
        ]),
        "goroutines take turns on {name}: shard it (one sync.Mutex per shard, chosen by key \
         or by goroutine), hold it for less (compute outside, lock only to publish), use \
         sync/atomic for counters, or give each goroutine its own data and merge at the end \
         (a channel of results); a read-mostly map can be a sync.Map or an atomic.Pointer \
         swapped on update",
    ),
    (
        LockMatch::Kinds(&[LockKind::JavaMonitor]),
        "threads queue on the monitor that {name} enters (`synchronized`): shorten the \
         synchronized block (compute outside, publish inside), stripe the lock (an array \
         of locks chosen by key), or replace it: a LongAdder or AtomicLong for counters, a \
         ConcurrentHashMap for a map",
    ),
    (
        LockMatch::Kinds(&[LockKind::JavaPark]),
        "threads park in {name} (a java.util.concurrent lock or queue): hold the lock for \
         less, stripe it, or hand work over in batches (drainTo, larger tasks)",
    ),
    (
        LockMatch::InScope(Scope::User),
        "shard {name} (one lock per bucket or per CPU, each on its own cache line), shorten \
         its critical section, or use a read-mostly scheme",
    ),
    (
        LockMatch::Named(Prefix("mmap_lock")),
        "reduce the address-space changes: fewer mmap/munmap/mprotect and page faults (reuse \
         buffers, MAP_POPULATE, a per-thread arena)",
    ),
    (
        LockMatch::Named(Prefix("i_rwsem")),
        "writers of one file take its inode lock in turn: give each writer its own file, or \
         batch the writes (fewer, larger writes)",
    ),
    (
        LockMatch::Named(Exact("files_struct.file_lock")),
        "the threads share one file-descriptor table, and opening, duplicating and closing \
         descriptors takes its lock: keep descriptors open and reuse them, or open them in \
         processes (or threads made with clone without CLONE_FILES) that have their own \
         table",
    ),
    (
        LockMatch::Any,
        "reduce how often the workload takes the kernel's {name}: its callers are in the \
         lock table (scalprof show RUN -v)",
    ),
];

/// What to try against one kind of wait: the first row of [`ADVICE`] that matches.
fn suggestion(kind: &LockKind, scope: Scope, name: &str) -> String {
    ADVICE
        .iter()
        .find(|(on, _)| on.matches(kind, scope, name))
        .map_or_else(String::new, |(_, text)| text.replace("{name}", name))
}

#[cfg(test)]
#[test]
fn suggestions_fit_the_lock() {
    let gil = suggestion(&LockKind::Condvar, Scope::User, "_PyRuntime+0x188");
    assert!(gil.contains("GIL") && !gil.contains("shard"), "{gil}");
    let inode = suggestion(&LockKind::Rwsem(None), Scope::Kernel, "i_rwsem");
    assert!(inode.contains("own file"), "{inode}");
    let other = suggestion(&LockKind::Spinlock, Scope::Kernel, "futex hash bucket");
    assert!(!other.contains("mmap"), "{other}");
}

fn fmt_list(v: &[f64]) -> String {
    v.iter()
        .map(|x| human_ns(*x))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// A lock row's few words in the verdict: its type and callers (from the latest point
/// that has them, else `previous`), who held it, who woke it, in which process.
pub(crate) fn budget_detail(r: &LockRow, previous: String) -> String {
    let mut d = previous;
    if !r.callers.is_empty() {
        let callers: Vec<&str> = r
            .callers
            .iter()
            .take(2)
            .map(|c| c.function.as_str())
            .collect();
        d = format!("{}; {}", r.lock_type, callers.join(", "));
    }
    if let Some(h) = r.holders.first().filter(|h| h.share >= 0.5) {
        let held = if r.lock_type == LockKind::Sleep {
            "the others ran in"
        } else {
            "held in"
        };
        d = format!(
            "{d}; {held} {}, {:.0}% of the wait",
            h.function,
            h.share * 100.0
        );
        if let Some(w) = r.holder_waits.first().filter(|w| w.share >= 0.2) {
            d = format!(
                "{d}; its holder blocked in {} {:.0}%",
                w.wait,
                w.share * 100.0
            );
        }
    }
    if let Some(peer) = &r.woken_by {
        d = format!("{d}; woken by {peer}");
    }
    if let Some(process) = &r.process {
        d = format!("{d}; in {process}");
    }
    d
}

/// "; held 90 ns (p99 310 ns, longest 2.1 µs), taken 1× per op": the lock's hold times, where
/// they were timed.
pub(crate) fn hold_text(row: &LockRow) -> String {
    let Some(h) = &row.hold else {
        return String::new();
    };
    let taken = h.acquisitions_per_op.map_or(String::new(), |n| {
        format!(", taken {}× per op", per_op_count(n))
    });
    format!(
        "; held {} (p99 {}, longest {}){taken}",
        human_ns(h.p50_ns as f64),
        human_ns(h.p99_ns as f64),
        human_ns(h.max_ns as f64)
    )
}

/// A count per operation in a few digits: 2, 0.25, 1.3e-5.
fn per_op_count(n: f64) -> String {
    if n >= 10.0 {
        format!("{n:.0}")
    } else if n >= 0.01 {
        format!("{:.3}", n)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{n:.1e}")
    }
}

/// "; held in F (N% of the wait), G (M%)": who made the waiters wait.
fn held_text(row: &LockRow) -> String {
    if row.holders.is_empty() {
        return String::new();
    }
    let list: Vec<String> = row
        .holders
        .iter()
        .filter(|h| h.share >= 0.05)
        .map(|h| format!("{} ({:.0}% of the wait)", h.function, h.share * 100.0))
        .collect();
    if row.lock_type == LockKind::Sleep {
        // No holder wakes a sleep: these are what the other threads ran meanwhile.
        return format!("; while it slept the others ran in {}", list.join(", "));
    }
    if row.lock_type == LockKind::Io {
        // A wait for a peer's data: the thread that answered it (a server's).
        return format!("; answered by {}", list.join(", "));
    }
    format!("; held in {}", list.join(", "))
}

/// The function holding the lock for most of the wait (at least half) while it takes the
/// lock for a small part of the waits (at most a quarter): a long critical section among
/// short ones, whose fix is to shorten it, not to shard. Only for a lock: a condition
/// variable's "holder" is whoever signalled it (an interpreter lock's handoff has its own
/// advice).
fn long_holder(row: &LockRow) -> Option<String> {
    if !row.lock_type.is_lock() {
        return None;
    }
    // The largest holder by a clear margin: holders come from a few dozen samples inside
    // the waits, so a true 0.6 share reads anywhere from 0.45 to 0.8 between runs.
    let h = row.holders.first()?;
    let next = row.holders.get(1).map_or(0.0, |n| n.share);
    let clear = h.share >= 0.5 || (h.share >= 0.4 && h.share >= 1.5 * next);
    (clear && share_of(&row.callers, &h.function) <= 0.25).then(|| h.function.clone())
}

/// The share `function` has in a list of callers or holders (0 when it is not in it).
fn share_of(list: &[LockCaller], function: &str) -> f64 {
    list.iter()
        .find(|c| c.function == function)
        .map_or(0.0, |c| c.share)
}

/// CPython's global interpreter lock, which lives in `_PyRuntime` (its mutex and condition
/// variable, one object): a lock with advice of its own.
fn is_interpreter_lock(scope: Scope, name: &str) -> bool {
    scope == Scope::User && (INTERPRETER_LOCK.matches(name) || name == "GIL")
}

#[cfg(test)]
#[test]
fn a_long_holder_is_a_lock_s_rare_caller_with_most_of_the_wait() {
    use scalprof_model::locks::LockCaller;
    let c = |f: &str, share: f64| LockCaller {
        function: f.into(),
        share,
        state: None,
        stack: None,
    };
    let mut row = LockRow {
        address: scalprof_model::locks::LockAddress::Traced(0x1),
        count: 100,
        total_wait_ns: 1,
        max_wait_ns: 1,
        callers: vec![c("lookup", 0.97), c("rebuild_index", 0.03)],
        holders: vec![c("rebuild_index", 0.95), c("lookup", 0.05)],
        ..LockRow::new(Scope::User, "index_lock", LockKind::Mutex)
    };
    assert_eq!(long_holder(&row).as_deref(), Some("rebuild_index"));
    assert!(held_text(&row).contains("held in rebuild_index (95% of the wait), lookup (5%"));
    // Below half, the largest holder by a clear margin still is (kmap_lock's flush).
    row.holders = vec![
        c("rebuild_index", 0.45),
        c("lookup", 0.30),
        c("other", 0.25),
    ];
    assert_eq!(long_holder(&row).as_deref(), Some("rebuild_index"));
    // Two holders of nearly equal share: neither is the one the waiters wait behind.
    row.holders = vec![c("rebuild_index", 0.42), c("lookup", 0.40)];
    assert_eq!(long_holder(&row), None);
    row.holders = vec![c("rebuild_index", 0.95), c("lookup", 0.05)];
    // The holder is also the caller (hash_global_mutex's table_lookup): not a long holder.
    row.callers = vec![c("rebuild_index", 1.0)];
    assert_eq!(long_holder(&row), None);
    // A condition variable's waker is whoever signalled it, not a holder to shorten.
    row.callers = vec![c("lookup", 1.0)];
    row.lock_type = LockKind::Condvar;
    assert_eq!(long_holder(&row), None);
    assert!(is_interpreter_lock(Scope::User, "_PyRuntime"));
    assert!(!is_interpreter_lock(Scope::Kernel, "_PyRuntime"));
}

#[cfg(test)]
#[test]
fn a_worker_pool_s_long_sleeps_are_idle_waits_and_a_hand_off_is_not() {
    // xz -T2's worker pool: 34 waits of 66 ms on average, the mutex held 44 ns.
    let mut row = LockRow {
        count: 34,
        total_wait_ns: 34 * 66_300_000,
        hold: Some(scalprof_model::locks::HoldTimes {
            acquisitions: 1276,
            sampled: 1276,
            p50_ns: 44,
            p99_ns: 37_500,
            mean_ns: 300.0,
            max_ns: 321_200,
            repeats: 1,
            acquisitions_per_op: None,
        }),
        ..LockRow::new(
            Scope::User,
            "condvar@[liblzma.so.5]+0xc5ad (heap)",
            LockKind::Condvar,
        )
    };
    assert_eq!(idle_wait(&row), Some(66_300_000.0));
    // The advice is about what feeds the pool, never sharding; the sleepers (callers) are
    // not named as the ones who signal.
    row.callers = vec![scalprof_model::locks::LockCaller::new("worker_start", 1.0)];
    let advice = idle_advice("pool_cond", &row).unwrap();
    assert!(
        advice.contains("what feeds them:") && !advice.contains("shard "),
        "{advice}"
    );
    assert!(!advice.contains("signals it"), "{advice}");
    row.holders = vec![scalprof_model::locks::LockCaller::new("lzma_code", 1.0)];
    let advice = idle_advice("pool_cond", &row).unwrap();
    assert!(advice.contains("(lzma_code signals it)"), "{advice}");
    // gil_handoff: 10,857 waits of 45 µs — threads taking turns, contention.
    row.count = 10_857;
    row.total_wait_ns = 10_857 * 45_100;
    assert_eq!(idle_wait(&row), None);
    // A mutex's long waits are contention whatever their length.
    row.total_wait_ns = 10_857 * 66_300_000;
    row.lock_type = LockKind::Mutex;
    assert_eq!(idle_wait(&row), None);
}

/// What a lock's holders were doing while the waiters waited, measured: running (their
/// samples during the waits) and blocked in waits of their own, followed as a chain
/// through the locks they waited on (to depth 3, cycles cut): `; its holder journal_append
/// was blocked in disk I/O (fdatasync …) 48% of the wait, running 44%`.
fn chain_text(row: &LockRow, rows: &[LockRow]) -> String {
    let Some(h) = row.holders.first() else {
        return String::new();
    };
    let who = if row.lock_type == LockKind::Io {
        "the peer"
    } else {
        "its holder"
    };
    let mut parts: Vec<String> = Vec::new();
    let mut visited = vec![row.name.as_str()];
    let mut at = row;
    for depth in 0..3 {
        let Some(w) = at
            .holder_waits
            .first()
            .filter(|w| w.share >= scalprof_model::locks::HOLDER_WAIT_SHARE)
        else {
            break;
        };
        let link = link_name(w, rows);
        parts.push(if depth == 0 {
            format!(
                "{who} {} was blocked in {link} {:.0}% of the wait",
                h.function,
                w.share * 100.0
            )
        } else {
            format!("whose holder was blocked in {link} {:.0}%", w.share * 100.0)
        });
        if !w.lock || visited.contains(&w.wait.as_str()) {
            break;
        }
        visited.push(&w.wait);
        match rows.iter().find(|r| r.name == w.wait) {
            Some(next) => at = next,
            None => break,
        }
    }
    if let Some(r) = row.holder_running.filter(|&r| r >= 0.05) {
        if row.lock_type == LockKind::Sleep {
            parts.push(format!("the others were running {:.0}% of it", r * 100.0));
        } else if parts.is_empty() {
            parts.push(format!(
                "{who} {} was running {:.0}% of the wait",
                h.function,
                r * 100.0
            ));
        } else {
            parts[0] += &format!(", running {:.0}%", r * 100.0);
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}

/// A holder's wait by the row it is in at the same point: a lock by its name, a system
/// call by the row of that call (`disk I/O (fdatasync journal.dat) in journal_append`).
fn link_name(w: &scalprof_model::locks::HolderWait, rows: &[LockRow]) -> String {
    if w.lock {
        return format!("lock {}", w.wait);
    }
    rows.iter()
        .filter(|r| r.lock_type.is_blocked_wait() && r.name.contains(&w.wait))
        .max_by_key(|r| r.total_wait_ns)
        .map_or_else(|| w.wait.clone(), |r| r.name.clone())
}

/// The main holder of a lock and the wait of its own it spent most of the waiters' wait
/// in, when that is at least a third of it (measured, not inferred from names).
fn blocked_holder(row: &LockRow, rows: &[LockRow]) -> Option<(String, String, f64)> {
    if !row.lock_type.is_lock() {
        return None;
    }
    let h = row.holders.first().filter(|h| h.share >= 0.5)?;
    let w = row.holder_waits.first().filter(|w| w.share >= 0.33)?;
    Some((h.function.clone(), link_name(w, rows), w.share))
}

/// A chain: the lock's main holder (at least half the wait) is also the function that
/// blocks in a wait of its own at the same point — the disk, I/O, a sleep — (that row's
/// top caller). Told from the functions, not from times: the holder may block outside the
/// lock, and the text says "if".
fn holder_wait<'a>(row: &LockRow, rows: &'a [LockRow]) -> Option<(String, &'a LockRow)> {
    if !row.lock_type.is_lock() {
        return None;
    }
    let h = row.holders.first().filter(|h| h.share >= 0.5)?;
    let wait = rows
        .iter()
        .filter(|r| {
            matches!(
                r.lock_type,
                LockKind::DiskIo | LockKind::Io | LockKind::Sleep | LockKind::Syscall
            ) && r.count >= LOCK_MIN_WAITS
        })
        .find(|r| {
            r.callers
                .first()
                .is_some_and(|c| c.function == h.function && c.share >= 0.5)
        })?;
    Some((h.function.clone(), wait))
}

#[cfg(test)]
#[test]
fn a_wait_chain_is_followed_through_locks_to_depth_three_and_stops_at_a_cycle() {
    use scalprof_model::locks::{HolderWait, LockCaller};
    let link = |wait: &str, lock: bool, share: f64| HolderWait {
        wait: wait.into(),
        lock,
        share,
    };
    let row = |name: &str, holder: &str, waits: Vec<HolderWait>| LockRow {
        count: 100,
        total_wait_ns: 1_000_000,
        holders: vec![LockCaller::new(holder, 1.0)],
        holder_waits: waits,
        ..LockRow::new(Scope::User, name, LockKind::Mutex)
    };
    // index_lock's holder waits on cache_lock, whose holder waits on journal_lock, whose
    // holder is in the disk.
    let disk = LockRow {
        total_wait_ns: 5_000_000,
        ..LockRow::new(
            Scope::User,
            "disk I/O (fdatasync journal.dat) in journal_append",
            LockKind::DiskIo,
        )
    };
    let rows = vec![
        row("index_lock", "refresh", vec![link("cache_lock", true, 0.7)]),
        row("cache_lock", "fill", vec![link("journal_lock", true, 0.6)]),
        row(
            "journal_lock",
            "journal_append",
            vec![link("fdatasync", false, 0.8)],
        ),
        disk,
    ];
    let text = chain_text(&rows[0], &rows);
    assert_eq!(
        text,
        "; its holder refresh was blocked in lock cache_lock 70% of the wait, \
         whose holder was blocked in lock journal_lock 60%, \
         whose holder was blocked in disk I/O (fdatasync journal.dat) in journal_append 80%"
    );
    // The last link names the disk row: advice to move the call out of the lock.
    let (h, w, share) = blocked_holder(&rows[2], &rows).unwrap();
    assert_eq!((h.as_str(), share), ("journal_append", 0.8));
    assert!(w.starts_with("disk I/O (fdatasync"));
    // A cycle (a's holder waits on b, b's on a) is cut where it closes.
    let cycle = vec![
        row("a", "f", vec![link("b", true, 0.5)]),
        row("b", "g", vec![link("a", true, 0.5)]),
    ];
    let text = chain_text(&cycle[0], &cycle);
    assert_eq!(text.matches("whose holder").count(), 1, "{text}");
    // Running holders are said as such.
    let mut busy = row("kmap_lock", "flush_all_zero_pkmaps", Vec::new());
    busy.holder_running = Some(0.95);
    assert_eq!(
        chain_text(&busy, &[]),
        "; its holder flush_all_zero_pkmaps was running 95% of the wait"
    );
}
