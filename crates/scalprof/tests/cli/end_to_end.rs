//! End-to-end tests of the scalprof binary: real processes and a real store, running short
//! shell scripts rather than measured programs.

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::{predicate, PredicateBooleanExt};
use serde_json::Value;

use crate::common::check_shape;
use crate::common::cli::{quick_run, scalprof_process, show_json, QUICK_RUN};
use crate::common::scalprof;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn run_document_keeps_its_contract() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let json = dir.path().join("run.json");
    // 20 ms of sleep: a run of 2 ms (the echo alone) is all process start-up, and its
    // noise made a 27% "loss" at 3 threads that a finding then explained, 1 run in 3.
    let script = "sleep 0.02; echo ops=$((1000 * $1))";
    scalprof(&db)
        .args([
            "run", "-t", "1-3", "--repeat", "2", "--label", "contract", "--json",
        ])
        .arg(&json)
        .args(["--", "sh", "-c", script, "sh", "{threads}"])
        .assert()
        .success();
    let doc = read_json(&json);
    let shape: Value =
        serde_json::from_str(include_str!("../contract/run-document.shape.json")).unwrap();
    check_shape(&doc, &shape, "$");
    assert_eq!(doc["schema"], "scalprof.run/1");
    assert_eq!(doc["label"], "contract");
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["sweep"]["values"], serde_json::json!([1, 2, 3]));
    assert_eq!(
        doc["command"],
        serde_json::json!(["sh", "-c", script, "sh", "{threads}"])
    );
    assert_eq!(doc["model"]["kind"], "usl");
    assert_eq!(doc["findings"], serde_json::json!([]));
    assert_eq!(doc["points"][2]["repeats"][1]["ops"], 3000);
    // Two clean repeats per point; as root, two traced repeats too, with the perturbation.
    // A repeat other processes (the tests beside this one) disturbed is measured again, at
    // most twice per point, and a verdict they leave unsettled adds traced repeats (up to
    // 6 in all).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        for p in doc["points"].as_array().unwrap() {
            let all = p["repeats"].as_array().unwrap().len()
                + p["traced_repeats"].as_array().unwrap().len();
            let disturbed = p["interference"]["disturbed"].as_u64().unwrap_or(0) as usize;
            assert!((4..=2 + 6 + disturbed.min(2)).contains(&all), "{p}");
            assert!(p["repeats"].as_array().unwrap().len() >= 2, "{p}");
            assert!(p["traced_repeats"].as_array().unwrap().len() >= 2, "{p}");
            assert_eq!(p["traced_repeats"][0]["traced"], true);
            assert!(p["perturbation"].is_number(), "{p}");
        }
    } else {
        eprintln!("not root: traced repeats not checked (profiling needs privileges)");
    }
    // `show --json` prints the same document the run wrote.
    assert_eq!(show_json(&db, "contract"), doc);
}

#[test]
fn fit_matches_the_reference_specsdm91_fit() {
    let csv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specsdm91.csv");
    let out = Command::cargo_bin("scalprof")
        .unwrap()
        .arg("fit")
        .arg(&csv)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let close = |key: &str, want: f64| {
        let got = v[key].as_f64().unwrap();
        assert!((got - want).abs() / want < 5e-3, "{key}: {got} vs {want}");
    };
    close("sigma", 0.0277);
    close("kappa", 0.000104);
    close("lambda", 90.0);
    close("peak", 96.5);
    assert!(v["r2"].as_f64().unwrap() > 0.98);
}

#[test]
fn fit_explains_bad_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "n,x\n1,10\n2,twenty\n").unwrap();
    Command::cargo_bin("scalprof")
        .unwrap()
        .arg("fit")
        .arg(&csv)
        .assert()
        .failure()
        .stderr(predicate::str::contains("line 3"));
}

#[test]
fn a_missing_command_fails_at_once_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    scalprof(&dir.path().join("runs.db"))
        .args(["run", "--", "/nonexistent"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("/nonexistent"))
        .stderr(predicate::function(|s: &str| s.lines().count() == 1));
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert!(
        !dir.path().join("runs.db").exists(),
        "no run is created for a typo"
    );
}

