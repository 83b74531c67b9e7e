//! Diagnoses of the pathology corpus: each program swept at 1 and 2 threads and the
//! cause it must be given. Each takes its turn with the other measuring tests so that
//! none competes for the CPUs while it measures scaling. Most pathologies are a row of the
//! table below ([`Case`]); the rest need a look of their own.

use std::path::Path;
use std::process::Command as StdCommand;

use scalprof_model::compare::{Comparison, Metric, MetricComparison};
use scalprof_model::locks::{HolderState, LockKind, LockRow, Scope, CPU_WAIT};
use scalprof_model::{
    FindingDetails, FindingKind, RunDocument, RunStatus, ThroughputSource, WarningKind,
};

use crate::common::corpus::{
    can_profile, cause_share, corpus, diagnose, efficiency_at, folded, is_tool_frame, json,
    last_budget, last_point, lock_rows, read_run, require_profiling, sweep_corpus,
    top_cause_and_residual, Case, Within,
};
use crate::common::{exclusive, scalprof};

/// A test per row: the case is swept and checked by [`diagnose`], then `then` looks further
/// at the run (its document and store) where a row cannot say it.
macro_rules! diagnosis {
    ($(#[doc = $d:literal])* $name:ident, $case:expr $(, then $then:expr)?) => {
        $(#[doc = $d])*
        #[test]
        #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
        fn $name() {
            #[allow(unused_variables)]
            let run = diagnose(&$case);
            $( let then: fn(&crate::common::corpus::Diagnosed) = $then; then(&run); )?
        }
    };
}

diagnosis!(
    /// Every op takes table_lock around all of its work, so at 2 threads the lost
    /// thread-time is the lock's: within 7 points in release runs. A mutex's hand-off
    /// rate on 2 CPUs is bimodal between repeats (will-it-scale's pthread_mutex1: 25M–46M
    /// ops/s), and when the clean repeats land in the faster mode the traced one describes
    /// them less well (one CI run: 0.60 of 0.75): within 15 points. Who made the waiters
    /// wait: the unlocks that woke them are table_lookup's.
    a_global_mutex_is_named_with_its_caller,
    Case {
        first: true,
        explains: Some((&["table_lock"], Within::Points(0.15))),
        ..Case::new(
            "hash_global_mutex",
            (FindingKind::LockContention, Some(Scope::User), "table_lock")
        )
    },
    then |run| {
        let (lock, what_if) = (run.lock(), run.finding().what_if);
        assert_eq!(lock.callers[0].function, "table_lookup", "{}", json(lock));
        assert_eq!(lock.holders[0].function, "table_lookup", "{}", json(lock));
        assert_eq!(what_if.map(|w| w.value), Some(2), "{what_if:?}");
        // Every field has its type (the document read into the model's types says so);
        // the score is a share, and the details an object.
        for f in &run.doc.findings {
            assert!((0.0..=1.0).contains(&f.score), "{}", json(f));
            assert!(
                !matches!(&f.details, FindingDetails::Other(d) if !d.is_object()),
                "{}",
                json(f)
            );
        }
        // The kernel's futex hash-bucket contention is the user lock's, not a finding.
        assert!(run.doc.findings.iter().all(|f| !(f.kind == FindingKind::LockContention
            && f.scope == Some(Scope::Kernel))));
        // Holds are timed where the lock is contended, and never at 1 thread, where the
        // interposer would only slow the run down.
        let holds = |p: &scalprof_model::Point| -> Vec<String> {
            p.locks.iter().flat_map(|l| &l.rows).filter(|r| r.hold.is_some())
                .map(|r| r.name.clone()).collect()
        };
        let (one, last) = (&run.doc.points[0], run.doc.points.last().unwrap());
        assert_eq!((one.value, holds(one)), (1, Vec::<String>::new()), "{}", json(one));
        assert!(holds(last).contains(&"table_lock".to_string()), "{}", json(last));
        // The interposer's cost is measured there: its first traced repeat ran without it,
        // the later ones with it.
        let l = last.locks.as_ref().unwrap();
        assert!(
            !l.hold_timed_repeats.is_empty()
                && !l.hold_timed_repeats.contains(&last.traced_repeats[0].index),
            "{:?} of {:?}",
            l.hold_timed_repeats,
            last.traced_repeats.iter().map(|r| r.index).collect::<Vec<_>>()
        );
        assert!(l.hold_timing_cost.is_some_and(f64::is_finite), "{:?}", l.hold_timing_cost);
        // The sharded twin: what is left of the lock cost is the lock array's (its 256
        // locks are one cause, `shards`), less than the global lock's (its share varies
        // on 2 CPUs: 7% to 44% in CI), with advice that fits an array already sharded.
        let global = run.finding().score;
        let sharded = run.run("hash_sharded");
        for f in sharded
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::LockContention && f.score > 0.05)
        {
            assert_eq!(f.subject, "shards", "{}", json(f));
            assert!(f.score < global, "{}; the global lock: {global}", json(f));
            assert!(f.suggestion.contains("Partition"), "{}", json(f));
        }
    }
);

diagnosis!(
    /// The same table statically linked: glibc's lock and wake-up code are the program's
    /// own functions. They fold into the lock's row, and the holder is named past them:
    /// `table_lookup`, never `__lll_lock_wake` (as a 16-CPU run of a static build said).
    a_statically_linked_mutex_is_named_with_its_caller_and_holder,
    Case {
        first: true,
        ..Case::new(
            "hash_global_static",
            (FindingKind::LockContention, Some(Scope::User), "table_lock")
        )
    },
    then |run| {
        let lock = run.lock();
        assert_eq!(lock.callers[0].function, "table_lookup", "{}", json(lock));
        assert_eq!(lock.holders[0].function, "table_lookup", "{}", json(lock));
        no_finding_names_lock_code(&run.doc);
    }
);

/// No finding or budget cause is named by a lock's own code (glibc's or Rust std's,
/// linked into the program): that code is the lock's row.
fn no_finding_names_lock_code(doc: &RunDocument) {
    use scalprof_model::vocabulary::is_user_lock_code;
    for f in &doc.findings {
        assert!(!is_user_lock_code(&f.subject), "{}", json(f));
    }
    for c in &last_budget(doc).causes {
        assert!(!is_user_lock_code(&c.subject), "{}", json(c));
    }
}

/// A `static` `std::sync::Mutex` around a map (`corpus/rust_mutex.rs`, built by rustc):
/// the lock is named by its static, demangled, with the function that locks it as both
/// caller and holder; std's futex code folds into the row (no `Mutex::spin` or
/// `atomic_load` cause, no sharing finding on the lock's own word), and the profile's
/// stacks are walked to the threads' start (lld's layout once cut 20–70% of them).
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_rust_std_mutex_is_named_by_its_static_and_the_function_that_locks_it() {
    require_rust_program("rust_mutex");
    let run = diagnose(&Case {
        first: true,
        ..Case::new(
            "rust_mutex",
            (
                FindingKind::LockContention,
                Some(Scope::User),
                "rust_mutex::ROUTES",
            ),
        )
    });
    let lock = run.lock();
    assert_eq!(
        lock.callers[0].function,
        "rust_mutex::route_lookup",
        "{}",
        json(lock)
    );
    assert_eq!(
        lock.holders[0].function,
        "rust_mutex::route_lookup",
        "{}",
        json(lock)
    );
    // A mutex, as Rust names it, with advice in Rust's terms.
    let row = run
        .doc
        .points
        .last()
        .and_then(|p| p.locks.as_ref())
        .and_then(|l| l.rows.iter().find(|r| r.name == "rust_mutex::ROUTES"));
    assert_eq!(
        row.map(|r| r.lock_type.clone()),
        Some(scalprof_model::locks::LockKind::Mutex)
    );
    assert!(
        run.finding().suggestion.contains("Vec<Mutex<_>>"),
        "{}",
        json(run.finding())
    );
    no_finding_names_lock_code(&run.doc);
    for f in &run.doc.findings {
        assert!(!f.subject.starts_with("_ZN"), "a mangled name: {}", json(f));
        // std's code inlined in route_lookup is route_lookup's cost, the lock's section.
        assert!(
            !scalprof_model::vocabulary::is_rust_library_frame(&f.subject),
            "a cause named by std: {}",
            json(f)
        );
        assert!(
            !(matches!(f.kind, FindingKind::TrueSharing | FindingKind::FalseSharing)
                && f.subject.contains("ROUTES")),
            "the lock's own word is its row, not a sharing cause: {}",
            json(f)
        );
    }
    // The workers' stacks reach the thread's start (start_thread, clone3).
    let stacks = folded(&run.db(), 2);
    let workers = |s: &&(String, u64)| s.0.contains("rust_mutex::");
    let total: u64 = stacks.iter().filter(workers).map(|s| s.1).sum();
    let rooted: u64 = stacks
        .iter()
        .filter(workers)
        .filter(|s| s.0.contains("start_thread") || s.0.contains("clone"))
        .map(|s| s.1)
        .sum();
    assert!(
        rooted * 10 >= total * 9,
        "{rooted} of {total} worker samples walked to the thread's start"
    );
}

/// Asserts that the corpus has the Rust program `name`: its build makes it with rustc, which
/// comes with the toolchain that builds these tests.
fn require_rust_program(name: &str) {
    assert!(
        corpus().join(name).exists(),
        "the corpus build made no {name}: is rustc on the PATH?"
    );
}

/// Producers hand every result to one collector over a bounded `std::sync::mpsc` channel
/// (`corpus/rust_funnel.rs`): the channel is named by its two ends, both sides' waits
/// (the senders' parks, the receiver's, the channel's own mutex) are its rows, it is a
/// cause where the sweep lost throughput, and no cause or row is named by std's channel,
/// parking or thread-local code. Its twin, which
/// folds per thread and sends one table each, has no lock or channel finding.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_rust_channel_funnel_is_named_by_its_ends_and_its_twin_has_no_finding() {
    require_profiling();
    require_rust_program("rust_funnel");
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = sweep_corpus(&db, "rust_funnel", &dir.path().join("f.json"));
    let channel = "chan rust_funnel::produce → rust_funnel::collect";
    let last = doc.points.last().unwrap();
    let rows = &last.locks.as_ref().expect("a lock table").rows;
    let names: Vec<String> = rows
        .iter()
        .map(|r| format!("{} ({}, {} waits)", r.name, r.lock_type, r.count))
        .collect();
    for r in rows
        .iter()
        .filter(|r| matches!(r.lock_type, LockKind::Chan(_)))
    {
        assert_eq!(r.name, channel, "{names:?}");
    }
    assert!(
        rows.iter().any(|r| r.name == channel
            && r.lock_type == LockKind::Chan(Some(scalprof_model::locks::ChanSide::Send))),
        "{names:?}"
    );
    // Where the sweep lost throughput, the channel is one of its causes, or the wait for
    // a CPU is the first: on this 2-CPU machine the collector is a third thread, and
    // std's channel backs off with sched_yield before it parks, so three runnable threads
    // share two CPUs (28% against the channel's 2% in one CI run; 30% and no channel
    // cause in another, efficiency 0.59; 1 run in 3 the collector kept pace, efficiency
    // 0.68). On 16 CPUs the channel is the first cause (`many_core.rs`).
    let e2 = efficiency_at(&doc, 2);
    let budget = last_budget(&doc);
    let channel_cause = budget
        .causes
        .iter()
        .any(|c| c.subject == channel && c.share > 0.0);
    let cpu_wait_first = budget.causes.first().is_some_and(|c| c.subject == CPU_WAIT);
    assert!(
        e2 >= 0.6 || channel_cause || cpu_wait_first,
        "efficiency {e2:.2}, and neither the channel nor the wait for a CPU is its cause: {}",
        json(budget)
    );
    for r in rows.iter().filter(|r| r.count >= 100) {
        assert!(!r.name.contains("std::"), "a row named by std: {names:?}");
    }
    no_finding_names_lock_code(&doc);
    let twin = sweep_corpus(&db, "rust_funnel_sharded", &dir.path().join("t.json"));
    let locks: Vec<&str> = twin
        .findings
        .iter()
        .filter(|f| matches!(f.kind, FindingKind::LockContention))
        .map(|f| f.subject.as_str())
        .collect();
    assert!(locks.is_empty(), "{}", json(&twin.findings));
}

