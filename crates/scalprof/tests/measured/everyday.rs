//! Everyday use, end to end: the workload's output is not hoarded, the store can be
//! pruned, and a fixed-work tool's speedup is its wall time's, on a quiet and on a busy
//! machine.

use std::path::Path;
use std::process::{Child, Command as StdCommand, Stdio};

use serde_json::Value;

use crate::common::cli::{quick_run, show_json, stderr_of};
use crate::common::{exclusive, scalprof};

/// Bytes under `dir`, recursively.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let t = e.file_type().unwrap();
                    if t.is_dir() {
                        bytes_under(&e.path())
                    } else {
                        e.metadata().map_or(0, |m| m.len())
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// A program that writes 3 MB of text per repeat, then its ops line.
const CHATTY: &str = "i=0; while [ $i -lt 30000 ]; do echo \"line $i of a chatty program, padded to about a hundred bytes .........................\"; i=$((i+1)); done; echo ops=$((5 * $1))";

#[test]
fn a_chatty_sweep_keeps_its_ops_lines_and_not_its_output() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for keep in [false, true] {
        let mut c = scalprof(&db);
        c.args(["run", "-t", "1,2", "--repeat", "2", "--diagnose", "0"]);
        if keep {
            c.arg("--keep-output");
        }
        let out = c
            .args(["--", "sh", "-c", CHATTY, "sh", "{threads}"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
    }
    let outputs = dir.path().join("runs.db.d");
    let (default, kept) = (
        bytes_under(&outputs.join("1")),
        bytes_under(&outputs.join("2")),
    );
    // Four repeats of 3 MB each: all of it with --keep-output, the ops lines without.
    assert!(default < 1 << 20, "{default} bytes kept by default");
    assert!(kept > 10_000_000, "{kept} bytes kept with --keep-output");
    for run in ["1", "2"] {
        let doc = show_json(&db, run);
        assert_eq!(doc["throughput"]["source"], "ops", "run {run}");
        assert_eq!(doc["points"][1]["repeats"][0]["ops"], 10, "run {run}");
    }
    let stdout = show_json(&db, "1")["points"][0]["repeats"][0]["stdout_path"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(std::fs::read_to_string(stdout).unwrap(), "ops=5\n");
}

#[test]
fn runs_are_listed_as_json_and_deleted_with_their_outputs() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for _ in 0..4 {
        let out = quick_run(&db, "echo ops=1; echo some output")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
    }
    let list = |extra: &[&str]| -> Vec<i64> {
        let out = scalprof(&db)
            .arg("runs")
            .arg("--json")
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(list(&[]), vec![1, 2, 3, 4]);
    assert_eq!(list(&["--limit", "2"]), vec![3, 4]);
    let outputs = dir.path().join("runs.db.d");
    // A reference that names no run deletes nothing.
    let out = scalprof(&db)
        .args(["runs", "rm", "1", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("nosuch"), "{}", stderr_of(&out));
    assert_eq!(list(&[]), vec![1, 2, 3, 4]);
    let out = scalprof(&db).args(["runs", "rm", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(list(&[]), vec![2, 3, 4]);
    assert!(!outputs.join("1").exists());
    // A dry run deletes nothing; gc keeps the newest.
    let out = scalprof(&db)
        .args(["gc", "--keep", "1", "--dry-run"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("would delete 2 of 3 runs (2, 3)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(list(&[]), vec![2, 3, 4]);
    let out = scalprof(&db).args(["gc", "--keep", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(list(&[]), vec![4]);
    assert!(!outputs.join("2").exists() && !outputs.join("3").exists());
    assert!(outputs.join("4").exists());
    // The run left is whole.
    assert_eq!(show_json(&db, "4")["points"][0]["repeats"][0]["ops"], 1);
}

/// A CPU kept busy by another process while it lives.
struct Busy(Child);

impl Busy {
    fn start() -> Busy {
        Busy(
            StdCommand::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The tools, from apt (xz-utils, zstd), as a user runs them; `None` outside CI where one
/// is missing.
fn tool(name: &str) -> Option<&str> {
    let found = StdCommand::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing: .ci/run installs it"
        );
        eprintln!("skipped: {name} is not installed");
        return None;
    }
    Some(name)
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_fixed_work_tool_s_speedup_is_its_wall_time_s_quiet_or_busy() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // 6 MB of text that compresses like a log: each tool takes a few tenths of a second.
    let input = dir.path().join("input.txt");
    let text: String = (0..120_000)
        .map(|i| {
            format!(
                "{i} {} request served in {} ms\n",
                i * 7919 % 100_003,
                i % 97
            )
        })
        .collect();
    std::fs::write(&input, text).unwrap();
    let input = input.to_str().unwrap();
    let mut run = 0;
    for busy in [false, true] {
        let _load = busy.then(Busy::start);
        // zstd splits its input into 1 MiB jobs (-B), one per thread; without -B, one
        // job held the whole input at -19 and a repeat took 12 s.
        for (name, level) in [("xz", &["-1"][..]), ("zstd", &["-12", "-B1MiB"])] {
            let Some(tool) = tool(name) else { continue };
            let out = scalprof(&db)
                .args(["run", "-t", "1,2", "--repeat", "3", "--diagnose", "0", "--"])
                .args([tool, "-T{threads}"])
                .args(level)
                .args(["-k", "-c", input])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", stderr_of(&out));
            run += 1;
            let doc = show_json(&db, &run.to_string());
            let p = &doc["points"][1];
            let (speedup, wall) = (
                p["speedup"].as_f64().unwrap(),
                p["wall_speedup"].as_f64().unwrap(),
            );
            // Fixed work: the speedup is the wall time's, whatever the machine's load.
            assert!(
                (speedup / wall - 1.0).abs() < 0.05,
                "{name} (busy: {busy}): speedup {speedup:.2}× but the wall time's {wall:.2}× ({})",
                doc["throughput"]["inferred"]
            );
            assert_eq!(doc["throughput"]["source"], "strong", "{name} busy={busy}");
        }
    }
}
