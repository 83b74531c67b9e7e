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
        // Where the time went, not a sweep table of one point.
        .stdout(predicate::str::contains("top functions at 1 threads"))
        .stdout(predicate::str::contains("speedup").not());
    // The top view names the program's own function, with its share of the samples.
    let out = Command::cargo_bin("scalprof")
        .unwrap()
        .arg("--db")
        .arg(&db)
        .args(["show", "latest", "--top", "5"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.contains('%')).collect();
    assert!(rows.len() >= 2 && rows.len() <= 6, "{text}");
    assert!(
        rows.iter()
            .any(|r| r.contains("worker") || r.contains("spin")),
        "{text}"
    );
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

/// speedscope's file format (its `file-format-spec.ts`, published as the JSON schema the
/// file names): the fields it requires, each of the type it requires, the frame indices
/// in range and one weight per sample.
fn check_speedscope(file: &serde_json::Value) {
    assert_eq!(
        file["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = file["shared"]["frames"].as_array().expect("shared.frames");
    assert!(!frames.is_empty());
    for f in frames {
        assert!(f["name"].is_string(), "{f}");
        assert!(f.get("file").is_none_or(|x| x.is_string()), "{f}");
    }
    let profiles = file["profiles"].as_array().expect("profiles");
    assert!(!profiles.is_empty());
    for p in profiles {
        assert_eq!(p["type"], "sampled");
        assert!(p["name"].is_string());
        let units = [
            "none",
            "nanoseconds",
            "microseconds",
            "milliseconds",
            "seconds",
            "bytes",
        ];
        assert!(
            units.contains(&p["unit"].as_str().unwrap()),
            "{}",
            p["unit"]
        );
        let (start, end) = (
            p["startValue"].as_f64().unwrap(),
            p["endValue"].as_f64().unwrap(),
        );
        assert!(end >= start);
        let samples = p["samples"].as_array().unwrap();
        let weights = p["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len());
        assert!(!samples.is_empty());
        for s in samples {
            for i in s.as_array().unwrap() {
                assert!((i.as_u64().unwrap() as usize) < frames.len());
            }
        }
        let total: f64 = weights.iter().map(|w| w.as_f64().unwrap()).sum();
        assert_eq!(total, end - start);
    }
}

#[test]
fn an_imported_profile_exports_as_a_speedscope_file() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    // A shell counting for a fraction of a second: a few hundred samples.
    let st = StdCommand::new("perf")
        .args(["record", "-q", "-F", "999", "-g", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        ])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let db = dir.path().join("runs.db");
    let scalprof = || {
        let mut c = Command::cargo_bin("scalprof").unwrap();
        c.arg("--db").arg(&db);
        c
    };
    scalprof().arg("import").arg(&data).assert().success();
    let out = dir.path().join("p.speedscope.json");
    scalprof()
        .args(["export", "latest", "--format", "speedscope", "-o"])
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains("speedscope profile"));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    check_speedscope(&file);
    assert_eq!(file["profiles"].as_array().unwrap().len(), 1);
    assert_eq!(file["profiles"][0]["unit"], "nanoseconds");
    // The shell's frames are there, the process name as a root.
    let names: Vec<&str> = file["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"sh"), "{names:?}");
}
