//! The verdicts of a 16-CPU machine, checked on any machine: the runs of
//! `tests/fixtures/corpus16.db` (recorded at 1, 4, 8 and 16 threads on 16 CPUs) re-analysed
//! by this build. Nothing is measured here: each test reads the store.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::cli::show_json;

/// A private copy of the fixture (opening a store may migrate it), made once per test.
fn fixture(dir: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus16.db");
    let to = dir.join("corpus16.db");
    std::fs::copy(&from, &to).unwrap();
    to
}

/// The expected top cause past one thread; `None`: a program that scales, with no finding.
const EXPECTED: [(&str, Option<&str>); 11] = [
    ("hash_global_mutex", Some("table_lock")),
    ("counters_packed", Some("vm_cnt")),
    ("side_lock", None),
    ("mmap_churn", Some("mmap_lock")),
    ("clean_parallel", None),
    ("index_rebuild", Some("index_lock")),
    ("refcount_global", Some("obj_refcount")),
    ("hash_sharded", Some("shards")),
    ("pwrite_same_file", Some("i_rwsem")),
    ("journal_sync", Some("journal_lock")),
    ("gil_handoff", Some("gil_cond")),
];

/// Unexplained thread-time above this at a point is a verdict that fell short.
const MOST_UNEXPLAINED: f64 = 0.20;

/// What is wrong with one run's document, in sentences (none: all good).
fn defects(doc: &Value, expected: Option<&str>) -> Vec<String> {
    let mut wrong = Vec::new();
    let label = doc["label"].as_str().unwrap_or("?");
    let points = doc["points"].as_array().cloned().unwrap_or_default();
    for p in points.iter().skip(1) {
        let value = &p["value"];
        let budget = &p["budget"];
        let unexplained = budget["unexplained"].as_f64().unwrap_or(1.0);
        if unexplained > MOST_UNEXPLAINED {
            wrong.push(format!(
                "{label} at {value}: unexplained {:.0}%",
                unexplained * 100.0
            ));
        }
        let top = budget["causes"]
            .as_array()
            .and_then(|c| c.first())
            .and_then(|c| c["subject"].as_str());
        if let Some(want) = expected {
            if top != Some(want) {
                wrong.push(format!("{label} at {value}: top cause {top:?}, not {want}"));
            }
        }
    }
    let findings: Vec<&str> = doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["subject"].as_str())
        .collect();
    match expected {
        None if !findings.is_empty() => wrong.push(format!(
            "{label}: findings {findings:?} on a program that scales"
        )),
        Some(want) if findings.first() != Some(&want) => {
            wrong.push(format!("{label}: first finding {findings:?}, not {want}"))
        }
        _ => {}
    }
    let measured = points
        .iter()
        .filter(|p| p["throughput"].is_number())
        .count();
    if measured >= 3 && doc["model"].is_null() {
        wrong.push(format!("{label}: no model over {measured} measured points"));
    }
    wrong
}

#[test]
fn every_point_of_the_16_cpu_recordings_names_its_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let db = fixture(tmp.path());
    let mut wrong = Vec::new();
    for (label, expected) in EXPECTED {
        let doc = show_json(&db, label);
        assert_eq!(doc["host"]["cpus"], 16, "{label}: not a 16-CPU recording");
        wrong.extend(defects(&doc, expected));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_retrograde_curve_gets_a_model_that_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let db = fixture(tmp.path());
    for label in ["counters_packed", "hash_global_mutex", "refcount_global"] {
        let doc = show_json(&db, label);
        let sigma = doc["model"]["sigma"].as_f64().unwrap_or(0.0);
        assert!(sigma > 1.0, "{label}: {}", doc["model"]);
        let out = crate::common::scalprof(&db)
            .args(["show", label])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("retrograde"), "{label}: {text}");
        assert!(!text.contains("fewer than two"), "{label}: {text}");
    }
}
