//! The command line as a user of perf and hyperfine expects it: the missing `--` and a
//! misspelt command said with the fix, `-F`, `--prepare`/`--cleanup`, one exit-status
//! table, labels from the command, compare's warnings and gate line, completions and man.

use predicates::prelude::predicate;

use crate::common::cli::{quick_run, show_json, stderr_of};
use crate::common::scalprof;

#[test]
fn a_workload_without_the_separator_is_refused_with_the_line_to_type() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    scalprof(&db)
        .args(["run", "-t", "1", "--repeat", "1", "sleep", "0.1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "tip: the command goes after --: scalprof --db ",
        ))
        .stderr(predicate::str::contains(
            "runs.db run -t 1 --repeat 1 -- sleep 0.1",
        ));
    scalprof(&db)
        .args(["locks", "-t", "2", "./bench", "{threads}"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "runs.db locks -t 2 -- ./bench {threads}",
        ));
    assert!(!db.exists(), "a refused command created the store");
}

#[test]
fn a_misspelt_run_suggests_run() {
    for typed in ["rnu", "rn", "urn"] {
        scalprof(std::path::Path::new("unused.db"))
            .arg(typed)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "a similar subcommand exists: 'run'",
            ));
    }
}

#[test]
fn every_command_shares_one_exit_status_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let help = scalprof(&db).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success());
    for line in [
        "Exit status (the same for every command):",
        "  0    success",
        "  1    a gate failed",
        "  2    an error",
        "  130  interrupted by Ctrl-C",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    // Bad flags, a workload that failed, an unknown run, compare's errors: all 2.
    scalprof(&db).args(["run", "--bogus"]).assert().code(2);
    quick_run(&db, "exit 3").assert().code(2);
    scalprof(&db).args(["show", "nope"]).assert().code(2);
    scalprof(&db)
        .args(["compare", "nope", "latest"])
        .assert()
        .code(2);
    scalprof(&db)
        .args(["fit", "/nonexistent.csv"])
        .assert()
        .code(2);
}

#[test]
fn dash_f_is_the_sampling_frequency() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for command in [&["run"][..], &["complexity", "--sizes", "1,2,3"]] {
        scalprof(&db)
            .args(command)
            .args(["-F", "often", "--", "true"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "invalid value 'often' for '--freq <HZ>'",
            ));
    }
}

#[test]
fn prepare_and_cleanup_wrap_every_repeat_and_a_failing_prepare_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let log = dir.path().join("log");
    let l = log.display();
    scalprof(&db)
        .args(["run", "-t", "1,2", "--repeat", "2", "--diagnose", "0"])
        .args(["--prepare", &format!("echo prepare {{threads}} >> {l}")])
        .args([
            "--cleanup",
            &format!("echo cleanup $SCALPROF_THREADS >> {l}"),
        ])
        .args(["--", "sh", "-c", &format!("echo run $1 >> {l}; echo ops=1")])
        .args(["sh", "{threads}"])
        .assert()
        .success();
    // Each execution wrapped, points in order; a repeat that other processes disturbed
    // is measured again, wrapped as well.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut values = Vec::new();
    for wrapped in lines.chunks(3) {
        let v = wrapped[0].strip_prefix("prepare ").expect(&text);
        assert_eq!(
            wrapped,
            [
                format!("prepare {v}"),
                format!("run {v}"),
                format!("cleanup {v}")
            ],
            "{text}"
        );
        values.push(v);
    }
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{text}");
    for v in ["1", "2"] {
        assert!(values.iter().filter(|&&x| x == v).count() >= 2, "{text}");
    }
    let out = scalprof(&db)
        .args(["run", "-t", "1,2", "--repeat", "1", "--diagnose", "0"])
        .args([
            "--prepare",
            "[ {threads} -lt 2 ] || { echo no database >&2; exit 3; }",
        ])
        .args(["--", "sh", "-c", "echo ops=1"])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("exited with status 3 before threads 2, repeat 1: no database"),
        "{err}"
    );
    let doc = show_json(&db, "latest");
    assert_eq!(doc["status"], "failed");
    assert_eq!(
        doc["points"].as_array().unwrap().len(),
        1,
        "point 1 is kept"
    );
}

