//! A lock finding's advice: against what its holders were seen doing where that explains
//! the wait, else by the kind of lock and its name.

use scalprof_model::locks::CPU_WAIT_OTHER;
use scalprof_model::locks::{
    CallerNamed, ChanSide, LockAddress, LockKind, LockPlace, LockRow, Scope, Side,
};
use scalprof_model::units::human_ns;
use scalprof_model::vocabulary::Pat::{self, Exact, Prefix};

use super::evidence::{blocked_holder, holder_wait, long_holder, share_of};
use super::LockSeries;

impl LockSeries<'_> {
    /// What to try: against what the holders were seen doing when that explains the
    /// wait, else against the kind of lock ([`suggestion`]).
    pub(super) fn advice(&self, rows: &[LockRow]) -> String {
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
        if let LockKind::Chan(side) = last.lock_type {
            return chan_advice(name, side, last);
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

/// A channel's hand-off: the goroutine at its other end (`last`'s holders) paces the
/// waiters. Senders waiting for one receiver is a funnel; a receiver waiting for its
/// senders, a hand-off per item.
fn chan_advice(name: &str, side: Option<ChanSide>, last: &LockRow) -> String {
    let other = last
        .holders
        .first()
        .map_or("the goroutine at its other end", |h| h.function.as_str());
    if let Some(channels) = last.channels.filter(|&c| is_one_shot(c, last.count)) {
        return format!(
            "{name} is {channels} channels used about once each ({} waits): every task \
             waits for one result handed over once, a chain that keeps the tasks' output in \
             order (each waits for the one before it). A buffer or batches do not shorten \
             it; let the tasks finish out of order (each writes its result to its own slot, \
             printed in order at the end), or hand the wait to one goroutine that prints, so \
             that no task holds its resources while it waits",
            last.count
        );
    }
    match side {
        Some(ChanSide::Send) => format!(
            "the senders wait for {other} to take their results from {name}, one at a time: \
             send in batches (a slice of results per send), give the channel a buffer, or \
             give each sender its own results and merge them at the end (or run several \
             collectors)"
        ),
        _ => format!(
            "the receivers wait for {other} to send on {name}, one item per hand-off: send \
             in batches (a slice per send) so that each hand-off carries more work, or give \
             the channel a buffer"
        ),
    }
}

/// Waits spread over channels one or two each: one-shot hand-offs, not one channel that
/// many items pass through (enough of them that the pattern is the program's).
fn is_one_shot(channels: u64, waits: u64) -> bool {
    waits >= 8 && channels * 2 >= waits
}

/// The advice for an idle wait ([`idle_wait`]): look at what feeds the sleepers.
pub(super) fn idle_advice(name: &str, last: &LockRow) -> Option<String> {
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
pub(super) fn idle_wait(row: &LockRow) -> Option<f64> {
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

/// `crate::path::NAME`: a Rust static's demangled name (the last segment upper case).
fn is_rust_static(name: &str) -> bool {
    // A lock inside the static is named at an offset (`std::io::stdio::STDOUT+0x8`).
    let name = LockPlace::symbol_in(name);
    name.rsplit_once("::").is_some_and(|(_, last)| {
        last.chars().any(|c| c.is_ascii_uppercase())
            && last
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// `mutex@crate::module::function (heap)`: a heap lock named after the Rust function that
/// takes it (C++'s demangled names carry their parameters).
fn is_rust_heap_lock(name: &str) -> bool {
    CallerNamed::parse(name).is_some_and(|n| {
        n.in_heap()
            && n.caller
                .is_some_and(|function| function.contains("::") && !function.contains('('))
    })
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
    /// Waits of these kinds on a Rust `static` (`crate::module::NAME`: a path whose last
    /// segment is in upper case, as Rust names statics and C++ rarely names a global), or
    /// on a heap lock named after the Rust function that takes it (`mutex@crate::f
    /// (heap)`: a path without C++'s parameter list).
    RustStatic(&'static [LockKind]),
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
            LockMatch::RustStatic(kinds) => {
                kinds.contains(kind) && (is_rust_static(name) || is_rust_heap_lock(name))
            }
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
        LockMatch::Kinds(&[LockKind::GoCond]),
        "goroutines wait on the sync.Cond {name} for each hand-off: signal once per batch \
         of work rather than per item, or hand the work over on a buffered channel of \
         batches",
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
        // Rust's standard streams: every print takes the stream's reentrant mutex.
        LockMatch::ScopeNamed(Scope::User, Prefix("std::io::stdio::")),
        "threads take turns printing through {name}: lock the stream once per thread \
         (`stdout().lock()`) and write through a BufWriter, or collect each thread's output \
         and print it at the end",
    ),
    (
        // A condition variable (the GIL's are matched above by name): its waiters wait for
        // a signal, which sharding cannot make come sooner.
        LockMatch::Kinds(&[LockKind::Condvar]),
        "threads wait on the condition variable {name} for each hand-off: hand work over \
         in batches (signal once per batch, not per item), signal after unlocking its \
         mutex, or give each consumer a queue of its own",
    ),
    (
        // Rust's std locks wait on the futex themselves (no pthread): a Rust program's
        // static (`crate::NAME`), named as Rust names it. A bare futex is how runs before
        // Rust's lock frames were read named its mutexes.
        LockMatch::RustStatic(&[
            LockKind::Mutex,
            LockKind::Rwlock(Some(Side::Write)),
            LockKind::Rwlock(Some(Side::Read)),
            LockKind::Futex,
        ]),
        "shard {name} (a Vec<Mutex<_>> indexed by the key's hash, each padded to its own \
         cache line, or a sharded map), use an RwLock if it is read mostly, atomics for \
         counters, or per-thread values merged at the end; and drop the guard before the \
         slow part",
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
pub(super) fn suggestion(kind: &LockKind, scope: Scope, name: &str) -> String {
    ADVICE
        .iter()
        .find(|(on, _)| on.matches(kind, scope, name))
        .map_or_else(String::new, |(_, text)| text.replace("{name}", name))
}

/// CPython's global interpreter lock, which lives in `_PyRuntime` (its mutex and condition
/// variable, one object): a lock with advice of its own.
pub(super) fn is_interpreter_lock(scope: Scope, name: &str) -> bool {
    scope == Scope::User && (INTERPRETER_LOCK.matches(name) || name == "GIL")
}

#[cfg(test)]
#[test]
fn suggestions_fit_the_lock() {
    let gil = suggestion(&LockKind::Condvar, Scope::User, "_PyRuntime+0x188");
    assert!(gil.contains("GIL") && !gil.contains("shard"), "{gil}");
    let inode = suggestion(&LockKind::Rwsem(None), Scope::Kernel, "i_rwsem");
    assert!(inode.contains("own file"), "{inode}");
    // A Rust static behind std's futex mutex: Rust's ways to shard; C's mutex keeps C's.
    let rust = suggestion(&LockKind::Mutex, Scope::User, "rust_mutex::ROUTES");
    let old = suggestion(&LockKind::Futex, Scope::User, "rust_mutex::ROUTES");
    assert_eq!(rust, old);
    let stdout = suggestion(&LockKind::Mutex, Scope::User, "std::io::stdio::STDOUT+0x8");
    assert!(stdout.contains("BufWriter"), "{stdout}");
    assert!(is_rust_static("std::io::stdio::STDOUT+0x8") && !is_rust_static("table_lock"));
    let heap = suggestion(&LockKind::Mutex, Scope::User, "mutex@arc::lookup (heap)");
    assert!(heap.contains("Vec<Mutex<_>>"), "{heap}");
    assert!(!is_rust_heap_lock("mutex@Cache::get(unsigned long) (heap)"));
    // A C++ global of the same shape is not a Rust static unless named as one.
    let cpp = suggestion(&LockKind::Mutex, Scope::User, "cache::Registry::mutex_");
    assert!(!cpp.contains("Vec<Mutex<_>>"), "{cpp}");
    assert!(
        rust.contains("Vec<Mutex<_>>") && rust.contains("RwLock"),
        "{rust}"
    );
    let c = suggestion(&LockKind::Mutex, Scope::User, "table_lock");
    assert!(
        c.contains("one lock per bucket") && !c.contains("Vec<"),
        "{c}"
    );
    let other = suggestion(&LockKind::Spinlock, Scope::Kernel, "futex hash bucket");
    assert!(!other.contains("mmap"), "{other}");
    // CPython's runtime lock is the interpreter's, in user space only.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn chan_row(count: u64, channels: Option<u64>) -> LockRow {
        LockRow {
            count,
            channels,
            ..LockRow::new(
                Scope::User,
                "chan main.run → main.run",
                LockKind::Chan(Some(ChanSide::Recv)),
            )
        }
    }

    #[test]
    fn one_shot_channels_are_told_to_give_up_the_order_not_to_batch() {
        let name = "chan main.run → main.run";
        let chain = chan_advice(name, Some(ChanSide::Recv), &chan_row(1400, Some(1390)));
        assert!(
            chain.contains("1390 channels") && chain.contains("out of order"),
            "{chain}"
        );
        // One channel that many items pass through: a hand-off per item.
        let funnel = chan_advice(name, Some(ChanSide::Recv), &chan_row(1400, Some(1)));
        assert!(
            funnel.contains("batches") && !funnel.contains("out of order"),
            "{funnel}"
        );
        // Too few waits to tell a pattern, or not counted (an older run).
        for row in [chan_row(4, Some(4)), chan_row(1400, None)] {
            assert!(chan_advice(name, Some(ChanSide::Recv), &row).contains("batches"));
        }
    }
}
