use super::open::{user_version, wal_has_data, wal_path};
use super::read::effective_status;
use super::schema::MIGRATIONS;
use super::*;
use scalprof_model::locks::{LockKind, LockProfile, Scope};
use scalprof_model::{FoldedStack, PointProfile, Repeat};
use std::path::Path;

pub(crate) fn new_run(label: &str) -> NewRun {
    NewRun {
        label: label.into(),
        created: "2026-11-21T00:00:00Z".into(),
        command: vec!["./bench".into(), "{threads}".into()],
        sweep: Sweep {
            parameter: scalprof_model::SweepParameter::Threads,
            values: vec![1, 2],
        },
        host: Host {
            kernel: "6.18.0".into(),
            cpus: 2,
            cpu_model: "test".into(),
            pmu: false,
            limits: None,
            topology: None,
            sample_cost_ns: None,
            switch_cost: None,
        },
        scaling: Some(ThroughputSource::Weak),
        ops_regex: r"ops=(\d+)".into(),
        commit: None,
    }
}

pub(crate) fn repeat(index: u32, wall: f64) -> Repeat {
    Repeat {
        user_s: 0.5,
        sys_s: 0.1,
        ops: Some(100),
        voluntary_csw: 1,
        involuntary_csw: 2,
        minor_faults: 3,
        major_faults: 4,
        stdout_path: Some("/tmp/o".into()),
        ..Repeat::ok(index, wall)
    }
}

#[test]
fn traced_repeats_round_trip_and_older_stores_read_as_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // A store written at schema 4, before clean and traced repeats were told apart.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for sql in &MIGRATIONS[..4] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 4).unwrap();
        conn.execute_batch(
            "INSERT INTO runs (label, created, command, status, parameter, sweep_values, host,
                               scaling, ops_regex, output_dir)
             VALUES ('old', '2026-01-01T00:00:00Z', '[\"./x\"]', 'complete', 'threads', '[1]',
                     '{\"kernel\":\"6.1\",\"cpus\":2,\"cpu_model\":\"c\",\"pmu\":false}',
                     'weak', 'ops=(\\d+)', '/tmp');
             INSERT INTO repeats (run_id, value, idx, wall_s, user_s, sys_s, ops, exit_code,
                                  signal, timed_out, voluntary_csw, involuntary_csw,
                                  minor_faults, major_faults)
             VALUES (1, 1, 0, 1.0, 1.0, 0.0, 100, 0, NULL, 0, 0, 0, 0, 0);",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let repeats = store.load(1).unwrap().repeats;
    assert_eq!(repeats.len(), 1);
    assert!(!repeats[0].repeat.traced, "an old repeat counts as clean");
    // New repeats keep their kind.
    let mut r = repeat(1, 1.2);
    r.traced = true;
    store.add_repeat(1, 1, &r).unwrap();
    let repeats = store.load(1).unwrap().repeats;
    assert_eq!(
        repeats.iter().map(|r| r.repeat.traced).collect::<Vec<_>>(),
        vec![false, true]
    );
}

#[test]
fn a_label_of_several_runs_resolves_to_the_newest_and_lists_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("runs.db")).unwrap();
    let a = store.create_run(&new_run("alpha")).unwrap();
    let b = store.create_run(&new_run("beta")).unwrap();
    let a2 = store.create_run(&new_run("alpha")).unwrap();
    assert_eq!(store.resolve("alpha").unwrap(), a2);
    assert_eq!(store.labelled("alpha").unwrap(), vec![a, a2]);
    assert_eq!(store.labelled("beta").unwrap(), vec![b]);
    assert!(store.labelled("gamma").unwrap().is_empty());
    // `latest…` and ids name one run each.
    assert!(store.labelled("latest~1").unwrap().is_empty());
    assert!(store.labelled(&a.to_string()).unwrap().is_empty());
    // `LABEL~N`: the Nth-last run of the label; a label ending in `~N` is itself first.
    assert_eq!(store.resolve("alpha~0").unwrap(), a2);
    assert_eq!(store.resolve("alpha~1").unwrap(), a);
    assert!(store.resolve("alpha~2").is_err());
    assert!(store.resolve("beta~x").is_err());
    let odd = store.create_run(&new_run("alpha~1")).unwrap();
    assert_eq!(store.resolve("alpha~1").unwrap(), odd);
}