#[test]
fn runs_are_labelled_by_their_command_and_compare_says_which_it_took() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for script in ["sleep 0.3; echo ops=1", "echo ops=1", "echo ops=1"] {
        scalprof(&db)
            .args(["run", "-t", "1", "--repeat", "3", "--diagnose", "0"])
            .args(["--", "sh", "-c", script])
            .assert()
            .success();
    }
    assert_eq!(show_json(&db, "1")["label"], "sleep 0.3; echo ops=1");
    assert_eq!(show_json(&db, "latest")["label"], "echo ops=1");
    scalprof(&db)
        .args(["compare", "echo ops=1", "echo ops=1"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "label \"echo ops=1\" matches runs 2, 3; taking the latest, 3: use a run id",
        ))
        .stderr(predicate::str::contains(
            "A and B are the same run (3): nothing can differ; name two runs (e.g. scalprof compare 2 3)",
        ));
    // The gate's verdict is the last line: B (no sleep) is far faster than A, and the
    // other way round far slower.
    let last_line = |a: &str, b: &str, code: i32| {
        let out = scalprof(&db)
            .args(["compare", a, b, "--fail-if-slower", "5"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", stderr_of(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().last().unwrap().to_string()
    };
    assert_eq!(
        last_line("1", "3", 0),
        "gate: no point slower than 5% — passed"
    );
    let failed = last_line("3", "1", 1);
    assert!(
        failed.starts_with("gate: B is slower than 5% at 1 thread (−")
            && failed.ends_with("— failed"),
        "{failed}"
    );
}

#[test]
fn completions_and_the_man_page_are_printed() {
    let db = std::path::Path::new("unused.db");
    for (shell, mark) in [
        ("bash", "complete -F _scalprof"),
        ("zsh", "#compdef scalprof"),
        ("fish", "complete -c scalprof"),
        ("elvish", "scalprof"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        scalprof(db)
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains(mark))
            .stdout(predicate::str::contains("prepare"));
    }
    scalprof(db)
        .arg("man")
        .assert()
        .success()
        .stdout(predicate::str::starts_with(".ie"))
        .stdout(predicate::str::contains(".TH scalprof 1"))
        .stdout(predicate::str::contains(".SH \"EXIT STATUS\""));
}

#[test]
fn help_says_what_locks_and_all_cpus_do_and_fit_prints_plain_decimals() {
    let db = std::path::Path::new("unused.db");
    scalprof(db)
        .args(["locks", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("once clean and then traced"));
    scalprof(db)
        .args(["run", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Lock tracing only"));
    let csv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specsdm91.csv");
    let out = scalprof(db).arg("fit").arg(&csv).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(text.contains("95% interval"), "{text}");
    // No exponent anywhere: a digit, an `e`, then a digit or a sign.
    let bytes = text.as_bytes();
    let exponent = bytes.windows(3).any(|w| {
        w[0].is_ascii_digit()
            && w[1] == b'e'
            && (w[2].is_ascii_digit() || w[2] == b'-' || w[2] == b'+')
    });
    assert!(!exponent, "{text}");
}

#[test]
fn a_rust_compiler_that_fails_skips_the_rust_programs_and_builds_the_rest() {
    // rustup with no default toolchain answers every `rustc` with an error: the Rust
    // programs are extras, and the demo's C programs still build.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("corpus");
    let output = scalprof(&dir.path().join("runs.db"))
        .env("RUSTC", "false")
        .args(["corpus", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let err = stderr_of(&output);
    assert!(output.status.success(), "{err}");
    assert!(
        err.contains("skipped rust_mutex: the Rust compiler failed"),
        "{err}"
    );
    assert!(out.join("counters_packed").exists() && out.join("counters_padded").exists());
    assert!(!out.join("rust_mutex").exists());
}