#[test]
fn a_failing_workload_is_recorded_and_its_stderr_shown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let script = "echo \"cannot allocate $1 widgets\" >&2; [ $1 -lt 2 ]";
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1,2,3",
            "--repeat",
            "1",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            "{threads}",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "threads 2, repeat 1: exited with status 1",
        ))
        .stderr(predicate::str::contains("cannot allocate 2 widgets"));
    let doc = show_json(&db, "latest");
    assert_eq!(doc["status"], "failed");
    assert_eq!(
        doc["points"].as_array().unwrap().len(),
        2,
        "the sweep stopped at the failure"
    );
    assert_eq!(doc["points"][1]["repeats"][0]["exit_code"], 1);

    // --keep-going measures every point anyway.
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1,2,3",
            "--repeat",
            "1",
            "--keep-going",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            "{threads}",
        ])
        .assert()
        .success();
    let doc = show_json(&db, "latest");
    assert_eq!(doc["points"].as_array().unwrap().len(), 3);
    assert!(doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["kind"] == "failed_repeats"));
}

#[test]
fn a_crash_and_a_timeout_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--",
            "sh",
            "-c",
            "kill -SEGV $$",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("killed by SIGSEGV"));
    let t0 = Instant::now();
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--timeout",
            "0.3",
            "--",
            "sleep",
            "20",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("timed out"));
    assert!(t0.elapsed() < Duration::from_secs(10));
    let doc = show_json(&db, "latest");
    assert_eq!(doc["points"][0]["repeats"][0]["timed_out"], true);
}

#[test]
fn sigint_during_the_second_point_keeps_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let marker = dir.path().join("second-point-started");
    // Point 1 is quick; point 2 announces itself, then runs long.
    let script = format!(
        "if [ $1 -ge 2 ]; then touch {}; sleep 30; fi; echo ops=100",
        marker.display()
    );
    let child = scalprof_process(&db)
        .args(["run", "-t", "1,2", "--repeat", "3", "--json"])
        .arg(dir.path().join("run.json"))
        .args(["--", "sh", "-c", &script, "sh", "{threads}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "point 2 never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the sleeping workload was stopped"
    );
    let doc = show_json(&db, "latest");
    assert_eq!(doc["status"], "interrupted");
    let points = doc["points"].as_array().unwrap();
    assert_eq!(
        points.len(),
        1,
        "the cut-off repeat of point 2 is not a measurement"
    );
    assert_eq!(points[0]["value"], 1);
    // Three clean repeats, and those measured again when the tests beside this one
    // disturbed them.
    let disturbed = points[0]["interference"]["disturbed"].as_u64().unwrap_or(0) as usize;
    let clean = points[0]["repeats"].as_array().unwrap().len();
    assert!((3..=3 + disturbed.min(2)).contains(&clean), "{}", points[0]);
    assert_eq!(
        read_json(&dir.path().join("run.json"))["status"],
        "interrupted"
    );
}

#[test]
fn killing_scalprof_loses_at_most_the_repeat_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let marker = dir.path().join("second-point-started");
    let script = format!(
        "if [ $1 -ge 2 ]; then touch {}; exec sleep 37; fi; echo ops=100",
        marker.display()
    );
    let mut child = scalprof_process(&db)
        .args(["run", "-t", "1,2", "--repeat", "2"])
        .args(["--", "sh", "-c", &script, "sh", "{threads}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "point 2 never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    let doc = show_json(&db, "latest");
    assert_eq!(
        doc["status"], "interrupted",
        "a run whose recorder died is not 'running'"
    );
    // Two clean repeats, and those measured again when other processes disturbed them.
    let first = &doc["points"][0];
    let disturbed = first["interference"]["disturbed"].as_u64().unwrap_or(0) as usize;
    let repeats = first["repeats"].as_array().unwrap().len();
    assert!((2..=2 + disturbed.min(2)).contains(&repeats), "{first}");
    // The orphaned workload was taken down with scalprof (parent-death signal).
    std::thread::sleep(Duration::from_millis(200));
    let still = StdCommand::new("pgrep")
        .args(["-x", "-f", "sleep 37"])
        .output()
        .unwrap();
    assert!(still.stdout.is_empty(), "workload left running");
}

#[test]
fn runs_lists_and_show_resolves_labels() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    scalprof(&db)
        .arg("runs")
        .assert()
        .success()
        .stdout(predicate::str::contains("no runs"));
    for label in ["first", "second"] {
        scalprof(&db)
            .args([
                "run", "-t", "1,2", "--repeat", "1", "--label", label, "--", "true",
            ])
            .assert()
            .success()
            .stdout(predicate::str::contains("fixed work assumed"));
    }
    scalprof(&db)
        .arg("runs")
        .assert()
        .success()
        .stdout(predicate::str::contains("first").and(predicate::str::contains("second")));
    scalprof(&db)
        .args(["show", "latest~1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("first"));
    scalprof(&db)
        .args(["show", "nope"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("no run \"nope\""));
    // A run measured without profiles has nothing to export, and says why.
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--",
            "true",
        ])
        .assert()
        .success();
    scalprof(&db)
        .args(["export", "latest", "-o"])
        .arg(dir.path().join("x.pb.gz"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "has no profiles (recorded with --no-profile",
        ));
    assert!(!dir.path().join("x.pb.gz").exists());
}

#[test]
fn the_default_store_follows_xdg_data_home() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("scalprof")
        .unwrap()
        .env_remove("SCALPROF_DB")
        .env("XDG_DATA_HOME", dir.path())
        .args(["run", "-t", "1", "--repeat", "1", "--", "true"])
        .assert()
        .success();
    assert!(dir.path().join("scalprof/runs.db").exists());
    assert!(dir
        .path()
        .join("scalprof/runs.db.d/1/p1-r0.stdout")
        .exists());
}

