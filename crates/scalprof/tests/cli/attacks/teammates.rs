//! Hardening 4: a teammate with write access to a shared store, and another local user,
//! against root's scalprof.

use super::*;
use crate::common::require_root;

/// Row 1: a teammate rewrote a stored run's command; root's `verify` ran it as uid 0,
/// without showing it. Now a command this user did not record runs only when given again
/// (or confirmed on a terminal), and it is always shown first.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn verify_never_runs_a_command_a_teammate_rewrote() {
    require_root("verify_never_runs_a_command_a_teammate_rewrote");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let db = tmp.path().join("runs.db");
    let out = scalprof_process(&db)
        .env("XDG_DATA_HOME", &home)
        .args(QUICK_RUN)
        .args(["sh", "-c", "echo ops=1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let pwned = tmp.path().join("pwned");
    let forged =
        serde_json::to_string(&["sh", "-c", &format!("id > {}; echo ops=1", pwned.display())])
            .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE runs SET command = ?1 WHERE id = 1", [&forged])
        .unwrap();
    drop(conn);
    let verify = |extra: &[&str]| {
        scalprof_process(&db)
            .env("XDG_DATA_HOME", &home)
            .args(["verify", "1", "--cause", "fdatasync", "--rounds", "2"])
            .args(extra)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = verify(&[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!pwned.exists(), "the teammate's command ran: {err}");
    assert!(
        err.contains("id > ") && err.contains("scalprof verify 1 -- "),
        "the refusal shows the stored command and how to give one: {err}"
    );
    // The command given again runs, and is shown before it does.
    let out = verify(&["--", "sh", "-c", "echo ops=1"]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the command: sh -c 'echo ops=1'"), "{err}");
    assert!(!pwned.exists());
    // The recorder's own, unchanged run runs as it is.
    let out = scalprof_process(&db)
        .env("XDG_DATA_HOME", &home)
        .args(QUICK_RUN)
        .args(["sh", "-c", "echo ops=2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let out = scalprof_process(&db)
        .env("XDG_DATA_HOME", &home)
        .args(["verify", "2", "--cause", "fdatasync", "--rounds", "2"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
}

/// A store in `dir` with two quick runs, for `compare 1 2`.
fn store_with_two_runs(dir: &Path) -> PathBuf {
    let db = store_with_a_run(dir);
    let out = scalprof(&db)
        .args(QUICK_RUN)
        .args(["sh", "-c", "echo ops=1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    db
}

/// `compare 1 2` as a gate, with the step summary at `summary`, killed after 20 s.
fn gate_into(db: &Path, summary: &Path) -> std::process::Output {
    let mut c = scalprof_process(db);
    c.args(["compare", "1", "2", "--fail-if-slower", "99%"])
        .env("GITHUB_STEP_SUMMARY", summary);
    let mut t = StdCommand::new("timeout");
    t.args(["-s", "KILL", "20"])
        .arg(c.get_program())
        .args(c.get_args());
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            t.env(k, v);
        }
    }
    t.output().unwrap()
}

/// Rows 9 and 13: $GITHUB_STEP_SUMMARY naming a FIFO hung the gate, naming /dev/zero
/// exhausted memory (it was read whole first), and a summary holding a byte that is not
/// UTF-8 was replaced, earlier steps' text lost. Now only a regular file is appended to,
/// and what it held stays as it was.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_step_summary_is_appended_to_never_read_or_waited_on() {
    require_root("the_step_summary_is_appended_to_never_read_or_waited_on");
    let tmp = tempfile::tempdir().unwrap();
    let db = store_with_two_runs(tmp.path());
    let fifo = tmp.path().join("fifo");
    assert!(StdCommand::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let zero = tmp.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for planted in [&fifo, &zero] {
        let out = gate_into(&db, planted);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", planted.display());
        assert!(err.contains("not a regular file"), "{err}");
    }
    // Earlier steps' bytes, one of them not UTF-8, are kept as they were.
    let summary = tmp.path().join("summary.md");
    let earlier = b"## build\n\xff ok".to_vec();
    std::fs::write(&summary, &earlier).unwrap();
    let out = gate_into(&db, &summary);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let now = std::fs::read(&summary).unwrap();
    assert!(
        now.starts_with(&earlier),
        "the earlier steps' text was changed"
    );
    assert!(now.len() > earlier.len() + 10, "nothing appended");
    assert_eq!(now[earlier.len()], b'\n', "a newline before the new text");
}

/// Row 8: another user's `.git/HEAD` FIFO above the working folder hung `run` for 600 s,
/// deaf to SIGTERM; a HEAD linked to /dev/zero was read without bound. Now neither is
/// read, and the run records no commit.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_planted_git_head_never_hangs_a_run() {
    require_root("a_planted_git_head_never_hangs_a_run");
    let tmp = tempfile::tempdir().unwrap();
    let shared = nobodys_folder(&tmp.path().join("shared"));
    let git = shared.join(".git");
    std::fs::create_dir(&git).unwrap();
    let work = shared.join("work");
    std::fs::create_dir(&work).unwrap();
    let db = tmp.path().join("runs.db");
    for plant in ["fifo", "zero"] {
        let head = git.join("HEAD");
        let _ = std::fs::remove_file(&head);
        if plant == "fifo" {
            assert!(StdCommand::new("mkfifo")
                .arg(&head)
                .status()
                .unwrap()
                .success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &head).unwrap();
        }
        std::os::unix::fs::lchown(&head, Some(NOBODY), Some(NOBODY)).unwrap();
        let started = std::time::Instant::now();
        let out = StdCommand::new("timeout")
            .args(["-s", "KILL", "30"])
            .arg(assert_cmd::cargo::cargo_bin("scalprof"))
            .arg("--db")
            .arg(&db)
            .args(QUICK_RUN)
            .args(["sh", "-c", "echo ops=1"])
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(out.status.success(), "{plant}: {}", stderr_of(&out));
        assert!(
            started.elapsed().as_secs() < 20,
            "{plant}: took {:?}",
            started.elapsed()
        );
    }
    let doc = show_json(&db, "latest");
    assert!(
        doc.get("commit").is_none_or(|c| c.is_null()),
        "{}",
        doc["commit"]
    );
}

/// Row 10: another user's frozen freezer cgroup given to `--cgroup` hung the sweep past
/// `--timeout` and SIGTERM. Now a frozen cgroup, or another user's, is refused up front.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_frozen_or_foreign_cgroup_is_refused_before_the_sweep() {
    require_root("a_frozen_or_foreign_cgroup_is_refused_before_the_sweep");
    let freezer = Path::new("/sys/fs/cgroup/freezer");
    if !freezer.join("cgroup.procs").exists() {
        eprintln!("a_frozen_or_foreign_cgroup_is_refused_before_the_sweep: skipped, no v1 freezer");
        return;
    }
    let cg = freezer.join(format!("scalprof-test-frozen-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    let run = |cg: &Path| {
        let tmp = tempfile::tempdir().unwrap();
        StdCommand::new("timeout")
            .args(["-s", "KILL", "30"])
            .arg(assert_cmd::cargo::cargo_bin("scalprof"))
            .arg("--db")
            .arg(tmp.path().join("runs.db"))
            .args([
                "run",
                "-t",
                "1",
                "--repeat",
                "1",
                "--diagnose",
                "0",
                "--timeout",
                "3s",
            ])
            .arg("--cgroup")
            .arg(cg)
            .args(["--", "sh", "-c", "echo ops=1"])
            .output()
            .unwrap()
    };
    std::fs::write(cg.join("freezer.state"), "FROZEN").unwrap();
    let frozen = run(&cg);
    std::fs::write(cg.join("freezer.state"), "THAWED").unwrap();
    std::os::unix::fs::chown(&cg, Some(NOBODY), Some(NOBODY)).unwrap();
    let foreign = run(&cg);
    let _ = std::fs::remove_dir(&cg);
    let err = stderr_of(&frozen);
    assert_eq!(frozen.status.code(), Some(2), "{err}");
    assert!(err.contains("is frozen"), "{err}");
    let err = stderr_of(&foreign);
    assert_eq!(foreign.status.code(), Some(2), "{err}");
    assert!(err.contains("another user (uid 65534)"), "{err}");
}

/// Row 7: files named `1` and `2` planted in a shared working folder were compared
/// instead of runs 1 and 2, and their author chose the gate's result. Now the runs win,
/// and the user is told; `./1` names the file.
#[test]
fn compare_prefers_the_runs_to_files_of_the_same_name() {
    let tmp = tempfile::tempdir().unwrap();
    let db = store_with_two_runs(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    for name in ["1", "2"] {
        std::fs::write(work.join(name), "{\"schema\": \"planted\"}").unwrap();
    }
    let out = scalprof_process(&db)
        .args(["compare", "1", "2", "--json"])
        .current_dir(&work)
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("comparing the run"), "{err}");
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(c.get("points").is_some(), "not a comparison of runs: {c}");
    // Written as a path, the file is read (and is no suite document).
    let out = scalprof_process(&db)
        .args(["compare", "./1", "./2"])
        .current_dir(&work)
        .output()
        .unwrap();
    assert!(
        stderr_of(&out).contains("not a suite document"),
        "{}",
        stderr_of(&out)
    );
}

/// Rows 17 and 18: a label's newline forged a `scalprof:` line on stderr, and a label's
/// `<!--` hid the verdict in GitHub's rendering of the step summary. Now a label is one
/// line wherever it is shown, and the summary holds no HTML of the label's.
#[test]
fn a_label_cannot_forge_a_line_nor_hide_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let label = "nightly <!--\nscalprof: all clear\u{1b}[2J";
    for _ in 0..2 {
        let out = scalprof(&db)
            .args([
                "run",
                "-t",
                "1",
                "--repeat",
                "2",
                "--diagnose",
                "0",
                "--label",
                label,
            ])
            .args(["--", "sh", "-c", "echo ops=1"])
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            !err.lines().any(|l| l.starts_with("scalprof: all clear")),
            "a forged line: {err}"
        );
        assert!(!err.contains('\u{1b}'), "a raw ESC: {err}");
    }
    let summary = tmp.path().join("summary.md");
    let out = scalprof(&db)
        .args(["compare", "1", "2", "--fail-if-slower", "50"])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(!md.contains("<!--"), "{md}");
    assert!(!md.contains('\u{1b}'), "{md}");
    assert!(md.contains("no regression"), "{md}");
}