diagnosis!(
    /// Named by the condvar, not by the futex word a waiter slept on. Only the GIL's
    /// holder runs, so the lost thread-time is the GIL's: its waits on gil_cond and
    /// gil_mutex and the phases when one thread runs alone. Release builds measure it
    /// within 5 points; a debug build (CI) left up to 20 points unexplained in one run of
    /// three, so: most of the loss.
    an_interpreter_lock_handed_off_on_a_condvar_is_named_and_explains_the_loss,
    Case {
        first: true,
        explains: Some((&["gil_*", "serial"], Within::Fraction(0.5, 0.10))),
        ..Case::new("gil_handoff", (FindingKind::LockContention, None, "gil_cond"))
    },
    then |run| {
        let lock = run.lock();
        assert_eq!(lock.lock_type, LockKind::Condvar, "{}", json(lock));
        assert_eq!(lock.callers[0].function, "take_gil", "{}", json(lock));
        let e2 = efficiency_at(&run.doc, 2);
        assert!(e2 < 0.7, "a GIL does not scale: efficiency {e2:.2}");
    }
);

diagnosis!(
    /// Every operation holds the file's lock for all of its work, so at 2 processes the
    /// lost thread-time is the lock's, within 10 points: its waits, the phases when one
    /// process runs alone, and a woken waiter's wait for the CPU its releaser still runs
    /// on. The lock file lives next to the program, in the private corpus directory. A CPU
    /// wait behind processes outside the workload counts too: it is part of the loss the
    /// clean repeats measured (one debug CI run: 0.09 of a 0.59 loss, which the other rows
    /// left unexplained).
    a_posix_record_lock_across_processes_is_named_by_its_file,
    Case {
        explains: Some((
            &[
                "{corpus}/fcntl_same_file.lock",
                "serial",
                "waiting for a CPU",
                "waiting for a CPU behind other processes",
            ],
            Within::Points(0.10),
        )),
        ..Case::new(
            "fcntl_same_file",
            (FindingKind::LockContention, Some(Scope::File), "{corpus}/fcntl_same_file.lock")
        )
    },
    then |run| {
        let lock = run.lock();
        assert_eq!(lock.lock_type, LockKind::PosixLock, "{}", json(lock));
    }
);