#[test]
fn kernel_struct_layout_shows_mmap_lock_and_its_cache_line() {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI's kernel must have BTF"
        );
        eprintln!("skipped: this kernel has no BTF");
        return;
    }
    let out = Command::cargo_bin("scalprof")
        .unwrap()
        .args(["layout", "--kernel", "--struct", "mm_struct"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(" mmap_lock "))
        .expect("mmap_lock listed");
    assert!(
        lines[at].contains("rw_semaphore") && lines[at].contains("[lock]"),
        "{}",
        lines[at]
    );
    // Its cache line is named above it, with neighbors in it.
    let header = lines[..at]
        .iter()
        .rposition(|l| l.starts_with("--- cache line"))
        .expect("line header");
    assert!(
        at - header >= 2,
        "mmap_lock has neighbors on its line: {text}"
    );
    Command::cargo_bin("scalprof")
        .unwrap()
        .args(["layout", "--kernel", "--struct", "no_such_struct_xyz"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("no struct or union named"));
}

/// An unprivileged user cannot load BPF: the run must go on without lock tracing, say so
/// with the fix, and never hang (it once waited forever on the workload it held before
/// exec). Runs for real as `nobody` where scalprof is root; CI runs as root.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn an_unprivileged_run_goes_on_without_the_collectors_it_may_not_use() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || which("setpriv").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with setpriv (util-linux) installed"
        );
        eprintln!("skipped: needs root (to become nobody) and setpriv");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // nobody must be able to write the store's folder and run the binary.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("scalprof");
    let db = dir.path().join("n.db");
    let t0 = Instant::now();
    let mut child = StdCommand::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .arg("--db")
        .arg(&db)
        .args([
            "run",
            "-t",
            "1,2",
            "--repeat",
            "1",
            "--timeout",
            "20s",
            "--",
        ])
        .args(["sh", "-c", "echo ops=$((100 * $1))", "sh", "{threads}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("an unprivileged run hung for 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("continuing without lock tracing") && stderr.contains("root"),
        "{stderr}"
    );
    // One line from us, not libbpf's own log ("Make sure your kernel supports BPF…").
    assert!(!stderr.contains("libbpf:"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("complete"), "{stdout}");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[test]
fn two_stores_in_one_folder_keep_their_own_workload_output() {
    let dir = tempfile::tempdir().unwrap();
    for (db, word) in [("a.db", "apple"), ("b.db", "banana")] {
        quick_run(&dir.path().join(db), &format!("echo ops=1 {word}"))
            .assert()
            .success();
    }
    for (db, word) in [("a.db", "apple"), ("b.db", "banana")] {
        let doc = show_json(&dir.path().join(db), "1");
        let stdout = doc["points"][0]["repeats"][0]["stdout_path"]
            .as_str()
            .unwrap();
        assert!(stdout.contains(&format!("{db}.d")), "{stdout}");
        assert_eq!(
            std::fs::read_to_string(stdout).unwrap(),
            format!("ops=1 {word}\n")
        );
    }
}

#[test]
fn escape_sequences_from_the_workload_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let evil = "\x1b]0;pwned\x07\x1b[2J";
    let run = scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--label",
        ])
        .arg(format!("x{evil}"))
        .args(["--", "sh", "-c"])
        .arg(format!("printf 'boom{evil}\\n' >&2; exit 3"))
        .output()
        .unwrap();
    let runs = scalprof(&db).arg("runs").output().unwrap();
    let show = scalprof(&db).args(["show", "latest"]).output().unwrap();
    for (what, bytes) in [
        ("run stdout", &run.stdout),
        ("run stderr", &run.stderr),
        ("runs", &runs.stdout),
        ("show", &show.stdout),
    ] {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains('\x1b') && !text.contains('\x07'),
            "{what}: {text:?}"
        );
    }
    // Shown, neutralized: the user still sees what was there.
    assert!(String::from_utf8_lossy(&run.stderr).contains("boom^[]0;pwned^G"));
    assert!(String::from_utf8_lossy(&runs.stdout).contains("x^[]0;pwned"));
}

