//! The invocations of the scalprof binary that the test binaries repeat: a quick run, a
//! store holding one, the run document `show --json` prints, and scalprof as a process a
//! test signals or limits.

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output};

use assert_cmd::Command;
use serde_json::Value;

use super::scalprof;

/// `scalprof run`'s options for the quickest recorded run: one thread, one repeat, no
/// diagnosis; the workload follows.
pub const QUICK_RUN: [&str; 8] = ["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--"];

/// A quick run ([`QUICK_RUN`]) of `sh -c script` into the store `db`.
pub fn quick_run(db: &Path, script: &str) -> Command {
    let mut c = scalprof(db);
    c.args(QUICK_RUN).args(["sh", "-c", script]);
    c
}

/// A store in `dir` with one quick run in it.
pub fn store_with_a_run(dir: &Path) -> PathBuf {
    let db = dir.join("runs.db");
    let out = quick_run(&db, "echo ops=1").output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    db
}

/// The run document `scalprof show <run> --json` prints from the store `db`.
pub fn show_json(db: &Path, run: &str) -> Value {
    let out = scalprof(db).args(["show", run, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The scalprof binary with its own store, as a process the test spawns (to signal it,
/// kill it or limit it).
pub fn scalprof_process(db: &Path) -> StdCommand {
    let mut c = StdCommand::new(assert_cmd::cargo::cargo_bin("scalprof"));
    c.arg("--db").arg(db);
    c
}

/// What a finished scalprof wrote to stderr.
pub fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
