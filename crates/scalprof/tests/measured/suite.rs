//! `scalprof suite`: the OS microbenchmarks, run for real, and the diagnoses this VM must
//! give (issue 14): mmap_lock, i_rwsem and the file's record lock are named; the tests that
//! scale get no cause of 0.10 or more.

use std::path::Path;

use serde_json::Value;

use crate::common::require_root;
use crate::common::{exclusive, scalprof};

fn test<'a>(doc: &'a Value, name: &str, mode: &str) -> &'a Value {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name && t["mode"] == mode)
        .unwrap_or_else(|| panic!("{name} ({mode}) not in the suite document"))
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn the_quick_suite_names_the_kernel_s_locks_and_clears_what_scales() {
    require_root("the suite's diagnoses (BPF lock tracing)");
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let json = dir.path().join("suite.json");
    let out = scalprof(&db)
        .args([
            "suite",
            "--quick",
            "--threads",
            "1,2",
            "--tests",
            "mmap_munmap:threads,pwrite_same_file,fcntl_same_file:processes,page_fault:threads,\
             lseek:threads,poll:threads,stat_own,fcntl_own_file:processes",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("ops/s per point") && table.contains("mmap_munmap"),
        "{table}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "scalprof.suite/1");
    assert!(doc["host"]["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(doc["tests"].as_array().unwrap().len(), 8);
    for t in doc["tests"].as_array().unwrap() {
        assert_eq!(t["status"], "complete", "{t}");
        let points = t["points"].as_array().unwrap();
        assert_eq!(points.len(), 2, "{t}");
        for p in points {
            assert!(p["throughput"].as_f64().unwrap() > 0.0, "{t}");
            assert!(p["efficiency"].is_f64(), "{t}");
        }
        // Each test is an ordinary stored run with its diagnosis.
        scalprof(&db)
            .args(["show", t["run_id"].as_str().unwrap()])
            .assert()
            .success();
    }
    let cause = |name: &str, mode: &str| test(&doc, name, mode)["top_cause"].clone();
    assert_eq!(cause("mmap_munmap", "threads")["subject"], "mmap_lock");
    assert_eq!(cause("pwrite_same_file", "threads")["subject"], "i_rwsem");
    let lock = cause("fcntl_same_file", "processes");
    assert_eq!(lock["kind"], "lock_contention", "{lock}");
    assert!(
        lock["subject"]
            .as_str()
            .unwrap()
            .ends_with("scalprof-suite-lock"),
        "{lock}"
    );
    // Named as what it is in the rates table, not by its path alone.
    assert_eq!(lock["lock_type"], "posix-lock", "{lock}");
    assert!(table.contains("POSIX record lock on "), "{table}");
    for (name, mode) in [
        ("page_fault", "threads"),
        ("lseek", "threads"),
        ("poll", "threads"),
        ("stat_own", "threads"),
        ("fcntl_own_file", "processes"),
    ] {
        let c = cause(name, mode);
        assert!(
            c.is_null() || c["score"].as_f64().unwrap() < 0.10,
            "{name} ({mode}) scales, yet: {c}"
        );
    }
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_hung_test_is_recorded_as_timed_out_and_the_suite_goes_on() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let json = dir.path().join("suite.json");
    // Each repeat would run 5 s; the timeout kills it at 0.3 s.
    scalprof(&db)
        .args([
            "suite",
            "--tests",
            "lseek:threads,futex_own",
            "--threads",
            "1",
            "--repeat",
            "1",
            "--seconds",
            "5",
            "--timeout",
            "300ms",
            "--json",
        ])
        .arg(&json)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for name in ["lseek", "futex_own"] {
        let t = test(&doc, name, "threads");
        assert_eq!(t["status"], "failed", "{t}");
        assert!(t["points"][0]["throughput"].is_null(), "{t}");
    }
    // A test that does not exist is refused before anything runs: a usage error.
    scalprof(&db)
        .args(["suite", "--tests", "page_faults"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no test \"page_faults\""));
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn two_suites_are_compared_test_by_test_and_a_suite_is_one_html_page() {
    require_root("the suite's diagnoses (BPF lock tracing)");
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let p = |f: &str| dir.path().join(f).display().to_string();
    let suite = |tests: &str, json: &str, extra: &[&str]| {
        scalprof(&db)
            .args(["suite", "--tests", tests, "--threads", "1", "--repeat", "3"])
            .args(["--seconds", "0.2", "--json", &p(json)])
            .args(extra)
            .assert()
            .success();
    };
    suite(
        "lseek:threads,futex_own",
        "a.json",
        &["--report", &p("a.html")],
    );
    suite("lseek:threads", "b.json", &[]);

    let html = std::fs::read_to_string(p("a.html")).unwrap();
    for needle in [
        "id=\"rates\"",
        "<h2 id=\"lseek-threads\">",
        "<h2 id=\"futex_own-threads\">",
        "<svg",
    ] {
        assert!(html.contains(needle), "{needle} not in the suite page");
    }

    let out = scalprof(&db)
        .args(["compare", &p("a.json"), &p("b.json")])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("B vs A (95% confidence)"), "{text}");
    assert!(text.contains("lseek"), "{text}");
    assert!(text.contains("only in A: futex_own (threads)"), "{text}");

    let json = |db: &Path, a: &str, b: &str| -> Value {
        let out = scalprof(db)
            .args(["compare", "--json", &p(a), &p(b)])
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    // Both suites' runs are in this store: the full comparison.
    let c = json(&db, "a.json", "b.json");
    assert_eq!(c["schema"], "scalprof.suite-compare/1");
    let t = &c["tests"][0];
    assert_eq!(t["name"], "lseek");
    assert_eq!(t["from_store"], true, "{t}");
    let m = &t["comparison"]["points"][0]["metrics"][0];
    assert_eq!(m["metric"], "throughput");
    assert_eq!((m["a_n"].as_u64(), m["b_n"].as_u64()), (Some(3), Some(3)));
    // Another store: from the documents' repeats.
    let c = json(&dir.path().join("other.db"), "a.json", "b.json");
    assert_eq!(c["tests"][0]["from_store"], false);
    assert_eq!(
        c["tests"][0]["comparison"]["points"][0]["metrics"][0]["a_n"],
        3
    );

    // A kernel that halves lseek's rate: the documents no longer describe the stored runs,
    // so the rates in the document are compared, and the regression fails the check.
    let mut slow: Value =
        serde_json::from_str(&std::fs::read_to_string(p("b.json")).unwrap()).unwrap();
    let point = &mut slow["tests"][0]["points"][0];
    point["throughput"] = (point["throughput"].as_f64().unwrap() * 0.5).into();
    let halved: Vec<Value> = point["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x.as_f64().unwrap() * 0.5).into())
        .collect();
    point["repeats"] = halved.into();
    std::fs::write(p("slow.json"), slow.to_string()).unwrap();
    let out = scalprof(&db)
        .args([
            "compare",
            &p("a.json"),
            &p("slow.json"),
            "--fail-if-slower",
            "10",
        ])
        .assert()
        .code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("B is slower in lseek (threads) at 1 workers"),
        "{err}"
    );
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("slower in 1"), "{text}");
    // The gate's verdict is the last line.
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("gate: B is slower than 10% in lseek (threads) at 1 workers (−")
            && last.ends_with("— failed"),
        "{text}"
    );

    // A suite and a run cannot be compared.
    scalprof(&db)
        .args(["compare", &p("a.json"), "latest"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "one of A and B is a suite document",
        ));
}
