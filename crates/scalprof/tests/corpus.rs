//! Measurements of the pathology corpus. Kept in a test binary of its own so that no
//! other test competes for the CPUs while it measures scaling.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::Value;

fn scalprof(db: &Path) -> Command {
    let mut c = Command::cargo_bin("scalprof").unwrap();
    c.arg("--db").arg(db);
    c
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The corpus, built once per test binary by `scalprof corpus`.
fn corpus() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus");
        let out = Command::cargo_bin("scalprof")
            .unwrap()
            .args(["corpus", "--out"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

fn run_corpus(db: &Path, program: &str, json: &Path) -> Value {
    let bin = corpus().join(program);
    scalprof(db)
        .args(["run", "-t", "1,2", "--repeat", "3", "--json"])
        .arg(json)
        .arg("--")
        .arg(&bin)
        .arg("{threads}")
        .assert()
        .success();
    read_json(json)
}

fn efficiency_at(doc: &Value, threads: u64) -> f64 {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["value"] == threads)
        .unwrap()["efficiency"]
        .as_f64()
        .unwrap()
}

#[test]
fn packed_counters_scale_far_worse_than_padded_ones() {
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
    // The whole-tree CPU time: two spinning threads use about twice the wall time.
    let p2 = &packed["points"][1];
    assert!(
        p2["user_s"]["median"].as_f64().unwrap() > 1.5 * p2["wall_s"]["median"].as_f64().unwrap()
    );
}
