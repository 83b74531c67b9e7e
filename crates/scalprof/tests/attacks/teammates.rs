//! Hardening 4: a teammate with write access to a shared store, and another local user,
//! against root's scalprof.

use super::*;

/// Row 1: a teammate rewrote a stored run's command; root's `verify` ran it as uid 0,
/// without showing it. Now a command this user did not record runs only when given again
/// (or confirmed on a terminal), and it is always shown first.
#[test]
fn verify_never_runs_a_command_a_teammate_rewrote() {
    if !need_root("verify_never_runs_a_command_a_teammate_rewrote") {
        return;
    }
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