diagnosis!(
    /// Named by the function that sleeps, from the stack copied as it blocked. While one
    /// thread holds db_lock the other sleeps: the loss is the sleeping, seen as the sleep
    /// and as the phases when one thread runs alone, within 10 points. What the other
    /// thread ran while it slept is its transaction, the section under db_lock.
    a_sleep_and_retry_loop_is_a_blocked_wait_in_its_sleep,
    Case {
        explains: Some((
            &["sleep in busy_wait_lock", "serial", "waiting for a CPU"],
            Within::Points(0.10),
        )),
        ..Case::new(
            "sleep_retry",
            (FindingKind::BlockedWait, None, "sleep in busy_wait_lock")
        )
    },
    then |run| {
        let lock = run.lock();
        assert_eq!(lock.lock_type, LockKind::Sleep, "{}", json(lock));
        assert_eq!(lock.holders[0].function, "transaction", "{}", json(lock));
        let evidence = &run.finding().evidence;
        assert!(
            evidence.contains("while it slept the others ran in transaction"),
            "{evidence}"
        );
    }
);

diagnosis!(
    /// The locked add's samples skid onto the instructions after it: the whole growth of
    /// the function it is in is the line's, so the loss is explained, and by it.
    a_global_refcount_is_true_sharing,
    Case {
        explains: Some((&["obj_refcount"], Within::Fraction(0.7, 1.0))),
        unexplained: Some(0.10),
        ..Case::new("refcount_global", (FindingKind::TrueSharing, None, "obj_refcount"))
    },
    then |run| {
        assert_eq!(top_cause_and_residual(&run.doc).0, "obj_refcount");
        let findings = &run.doc.findings;
        assert!(
            findings.iter().all(|f| f.kind != FindingKind::FalseSharing),
            "{findings:?}"
        );
    }
);

diagnosis!(
    /// Named from who takes it (the inlined inode_lock in the file system's write path),
    /// its traced waits and the optimistic spinning sampled in its slow path together. A
    /// write holds the inode lock for most of its kernel time: most of the loss; the rest
    /// is the same writes grown slower under it (the file's pages and inode bouncing).
    writers_of_one_file_wait_on_its_inode_lock,
    Case {
        first: true,
        explains: Some((&["i_rwsem"], Within::Fraction(0.5, 0.10))),
        ..Case::new(
            "pwrite_same_file",
            (FindingKind::LockContention, Some(Scope::Kernel), "i_rwsem")
        )
    },
    then |run| {
        // Who released it, from the waker's kernel stack: the write path itself.
        let lock = run.lock();
        assert_eq!(lock.holders[0].state, Some(HolderState::AtRelease), "{}", json(lock));
    }
);

diagnosis!(
    /// mmap and munmap in a loop, two threads: they sleep on the mmap_lock. A waiter woken
    /// from it runs, then takes the lock; the contention's wait (begin to end) holds that
    /// time whole, and it is not a wait for a CPU as well: 297k "waits for a CPU" beside
    /// 313k contentions, 15% of the thread-time, read as the second cause on 2 CPUs that
    /// two threads never oversubscribe, until the scheduler's programs left such a task's
    /// run to the lock.
    the_mmap_lock_s_waiters_are_the_lock_s_not_waits_for_a_cpu,
    Case::new(
        "mmap_churn",
        (FindingKind::LockContention, Some(Scope::Kernel), "mmap_lock")
    ),
    then |run| {
        let budget = run.doc.points[1].budget.as_ref().unwrap();
        let cpu = budget
            .causes
            .iter()
            .filter(|c| c.subject == CPU_WAIT)
            .map(|c| c.share)
            .sum::<f64>();
        assert!(cpu < 0.05, "{}", json(budget));
    }
);

diagnosis!(
    /// 64 mutexes of one array: one row, one cause, not one per element. The lock words'
    /// traffic (libc's lock code, the futex path) is the array's cost: the largest cause,
    /// little left unexplained. Like the mutex above, the array's hand-off rate is bimodal
    /// between repeats (the stripes' share 0.13–0.62 in ten debug runs here, unexplained
    /// 0–0.006), and once in a debug CI run the traced repeat left 0.11 unexplained: at
    /// most 0.15.
    a_lock_array_is_one_cause_named_by_its_variable,
    Case {
        explains: Some((&["stripes"], Within::Fraction(0.0, 1.0))),
        unexplained: Some(0.15),
        ..Case::new(
            "striped_locks",
            (FindingKind::LockContention, Some(Scope::User), "stripes")
        )
    },
    then |run| {
        let stripes: Vec<&LockRow> = lock_rows(last_point(&run.doc))
            .iter()
            .filter(|r| r.name.starts_with("stripes"))
            .collect();
        assert_eq!(stripes.len(), 1, "{stripes:?}");
        assert_eq!(stripes[0].name, "stripes", "{}", json(stripes[0]));
        let address = &stripes[0].address;
        assert!(
            matches!(address, scalprof_model::locks::LockAddress::Array { .. }),
            "{address}"
        );
        let causes = &last_budget(&run.doc).causes;
        assert!(causes.iter().all(|c| !c.subject.starts_with("stripes+")));
        assert!(cause_share(&run.doc, "stripes") > 0.05, "{causes:?}");
        assert_eq!(top_cause_and_residual(&run.doc).0, "stripes", "{causes:?}");
    }
);

