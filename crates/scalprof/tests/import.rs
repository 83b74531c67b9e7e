//! `scalprof import` on files recorded by Linux perf on this machine.

use std::path::Path;
use std::process::Command as StdCommand;

use assert_cmd::Command;
use predicates::prelude::*;

fn perf_available() -> bool {
    let ok = StdCommand::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have perf (apt-get install linux-perf)"
        );
        eprintln!("skipped: perf is not installed (apt-get install linux-perf)");
    }
    ok
}

fn build_corpus(dir: &Path) {
    Command::cargo_bin("scalprof")
        .unwrap()
        .args(["corpus", "--out"])
        .arg(dir)
        .assert()
        .success();
}

#[test]
fn a_dwarf_perf_data_imports_with_stacks_reaching_the_thread_function() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build_corpus(&dir.path().join("c"));
    let data = dir.path().join("perf.data");
    let st = StdCommand::new("perf")
        .args(["record", "-q", "-F", "999", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg("--")
        .arg(dir.path().join("c/clean_parallel"))
        .arg("2")
        .env("CORPUS_SCALE", "0.5")
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let db = dir.path().join("runs.db");
    Command::cargo_bin("scalprof")
        .unwrap()
        .arg("--db")
        .arg(&db)
        .arg("import")
        .arg(&data)
        .assert()
        .success()
        .stdout(predicate::str::contains("profile: cpu-clock"));
    let out = Command::cargo_bin("scalprof")
        .unwrap()
        .arg("--db")
        .arg(&db)
        .args(["flame", "latest", "--folded"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut total, mut reach) = (0u64, 0u64);
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        total += n;
        if stack.contains("start_thread;worker") {
            reach += n;
        }
    }
    assert!(total > 50 && reach * 10 >= total * 9, "{reach} of {total}");
}

#[test]
fn a_corrupt_perf_data_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.data");
    let mut bytes = b"PERFILE2".to_vec();
    bytes.extend_from_slice(&[0xff; 200]);
    std::fs::write(&bad, bytes).unwrap();
    Command::cargo_bin("scalprof")
        .unwrap()
        .arg("--db")
        .arg(dir.path().join("runs.db"))
        .arg("import")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "bad.data is not a readable perf.data file",
        ))
        .stderr(predicate::str::contains("panicked").not());
}
