//! A team's store: scalprof's commands on a PostgreSQL database (`--db postgres://…` and
//! SCALPROF_DB), against a private server the test starts (see the store's test_server).
//! The workload is a trivial one, run once.

use std::path::Path;

use predicates::str::contains;
use serde_json::Value;

mod common;
use common::cli::{quick_run, show_json, stderr_of};
use common::{check_shape, scalprof};

#[path = "../../scalprof-store/src/test_server.rs"]
mod test_server;

#[test]
fn every_store_command_works_on_postgres_with_the_same_run_document() {
    let Some(server) = test_server::PgServer::shared(
        "every_store_command_works_on_postgres_with_the_same_run_document",
    ) else {
        return;
    };
    let url = server.database("cli");
    let db = Path::new(&url);
    let data = tempfile::tempdir().unwrap();
    let with_data = |mut c: assert_cmd::Command| {
        c.env("XDG_DATA_HOME", data.path());
        c
    };

    // One run with --db; one with SCALPROF_DB, of three points (a model is fitted).
    let out = with_data(quick_run(db, "echo ops=1")).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let mut by_env = assert_cmd::Command::cargo_bin("scalprof").unwrap();
    by_env
        .env("SCALPROF_DB", &url)
        .args(["run", "-t", "1-3", "--repeat", "1", "--diagnose", "0", "--"])
        // 20 ms of sleep and ops per thread: a 2-ms echo's start-up noise at one repeat
        // a point sometimes left the USL nothing to fit (the model null).
        .args([
            "sh",
            "-c",
            "sleep 0.02; echo ops=$((2 * $1))",
            "sh",
            "{threads}",
        ]);
    let out = with_data(by_env).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));

    let out = scalprof(db).args(["runs", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(i64, &str)> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [(1, "complete"), (2, "complete")]);
    scalprof(db)
        .arg("runs")
        .assert()
        .success()
        .stdout(contains("sleep 0.02"));

    // The run document keeps its contract, and says what an SQLite store's says of the
    // same run (its optional parts, such as interference, depend on the machine's noise).
    let contract: Value =
        serde_json::from_str(include_str!("contract/run-document.shape.json")).unwrap();
    check_shape(&show_json(db, "2"), &contract, "$");
    let doc = show_json(db, "1");
    let lite_dir = tempfile::tempdir().unwrap();
    let lite = lite_dir.path().join("runs.db");
    let out = quick_run(&lite, "echo ops=1").output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let lite_doc = show_json(&lite, "1");
    for key in [
        "schema",
        "id",
        "label",
        "command",
        "status",
        "sweep",
        "throughput",
    ] {
        assert_eq!(doc[key], lite_doc[key], "{key}");
    }
    let repeats = |d: &Value| d["points"][0]["repeats"].as_array().map(Vec::len);
    assert_eq!(repeats(&doc), repeats(&lite_doc));
    // The workload's outputs stayed on this machine, in the data directory.
    let output_dir = doc["output_dir"].as_str().unwrap();
    assert!(
        Path::new(output_dir).starts_with(data.path().join("scalprof/outputs")),
        "{output_dir}"
    );

    // The commands that read runs.
    scalprof(db).args(["compare", "1", "2"]).assert().success();
    let html = data.path().join("report.html");
    scalprof(db)
        .args(["report", "2", "-o"])
        .arg(&html)
        .assert()
        .success();
    assert!(std::fs::metadata(&html).unwrap().len() > 0);

    // Deleting: one run by id, then gc down to none.
    with_data(scalprof(db))
        .args(["runs", "rm", "1"])
        .assert()
        .success()
        .stdout(contains("deleted 1 run (1)"));
    assert!(!Path::new(output_dir).exists(), "its outputs were kept");
    with_data(scalprof(db))
        .args(["gc", "--keep", "0"])
        .assert()
        .success();
    scalprof(db)
        .args(["runs", "--json"])
        .assert()
        .success()
        .stdout(contains("[]"));
}

#[test]
fn an_unreachable_server_is_named_without_its_password() {
    // Nothing listens on port 9 (discard) of this machine.
    let db = Path::new("postgres://ann:s3cret@127.0.0.1:9/runs");
    let out = scalprof(db).arg("runs").output().unwrap();
    let said = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("postgres://ann:***@127.0.0.1:9/runs"),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
}