diagnosis!(
    /// The waits are lookups' (nearly every operation), but they wait behind the rebuild,
    /// which ends with a tail call into the unlock (its frame is found again from its
    /// caller's call instruction).
    a_rare_long_holder_is_named_as_who_made_the_waiters_wait,
    Case::new("index_rebuild", (FindingKind::LockContention, None, "index_lock")),
    then |run| {
        let lock = run.lock();
        assert_eq!(lock.callers[0].function, "lookup", "{}", json(lock));
        assert_eq!(lock.holders[0].function, "rebuild_index", "{}", json(lock));
        let advice = &run.finding().suggestion;
        assert!(advice.contains("behind rebuild_index"), "{advice}");
        assert!(advice.contains("out of the lock"), "{advice}");
        let detail = &run.doc.points[1].budget.as_ref().unwrap().causes[0].detail;
        assert!(detail.contains("held in rebuild_index"), "{detail}");
        // From the holders' own samples inside the waits (a few dozen at 999 Hz): 0.77
        // to 0.93 in runs here; the lookups' short sections hold the rest.
        let holder = &lock.holders[0];
        assert!(holder.share >= 0.6, "{}", json(holder));
    }
);

diagnosis!(
    /// The kmap_lock case study: the waiters are woken by kmap_high's and kunmap_high's
    /// unlocks, but the holder thread's own samples during their waits are in the flush it
    /// runs under the lock when the pool wraps (blame shifting).
    the_kmap_lock_waiters_wait_behind_the_flush_its_holder_runs,
    Case {
        first: true,
        ..Case::new(
            "kmap_flush",
            (FindingKind::LockContention, Some(Scope::User), "kmap_lock")
        )
    },
    then |run| {
        let holder = &run.lock().holders[0];
        assert_eq!(holder.function, "flush_all_zero_pkmaps", "{}", json(holder));
        assert_eq!(holder.state, Some(HolderState::OnCpu), "{}", json(holder));
        let advice = &run.finding().suggestion;
        assert!(advice.contains("behind flush_all_zero_pkmaps"), "{advice}");
        // The holder's own stack: the chain the case study found by hand.
        let stack = holder
            .stack
            .as_deref()
            .unwrap_or_else(|| panic!("no stack: {}", json(holder)));
        assert!(
            stack.contains("kmap_high;map_new_virtual;flush_all_zero_pkmaps"),
            "{stack}"
        );
        // From a few dozen samples: 0.56–0.81 in five runs here, lower once in a debug CI
        // run; the advice names it from 0.4 with a clear margin over the next holder.
        assert!(holder.share >= 0.4, "{}", json(holder));
        // Its flame graph's stacks are in the lock's row.
        let row = lock_rows(last_point(&run.doc))
            .iter()
            .find(|r| r.name == "kmap_lock")
            .unwrap();
        assert!(!row.holder_stacks.is_empty(), "{}", json(row));
    }
);

diagnosis!(
    /// One chain, not two unrelated causes: the holder's own wait is the disk, measured
    /// (the time the holder spent blocked inside the waiters' waits).
    a_lock_held_across_a_disk_flush_is_chained_to_the_disk,
    Case::new("journal_sync", (FindingKind::LockContention, None, "journal_lock")),
    then |run| {
        let (finding, lock) = (run.finding(), run.lock());
        assert_eq!(lock.holders[0].function, "journal_append", "{}", json(lock));
        let evidence = &finding.evidence;
        assert!(
            evidence.contains("its holder journal_append was blocked in disk I/O (fdatasync"),
            "{evidence}"
        );
        let advice = &finding.suggestion;
        assert!(advice.contains("outside the lock"), "{advice}");
        assert!(!advice.starts_with("shard"), "{advice}");
        let link = &lock.holder_waits[0];
        assert_eq!(
            link.on,
            scalprof_model::locks::HeldWait::Syscall("fdatasync".into()),
            "{}",
            json(finding)
        );
        assert!(link.share >= 0.2, "{}", json(finding));
    }
);

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn packed_counters_scale_far_worse_than_padded_ones() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let packed = sweep_corpus(&db, "counters_packed", &dir.path().join("packed.json"));
    let padded = sweep_corpus(&db, "counters_padded", &dir.path().join("padded.json"));
    for doc in [&packed, &padded] {
        assert_eq!(doc.status, RunStatus::Complete);
        assert_eq!(doc.points.len(), 2);
        for p in &doc.points {
            assert_eq!(p.repeats.len(), 3);
            for r in &p.repeats {
                assert!(r.user_s > 0.0, "{}", json(r));
                assert_eq!(r.exit_code, Some(0));
                assert!(r.ops.unwrap() > 0);
            }
        }
        assert_eq!(doc.throughput.source, ThroughputSource::Ops);
    }
    let (e_packed, e_padded) = (efficiency_at(&packed, 2), efficiency_at(&padded, 2));
    // Measured here: packed ≈ 0.13, padded ≈ 0.98 at 2 threads on 2 CPUs.
    assert!(
        e_packed < 0.6 * e_padded,
        "packed efficiency {e_packed:.2} should be far below padded {e_padded:.2}"
    );
    // The cause, named at field level: vm_cnt's counters share a line (profiled runs only).
    if can_profile() {
        let findings = &packed.findings;
        let fs = findings
            .iter()
            .find(|f| f.kind == FindingKind::FalseSharing)
            .unwrap_or_else(|| panic!("no false_sharing finding: {findings:?}"));
        assert_eq!(fs.subject, "vm_cnt");
        let FindingDetails::Sharing(sharing) = &fs.details else {
            panic!("not a sharing's details: {}", json(fs));
        };
        let fields = &sharing.fields;
        assert!(
            fields.len() >= 2 && fields.iter().any(|f| f == "v_swtch"),
            "{fields:?}"
        );
        assert!(padded
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::FalseSharing && f.kind != FindingKind::TrueSharing));
    }
    // Prove the fix: the padded twin's throughput at 2 threads is higher, at p < 0.05.
    let cmp = |a: &str, b: &str, extra: &[&str]| {
        scalprof(&db)
            .args(["compare", a, b, "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let comparison =
        |out: std::process::Output| -> Comparison { serde_json::from_slice(&out.stdout).unwrap() };
    let c = comparison(cmp(&packed.id, &padded.id, &[]));
    let tput = |c: &Comparison, point: u64| -> MetricComparison {
        c.points
            .iter()
            .find(|p| p.value == point)
            .unwrap()
            .metrics
            .iter()
            .find(|m| m.metric == Metric::Throughput)
            .unwrap()
            .clone()
    };
    let t2 = tput(&c, 2);
    assert!(t2.significant, "{}", json(&t2));
    assert!(t2.welch.unwrap().p_value < 0.05);
    assert!(t2.difference_pct.unwrap() > 100.0);
    // The comparison page.
    let page = dir.path().join("compare.html");
    let out = cmp(
        &packed.id,
        &padded.id,
        &["--report", page.to_str().unwrap()],
    );
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Difference at 95.0% confidence") && html.contains("id=\"flame-diff\""));
    // A run against itself: no difference proven.
    let id = &padded.id;
    let same = comparison(cmp(id, id, &[]));
    assert!(tput(&same, 2).verdict.starts_with("No difference proven"));
    // For CI: going from padded back to packed fails --fail-if-slower.
    let back = cmp(id, &packed.id, &["--fail-if-slower", "5"]);
    assert_eq!(back.status.code(), Some(1));
    // The whole-tree CPU time: two spinning threads use about twice the wall time.
    let p2 = &packed.points[1];
    assert!(p2.user_s.unwrap().median > 1.5 * p2.wall_s.unwrap().median);
}

