//! Diagnoses of the pathology corpus: each program swept at 1 and 2 threads and the
//! cause it must be given. Kept in a test binary of its own so that no other test
//! competes for the CPUs while it measures scaling. Most pathologies are a row of the
//! table below ([`Case`]); the rest need a look of their own.

use std::path::Path;
use std::process::Command as StdCommand;

use serde_json::Value;

mod common;
use common::corpus::{
    can_profile, cause_share, corpus, diagnose, efficiency_at, folded, is_tool_frame, read_json,
    run_corpus, top_cause_and_residual, Case, Within,
};
use common::{exclusive, scalprof};

/// A test per row: the case is swept and checked by [`diagnose`], then `then` looks further
/// at the run (its document and store) where a row cannot say it.
macro_rules! diagnosis {
    ($(#[doc = $d:literal])* $name:ident, $case:expr $(, then $then:expr)?) => {
        $(#[doc = $d])*
        #[test]
        #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
        fn $name() {
            #[allow(unused_variables)]
            if let Some(run) = diagnose(&$case) {
                $( let then: fn(&common::corpus::Diagnosed) = $then; then(&run); )?
            }
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
        fields: &[
            ("/details/callers/0/function", "table_lookup"),
            ("/details/holders/0/function", "table_lookup"),
            ("/what_if/value", "2"),
        ],
        explains: Some((&["table_lock"], Within::Points(0.15))),
        ..Case::new("hash_global_mutex", ("lock_contention", "user", "table_lock"))
    },
    then |run| {
        let findings = run.doc["findings"].as_array().unwrap();
        for f in findings {
            for key in ["kind", "subject", "evidence", "suggestion"] {
                assert!(f[key].is_string(), "{key} of {f}");
            }
            assert!((0.0..=1.0).contains(&f["score"].as_f64().unwrap()), "{f}");
            assert!(f["details"].is_object(), "{f}");
            assert!(f.get("scope").is_none_or(|s| s.is_string()), "{f}");
        }
        // The kernel's futex hash-bucket contention is the user lock's, not a finding.
        assert!(findings
            .iter()
            .all(|f| !(f["kind"] == "lock_contention" && f["scope"] == "kernel")));
        // The sharded twin: what is left of the lock cost is the lock array's (its 256
        // locks are one cause, `shards`), less than the global lock's (its share varies
        // on 2 CPUs: 7% to 44% in CI), with advice that fits an array already sharded.
        let global = run.finding("table_lock")["score"].as_f64().unwrap();
        let sharded = run.run("hash_sharded");
        for f in sharded["findings"].as_array().unwrap().iter().filter(|f| {
            f["kind"] == "lock_contention" && f["score"].as_f64().unwrap() > 0.05
        }) {
            assert_eq!(f["subject"], "shards", "{f}");
            assert!(f["score"].as_f64().unwrap() < global, "{f}; the global lock: {global}");
            assert!(f["suggestion"].as_str().unwrap().contains("Partition"), "{f}");
        }
    }
);

diagnosis!(
    /// Named by the condvar, not by the futex word a waiter slept on. Only the GIL's
    /// holder runs, so the lost thread-time is the GIL's: its waits on gil_cond and
    /// gil_mutex and the phases when one thread runs alone. Release builds measure it
    /// within 5 points; a debug build (CI) left up to 20 points unexplained in one run of
    /// three, so: most of the loss.
    an_interpreter_lock_handed_off_on_a_condvar_is_named_and_explains_the_loss,
    Case {
        first: true,
        fields: &[
            ("/details/type", "condvar"),
            ("/details/callers/0/function", "take_gil"),
        ],
        explains: Some((&["gil_*", "serial"], Within::Fraction(0.5, 0.10))),
        ..Case::new("gil_handoff", ("lock_contention", "", "gil_cond"))
    },
    then |run| {
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
        fields: &[("/details/type", "posix-lock")],
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
            ("lock_contention", "file", "{corpus}/fcntl_same_file.lock")
        )
    }
);

diagnosis!(
    /// Named by the function that sleeps, from the stack copied as it blocked. While one
    /// thread holds db_lock the other sleeps: the loss is the sleeping, seen as the sleep
    /// and as the phases when one thread runs alone, within 10 points. What the other
    /// thread ran while it slept is its transaction, the section under db_lock.
    a_sleep_and_retry_loop_is_a_blocked_wait_in_its_sleep,
    Case {
        fields: &[
            ("/details/type", "sleep"),
            ("/details/holders/0/function", "transaction"),
        ],
        says: &[("/evidence", "while it slept the others ran in transaction")],
        explains: Some((
            &["sleep in busy_wait_lock", "serial", "waiting for a CPU"],
            Within::Points(0.10),
        )),
        ..Case::new("sleep_retry", ("blocked_wait", "", "sleep in busy_wait_lock"))
    }
);

diagnosis!(
    /// The locked add's samples skid onto the instructions after it: the whole growth of
    /// the function it is in is the line's, so the loss is explained, and by it.
    a_global_refcount_is_true_sharing,
    Case {
        explains: Some((&["obj_refcount"], Within::Fraction(0.7, 1.0))),
        unexplained: Some(0.10),
        ..Case::new("refcount_global", ("true_sharing", "", "obj_refcount"))
    },
    then |run| {
        assert_eq!(top_cause_and_residual(&run.doc).0, "obj_refcount");
        let findings = run.doc["findings"].as_array().unwrap();
        assert!(findings.iter().all(|f| f["kind"] != "false_sharing"), "{findings:?}");
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
        // Who released it, from the waker's kernel stack: the write path itself.
        fields: &[("/details/holders/0/state", "at_release")],
        explains: Some((&["i_rwsem"], Within::Fraction(0.5, 0.10))),
        ..Case::new("pwrite_same_file", ("lock_contention", "kernel", "i_rwsem"))
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
        ..Case::new("striped_locks", ("lock_contention", "user", "stripes"))
    },
    then |run| {
        let last = run.doc["points"].as_array().unwrap().last().unwrap();
        let stripes: Vec<&Value> = last["locks"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["name"].as_str().unwrap().starts_with("stripes"))
            .collect();
        assert_eq!(stripes.len(), 1, "{stripes:?}");
        assert_eq!(stripes[0]["name"], "stripes", "{}", stripes[0]);
        let address = stripes[0]["address"].as_str().unwrap();
        assert!(address.contains("elements"), "{address}");
        let causes = last["budget"]["causes"].as_array().unwrap();
        assert!(causes.iter().all(|c| !c["subject"].as_str().unwrap().starts_with("stripes+")));
        assert!(cause_share(&run.doc, "stripes") > 0.05, "{causes:?}");
        assert_eq!(top_cause_and_residual(&run.doc).0, "stripes", "{causes:?}");
    }
);

diagnosis!(
    /// The waits are lookups' (nearly every operation), but they wait behind the rebuild,
    /// which ends with a tail call into the unlock (its frame is found again from its
    /// caller's call instruction).
    a_rare_long_holder_is_named_as_who_made_the_waiters_wait,
    Case {
        fields: &[
            ("/details/callers/0/function", "lookup"),
            ("/details/holders/0/function", "rebuild_index"),
        ],
        says: &[
            ("/suggestion", "behind rebuild_index"),
            ("/suggestion", "out of the lock"),
            ("/points/1/budget/causes/0/detail", "held in rebuild_index"),
        ],
        ..Case::new("index_rebuild", ("lock_contention", "", "index_lock"))
    },
    then |run| {
        // From the holders' own samples inside the waits (a few dozen at 999 Hz): 0.77
        // to 0.93 in runs here; the lookups' short sections hold the rest.
        let holder = &run.finding("index_lock")["details"]["holders"][0];
        assert!(holder["share"].as_f64().unwrap() >= 0.6, "{holder}");
    }
);

diagnosis!(
    /// The kmap_lock case study: the waiters are woken by kmap_high's and kunmap_high's
    /// unlocks, but the holder thread's own samples during their waits are in the flush it
    /// runs under the lock when the pool wraps (blame shifting).
    the_kmap_lock_waiters_wait_behind_the_flush_its_holder_runs,
    Case {
        first: true,
        fields: &[
            ("/details/holders/0/function", "flush_all_zero_pkmaps"),
            ("/details/holders/0/state", "on_cpu"),
        ],
        says: &[
            ("/suggestion", "behind flush_all_zero_pkmaps"),
            // The holder's own stack: the chain the case study found by hand.
            ("/details/holders/0/stack", "kmap_high;map_new_virtual;flush_all_zero_pkmaps"),
        ],
        ..Case::new("kmap_flush", ("lock_contention", "user", "kmap_lock"))
    },
    then |run| {
        // From a few dozen samples: 0.56–0.81 in five runs here, lower once in a debug CI
        // run; the advice names it from 0.4 with a clear margin over the next holder.
        let holder = &run.finding("kmap_lock")["details"]["holders"][0];
        assert!(holder["share"].as_f64().unwrap() >= 0.4, "{holder}");
        // Its flame graph's stacks are in the lock's row.
        let last = run.doc["points"].as_array().unwrap().last().unwrap();
        let row = last["locks"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "kmap_lock")
            .unwrap();
        assert!(!row["holder_stacks"].as_array().unwrap().is_empty(), "{row}");
    }
);

diagnosis!(
    /// One chain, not two unrelated causes: the holder's own wait is the disk, measured
    /// (the time the holder spent blocked inside the waiters' waits).
    a_lock_held_across_a_disk_flush_is_chained_to_the_disk,
    Case {
        fields: &[("/details/holders/0/function", "journal_append")],
        says: &[
            ("/evidence", "its holder journal_append was blocked in disk I/O (fdatasync"),
            ("/suggestion", "outside the lock"),
        ],
        ..Case::new("journal_sync", ("lock_contention", "", "journal_lock"))
    },
    then |run| {
        let lock = run.finding("journal_lock");
        let advice = lock["suggestion"].as_str().unwrap();
        assert!(!advice.starts_with("shard"), "{advice}");
        let link = &lock["details"]["holder_waits"][0];
        assert_eq!(link["wait"], "fdatasync", "{lock}");
        assert!(link["share"].as_f64().unwrap() >= 0.2, "{lock}");
    }
);

#[test]
fn packed_counters_scale_far_worse_than_padded_ones() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let packed = run_corpus(&db, "counters_packed", &dir.path().join("packed.json"));
    let padded = run_corpus(&db, "counters_padded", &dir.path().join("padded.json"));
    for doc in [&packed, &padded] {
        assert_eq!(doc["status"], "complete");
        let points = doc["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        for p in points {
            let reps = p["repeats"].as_array().unwrap();
            assert_eq!(reps.len(), 3);
            for r in reps {
                assert!(r["user_s"].as_f64().unwrap() > 0.0, "{r}");
                assert_eq!(r["exit_code"], 0);
                assert!(r["ops"].as_u64().unwrap() > 0);
            }
        }
        assert_eq!(doc["throughput"]["source"], "ops");
    }
    let (e_packed, e_padded) = (efficiency_at(&packed, 2), efficiency_at(&padded, 2));
    // Measured here: packed ≈ 0.13, padded ≈ 0.98 at 2 threads on 2 CPUs.
    assert!(
        e_packed < 0.6 * e_padded,
        "packed efficiency {e_packed:.2} should be far below padded {e_padded:.2}"
    );
    // The cause, named at field level: vm_cnt's counters share a line (profiled runs only).
    if can_profile() {
        let findings = packed["findings"].as_array().unwrap();
        let fs = findings
            .iter()
            .find(|f| f["kind"] == "false_sharing")
            .unwrap_or_else(|| panic!("no false_sharing finding: {findings:?}"));
        assert_eq!(fs["subject"], "vm_cnt");
        let fields: Vec<&str> = fs["details"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(
            fields.len() >= 2 && fields.contains(&"v_swtch"),
            "{fields:?}"
        );
        assert!(padded["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "false_sharing" && f["kind"] != "true_sharing"));
    }
    // Prove the fix: the padded twin's throughput at 2 threads is higher, at p < 0.05.
    let cmp = |a: &str, b: &str, extra: &[&str]| {
        scalprof(&db)
            .args(["compare", a, b, "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = cmp(
        packed["id"].as_str().unwrap(),
        padded["id"].as_str().unwrap(),
        &[],
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tput = |c: &Value, point: u64| -> Value {
        c["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["value"] == point)
            .unwrap()["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "throughput")
            .unwrap()
            .clone()
    };
    let t2 = tput(&c, 2);
    assert_eq!(t2["significant"], true, "{t2}");
    assert!(t2["welch"]["p_value"].as_f64().unwrap() < 0.05);
    assert!(t2["difference_pct"].as_f64().unwrap() > 100.0);
    // The comparison page.
    let page = dir.path().join("compare.html");
    let out = cmp(
        packed["id"].as_str().unwrap(),
        padded["id"].as_str().unwrap(),
        &["--report", page.to_str().unwrap()],
    );
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Difference at 95.0% confidence") && html.contains("id=\"flame-diff\""));
    // A run against itself: no difference proven.
    let id = padded["id"].as_str().unwrap();
    let same: Value = serde_json::from_slice(&cmp(id, id, &[]).stdout).unwrap();
    assert!(tput(&same, 2)["verdict"]
        .as_str()
        .unwrap()
        .starts_with("No difference proven"));
    // For CI: going from padded back to packed fails --fail-if-slower.
    let back = cmp(
        id,
        packed["id"].as_str().unwrap(),
        &["--fail-if-slower", "5"],
    );
    assert_eq!(back.status.code(), Some(1));
    // The whole-tree CPU time: two spinning threads use about twice the wall time.
    let p2 = &packed["points"][1];
    assert!(
        p2["user_s"]["median"].as_f64().unwrap() > 1.5 * p2["wall_s"]["median"].as_f64().unwrap()
    );
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
fn client_sweep(db: &Path, program: &str, repeats: u32, scale: Option<&str>) -> Value {
    let dir = db.parent().unwrap();
    let socket = dir.join(format!("{program}.sock"));
    let server = Server::start(program, &socket);
    let json = dir.join("client.json");
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
    .arg(&json)
    .args(["--attach", &server.0.id().to_string(), "--"])
    .arg(corpus().join("lock_client"))
    .arg("{threads}")
    .arg(&socket)
    .assert()
    .success();
    read_json(&json)
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn an_attached_server_s_lock_is_named_with_its_caller_and_process() {
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = client_sweep(&db, "lock_server", 3, None);
    let findings = doc["findings"].as_array().unwrap();
    // Two client and two server threads share this machine's two CPUs: at 2 clients the
    // woken server threads also wait for a CPU (a cause of its own, which can rank above
    // the lock on a 2-CPU machine). Nothing else may rank above the server's lock.
    let at = findings
        .iter()
        .position(|f| f["subject"] == "table_lock")
        .unwrap_or_else(|| {
            panic!(
                "table_lock not named; efficiency at 2: {}, findings: {findings:?}, warnings: {}",
                efficiency_at(&doc, 2),
                doc["warnings"]
            )
        });
    assert!(
        findings[..at]
            .iter()
            .all(|f| f["subject"] == "waiting for a CPU"),
        "{findings:?}"
    );
    let top = &findings[at];
    assert_eq!(top["kind"], "lock_contention", "{findings:?}");
    assert!(top["score"].as_f64().unwrap() >= 0.05, "{findings:?}");
    let evidence = top["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("in lock_server") && evidence.contains("table_lookup"),
        "{evidence}"
    );
    // The client's wait for the answer is the server's time: no finding of its own.
    assert!(
        findings
            .iter()
            .all(|f| !f["subject"].as_str().unwrap().contains("in client")),
        "{findings:?}"
    );
    // A request and its answer each wake a sleeping CPU: that latency is measured apart,
    // listed as part of the waits it ended, never a cause of its own.
    let rows1 = doc["points"][0]["locks"]["rows"].as_array().unwrap();
    let wake = rows1
        .iter()
        .find(|r| r["name"] == "waking an idle CPU")
        .unwrap_or_else(|| panic!("no idle wakeups at 1 client: {rows1:?}"));
    assert_eq!(wake["attributed_to"], "the waits it ended", "{wake}");
    assert!(findings
        .iter()
        .all(|f| f["subject"] != "waking an idle CPU"));
    // The server's side of that wait: the thread that answered ran table_lookup while
    // the client waited, and waited itself on table_lock (the server's own lock).
    let rows = doc["points"][1]["locks"]["rows"].as_array().unwrap();
    let read = rows
        .iter()
        .find(|r| r["name"].as_str().unwrap().ends_with(" in client"))
        .unwrap_or_else(|| panic!("no client wait: {rows:?}"));
    // From the server thread's samples inside the waits (table_lookup), or, with fewer
    // than 3 of them, from where it wrote the answer (serve_connection).
    let answered = read["holders"][0]["function"].as_str().unwrap_or("");
    assert!(
        answered == "table_lookup" || answered == "serve_connection",
        "{read}"
    );
    assert!(
        read["holder_waits"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|w| w["wait"] == "table_lock"),
        "{read}"
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
        .code(1)
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
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = client_sweep(&dir.path().join("runs.db"), "sync_server", 2, Some("0.25"));
    for p in doc["points"].as_array().unwrap() {
        let rows = p["locks"]["rows"].as_array().unwrap();
        let disk: Vec<&Value> = rows
            .iter()
            .filter(|r| {
                let name = r["name"].as_str().unwrap();
                name.contains("fdatasync") && name.ends_with("in log_commit")
            })
            .collect();
        assert_eq!(disk.len(), 1, "point {}: {rows:?}", p["value"]);
        assert!(
            disk[0]["name"]
                .as_str()
                .unwrap()
                .contains("sync_server.log.*"),
            "{}",
            disk[0]
        );
        assert_eq!(disk[0]["process"], "sync_server", "{}", disk[0]);
        // One fdatasync per request: the sweep's requests, at every point.
        assert!(disk[0]["count"].as_u64().unwrap() > 1000, "{}", disk[0]);
        let read = rows
            .iter()
            .find(|r| r["name"].as_str().unwrap().ends_with(" in client"))
            .unwrap_or_else(|| panic!("no client wait: {rows:?}"));
        assert!(
            read["holder_waits"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|w| w["wait"] == "fdatasync"),
            "{read}"
        );
    }
}

/// A server with one event loop (Redis's shape): at 2 clients its one thread is on a CPU
/// nearly all the time and the requests queue behind it. The budget covers the attached
/// server's threads, so that thread is the cause, named with its process.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_saturated_event_loop_in_an_attached_server_is_the_cause() {
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = client_sweep(&dir.path().join("runs.db"), "loop_server", 2, Some("0.25"));
    let findings = doc["findings"].as_array().unwrap();
    let stage = findings
        .iter()
        .find(|f| f["subject"] == "loop_server (one thread for all)")
        .unwrap_or_else(|| {
            panic!(
                "the loop is not named; efficiency at 2: {}, findings: {findings:?}, threads: {}",
                efficiency_at(&doc, 2),
                doc["points"][1]["profile"]["serial"]["threads"]
            )
        });
    assert_eq!(stage["kind"], "serial_fraction", "{stage}");
    assert!(stage["score"].as_f64().unwrap() >= 0.05, "{stage}");
    assert!(
        stage["details"]["single_thread_share"].as_f64().unwrap() >= 0.6,
        "{stage}"
    );
    // Nothing but the wait for a CPU (two clients and the loop share two CPUs) ranks above.
    assert!(
        findings
            .iter()
            .take_while(|f| f["subject"] != stage["subject"])
            .all(|f| f["subject"] == "waiting for a CPU"),
        "{findings:?}"
    );
    // The budget of the last point lists it, and leaves little unexplained.
    let budget = &doc["points"][1]["budget"];
    let cause = budget["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["subject"] == stage["subject"])
        .unwrap_or_else(|| panic!("{budget}"));
    assert!(cause["share"].as_f64().unwrap() >= 0.05, "{budget}");
    assert!(budget["unexplained"].as_f64().unwrap() <= 0.25, "{budget}");
    // The clients' threads each get a connection: the client is no stage of its own.
    assert!(
        findings
            .iter()
            .all(|f| !f["subject"].as_str().unwrap().starts_with("lock_client")),
        "{findings:?}"
    );
}

fn complexity(db: &Path, program: &str) -> Value {
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
    read_json(&db.with_extension(format!("{program}.json")))
}

fn exponent(doc: &Value, function: &str) -> f64 {
    doc["complexity"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == function)
        .unwrap_or_else(|| panic!("{function} not fitted: {}", doc["complexity"]))["fit"]
        ["exponent"]
        .as_f64()
        .unwrap()
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_quadratic_flow_expiry_loop_is_named_and_its_fix_is_linear() {
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = complexity(&db, "flow_expiry");
    let k = exponent(&doc, "flow_find_first");
    assert!((1.7..=2.3).contains(&k), "flow_find_first k = {k}");
    let findings = doc["findings"].as_array().unwrap();
    let f = findings
        .iter()
        .find(|f| f["kind"] == "superlinear_cost" && f["subject"] == "flow_find_first")
        .unwrap_or_else(|| panic!("{findings:?}"));
    assert!((f["details"]["exponent"].as_f64().unwrap() - k).abs() < 1e-9);
    // The sort is n log n: not flagged.
    assert!(findings.iter().all(|f| f["kind"] != "superlinear_cost"
        || !["sort_flow_times", "msort_with_tmp", "cmp_u64"]
            .contains(&f["subject"].as_str().unwrap())));
    assert!(
        findings
            .iter()
            .all(|f| f["kind"] != "serial_fraction" && f["kind"] != "kernel_hotspot"),
        "a size sweep has no threads: {findings:?}"
    );

    let fixed = complexity(&db, "flow_expiry_fixed");
    let k = exponent(&fixed, "flow_find_next");
    // Linear: 0.96–1.04 in three runs here (95% intervals up to ±0.45); a debug CI run
    // once gave 1.32. The quadratic above is 1.7–2.3, and what matters is no finding.
    assert!(k <= 1.45, "flow_find_next k = {k}");
    assert!(fixed["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["kind"] != "superlinear_cost" || f["subject"] != "flow_find_next"));
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_syscall_heavy_program_that_scales_gets_no_finding_and_is_measured_clean() {
    let _turn = exclusive();
    if !can_profile() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let doc = run_corpus(
        &dir.path().join("runs.db"),
        "syscall_loop",
        &dir.path().join("syscalls.json"),
    );
    for p in doc["points"].as_array().unwrap() {
        // Three clean repeats give the throughput (and up to two more where other
        // processes disturbed some); two traced repeats the diagnosis, more where the
        // verdict is unsettled (a small cause on the edge of 5%) or one was disturbed.
        let disturbed = p["interference"]["disturbed"].as_u64().unwrap_or(0) as usize;
        let clean = p["repeats"].as_array().unwrap().len();
        assert!((3..=3 + disturbed.min(2)).contains(&clean), "{p}");
        let traced = p["traced_repeats"].as_array().unwrap();
        assert!((2..=8).contains(&traced.len()), "{p}");
        assert!(traced.iter().all(|t| t["traced"] == true));
        let x = p["perturbation"].as_f64().expect("perturbation measured");
        // No system-call hook: tracing a syscall loop costs a few percent, not half
        // (2026-11 on the 2-CPU VM: -1% and -5%; the old syscall hooks: -53%).
        assert!(x > -0.25, "traced {:.0}% slower than clean", -100.0 * x);
        // The warning is there exactly when the perturbation exceeds 5% and lies outside
        // the noise: even the repeats' most favourable pairing shows it.
        let warned = doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "perturbed_diagnosis" && w["point"] == p["value"]);
        let [lo, hi] = [0, 1].map(|i| p["perturbation_interval"][i].as_f64().unwrap());
        assert!(lo <= x && x <= hi, "{p}");
        let outside = lo > 0.0 || hi < 0.0;
        assert_eq!(warned, x.abs() > 0.05 && outside, "{x} {}", doc["warnings"]);
    }
    let eff = efficiency_at(&doc, 2);
    let findings = doc["findings"].as_array().unwrap();
    if eff > 0.9 {
        assert!(findings.is_empty(), "efficiency {eff}: {findings:?}");
    } else {
        // The machine was busy: whatever is reported, it is not scalprof's own work.
        eprintln!("efficiency {eff:.2}: the machine was noisy; checking findings' subjects only");
    }
    for f in findings {
        assert!(!is_tool_frame(f["subject"].as_str().unwrap()), "{f}");
    }
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_tracers_own_frames_are_overhead_never_what_grew() {
    let _turn = exclusive();
    if !can_profile() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // dup/close contends the fd table's spinlock millions of times a second: every
    // contention runs the lock tracer's programs, and the sampler catches them.
    let doc = run_corpus(
        &dir.path().join("runs.db"),
        "dup_close",
        &dir.path().join("dup.json"),
    );
    let last = doc["points"].as_array().unwrap().last().unwrap().clone();
    let stats = &last["profile"]["stats"];
    assert!(
        stats["overhead_samples"].as_u64().unwrap() > 0,
        "the tracer's frames were never sampled, so this test proves nothing: {stats}"
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
    let diff = &doc["scaling_diff"];
    for scope in ["kernel", "user"] {
        for row in diff[scope].as_array().into_iter().flatten() {
            let f = row["function"].as_str().unwrap();
            assert!(!is_tool_frame(f), "what grew lists scalprof's own {f}");
        }
    }
    for f in doc["findings"].as_array().unwrap() {
        assert!(!is_tool_frame(f["subject"].as_str().unwrap()), "{f}");
    }
    for row in last["locks"]["rows"].as_array().unwrap() {
        for c in row["callers"].as_array().unwrap() {
            assert!(!is_tool_frame(c["function"].as_str().unwrap()), "{row}");
        }
    }
    // The clean repeats are what is reported: the traced one never counts.
    assert!(last["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r.get("traced").is_none()));
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn more_threads_than_cpus_is_a_wait_for_a_cpu_and_nothing_else() {
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let json = dir.path().join("over.json");
    // Twice as many threads as CPUs: the clean program's threads take turns on them. Long
    // enough (about 0.6 s a run) that threads starting and finishing a few time slices
    // apart are a small part of it: at 0.15 s the wait was 0.33–0.45 of the thread-time.
    let over = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
    scalprof(&db)
        .env("CORPUS_SCALE", "2")
        .args(["run", "-t", &format!("1,{over}"), "--repeat", "3", "--json"])
        .arg(&json)
        .arg("--")
        .arg(corpus().join("clean_parallel"))
        .arg("{threads}")
        .assert()
        .success();
    let doc = read_json(&json);
    let findings = doc["findings"].as_array().unwrap();
    let top = findings
        .first()
        .unwrap_or_else(|| panic!("no finding: {findings:?}"));
    assert_eq!(top["kind"], "blocked_wait", "{findings:?}");
    assert_eq!(top["subject"], "waiting for a CPU");
    assert_eq!(top["details"]["type"], "cpu-wait");
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
        doc["points"][1]["budget"],
        doc["points"][1]["interference"],
        doc["points"][1]["traced_repeats"],
        doc["points"][1]["perturbation"]
    );
    assert!(
        findings
            .iter()
            .skip(1)
            .all(|f| f["score"].as_f64().unwrap() < 0.10),
        "nothing else explains the loss: {findings:?}"
    );
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_process_spinning_beside_the_sweep_is_named_and_never_the_program_s_cause() {
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // A process outside the workload busy on one CPU for the whole sweep.
    let mut spinner = StdCommand::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = spinner.id() as i32;
    let doc = run_corpus(
        &dir.path().join("runs.db"),
        "hash_global_mutex",
        &dir.path().join("run.json"),
    );
    spinner.kill().unwrap();
    spinner.wait().unwrap();
    let last = doc["points"].as_array().unwrap().last().unwrap();
    let interference = &last["interference"];
    // At 2 threads on 2 CPUs, a spinner takes about half of what the workload could use.
    assert!(
        interference["share"].as_f64().unwrap() > 0.10,
        "{interference}"
    );
    let named = interference["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("the spinner {pid} is not named: {interference}"));
    assert!(named["cpu_s"].as_f64().unwrap() > 0.1, "{named}");
    assert!(
        interference["disturbed"].as_u64().unwrap() > 0,
        "{interference}"
    );
    let warning = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "interference" && w["point"] == 2)
        .unwrap_or_else(|| panic!("no interference warning: {}", doc["warnings"]));
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {pid}")),
        "{warning}"
    );
    // Disturbed repeats were measured again (at most twice per point).
    let clean = last["repeats"].as_array().unwrap().len();
    assert!((4..=5).contains(&clean), "{last}");
    // The time behind it is never the program's cause.
    for f in doc["findings"].as_array().unwrap() {
        assert_ne!(
            f["subject"], "waiting for a CPU behind other processes",
            "{f}"
        );
    }
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_contended_lock_off_the_workers_path_is_no_finding() {
    if !can_profile() {
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = run_corpus(
        &dir.path().join("runs.db"),
        "side_lock",
        &dir.path().join("run.json"),
    );
    // The lock is contended at every point: two housekeepers take turns on it.
    for p in doc["points"].as_array().unwrap() {
        let row = p["locks"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "stats_lock")
            .unwrap_or_else(|| panic!("stats_lock is not in the lock table: {}", p["locks"]));
        assert!(row["count"].as_u64().unwrap() >= 50, "{row}");
    }
    // Its waits do not grow with the workers: no finding, and no cause above 5%.
    let findings = doc["findings"].as_array().unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
    let last = doc["points"].as_array().unwrap().last().unwrap();
    for c in last["budget"]["causes"].as_array().unwrap() {
        assert!(c["share"].as_f64().unwrap() < 0.05, "{c}");
    }
}