#[test]
fn repeats_round_trip_and_runs_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("sub/runs.db")).unwrap();
    assert!(matches!(
        store.resolve("latest"),
        Err(StoreError::Empty { .. })
    ));
    let a = store.create_run(&new_run("alpha")).unwrap();
    store.add_repeat(a, 1, &repeat(0, 1.0)).unwrap();
    store.add_repeat(a, 1, &repeat(1, 1.1)).unwrap();
    store.add_repeat(a, 2, &repeat(0, 2.0)).unwrap();
    store.set_status(a, RunStatus::Complete).unwrap();
    let b = store.create_run(&new_run("beta")).unwrap();

    assert_eq!(store.resolve("latest").unwrap(), b);
    assert_eq!(store.resolve("latest~1").unwrap(), a);
    assert_eq!(store.resolve("alpha").unwrap(), a);
    assert_eq!(store.resolve(&a.to_string()).unwrap(), a);
    let e = store.resolve("gamma").unwrap_err().to_string();
    assert!(e.contains("gamma") && e.contains("scalprof runs"), "{e}");
    assert!(store.resolve("latest~5").is_err());
    assert!(store.resolve("latest~-1").is_err(), "not the newest run");

    let stored = store.load(a).unwrap();
    let (h, reps, findings) = (stored.header, stored.repeats, stored.legacy_findings);
    assert_eq!(h.label, "alpha");
    assert_eq!(h.status, RunStatus::Complete);
    assert_eq!(h.sweep.values, vec![1, 2]);
    assert_eq!(reps.len(), 3);
    assert_eq!(reps[1].repeat, repeat(1, 1.1));
    assert!(findings.is_empty());

    let list = store.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!((list[0].points, list[0].planned), (2, 2));
    // b is still "running" and recorded by this live process.
    assert_eq!(list[1].status, RunStatus::Running);
}

#[test]
fn a_running_run_whose_recorder_died_reads_as_interrupted() {
    assert_eq!(
        effective_status("running", Some(i32::MAX as i64), None),
        RunStatus::Interrupted
    );
    assert_eq!(
        effective_status("running", None, None),
        RunStatus::Interrupted
    );
    let me = std::process::id() as i64;
    let started = super::read::process_start(me as i32);
    assert!(started.is_some());
    assert_eq!(
        effective_status("running", Some(me), started.as_deref()),
        RunStatus::Running
    );
    assert_eq!(effective_status("failed", None, None), RunStatus::Failed);
}

#[test]
fn reopening_keeps_data_and_refuses_newer_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let id = {
        let s = Store::open(&path).unwrap();
        let id = s.create_run(&new_run("x")).unwrap();
        s.add_repeat(id, 1, &repeat(0, 1.0)).unwrap();
        id
    };
    let s = Store::open(&path).unwrap();
    assert_eq!(s.load(id).unwrap().repeats.len(), 1);
    s.conn()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(s);
    match Store::open(&path) {
        Err(StoreError::TooNew { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn default_path_follows_xdg() {
    let p = default_path();
    assert!(p.ends_with("scalprof/runs.db"), "{}", p.display());
}

#[test]
fn profiles_round_trip_with_spaces_in_frame_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("runs.db")).unwrap();
    let id = store.create_run(&new_run("p")).unwrap();
    let p = PointProfile {
        event: "cpu-clock".into(),
        frequency: 999,
        repeats: 1,
        folded: vec![FoldedStack {
            stack: "prog;operator new(unsigned long);clear_page_erms_[k]".into(),
            samples: 3,
            weight: 3_000_000,
        }],
        ..Default::default()
    };
    store.add_profile(id, 2, 0, &p).unwrap();
    let got = store.load_profiles(id).unwrap();
    assert_eq!(got, vec![(2, 0, p)]);
}

#[test]
fn lock_tables_round_trip() {
    use scalprof_model::locks::{LockCaller, LockRow};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("runs.db")).unwrap();
    let id = store.create_run(&new_run("l")).unwrap();
    let p = LockProfile {
        rows: vec![LockRow {
            address: scalprof_model::locks::LockAddress::Traced(0x1000),
            count: 10,
            total_wait_ns: 1000,
            max_wait_ns: 300,
            callers: vec![LockCaller {
                function: "table_lookup".into(),
                share: 1.0,
                state: None,
                stack: None,
            }],
            ..LockRow::new(Scope::User, "table_lock", LockKind::from("mutex"))
        }],
        repeats: 1,
        ..Default::default()
    };
    store.add_locks(id, 2, 0, &p).unwrap();
    assert_eq!(store.load_locks(id).unwrap(), vec![(2, 0, p)]);
}

#[test]
fn a_new_store_is_the_owners_only_and_foreign_databases_are_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new/runs.db");
    Store::open(&path).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    // Another program's SQLite file gets no scalprof tables, read-write or read-only.
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (t TEXT);")
        .unwrap();
    assert!(matches!(
        Store::open(&other),
        Err(StoreError::NotAStore { .. })
    ));
    assert!(matches!(
        Store::open_read_only(&other),
        Err(StoreError::NotAStore { .. })
    ));
    let tables: i64 = rusqlite::Connection::open(&other)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1);
    // Reading a store that does not exist does not create it.
    let missing = dir.path().join("missing.db");
    assert!(matches!(
        Store::open_read_only(&missing),
        Err(StoreError::Missing { .. })
    ));
    assert!(!missing.exists());
}

#[test]
fn a_read_only_store_reads_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let store = Store::open(&path).unwrap();
    let id = store.create_run(&new_run("ro")).unwrap();
    store.add_repeat(id, 1, &repeat(0, 1.0)).unwrap();
    drop(store);
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(ro.list().unwrap().len(), 1);
    assert_eq!(ro.load(id).unwrap().repeats.len(), 1);
    assert!(
        ro.create_run(&new_run("x")).is_err(),
        "read-only means read-only"
    );
}