/// A corpus server running for the length of a test.
struct Server(std::process::Child);

impl Server {
    /// The corpus server `program`, listening on `socket` once this returns.
    fn start(program: &str, socket: &Path) -> Server {
        let server = Server(
            StdCommand::new(corpus().join(program))
                .arg(socket)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        for _ in 0..100 {
            if socket.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(socket.exists(), "{program} did not start");
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lock_client` swept at 1 and 2 clients (`repeats` repeats; `scale`: CORPUS_SCALE, if
/// set) against the corpus server `program`, attached, into the store `db` (its folder
/// holds the socket): the run's document.
fn client_sweep(db: &Path, program: &str, repeats: u32, scale: Option<&str>) -> RunDocument {
    let dir = db.parent().unwrap();
    let socket = dir.join(format!("{program}.sock"));
    let server = Server::start(program, &socket);
    let document = dir.join("client.json");
    let mut cmd = scalprof(db);
    if let Some(scale) = scale {
        cmd.env("CORPUS_SCALE", scale);
    }
    cmd.args([
        "run",
        "-t",
        "1,2",
        "--repeat",
        &repeats.to_string(),
        "--json",
    ])
    .arg(&document)
    .args(["--attach", &server.0.id().to_string(), "--"])
    .arg(corpus().join("lock_client"))
    .arg("{threads}")
    .arg(&socket)
    .assert()
    .success();
    read_run(&document)
}

/// Whether this host ran a client/server sweep latency-bound, as scalprof warned: one
/// client's round trips waited on CPUs waking from idle (`idle_wakeups`), the second point
/// ran more than linearly (`super_linear`), or it lost nothing (efficiency 0.9 or more at
/// 2). An AMD host's VM did all three: its wake-ups from idle cost as much as a request,
/// so the server's cost shows as no loss at 2 clients, and there is nothing to name. Said,
/// so that a run that skipped the naming shows it.
fn latency_bound(doc: &RunDocument, server: &str) -> bool {
    let warned = doc
        .warnings
        .iter()
        .any(|w| matches!(w.kind, WarningKind::IdleWakeups | WarningKind::SuperLinear));
    let bound = warned || efficiency_at(doc, 2) >= 0.9;
    if bound {
        eprintln!(
            "{server}: the sweep was latency-bound on this host (efficiency at 2: {:.2}, \
             warned: {warned}): the server's cause was not tested",
            efficiency_at(doc, 2)
        );
    }
    bound
}

/// The client's wait for its answer, in a point's lock table.
fn client_wait(rows: &[LockRow]) -> &LockRow {
    rows.iter()
        .find(|r| r.name.ends_with(" in client"))
        .unwrap_or_else(|| panic!("no client wait: {rows:?}"))
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn an_attached_server_s_lock_is_named_with_its_caller_and_process() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = client_sweep(&db, "lock_server", 3, None);
    let findings = &doc.findings;
    // Two client and two server threads share this machine's two CPUs: at 2 clients the
    // woken server threads also wait for a CPU (a cause of its own, which can rank above
    // the lock on a 2-CPU machine). Nothing else may rank above the server's lock.
    let at = findings.iter().position(|f| f.subject == "table_lock");
    if at.is_none() && latency_bound(&doc, "lock_server") {
        return;
    }
    let at = at.unwrap_or_else(|| {
        panic!(
            "table_lock not named; efficiency at 2: {}, findings: {findings:?}, warnings: {}",
            efficiency_at(&doc, 2),
            json(&doc.warnings)
        )
    });
    assert!(
        findings[..at]
            .iter()
            .all(|f| f.subject == "waiting for a CPU"),
        "{findings:?}"
    );
    let top = &findings[at];
    assert_eq!(top.kind, FindingKind::LockContention, "{findings:?}");
    assert!(top.score >= 0.05, "{findings:?}");
    let evidence = &top.evidence;
    assert!(
        evidence.contains("in lock_server") && evidence.contains("table_lookup"),
        "{evidence}"
    );
    // The client's wait for the answer is the server's time: no finding of its own.
    assert!(
        findings.iter().all(|f| !f.subject.contains("in client")),
        "{findings:?}"
    );
    // A request and its answer each wake a sleeping CPU: that latency is measured apart,
    // listed as part of the waits it ended, never a cause of its own.
    let rows1 = lock_rows(&doc.points[0]);
    let wake = rows1
        .iter()
        .find(|r| r.name == "waking an idle CPU")
        .unwrap_or_else(|| panic!("no idle wakeups at 1 client: {rows1:?}"));
    assert_eq!(
        wake.attributed_to.as_deref(),
        Some("the waits it ended"),
        "{}",
        json(wake)
    );
    assert!(findings.iter().all(|f| f.subject != "waking an idle CPU"));
    // The server's side of that wait: the thread that answered ran table_lookup while
    // the client waited, and waited itself on table_lock (the server's own lock).
    let read = client_wait(lock_rows(&doc.points[1]));
    // From the server thread's samples inside the waits (table_lookup), or, with fewer
    // than 3 of them, from where it wrote the answer (serve_connection).
    let answered = read.holders.first().map_or("", |h| h.function.as_str());
    assert!(
        answered == "table_lookup" || answered == "serve_connection",
        "{}",
        json(read)
    );
    assert!(
        read.holder_waits
            .iter()
            .any(|w| w.on == scalprof_model::locks::HeldWait::Lock("table_lock".into())),
        "{}",
        json(read)
    );
    // The server's samples are in the profile, under its own name.
    let stacks = folded(&db, 2);
    let server_samples: u64 = stacks
        .iter()
        .filter(|s| s.0.starts_with("lock_server;") && s.0.contains("table_lookup"))
        .map(|s| s.1)
        .sum();
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    assert!(
        server_samples * 4 > total,
        "{server_samples} of {total} samples in the server's table_lookup"
    );
    // Only the observed processes are in it, though every CPU was sampled.
    assert!(
        stacks
            .iter()
            .all(|s| s.0.starts_with("lock_server;") || s.0.starts_with("lock_client;")),
        "{:?}",
        stacks.iter().find(|s| !s.0.starts_with("lock_"))
    );
    // A process that is not there is a clear error before anything runs.
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--attach-name",
            "no_such_server",
            "--",
            "true",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--attach-name no_such_server: no running process has that command name",
        ));
}

/// A server that forks a worker per connection (PostgreSQL's shape): the workers exist only
/// once the client connects, inside each traced repeat, and their disk waits (an
/// fdatasync per request, in a log file per worker) are recorded at every point, as one
/// row whatever the worker's log is numbered; the client's wait is answered by them.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_forking_server_s_workers_disk_waits_are_recorded_at_every_point() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = client_sweep(&dir.path().join("runs.db"), "sync_server", 2, Some("0.25"));
    for p in &doc.points {
        let rows = lock_rows(p);
        let disk: Vec<&LockRow> = rows
            .iter()
            .filter(|r| r.name.contains("fdatasync") && r.name.ends_with("in log_commit"))
            .collect();
        // On one line, short: a long message is cut in the middle by CI's log.
        let names: Vec<String> = rows
            .iter()
            .map(|r| format!("{} [{:?}, {} waits]", r.name, r.process, r.count))
            .collect();
        assert_eq!(disk.len(), 1, "point {}: rows {names:?}", p.value);
        let disk = disk[0];
        assert!(disk.name.contains("sync_server.log.*"), "{}", json(disk));
        assert_eq!(
            disk.process.as_deref(),
            Some("sync_server"),
            "{}",
            json(disk)
        );
        // One fdatasync per request: the sweep's requests, at every point.
        assert!(disk.count > 1000, "{}", json(disk));
        let read = client_wait(rows);
        assert!(
            read.holder_waits
                .iter()
                .any(|w| w.on == scalprof_model::locks::HeldWait::Syscall("fdatasync".into())),
            "{}",
            json(read)
        );
    }
}

/// A server with one event loop (Redis's shape): at 2 clients its one thread is on a CPU
/// nearly all the time and the requests queue behind it. The budget covers the attached
/// server's threads, so that thread is the cause, named with its process.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_saturated_event_loop_in_an_attached_server_is_the_cause() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = client_sweep(&dir.path().join("runs.db"), "loop_server", 2, Some("0.25"));
    let findings = &doc.findings;
    let stage = findings
        .iter()
        .find(|f| f.subject == "loop_server (one thread for all)");
    if stage.is_none() && latency_bound(&doc, "loop_server") {
        return;
    }
    let stage = stage.unwrap_or_else(|| {
        panic!(
            "the loop is not named; efficiency at 2: {}, findings: {findings:?}, threads: {}",
            efficiency_at(&doc, 2),
            json(&doc.points[1].profile.as_ref().map(|p| &p.serial.threads))
        )
    });
    assert_eq!(stage.kind, FindingKind::SerialFraction, "{}", json(stage));
    assert!(stage.score >= 0.05, "{}", json(stage));
    let FindingDetails::Serial(serial) = &stage.details else {
        panic!("not a serial fraction's details: {}", json(stage));
    };
    assert!(serial.single_thread_share >= 0.6, "{}", json(stage));
    // Nothing but the wait for a CPU (two clients and the loop share two CPUs) ranks above.
    assert!(
        findings
            .iter()
            .take_while(|f| f.subject != stage.subject)
            .all(|f| f.subject == "waiting for a CPU"),
        "{findings:?}"
    );
    // The budget of the last point lists it, and leaves little unexplained.
    let budget = doc.points[1].budget.as_ref().unwrap();
    let cause = budget
        .causes
        .iter()
        .find(|c| c.subject == stage.subject)
        .unwrap_or_else(|| panic!("{}", json(budget)));
    assert!(cause.share >= 0.05, "{}", json(budget));
    assert!(budget.unexplained <= 0.25, "{}", json(budget));
    // The clients' threads each get a connection: the client is no stage of its own.
    assert!(
        findings
            .iter()
            .all(|f| !f.subject.starts_with("lock_client")),
        "{findings:?}"
    );
}

fn complexity(db: &Path, program: &str) -> RunDocument {
    let out = scalprof(db)
        .args([
            "complexity",
            "--sizes",
            // Five sizes: with four, the fit has 2 degrees of freedom and the quadratic's
            // 95% interval once reached below n log n + 0.15 in a CI run.
            "5000,10000,20000,40000,80000",
            "--repeat",
            "3",
            "--json",
        ])
        .arg(db.with_extension(format!("{program}.json")))
        .arg("--")
        .arg(corpus().join(program))
        .arg("{size}")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_run(&db.with_extension(format!("{program}.json")))
}

fn exponent(doc: &RunDocument, function: &str) -> f64 {
    let complexity = doc.complexity.as_ref().unwrap();
    complexity
        .functions
        .iter()
        .find(|f| f.function == function)
        .unwrap_or_else(|| panic!("{function} not fitted: {}", json(complexity)))
        .fit
        .exponent
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_quadratic_flow_expiry_loop_is_named_and_its_fix_is_linear() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = complexity(&db, "flow_expiry");
    let k = exponent(&doc, "flow_find_first");
    assert!((1.7..=2.3).contains(&k), "flow_find_first k = {k}");
    let findings = &doc.findings;
    let f = findings
        .iter()
        .find(|f| f.kind == FindingKind::SuperlinearCost && f.subject == "flow_find_first")
        .unwrap_or_else(|| panic!("{findings:?}"));
    let FindingDetails::Complexity(fit) = &f.details else {
        panic!("not a fit's details: {}", json(f));
    };
    assert!((fit.exponent - k).abs() < 1e-9);
    // The sort is n log n: not flagged.
    assert!(findings
        .iter()
        .all(|f| f.kind != FindingKind::SuperlinearCost
            || !["sort_flow_times", "msort_with_tmp", "cmp_u64"].contains(&f.subject.as_str())));
    assert!(
        findings
            .iter()
            .all(|f| f.kind != FindingKind::SerialFraction && f.kind != FindingKind::KernelHotspot),
        "a size sweep has no threads: {findings:?}"
    );

    let fixed = complexity(&db, "flow_expiry_fixed");
    let k = exponent(&fixed, "flow_find_next");
    // Linear: 0.96–1.04 in three runs here (95% intervals up to ±0.45); a debug CI run
    // once gave 1.32. The quadratic above is 1.7–2.3, and what matters is no finding.
    assert!(k <= 1.45, "flow_find_next k = {k}");
    assert!(fixed
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::SuperlinearCost || f.subject != "flow_find_next"));
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_syscall_heavy_program_that_scales_gets_no_finding_and_is_measured_clean() {
    let _turn = exclusive();
    require_profiling();
    let dir = tempfile::tempdir().unwrap();
    let doc = sweep_corpus(
        &dir.path().join("runs.db"),
        "syscall_loop",
        &dir.path().join("syscalls.json"),
    );
    for p in &doc.points {
        // Three clean repeats give the throughput (and up to two more where other
        // processes disturbed some); two traced repeats the diagnosis, more where the
        // verdict is unsettled (a small cause on the edge of 5%) or one was disturbed.
        let disturbed = p.interference.as_ref().map_or(0, |i| i.disturbed) as usize;
        let clean = p.repeats.len();
        assert!((3..=3 + disturbed.min(2)).contains(&clean), "{}", json(p));
        let traced = &p.traced_repeats;
        assert!((2..=8).contains(&traced.len()), "{}", json(p));
        assert!(traced.iter().all(|t| t.traced));
        let x = p.perturbation.expect("perturbation measured");
        // No system-call hook: tracing a syscall loop costs a few percent, not half
        // (2026-11 on the 2-CPU Intel VM: -1% and -5%; the old syscall hooks: -53%). On an
        // AMD EPYC VM one CI run measured -27%: the bound tells the hook's cost apart, and
        // the perturbation warning below reports the rest to the user.
        assert!(x > -0.35, "traced {:.0}% slower than clean", -100.0 * x);
        // The warning is there exactly when the perturbation exceeds 5% and lies outside
        // the noise: even the repeats' most favourable pairing shows it, and it is larger
        // than the clean repeats' own spread (a CI run measured -9.6% with clean repeats
        // 13% apart: no warning, rightly).
        let clean_spread = p
            .throughput_spread
            .filter(|s| s.median > 0.0)
            .map_or(0.0, |s| (s.max - s.min) / s.median);
        let warned = doc
            .warnings
            .iter()
            .any(|w| w.kind == WarningKind::PerturbedDiagnosis && w.point == Some(p.value));
        let [lo, hi] = p.perturbation_interval.unwrap();
        assert!(lo <= x && x <= hi, "{}", json(p));
        let outside = lo > 0.0 || hi < 0.0;
        assert_eq!(
            warned,
            x.abs() > 0.05f64.max(clean_spread) && outside,
            "{x} spread {clean_spread} {}",
            json(&doc.warnings)
        );
    }
    let eff = efficiency_at(&doc, 2);
    let findings = &doc.findings;
    if eff > 0.9 {
        assert!(findings.is_empty(), "efficiency {eff}: {findings:?}");
    } else {
        // The machine was busy: whatever is reported, it is not scalprof's own work.
        eprintln!("efficiency {eff:.2}: the machine was noisy; checking findings' subjects only");
    }
    for f in findings {
        assert!(!is_tool_frame(&f.subject), "{}", json(f));
    }
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_tracers_own_frames_are_overhead_never_what_grew() {
    let _turn = exclusive();
    require_profiling();
    let dir = tempfile::tempdir().unwrap();
    // dup/close contends the fd table's spinlock millions of times a second: every
    // contention runs the lock tracer's programs, and the sampler catches them.
    let doc = sweep_corpus(
        &dir.path().join("runs.db"),
        "dup_close",
        &dir.path().join("dup.json"),
    );
    let last = last_point(&doc);
    let stats = &last.profile.as_ref().unwrap().stats;
    assert!(
        stats.overhead_samples > 0,
        "the tracer's frames were never sampled, so this test proves nothing: {}",
        json(stats)
    );
    // Those contentions are a spinlock's, no traced task waits for a sleeping lock: the
    // contention programs went off between bursts, and counted their own runs (on
    // throughout they ran 6 million times a repeat here, 16% of its CPU time).
    let tracer = &last.locks.as_ref().unwrap().tracer;
    assert!(
        tracer.klock_probed_ns > 0 && tracer.klock_probed_ns < tracer.klock_span_ns / 2,
        "{tracer:?}"
    );
    assert!(
        tracer.bpf_families.iter().any(|f| f.family
            == scalprof_model::locks::ProbeFamily::KernelLocks
            && f.runs > 10_000
            && f.run_ns > 0),
        "{tracer:?}"
    );
    // The tracer stays loaded from one traced repeat to the next: each repeat counts its
    // own runs, not the sweep's so far. pwrite_same_file's writers contend for i_rwsem
    // and keep the contention programs on, a few hundred runs a repeat (dup_close's come
    // in bursts whose count moves 2x from one repeat to the next); counted since the
    // load, the fifth repeat's count is the five's sum.
    let counted = dir.path().join("counted.db");
    scalprof(&counted)
        .args(["run", "-t", "2", "--repeat", "1", "--diagnose", "5", "--"])
        .arg(corpus().join("pwrite_same_file"))
        .arg("{threads}")
        .assert()
        .success();
    let mut runs = kernel_lock_runs(&counted, 2);
    assert!(runs.len() >= 5, "fewer than five traced repeats: {runs:?}");
    // The counter counts every contention on the machine: a repeat beside another
    // process's burst counts ten times more. The median is about the least's, not thrice.
    runs.sort_unstable();
    let (least, median) = (runs[0], runs[runs.len() / 2]);
    assert!(
        least >= 50 && (median as f64) < 2.0 * least as f64,
        "each traced repeat's kernel-lock program runs, sorted: {runs:?}"
    );
    // Every stored stack of every point is free of them: what the flame graphs, "what
    // grew" and the findings are made of.
    let db = dir.path().join("runs.db");
    for point in [1, 2] {
        for (stack, _) in folded(&db, point) {
            assert!(
                !stack.split(';').any(is_tool_frame),
                "point {point}: scalprof's own frame in a stored stack: {stack}"
            );
        }
    }
    if let Some(diff) = &doc.scaling_diff {
        for row in diff.kernel.iter().chain(&diff.user) {
            let f = &row.function;
            assert!(!is_tool_frame(f), "what grew lists scalprof's own {f}");
        }
    }
    for f in &doc.findings {
        assert!(!is_tool_frame(&f.subject), "{}", json(f));
    }
    for row in lock_rows(last) {
        for c in &row.callers {
            assert!(!is_tool_frame(&c.function), "{}", json(row));
        }
    }
    // The clean repeats are what is reported: the traced one never counts.
    assert!(last.repeats.iter().all(|r| !r.traced));
}

/// Each traced repeat's kernel-lock program runs at `point`, from the stored lock profiles.
fn kernel_lock_runs(db: &Path, point: u64) -> Vec<u64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT profile FROM locks WHERE value = ?1 ORDER BY idx")
        .unwrap();
    let rows = stmt
        .query_map([point as i64], |r| r.get::<_, String>(0))
        .unwrap();
    rows.map(|p| {
        let profile: scalprof_model::locks::LockProfile =
            serde_json::from_str(&p.unwrap()).unwrap();
        profile
            .tracer
            .bpf_families
            .iter()
            .filter(|f| f.family == scalprof_model::locks::ProbeFamily::KernelLocks)
            .map(|f| f.runs)
            .sum()
    })
    .collect()
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn more_threads_than_cpus_is_a_wait_for_a_cpu_and_nothing_else() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let document = dir.path().join("over.json");
    // Twice as many threads as CPUs: the clean program's threads take turns on them. Long
    // enough (about 0.6 s a run) that threads starting and finishing a few time slices
    // apart are a small part of it: at 0.15 s the wait was 0.33–0.45 of the thread-time.
    let over = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
    scalprof(&db)
        .env("CORPUS_SCALE", "2")
        .args(["run", "-t", &format!("1,{over}"), "--repeat", "3", "--json"])
        .arg(&document)
        .arg("--")
        .arg(corpus().join("clean_parallel"))
        .arg("{threads}")
        .assert()
        .success();
    let doc = read_run(&document);
    let findings = &doc.findings;
    let top = findings
        .first()
        .unwrap_or_else(|| panic!("no finding: {findings:?}"));
    assert_eq!(top.kind, FindingKind::BlockedWait, "{findings:?}");
    assert_eq!(top.subject, "waiting for a CPU");
    let FindingDetails::Lock(wait) = &top.details else {
        panic!("not a wait's details: {}", json(top));
    };
    assert_eq!(wait.lock_type, LockKind::CpuWait);
    // Worked out by hand: with twice the threads a CPU can run, each thread is runnable
    // but not running about half the time it lives. Not quite half of N × wall: threads
    // start one after another and the first to finish leaves the others less to wait for
    // (`perf sched timehist` on one run: 394 ms runnable of 980 thread-ms, 40%). So the
    // wait is most of the loss (half the thread-time), and nothing else is. The rest of
    // the loss is thread-time before a thread started and after it finished, which the
    // budget does not name (so it is unexplained, not given to another cause). At this
    // length the wait was 0.90–0.98 of the loss in three runs.
    let loss = 1.0 - efficiency_at(&doc, over as u64);
    let share = cause_share(&doc, "waiting for a CPU");
    eprintln!("the wait for a CPU {share:.3} of a loss {loss:.3}");
    assert!(
        share >= 0.75 * loss && share <= loss + 0.05 && (share - 0.45).abs() <= 0.12,
        "the wait for a CPU {share:.2} should be the loss {loss:.2}, about half: {} (interference {}, traced {}; traced vs clean {})",
        json(&doc.points[1].budget),
        json(&doc.points[1].interference),
        json(&doc.points[1].traced_repeats),
        json(&doc.points[1].perturbation)
    );
    assert!(
        findings.iter().skip(1).all(|f| f.score < 0.10),
        "nothing else explains the loss: {findings:?}"
    );
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_process_spinning_beside_the_sweep_is_named_and_never_the_program_s_cause() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // A process outside the workload busy on one CPU for the whole sweep.
    let mut spinner = StdCommand::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = spinner.id() as i32;
    let doc = sweep_corpus(
        &dir.path().join("runs.db"),
        "hash_global_mutex",
        &dir.path().join("run.json"),
    );
    spinner.kill().unwrap();
    spinner.wait().unwrap();
    let last = last_point(&doc);
    let interference = last.interference.as_ref().unwrap();
    // At 2 threads on 2 CPUs, a spinner takes about half of what the workload could use.
    assert!(interference.share > 0.10, "{}", json(interference));
    let named = interference
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("the spinner {pid} is not named: {}", json(interference)));
    assert!(named.cpu_s > 0.1, "{}", json(named));
    assert!(interference.disturbed > 0, "{}", json(interference));
    let warning = doc
        .warnings
        .iter()
        .find(|w| w.kind == WarningKind::Interference && w.point == Some(2))
        .unwrap_or_else(|| panic!("no interference warning: {}", json(&doc.warnings)));
    assert!(
        warning.message.contains(&format!("pid {pid}")),
        "{}",
        json(warning)
    );
    // Disturbed repeats were measured again (at most twice per point).
    let clean = last.repeats.len();
    assert!((4..=5).contains(&clean), "{}", json(last));
    // The time behind it is never the program's cause.
    for f in &doc.findings {
        assert_ne!(
            f.subject,
            "waiting for a CPU behind other processes",
            "{}",
            json(f)
        );
    }
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_contended_lock_off_the_workers_path_is_no_finding() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = sweep_corpus(
        &dir.path().join("runs.db"),
        "side_lock",
        &dir.path().join("run.json"),
    );
    // The lock is contended at every point: two housekeepers take turns on it.
    for p in &doc.points {
        let rows = lock_rows(p);
        let row = rows
            .iter()
            .find(|r| r.name == "stats_lock")
            .unwrap_or_else(|| panic!("stats_lock is not in the lock table: {}", json(&p.locks)));
        assert!(row.count >= 50, "{}", json(row));
    }
    // Its waits do not grow with the workers: no finding, and no cause of the lock's above
    // 5%. (The housekeepers' own bursts take a CPU from the workers now and then: a wait
    // for a CPU of 6% came out on an AMD host, which is true and no finding.)
    let findings = &doc.findings;
    assert!(findings.is_empty(), "{findings:#?}");
    for c in &last_budget(&doc).causes {
        let limit = if c.subject.contains("stats_lock") {
            0.05
        } else {
            0.10
        };
        assert!(c.share < limit, "{}", json(c));
    }
}
