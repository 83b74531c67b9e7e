//! `scalprof verify` on the corpus: causes lengthened by known delays, and the verdicts
//! the throughput's answer gives (root needed for BPF; CI runs as root).

use std::path::Path;

use scalprof_model::experiment::{Experiment, Verdict};

use crate::common::corpus::{corpus, json, read_run, require_profiling, sweep_corpus};
use crate::common::{exclusive, scalprof};

/// `scalprof verify RUN ARGS… --json`: the experiments.
fn verify(db: &Path, args: &[&str]) -> Vec<Experiment> {
    let out = scalprof(db)
        .args(["verify", "1", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_lock_held_across_fdatasync_is_on_the_critical_path() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // `run --verify`: the sweep, then its top findings proved, journal_lock first; the
    // document and the report written after the experiments.
    let (json_path, html) = (dir.path().join("run.json"), dir.path().join("run.html"));
    scalprof(&db)
        .args(["run", "-t", "1,2", "--repeat", "3", "--verify", "--json"])
        .arg(&json_path)
        .arg("--report")
        .arg(&html)
        .arg("--")
        .arg(corpus().join("journal_sync"))
        .arg("{threads}")
        .assert()
        .success();
    let experiments = read_run(&json_path).experiments;
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Experiment: journal_lock at threads 2"),
        "no experiment line in the report"
    );
    let lock = experiments
        .iter()
        .find(|e| e.subject == "journal_lock")
        .unwrap_or_else(|| panic!("no experiment on journal_lock: {}", json(&experiments)));
    assert_eq!(lock.verdict, Verdict::OnCriticalPath, "{}", json(lock));
    // A global pthread mutex: its hold lengthened where it is released.
    assert!(lock.primitive.contains("LD_PRELOAD"), "{}", json(lock));
    assert!(
        (lock.occurrences_per_op - 1.0).abs() < 0.01,
        "one release per append: {}",
        json(lock)
    );
    // The measured slowdown within 2× of the bottleneck's prediction.
    let [lo, hi] = lock.measured_slowdown;
    let mid = (lo + hi) / 2.0;
    let p = lock.predicted_slowdown;
    assert!(mid >= p / 2.0 && mid <= 2.0 * p, "{}", json(lock));
    // The control and the longest delay at least (the shorter one runs when the verdict
    // takes a second round).
    assert!(
        lock.throughput.len() >= 2 && lock.delays_ns[0] == 0,
        "{}",
        json(lock)
    );
    let w = lock
        .calibrated_what_if
        .as_ref()
        .expect("a measured what-if");
    assert!(w.speedup > 1.0, "{}", json(lock));
    // Stored with the run, and the finding points at it.
    let show = scalprof(&db)
        .args(["show", "1", "--json"])
        .output()
        .unwrap();
    let path = dir.path().join("shown.json");
    std::fs::write(&path, &show.stdout).unwrap();
    let doc = read_run(&path);
    let finding = doc
        .findings
        .iter()
        .find(|f| f.subject == "journal_lock")
        .expect("the journal_lock finding");
    let linked = finding.experiment.map(|i| &doc.experiments[i]);
    assert_eq!(linked.map(|e| e.verdict), Some(Verdict::OnCriticalPath));
    // In the terminal, under the finding.
    let text = scalprof(&db).args(["show", "1"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("experiment: journal_lock at threads 2"),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_lock_contended_off_the_workers_path_is_not_on_the_critical_path() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    sweep_corpus(&db, "side_lock", &dir.path().join("run.json"));
    // The housekeepers hold stats_lock across a 2 ms sleep: lengthening the sleep, or the
    // hold itself, is off every worker's path.
    let experiments = verify(
        &db,
        &[
            "--cause",
            "clock_nanosleep",
            "--cause",
            "stats_lock",
            "--cause",
            "no_such_cause",
        ],
    );
    for e in &experiments[..2] {
        assert!(e.occurrences_per_op > 0.0, "{}", json(e));
    }
    // The lock's hold is lengthened by a sleep, which takes no CPU: off the path.
    let lock = &experiments[1];
    assert!(lock.primitive.contains("LD_PRELOAD"));
    assert_ne!(lock.verdict, Verdict::OnCriticalPath, "{}", json(lock));
    // The sleep is lengthened by sleeping longer after it returns, which takes no CPU: off
    // the path. (A BPF spin where it returned took a CPU the workers kept busy, and 1 run in
    // 3 judged it on the path.)
    let sleep = &experiments[0];
    assert_eq!(sleep.subject, "clock_nanosleep");
    assert!(sleep.primitive.contains("no CPU taken"), "{}", json(sleep));
    assert_eq!(sleep.verdict, Verdict::OffCriticalPath, "{}", json(sleep));
    // A cause that is neither a call nor a global is named as not lengthened, and why.
    let none = &experiments[2];
    assert_eq!(none.verdict, Verdict::NotLengthened, "{}", json(none));
    assert!(none.reason.contains("system call"), "{}", json(none));
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_global_mutex_every_lookup_takes_is_on_the_critical_path() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    sweep_corpus(&db, "hash_global_mutex", &dir.path().join("run.json"));
    // table_lock's critical section is some 100 ns: delays of tens of ns, each release.
    let experiments = verify(&db, &["--rounds", "3"]);
    let lock = experiments
        .iter()
        .find(|e| e.subject == "table_lock")
        .unwrap_or_else(|| panic!("no experiment on table_lock: {}", json(&experiments)));
    assert_eq!(lock.verdict, Verdict::OnCriticalPath, "{}", json(lock));
    assert!(lock.delays_ns.len() >= 2, "{}", json(lock));
    assert!(
        lock.delays_ns[1] < 1_000,
        "a user lock takes delays below a system call's: {}",
        json(lock)
    );
    assert!(
        (lock.occurrences_per_op - 1.0).abs() < 0.01,
        "one release per lookup: {}",
        json(lock)
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_rare_long_holder_s_lock_is_on_the_critical_path_on_busy_cpus() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    sweep_corpus(&db, "index_rebuild", &dir.path().join("run.json"));
    // Two workers keep both CPUs busy; one of them rebuilds the index under index_lock now
    // and then. Lengthening every release is a bottleneck's cost, whatever the spin took.
    let experiments = verify(&db, &["--cause", "index_lock", "--rounds", "3"]);
    let lock = &experiments[0];
    assert_eq!(lock.subject, "index_lock");
    assert_eq!(lock.verdict, Verdict::OnCriticalPath, "{}", json(lock));
}
