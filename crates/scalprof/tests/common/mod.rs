//! Helpers shared by the test binaries (each uses some of them).
#![allow(dead_code)]

pub mod cli;
pub mod corpus;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use assert_cmd::Command;
use serde_json::Value;

/// The scalprof binary, with its own store.
pub fn scalprof(db: &Path) -> Command {
    let mut c = Command::cargo_bin("scalprof").unwrap();
    c.arg("--db").arg(db);
    c
}

/// Asserts that this test runs as root (`what` needs it). A test that calls it is marked
/// `#[cfg_attr(not(privileged), ignore = "…")]`: built for another user outside CI it is
/// listed as ignored, never run to pass without checking.
pub fn require_root(what: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "{what}: this test needs root; as another user, cargo test lists it as ignored \
         unless CI is set"
    );
}

/// Measurements must not overlap: the tests of one binary that measure take turns.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Checks `doc` against an independent, hand-written copy of the contract's shape:
/// every key of the shape must be present with the shape's type.
pub fn check_shape(doc: &Value, shape: &Value, path: &str) {
    match shape {
        Value::Object(fields) => {
            let obj = doc
                .as_object()
                .unwrap_or_else(|| panic!("{path}: expected an object, got {doc}"));
            for (k, sub) in fields {
                let v = obj.get(k).unwrap_or_else(|| panic!("{path}.{k}: missing"));
                check_shape(v, sub, &format!("{path}.{k}"));
            }
        }
        Value::Array(items) => {
            let arr = doc
                .as_array()
                .unwrap_or_else(|| panic!("{path}: expected an array, got {doc}"));
            if let Some(item) = items.first() {
                assert!(!arr.is_empty(), "{path}: expected at least one element");
                for (i, v) in arr.iter().enumerate() {
                    check_shape(v, item, &format!("{path}[{i}]"));
                }
            }
        }
        Value::String(ty) => {
            let ok = ty.split('|').any(|t| match t {
                "string" => doc.is_string(),
                "number" => doc.is_number(),
                "boolean" => doc.is_boolean(),
                "null" => doc.is_null(),
                other => panic!("unknown type {other} in the shape file"),
            });
            assert!(ok, "{path}: expected {ty}, got {doc}");
        }
        other => panic!("bad shape entry {other}"),
    }
}

/// Checks every budget of a run document: the parts sum to 1, and each budgeted finding
/// scores its cause's share at the last point.
pub fn check_budgets(doc: &Value) {
    let points = doc["points"].as_array().unwrap();
    // A sweep's every point carries a budget, the baseline too (all useful).
    let budgeted = points.last().is_some_and(|p| p["budget"].is_object());
    if points.len() >= 2 && budgeted && points[0]["efficiency"].is_number() {
        assert_eq!(
            points[0]["budget"]["useful"], 1.0,
            "$.points[0].budget: {}",
            points[0]["budget"]
        );
    }
    // A lock row's longest wait is at least its average one (a wakeup's latency added to
    // a wait's total once left the maximum behind).
    for (i, p) in points.iter().enumerate() {
        let rows = p["locks"]["rows"].as_array().cloned().unwrap_or_default();
        for r in rows {
            let count = r["count"].as_u64().unwrap_or(0);
            if count == 0 {
                continue;
            }
            let avg = r["total_wait_ns"].as_u64().unwrap() / count;
            assert!(
                r["max_wait_ns"].as_u64().unwrap() >= avg,
                "$.points[{i}].locks: max below average in {r}"
            );
        }
    }
    for (i, p) in points.iter().enumerate() {
        let Some(b) = p.get("budget") else { continue };
        let causes: f64 = b["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["share"].as_f64().unwrap())
            .sum();
        let sum = b["useful"].as_f64().unwrap()
            + b["overhead"].as_f64().unwrap()
            + b["unexplained"].as_f64().unwrap()
            + causes;
        assert!(
            (sum - 1.0).abs() < 1e-6,
            "$.points[{i}].budget sums to {sum}: {b}"
        );
        // Every cause of a point diagnosed from traced repeats has its interval, and the
        // interval holds the share.
        let within = |x: &Value, i: &Value| {
            let (lo, hi) = (i[0].as_f64().unwrap(), i[1].as_f64().unwrap());
            let x = x.as_f64().unwrap();
            lo <= x + 1e-9 && x <= hi + 1e-9
        };
        if p["traced_repeats"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
            && i > 0
        {
            for c in b["causes"].as_array().unwrap() {
                let interval = &c["share_interval"];
                assert!(
                    interval.is_array(),
                    "$.points[{i}]: no share_interval in {c}"
                );
                assert!(within(&c["share"], interval), "$.points[{i}]: {c}");
            }
            assert!(within(&b["unexplained"], &b["unexplained_interval"]), "{b}");
            assert!(
                p["settling"]["traced_repeats"].as_u64().unwrap() >= 1,
                "{p}"
            );
        }
    }
    let Some(last) = points.last().and_then(|p| p.get("budget")) else {
        return;
    };
    for f in doc["findings"].as_array().unwrap() {
        let Some(w) = f.get("what_if") else { continue };
        let cause = last["causes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == f["kind"] && c["subject"] == f["subject"])
            .unwrap_or_else(|| panic!("finding without its cause in the budget: {f}"));
        assert_eq!(cause["share"], f["score"], "one number per cause: {f}");
        if cause.get("share_interval").is_some() {
            assert_eq!(cause["share_interval"], f["score_interval"], "{f}");
        }
        assert!(w["speedup"].as_f64().unwrap() > 0.0);
    }
}

/// Checks every finding of a run document against the contract's finding shape.
pub fn check_findings(doc: &Value) {
    let shape: Value =
        serde_json::from_str(include_str!("../contract/finding.shape.json")).unwrap();
    for (i, f) in doc["findings"].as_array().unwrap().iter().enumerate() {
        check_shape(f, &shape, &format!("$.findings[{i}]"));
        let kind = f["kind"].as_str().unwrap();
        assert!(
            [
                "lock_contention",
                "false_sharing",
                "true_sharing",
                "superlinear_cost",
                "kernel_hotspot",
                "user_hotspot",
                "serial_fraction",
                "blocked_wait",
                "cpu_throttling",
            ]
            .contains(&kind),
            "$.findings[{i}]: unknown kind {kind}"
        );
        let score = f["score"].as_f64().unwrap();
        assert!(
            (0.0..=1.0).contains(&score),
            "$.findings[{i}]: score {score}"
        );
        if let Some(scope) = f.get("scope") {
            assert!(
                ["user", "kernel", "file"].contains(&scope.as_str().unwrap()),
                "$.findings[{i}]: scope {scope}"
            );
        }
        assert!(
            !f["subject"].as_str().unwrap().is_empty(),
            "$.findings[{i}]: no subject"
        );
    }
}
