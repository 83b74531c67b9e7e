//! A store on a shared machine: files another user made at its path, another program's
//! database, another process at a dead recorder's pid, another program holding its lock.
//! "Another user" is uid 65534 (nobody), whose files root makes with chown.

use super::read::effective_status;
use super::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

const NOBODY: u32 = 65534;

fn new_run() -> NewRun {
    NewRun {
        label: "shared".into(),
        created: "2026-11-21T00:00:00Z".into(),
        command: vec!["./bench".into()],
        sweep: Sweep {
            parameter: scalprof_model::SweepParameter::Threads,
            values: vec![1],
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
        scaling: None,
        ops_regex: r"ops=(\d+)".into(),
        commit: None,
    }
}

/// Tests that chown files to another user need root; outside CI they may skip, and say so.
fn require_root(test: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "{test}: needs root (it plants another user's files); as another user, cargo test lists it as ignored unless CI is set"
    );
}

fn runs_in(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap()
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn another_users_store_is_refused_before_anything_is_written() {
    require_root("another_users_store_is_refused_before_anything_is_written");
    let dir = tempfile::tempdir().unwrap();
    // They recorded a run there and made the store writable by everyone.
    let theirs = dir.path().join("theirs.db");
    Store::open(&theirs)
        .unwrap()
        .create_run(&new_run())
        .unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let e = Store::open(&theirs).err().expect("their store was opened");
    let said = e.to_string();
    assert!(
        said.contains("uid 65534") && said.contains("--db"),
        "{said}"
    );
    assert_eq!(runs_in(&theirs), 1);
    // Our own link to their store is theirs all the same.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&theirs, &link).unwrap();
    assert!(
        Store::open(&link).is_err(),
        "their store was opened through our link"
    );
    // Reading it stays possible: nothing of ours goes into it.
    assert_eq!(
        Store::open_read_only(&theirs)
            .unwrap()
            .list()
            .unwrap()
            .len(),
        1
    );
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn another_users_journal_files_are_refused() {
    require_root("another_users_journal_files_are_refused");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    drop(Store::open(&path).unwrap());
    // A write-ahead log they planted (world-writable, theirs) would get our runs.
    let wal = open::wal_path(&path);
    std::fs::write(&wal, "").unwrap();
    std::os::unix::fs::chown(&wal, Some(NOBODY), Some(NOBODY)).unwrap();
    let said = Store::open(&path).err().expect("opened").to_string();
    assert!(
        said.contains("runs.db-wal") && said.contains("uid 65534"),
        "{said}"
    );
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn another_users_outputs_folder_or_link_is_refused_and_not_followed() {
    require_root("another_users_outputs_folder_or_link_is_refused_and_not_followed");
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    // A link where the store's outputs folder goes, made by them.
    let path = dir.path().join("s6.db");
    let outputs = dir.path().join("s6.db.d");
    std::os::unix::fs::symlink(&victim, &outputs).unwrap();
    std::os::unix::fs::lchown(&outputs, Some(NOBODY), Some(NOBODY)).unwrap();
    let said = Store::open(&path).err().expect("opened").to_string();
    assert!(
        said.contains("s6.db.d") && said.contains("uid 65534"),
        "{said}"
    );
    assert!(!path.exists(), "the store was created before the refusal");
    // A folder of theirs there.
    std::fs::remove_file(&outputs).unwrap();
    std::fs::create_dir(&outputs).unwrap();
    std::os::unix::fs::chown(&outputs, Some(NOBODY), Some(NOBODY)).unwrap();
    assert!(
        Store::open(&path).is_err(),
        "their outputs folder was accepted"
    );
    // A link appearing after the store was opened is not followed either.
    std::fs::remove_dir(&outputs).unwrap();
    let store = Store::open(&path).unwrap();
    std::os::unix::fs::symlink(&victim, &outputs).unwrap();
    std::os::unix::fs::lchown(&outputs, Some(NOBODY), Some(NOBODY)).unwrap();
    assert!(store.run_output_dir(1).is_err(), "a link was followed");
    std::fs::remove_file(&outputs).unwrap();
    let made = store.run_output_dir(1).unwrap();
    assert_eq!(made, outputs.join("1"));
    let m = std::fs::symlink_metadata(&outputs).unwrap();
    assert!(m.is_dir() && m.uid() == 0 && m.mode() & 0o777 == 0o700);
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
}

#[test]
fn another_programs_database_is_refused_before_anything_in_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("app.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let before = std::fs::read(&other).unwrap();
    assert!(matches!(
        Store::open(&other),
        Err(StoreError::NotAStore { .. })
    ));
    // Not even switched to WAL (a journal mode stays in the file).
    assert_eq!(std::fs::read(&other).unwrap(), before);
    assert!(!open::wal_path(&other).exists());
}

#[test]
fn a_store_being_created_is_empty_not_another_programs() {
    let dir = tempfile::tempdir().unwrap();
    // What a reader may find while `run` creates the store: the database switched to WAL,
    // its tables not yet committed.
    let path = dir.path().join("new.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    }
    let e = Store::open_read_only(&path).err().expect("opened");
    assert!(matches!(e, StoreError::Empty { .. }), "{e}");
}

#[test]
fn a_run_whose_recorder_pid_was_taken_by_another_process_is_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("runs.db")).unwrap();
    let id = store.create_run(&new_run()).unwrap();
    assert_eq!(store.list().unwrap()[0].status, RunStatus::Running);
    // The recorder died and its pid now names another process.
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    store
        .conn()
        .execute(
            "UPDATE runs SET recorder_pid = ?2 WHERE id = ?1",
            rusqlite::params![id, other.id()],
        )
        .unwrap();
    let listed = store.list().unwrap()[0].status;
    let loaded = store.load(id).unwrap().header.status;
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(listed, RunStatus::Interrupted);
    assert_eq!(loaded, RunStatus::Interrupted);
    // A store written before recorders were told apart by start time.
    assert_eq!(
        effective_status("running", Some(std::process::id() as i64), None),
        RunStatus::Running
    );
}

#[test]
fn a_finished_repeat_waits_out_a_lock_held_longer_than_five_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let store = Store::open(&path).unwrap();
    let id = store.create_run(&new_run()).unwrap();
    // An `sqlite3` session holding a write transaction open for 7 s.
    let (held_tx, held) = std::sync::mpsc::channel();
    let holder = std::thread::spawn({
        let path = path.clone();
        move || {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            held_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(7));
            conn.execute_batch("COMMIT").unwrap();
        }
    });
    held.recv().unwrap();
    let stored = store.add_repeat(id, 1, &scalprof_model::Repeat::ok(0, 1.0));
    holder.join().unwrap();
    stored.expect("the repeat was dropped");
    assert_eq!(store.load(id).unwrap().repeats.len(), 1);
}