#[test]
fn a_schema_5_store_keeps_its_frozen_findings_and_new_runs_store_sharing_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    // Schema 5 froze sharing findings in `runs.findings`.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for sql in &MIGRATIONS[..5] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        conn.execute_batch(
            "INSERT INTO runs (label, created, command, status, parameter, sweep_values, host,
                               scaling, ops_regex, output_dir, findings)
             VALUES ('v5', '2026-01-01T00:00:00Z', '[\"./x\"]', 'complete', 'threads', '[1,2]',
                     '{\"kernel\":\"6.1\",\"cpus\":2,\"cpu_model\":\"c\",\"pmu\":false}',
                     'weak', 'ops=(\\d+)', '/tmp',
                     '[{\"kind\":\"false_sharing\",\"scope\":\"user\",\"subject\":\"counters\",\"score\":0.7,\"evidence\":\"e\",\"suggestion\":\"s\",\"details\":{}}]');",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let old = store.load(1).unwrap();
    assert_eq!(old.legacy_findings.len(), 1);
    assert_eq!(old.legacy_findings[0].subject, "counters");
    assert_eq!(
        old.legacy_findings[0].kind,
        scalprof_model::FindingKind::FalseSharing
    );
    assert_eq!(old.sharing, None);

    let id = store.create_run(&new_run("v6")).unwrap();
    let inputs = scalprof_model::layout::SharingInputs {
        line: 64,
        sites: vec![scalprof_model::layout::SharingSite {
            file: "/bin/x".into(),
            sampled: 0x1139,
            ip: 0x1135,
            address: 0x4040,
            indexed: true,
            object: "counters".into(),
            functions: vec!["worker".into()],
        }],
        objects: vec![],
    };
    store.set_sharing(id, &inputs).unwrap();
    let new = store.load(id).unwrap();
    assert_eq!(new.sharing, Some(inputs));
    assert!(new.legacy_findings.is_empty());
}

/// Root may read anything, so a read-only folder is a read-only bind mount here.
fn read_only_mount(dir: &Path) -> Option<impl Drop> {
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("skipped: a read-only bind mount needs root");
        return None;
    }
    let bind = std::process::Command::new("mount")
        .args(["--bind"])
        .arg(dir)
        .arg(dir)
        .status()
        .unwrap();
    assert!(bind.success());
    let guard = Unmount(dir.to_path_buf());
    let ro = std::process::Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(ro.success());
    Some(guard)
}

#[test]
fn runs_committed_only_to_the_log_are_read_from_a_read_only_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    {
        let store = Store::open(&path).unwrap();
        store.create_run(&new_run("first")).unwrap();
        // Checkpointed into the main file.
        store
            .conn()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        store.create_run(&new_run("second")).unwrap();
        // A killed recorder never checkpoints: the second run is only in the log.
        std::mem::forget(store);
    }
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::copy(&path, ro.join("x.db")).unwrap();
    std::fs::copy(wal_path(&path), ro.join("x.db-wal")).unwrap();
    assert!(wal_has_data(&ro.join("x.db")));
    let Some(_mount) = read_only_mount(&ro) else {
        return;
    };
    let store = Store::open_read_only(&ro.join("x.db")).unwrap();
    let labels: Vec<String> = store.list().unwrap().into_iter().map(|r| r.label).collect();
    assert_eq!(labels, ["first", "second"]);
    assert_eq!(store.path(), ro.join("x.db"));
}

#[test]
fn two_openers_of_a_new_store_take_turns_in_the_migration() {
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let openers: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || Store::open(&path).map(|_| ()))
            })
            .collect();
        for o in openers {
            o.join().unwrap().unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(user_version(store.conn()).unwrap(), SCHEMA_VERSION);
    }
}

#[test]
fn a_dangling_symlink_is_followed_to_an_owner_only_store() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink("target.db", &link).unwrap();
    Store::open(&link).unwrap();
    let mode = std::fs::metadata(dir.path().join("target.db"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // A link another user planted is not followed to create anything.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let theirs = dir.path().join("theirs.db");
        std::os::unix::fs::symlink("victim.db", &theirs).unwrap();
        std::os::unix::fs::lchown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = Store::open(&theirs).err().unwrap().to_string();
        assert!(e.contains("uid 65534"), "{e}");
        assert!(!dir.path().join("victim.db").exists());
    }
}

#[test]
fn a_damaged_run_does_not_hide_the_others_and_an_empty_file_is_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    let store = Store::open(&path).unwrap();
    store.create_run(&new_run("a")).unwrap();
    let b = store.create_run(&new_run("b")).unwrap();
    store
        .conn()
        .execute("UPDATE runs SET command = 'not json' WHERE id = ?1", [b])
        .unwrap();
    let runs = store.list().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs[1].command[0].starts_with("(damaged"), "{:?}", runs[1]);
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    let e = Store::open_read_only(&empty).err().unwrap();
    assert!(matches!(e, StoreError::Empty { .. }), "{e}");
}
