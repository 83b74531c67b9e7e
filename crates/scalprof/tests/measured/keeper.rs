//! The keeper (a process that kills what is left of a workload when scalprof is
//! SIGKILLed) runs as root when scalprof does: nothing another user can see or make may
//! turn it against their processes or root's. Its unit tests cover what it kills; these
//! cover how scalprof starts it.

use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::{scalprof_process, QUICK_RUN};

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
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn the_keepers_token_is_in_no_command_line() {
    let _turn = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("token");
    // The workload writes down the token it carries, then waits while we look.
    let script = r#"printf %s "$SCALPROF_TREE" > "$SEEN.part" && mv "$SEEN.part" "$SEEN"; sleep 3; echo ops=1"#;
    let mut child = scalprof_process(&tmp.path().join("runs.db"))
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

/// Whether a process with exactly this command line runs.
fn running(cmdline: &[u8]) -> bool {
    command_lines().iter().any(|(_, c)| c == cmdline)
}

/// A daemon that leaves every trace scalprof once followed: it forks twice, starts its own
/// session, clears its environment (so it carries no token) and ignores SIGTERM.
fn daemon_script(tag: &str) -> String {
    format!(
        "import os, signal, time\n\
         if os.fork() == 0:\n\
         \x20   os.setsid()\n\
         \x20   if os.fork() == 0:\n\
         \x20       signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         \x20       os.execve('/bin/sleep', ['sleep', '{tag}'], {{}})\n\
         \x20   os._exit(0)\n\
         time.sleep(0.3)\n\
         print('ops=1')\n"
    )
}

/// The workload cgroups (`scalprof-*`) where scalprof makes them.
fn workload_cgroups() -> Vec<std::path::PathBuf> {
    let Some(parent) = scalprof_collect::cgroup::path_for("x0-0")
        .and_then(|p| p.parent().map(|p| p.to_path_buf()))
    else {
        return Vec::new();
    };
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(parent)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("scalprof-"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Whether scalprof can make its workload cgroup here: probed the way scalprof does it.
fn require_cgroups() {
    // A name per call: the tests of this file probe at the same time.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = scalprof_collect::cgroup::path_for(&format!("probe{}-{call}", std::process::id()));
    assert!(
        probe.is_some_and(|d| std::fs::create_dir(&d).is_ok() && std::fs::remove_dir(&d).is_ok()),
        "this test needs root and a writable cgroup hierarchy; as another user, cargo test lists it as ignored unless CI is set"
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_daemon_that_clears_its_environment_does_not_outlive_its_repeat() {
    require_cgroups();
    let _turn = crate::common::exclusive();
    let before = workload_cgroups();
    let tmp = tempfile::tempdir().unwrap();
    let tag = format!("{}.{}", 300 + std::process::id() % 600, std::process::id());
    let out = scalprof_process(&tmp.path().join("runs.db"))
        .args(QUICK_RUN)
        .args(["python3", "-c", &daemon_script(&tag)])
        .output()
        .unwrap();
    let cmdline = format!("sleep\0{tag}\0").into_bytes();
    let alive = running(&cmdline);
    if alive {
        let _ = StdCommand::new("pkill")
            .args(["-f", &format!("sleep {tag}")])
            .status();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!alive, "the daemon outlived scalprof: {err}");
    assert!(err.contains("scalprof stopped it"), "{err}");
    // Its workload cgroup went with the repeat.
    let after = workload_cgroups();
    let left: Vec<_> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(left.is_empty(), "workload cgroups left behind: {left:?}");
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_process_that_keeps_forking_does_not_outlive_a_killed_scalprof() {
    require_cgroups();
    let _turn = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    // Forks, and the parent exits, every few milliseconds, its environment cleared:
    // neither the token nor a process tree keeps up with it.
    let marker = tmp.path().join("hopper-alive");
    let hopper = format!(
        "import os, time, sys\n\
         os.environ.clear()\n\
         end = time.time() + 8\n\
         while time.time() < end:\n\
         \x20   if os.fork() > 0:\n\
         \x20       os._exit(0)\n\
         \x20   time.sleep(0.005)\n\
         open('{}', 'w').write('survived')\n",
        marker.display()
    );
    let script = format!(
        "import subprocess, sys, time\n\
         subprocess.Popen([sys.executable, '-c', {hopper:?}], env={{}})\n\
         time.sleep(20)\n"
    );
    let mut child = scalprof_process(&tmp.path().join("runs.db"))
        .args(QUICK_RUN)
        .args(["python3", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = child.kill();
    let _ = child.wait();
    // The hopper writes its marker 8 s after it began if it is still alive.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(9) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !marker.exists(),
        "a forking process outlived the SIGKILLed scalprof"
    );
}
