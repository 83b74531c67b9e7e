//! A team's store: scalprof's commands on a PostgreSQL database (`--db postgres://…` and
//! SCALPROF_DB), against a private server the test starts (see the store's test_server).
//! The workload is a trivial one, run once.

use std::path::Path;

use predicates::str::contains;
use serde_json::Value;

use crate::common::cli::{quick_run, show_json, stderr_of};
use crate::common::{check_shape, scalprof};

#[path = "../../../scalprof-store/src/test_server.rs"]
mod test_server;

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
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
        serde_json::from_str(include_str!("../contract/run-document.shape.json")).unwrap();
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
    // One repeat each, or two where other processes (the tests beside this one) took
    // enough of a repeat's CPUs that it was measured again.
    let repeats = |d: &Value| d["points"][0]["repeats"].as_array().map_or(0, Vec::len);
    for n in [repeats(&doc), repeats(&lite_doc)] {
        assert!((1..=2).contains(&n), "{n} repeats");
    }
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
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn an_unreachable_server_is_named_without_its_password() {
    // Nothing listens on port 9 (discard) of this machine.
    let db = Path::new("postgres://ann:s3cret@127.0.0.1:9/runs");
    let out = scalprof(db).arg("runs").output().unwrap();
    let said = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    // The password was moved out of the URL (and the command line) before it was used.
    assert!(said.contains("postgres://ann@127.0.0.1:9/runs"), "{said}");
    assert!(
        said.contains("the password in --db is visible to other users in ps"),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
}

/// `s` with every byte but letters and digits percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Fails if `text` holds the password, or a recognisable piece of it, raw or encoded.
fn assert_no_password(text: &str, what: &str) {
    let encoded = percent_encode(test_server::PASSWORD);
    for piece in [
        test_server::PASSWORD,
        "s/e?c",
        "t0p",
        "r&et",
        encoded.as_str(),
    ] {
        assert!(!text.contains(piece), "{what} holds {piece:?}:\n{text}");
    }
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn the_password_reaches_neither_the_command_line_nor_the_workload() {
    let Some(server) = test_server::PgServer::start_secure("password_hidden") else {
        return;
    };
    let db = server.create_database("hidden");
    let scratch = tempfile::tempdir().unwrap();
    let (dump, mark) = (scratch.path().join("env"), scratch.path().join("started"));
    // The workload prints its environment, then waits while the test looks at scalprof.
    let script = r#"env > "$DUMP"; touch "$MARK"; sleep 2; echo ops=1"#;
    let by_url = format!(
        "postgres://{}:{}@127.0.0.1:{}/{db}?sslmode=require",
        test_server::ROLE,
        percent_encode(test_server::PASSWORD),
        server.port()
    );
    let bare = format!(
        "postgres://{}@127.0.0.1:{}/{db}?sslmode=require",
        test_server::ROLE,
        server.port()
    );
    // With the password in --db; in SCALPROF_DB; in PGPASSWORD.
    for (how, db_arg, env) in [
        ("--db", Some(by_url.as_str()), vec![]),
        ("SCALPROF_DB", None, vec![("SCALPROF_DB", by_url.as_str())]),
        (
            "PGPASSWORD",
            Some(bare.as_str()),
            vec![("PGPASSWORD", test_server::PASSWORD)],
        ),
    ] {
        let _ = std::fs::remove_file(&mark);
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("scalprof"));
        if let Some(url) = db_arg {
            c.arg("--db").arg(url);
        }
        c.args(crate::common::cli::QUICK_RUN)
            .args(["sh", "-c", script])
            .env_remove("SCALPROF_DB")
            .env_remove("PGPASSWORD")
            .envs(env)
            .env("DUMP", &dump)
            .env("MARK", &mark)
            .env("XDG_DATA_HOME", scratch.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = c.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !mark.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{how}: the workload never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // What every user sees of the running scalprof.
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert_eq!(
            cmdline.contains("127.0.0.1"),
            db_arg.is_some(),
            "{how}: {cmdline}"
        );
        assert_no_password(&cmdline, &format!("{how}: /proc/PID/cmdline"));
        let ps = std::process::Command::new("ps")
            .args(["-ww", "-o", "args=", "-p", &child.id().to_string()])
            .output()
            .unwrap();
        assert_no_password(&String::from_utf8_lossy(&ps.stdout), &format!("{how}: ps"));
        let out = child.wait_with_output().unwrap();
        let said = stderr_of(&out);
        assert!(out.status.success(), "{how}: {said}");
        assert_eq!(
            said.contains("the password in --db is visible to other users in ps"),
            how == "--db",
            "{how}: {said}"
        );
        assert_no_password(&said, &format!("{how}: stderr"));
        assert!(
            said.contains("without a check of the server's certificate (sslmode=require)"),
            "{how}: {said}"
        );
        // The workload's environment: no password, no store URL, and SCALPROF_TREE a
        // token (PID-RANDOM) only.
        let env = std::fs::read_to_string(&dump).unwrap();
        assert_no_password(&env, &format!("{how}: the workload's environment"));
        for name in ["SCALPROF_DB=", "PGPASSWORD=", "SCALPROF_DB_PASSWORD="] {
            assert!(
                !env.lines().any(|l| l.starts_with(name)),
                "{how}: {name} reached the workload"
            );
        }
        let tree = env
            .lines()
            .find_map(|l| l.strip_prefix("SCALPROF_TREE="))
            .expect("the keeper's token");
        assert!(
            tree.split(' ')
                .all(|t| t
                    .split_once('-')
                    .is_some_and(|(pid, hex)| pid.parse::<u32>().is_ok()
                        && hex.len() == 16
                        && hex.bytes().all(|b| b.is_ascii_hexdigit()))),
            "{how}: SCALPROF_TREE={tree}"
        );
    }
    // Three runs in the store, shown without a password.
    let out = scalprof(Path::new(&by_url))
        .args(["runs", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(3));
    assert_no_password(&String::from_utf8_lossy(&out.stdout), "runs --json");
    // With the server's certificate verified, nothing to warn about.
    let verified = format!(
        "postgres://{}@localhost:{}/{db}?sslmode=verify-full&sslrootcert={}",
        test_server::ROLE,
        server.port(),
        server.certificate().display()
    );
    let out = scalprof(Path::new(&verified))
        .env("PGPASSWORD", test_server::PASSWORD)
        .arg("runs")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(!stderr_of(&out).contains("warning"), "{}", stderr_of(&out));
}
