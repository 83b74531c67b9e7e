//! The keeper (a process that kills what is left of a workload when scalprof is
//! SIGKILLed) runs as root when scalprof does: nothing another user can see or make may
//! turn it against their processes or root's. Its unit tests cover what it kills; these
//! cover how scalprof starts it.

use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

mod common;

/// Every process's command line, as any user reads it.
fn command_lines() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            out.push((name, cmdline));
        }
    }
    out
}

#[test]
fn the_keepers_token_is_in_no_command_line() {
    let _turn = common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("token");
    // The workload writes down the token it carries, then waits while we look.
    let script = r#"printf %s "$SCALPROF_TREE" > "$SEEN.part" && mv "$SEEN.part" "$SEEN"; sleep 3; echo ops=1"#;
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("scalprof"))
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
            "--no-locks",
            "--",
        ])
        .args(["sh", "-c", script])
        .env("SEEN", &seen)
        .env_remove("SCALPROF_TREE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !seen.exists() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(&seen).expect("the workload did not start");
    assert!(!token.is_empty(), "the workload carries no token");
    // The keeper is scalprof's child, under a name of its own.
    let keepers: Vec<_> = command_lines()
        .into_iter()
        .filter(|(pid, _)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            stat.contains("(scalprof-keeper)") && ppid == Some(child.id())
        })
        .collect();
    let leaks: Vec<_> = command_lines()
        .into_iter()
        .filter(|(_, cmdline)| cmdline.windows(token.len()).any(|w| w == token.as_bytes()))
        .map(|(pid, cmdline)| format!("{pid}: {}", String::from_utf8_lossy(&cmdline)))
        .collect();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(!keepers.is_empty(), "no keeper was running beside scalprof");
    assert!(leaks.is_empty(), "the token is in command lines: {leaks:?}");
}