#[test]
fn sigterm_exits_143_and_keeps_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let marker = dir.path().join("started");
    let script = format!("touch {}; sleep 30; echo ops=1", marker.display());
    let child = scalprof_process(&db)
        .args(QUICK_RUN)
        .args(["sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending SIGTERM to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "128 + SIGTERM");
}

#[test]
fn keep_going_with_nothing_measured_fails_and_compare_names_different_commands() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    scalprof(&db)
        .args(["run", "-t", "1,2", "--repeat", "2", "--diagnose", "0"])
        .args([
            "--keep-going",
            "--label",
            "broken",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .assert()
        .code(2);
    for (label, script) in [("a", "echo ops=100"), ("b", "echo ops=100; true")] {
        scalprof(&db)
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
            .args(["--", "sh", "-c", script])
            .assert()
            .success();
    }
    scalprof(&db)
        .args(["compare", "a", "b"])
        .assert()
        .success()
        .stdout(predicate::str::contains("ran different commands"));
    // `latest~-1` is not the newest run.
    scalprof(&db)
        .args(["show", "latest~-1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no run \"latest~-1\""));
}

#[test]
fn layout_warns_about_another_architecture_and_names_a_missing_kernel_struct() {
    let dir = tempfile::tempdir().unwrap();
    // An x86-64 ELF relabelled as AArch64 (e_machine at offset 18).
    let mut elf = std::fs::read("/bin/true").unwrap();
    elf[18..20].copy_from_slice(&183u16.to_le_bytes());
    let path = dir.path().join("arm-true");
    std::fs::write(&path, elf).unwrap();
    scalprof(&dir.path().join("runs.db"))
        .arg("layout")
        .arg(&path)
        .assert()
        .stdout(predicate::str::contains(
            "the binary is for Aarch64, not this machine's",
        ));
    if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        scalprof(&dir.path().join("runs.db"))
            .args(["layout", "--kernel", "--struct", "no_such_struct"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "no struct or union named \"no_such_struct\" in the running kernel",
            ))
            .stderr(predicate::str::contains("not a usable ELF").not());
    }
}

#[test]
fn a_daemon_left_running_by_the_workload_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = quick_run(
        &dir.path().join("runs.db"),
        "setsid sleep 7.4321 </dev/null >/dev/null 2>&1 & echo ops=1",
    )
    .output()
    .unwrap();
    let _ = StdCommand::new("pkill")
        .args(["-f", "sleep 7.4321"])
        .status();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Its name may still be `sh` or `setsid` when scalprof looks: it is caught anyway.
    assert!(stderr.contains("left 1 process running"), "{stderr}");
}

/// On a full disk the reading commands still read, and a run says the disk is full. Needs
/// root to mount a tiny tmpfs; CI runs as root.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_full_disk_is_named_and_stored_runs_stay_readable() {
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = StdCommand::new("umount").arg(&self.0).status();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("full");
    std::fs::create_dir(&mnt).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mounted = root
        && StdCommand::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
    if !mounted {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to mount a tmpfs"
        );
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let _guard = Unmount(mnt.clone());
    let db = mnt.join("runs.db");
    quick_run(&db, "echo ops=1").assert().success();
    let _ = StdCommand::new("dd")
        .args(["if=/dev/zero", "bs=64k"])
        .arg(format!("of={}", mnt.join("fill").display()))
        .stderr(Stdio::null())
        .status();
    scalprof(&db).arg("runs").assert().success();
    scalprof(&db).args(["show", "1"]).assert().success();
    quick_run(&db, "echo ops=1")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the disk is full"));
}

#[test]
fn json_dash_is_standard_output_and_counts_read_as_english() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = scalprof(&db)
        .current_dir(dir.path())
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--json",
            "-",
        ])
        .args(["--", "sh", "-c", "echo ops=7"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // The document alone, not the summary, and no file named "-".
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["points"][0]["repeats"][0]["ops"], 7);
    assert!(!dir.path().join("-").exists());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 point × 1 repeat"), "{err}");
}

#[test]
fn json_alone_prints_the_document_as_show_json_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = scalprof(&db)
        .args([
            "run",
            "--json",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
        ])
        .args(["--", "sh", "-c", "echo ops=7"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let again = show_json(&db, "1");
    assert_eq!(doc["id"], again["id"]);
    assert_eq!(doc["points"], again["points"]);
}
