//! scalprof runs as root on shared machines: what another local user plants is never run,
//! followed or read, and bad input or a broken output never panics, hangs or loses a run.
//! Each test reproduces one defect found by hand; "another user" is uid 65534 (nobody),
//! whose files root makes with chown.

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::{scalprof_process, show_json, stderr_of, store_with_a_run, QUICK_RUN};
use crate::common::require_root;
use crate::common::scalprof;

const NOBODY: u32 = 65534;

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn another_users_build_directory_is_refused_not_run() {
    require_root("another_users_build_directory_is_refused_not_run");
    // With HOME and XDG_CACHE_HOME unset the corpus is built under $TMPDIR/scalprof-UID;
    // another user made that directory first and planted a "program" there.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let planted = tmp.path().join("scalprof-0/corpus");
    std::fs::create_dir_all(&planted).unwrap();
    let marker = tmp.path().join("ran-as-root");
    for name in ["counters_packed", "counters_padded"] {
        let bin = planted.join(name);
        std::fs::write(
            &bin,
            format!("#!/bin/sh\ntouch {}\necho ops=1\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    for p in [
        tmp.path().join("scalprof-0"),
        planted.clone(),
        planted.join("counters_packed"),
        planted.join("counters_padded"),
    ] {
        std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let out = StdCommand::new(assert_cmd::cargo::cargo_bin("scalprof"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TMPDIR", tmp.path())
        .arg("--db")
        .arg(tmp.path().join("runs.db"))
        .args(["demo", "-t", "1", "--repeat", "1"])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("owned by uid 65534"), "{err}");
    assert!(!marker.exists(), "a planted binary ran");
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_suite_never_writes_through_a_planted_link() {
    require_root("the_suite_never_writes_through_a_planted_link");
    let _turn = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "root's secret").unwrap();
    // A SUITE_DIR someone else owns is refused before anything runs.
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::symlink(&victim, theirs.join("scalprof-suite-pwrite")).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let suite = |dir: &Path| {
        scalprof(&tmp.path().join("runs.db"))
            .env("SUITE_DIR", dir)
            .args([
                "suite",
                "--tests",
                "pwrite_same_file:threads",
                "-t",
                "1",
                "--seconds",
                "0.2",
                "--repeat",
                "1",
            ])
            .output()
            .unwrap()
    };
    let out = suite(&theirs);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("SUITE_DIR"), "{}", stderr_of(&out));
    // Even in a directory of ours, a link at a test file's name is not followed.
    let ours = tmp.path().join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::os::unix::fs::symlink(&victim, ours.join("scalprof-suite-pwrite")).unwrap();
    let out = suite(&ours);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's secret",
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn timeout_and_sigterm_reach_a_workload_that_left_the_process_group() {
    let _turn = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    // Parent and child both leave scalprof's process group; both sleep.
    let script = "import os,time\npid=os.fork()\nif pid==0:\n os.setpgid(0,0)\n time.sleep(60)\n os._exit(0)\ntime.sleep(0.1)\nos.setpgid(0,pid)\ntime.sleep(60)\n";
    let t0 = Instant::now();
    let out = scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--timeout",
            "1s",
            "--",
            "python3",
            "-c",
            script,
        ])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "--timeout 1s ran {:?}: {}",
        t0.elapsed(),
        stderr_of(&out)
    );
    // SIGTERM to scalprof stops it, and the workload tree with it.
    let child = scalprof_process(&db)
        .args(QUICK_RUN)
        .args(["python3", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t1 = Instant::now();
    // SAFETY: sending SIGTERM to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        t1.elapsed() < Duration::from_secs(6),
        "SIGTERM took {:?}",
        t1.elapsed()
    );
    assert_eq!(out.status.code(), Some(143), "{}", stderr_of(&out));
    // Nothing of either workload is left sleeping.
    let left = StdCommand::new("pgrep")
        .args(["-f", "os.setpgid"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "workload processes survived: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// A SIGKILLed scalprof runs no code, yet nothing of its workload runs on: its keeper
/// kills the processes that carry its token, grandchildren that left the group included.
#[test]
fn a_sigkilled_scalprof_leaves_nothing_of_its_workload_running() {
    let _turn = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    // A grandchild in a process group and session of its own, detached from the tree.
    let marker = format!("scalprof-orphan-{}", std::process::id());
    // The name comes through the environment, so that only the sleeps' command lines hold
    // it (not scalprof's or the shell's).
    let script = r#"setsid bash -c 'exec -a "$ORPHAN" sleep 60' & exec -a "$ORPHAN" sleep 60"#;
    let mut child = scalprof_process(&db)
        .args(QUICK_RUN)
        .args(["bash", "-c", script])
        .env("ORPHAN", &marker)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = || {
        let out = StdCommand::new("pgrep")
            .args(["-f", &marker])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .count()
    };
    let t0 = Instant::now();
    while running() < 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(running(), 2, "the workload did not start");
    child.kill().unwrap();
    child.wait().unwrap();
    let t1 = Instant::now();
    while running() > 0 && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = running();
    if left > 0 {
        let _ = StdCommand::new("pkill").args(["-f", &marker]).status();
    }
    assert_eq!(
        left, 0,
        "processes of a SIGKILLed scalprof's workload ran on"
    );
}

/// `scalprof report 1 -o target` on `db`.
fn report_to(db: &Path, target: impl AsRef<std::ffi::OsStr>) -> std::process::Output {
    scalprof(db)
        .args(["report", "1", "-o"])
        .arg(target)
        .output()
        .unwrap()
}

#[test]
fn a_closed_pipe_or_a_full_disk_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let db = store_with_a_run(tmp.path());
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for args in [
        &["runs"][..],
        &["show", "1"],
        &["show", "1", "--json"],
        &["compare", "1", "1"],
    ] {
        let out = scalprof_process(&db)
            .args(args)
            .stdout(full())
            .output()
            .unwrap();
        let err = stderr_of(&out);
        // An error exits 2 in every command, compare too (its 1 is the gate's verdict).
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("writing standard output") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("where the store"),
            "blamed on the store: {err}"
        );
        // A reader that goes away after the first line: quiet, exit 0.
        let mut child = scalprof_process(&db)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        assert!(!stderr_of(&out).contains("panicked"), "{}", stderr_of(&out));
    }
    // A report written to a full disk names the report, not the store.
    let out = report_to(&db, "/dev/full");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("where /dev/full is written"), "{err}");
}

/// Under a file size limit (`ulimit -f`) the store's growth raised SIGXFSZ, which killed
/// scalprof with no message (exit 153), at the store's creation or mid-sweep. The write
/// fails instead, and the error says so; the workload keeps the signal's default.
#[test]
fn a_file_size_limit_is_an_error_not_a_silent_death() {
    let tmp = tempfile::tempdir().unwrap();
    for limit_kib in [0u64, 150] {
        let db = tmp.path().join(format!("f{limit_kib}.db"));
        let mut cmd = scalprof_process(&db);
        cmd.args([
            "run",
            "-t",
            "1,2,3",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            // The workload's output is written in full only when kept.
            "--keep-output",
            "--",
        ])
        .args(["sh", "-c", "echo ops=1; head -c 300000 /dev/zero"]);
        with_file_size_limit(&mut cmd, limit_kib << 10);
        let out = cmd.output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "limit {limit_kib} KiB: {err}");
        assert!(
            err.contains("scalprof: error:")
                && err.contains(&format!(
                    "the file-size limit (`ulimit -f`: {limit_kib} KiB)"
                )),
            "limit {limit_kib} KiB: {err}"
        );
    }
}

/// Sets the file-size limit (`ulimit -f`) of the process `cmd` starts.
fn with_file_size_limit(cmd: &mut StdCommand, limit_bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: limit_bytes,
                rlim_max: limit_bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Two threads that take one mutex `argv[1]` times each, then print one line.
const LOCKLOOP: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n, ops;
static void *work(void *unused) {
    (void)unused;
    for (long i = 0; i < n; i++) { pthread_mutex_lock(&m); ops++; pthread_mutex_unlock(&m); }
    return 0;
}
int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 1000;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    printf("ops=%ld\n", ops);
    return 0;
}
"#;

/// Under `ulimit -f 100` each traced process wrote its hold records to a file of its own,
/// past the limit: the workload was killed by SIGXFSZ ("threads 1, repeat 3: killed by
/// signal 25") and the sweep stopped. The records are memory now, sized within the limit:
/// the sweep completes with hold times and says how many records it dropped; or, if
/// scalprof's own store cannot grow, it stops with an error that names the limit. Never
/// with the workload killed.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_file_size_limit_never_kills_the_workload_for_its_hold_records() {
    // The traced repeats trace locks with BPF: root.
    require_root("a_file_size_limit_never_kills_the_workload_for_its_hold_records");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("lockloop.c");
    std::fs::write(&src, LOCKLOOP).unwrap();
    let bin = tmp.path().join("lockloop");
    let cc = StdCommand::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success());
    // The store made beforehand: its creation is not what is limited here.
    let db = store_with_a_run(tmp.path());
    let mut cmd = scalprof_process(&db);
    // 2 M acquisitions a thread: some 16 k timed holds, 250 KiB of records.
    cmd.args([
        "run",
        "-t",
        "1",
        "--repeat",
        "1",
        "--diagnose",
        "2",
        "--diagnose-max",
        "2",
        "--no-profile",
        // One thread contends for nothing: holds are timed there only when asked.
        "--hold-times-everywhere",
        "--",
    ])
    .arg(&bin)
    .arg("2000000");
    with_file_size_limit(&mut cmd, 100 << 10);
    let out = cmd.output().unwrap();
    let err = stderr_of(&out);
    assert!(
        !err.contains("SIGXFSZ") && !err.contains("signal 25"),
        "the workload was killed by the file-size limit: {err}"
    );
    if out.status.code() != Some(0) {
        // Only scalprof's own store may stop it, and then it says so.
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("scalprof: error:")
                && err.contains("the file-size limit (`ulimit -f`: 100 KiB) kept the store"),
            "{err}"
        );
        return;
    }
    assert!(
        err.contains("the hold times dropped")
            && err.contains("100 KiB, all that the file-size limit `ulimit -f` allows"),
        "{err}"
    );
    let doc = show_json(&db, "2");
    // The interposer's holds: user rows (a kernel mmap_lock waited on in the run has
    // holds the BPF tracer timed, which no file-size limit touches).
    let holds: Vec<&serde_json::Value> = doc["points"][0]["locks"]["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|row| row["scope"] == "user")
        .filter_map(|row| row.get("hold").filter(|h| !h.is_null()))
        .collect();
    assert_eq!(holds.len(), 1, "{doc}");
    // Every acquisition counted, though timed holds were dropped.
    assert_eq!(holds[0]["acquisitions"], 4_000_000, "{}", holds[0]);
    assert!(
        holds[0]["sampled"].as_u64().unwrap() > 4_000,
        "{}",
        holds[0]
    );
}

/// Files the user names (`report -o`, `--json`, `flame -o`, `export -o`) are not written
/// through another user's link or into another user's file in a shared folder; a FIFO no
/// one reads is refused at once. The user's own links and pipes still work.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn an_output_file_is_never_written_through_another_users_link() {
    require_root("an_output_file_is_never_written_through_another_users_link");
    let tmp = tempfile::tempdir().unwrap();
    let db = store_with_a_run(tmp.path());
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "root's secret").unwrap();
    // A shared folder, as /tmp is: world-writable and sticky.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let link = shared.join("report.html");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let theirs = shared.join("theirs.json");
    std::fs::write(&theirs, "").unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    for (args, code) in [
        (&["report", "1", "-o", "{}"][..], 2),
        (&["export", "1", "--format", "folded", "-o", "{}"], 2),
        // Checked when parsed, before the sweep.
        (&["run", "-t", "1", "--json", "{}", "--", "true"], 2),
    ] {
        for target in [&link, &theirs] {
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace("{}", target.to_str().unwrap()))
                .collect();
            let out = scalprof(&db).args(&args).output().unwrap();
            let err = stderr_of(&out);
            // export of a run without profiles fails before it writes: still not written.
            if args[0] != "export" {
                assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
                assert!(err.contains("another user (uid 65534)"), "{args:?}: {err}");
            }
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's secret");
            assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "");
        }
    }
    // A FIFO no one reads: refused at once, not waited on.
    let fifo = tmp.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t0 = Instant::now();
    let out = scalprof(&db)
        .args(["report", "1", "-o"])
        .arg(&fifo)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("no one reads"),
        "{}",
        stderr_of(&out)
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    // The user's own link, and standard output as a pipe, are written.
    let mine = tmp.path().join("mine.html");
    std::os::unix::fs::symlink(tmp.path().join("target.html"), &mine).unwrap();
    let out = report_to(&db, &mine);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(std::fs::read_to_string(tmp.path().join("target.html"))
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    let out = report_to(&db, "/dev/stdout");
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<!DOCTYPE html>"));
}

#[test]
fn a_jit_map_planted_by_another_user_is_neither_read_nor_waited_on() {
    // The FIFO case needs no second user: a FIFO at perf-PID.map would block a plain read.
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let _turn = crate::common::exclusive();
    // A JIT (generated code in an anonymous executable mapping, named only by a perf map)
    // whose map's name holds a FIFO: symbolizing its samples must not open and block on it.
    let script = "import ctypes, mmap, os\n\
os.mkfifo(f'/tmp/perf-{os.getpid()}.map')\n\
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n\
buf.write(bytes([0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3]))\n\
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))\n\
ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long)(addr)(300_000_000)\n\
print('ops=1')\n";
    let child = scalprof_process(&db)
        .args(["run", "-t", "1", "--repeat", "1", "--no-locks", "--"])
        .args(["python3", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut child = child;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("scalprof hung on a FIFO perf map");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Remove what the workload planted.
    for e in std::fs::read_dir("/tmp").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("perf-") && e.file_type().is_ok_and(|t| t.is_fifo()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    assert!(status.success(), "{status:?}");
    assert_eq!(show_json(&db, "1")["status"], "complete");
}

use std::os::unix::fs::FileTypeExt;

#[test]
fn an_empty_scalprof_db_means_the_default_store() {
    let tmp = tempfile::tempdir().unwrap();
    let out = StdCommand::new(assert_cmd::cargo::cargo_bin("scalprof"))
        .env("SCALPROF_DB", "")
        .env("XDG_DATA_HOME", tmp.path())
        .arg("runs")
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("--db"), "{err}");
}

/// Compiles `source` and renames its symbol `from` to `to` (objcopy), for symbol names no
/// compiler would write: escape sequences, bidi overrides.
fn binary_with_symbol(
    dir: &Path,
    source: &str,
    from: &str,
    to: &str,
    debug: bool,
) -> std::path::PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, source).unwrap();
    let plain = dir.join("prog-plain");
    let cc = StdCommand::new("cc")
        .args(debug.then_some("-g"))
        .args(["-O1", "-fno-inline", "-o"])
        .arg(&plain)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success());
    let bin = dir.join("prog");
    let oc = StdCommand::new("objcopy")
        .arg(format!("--redefine-sym={from}={to}"))
        .arg(&plain)
        .arg(&bin)
        .status()
        .unwrap();
    assert!(oc.success());
    bin
}

const ESC_NAME: &str = "evil\x1b]0;pwned\x07\x1b[2Jvar";

#[test]
fn layout_never_prints_a_binary_s_escape_sequences() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = binary_with_symbol(
        tmp.path(),
        "struct s { long a; long b; } var;\nint main(void) { var.a = 1; return 0; }\n",
        "var",
        ESC_NAME,
        true,
    );
    let out = scalprof(&tmp.path().join("runs.db"))
        .arg("layout")
        .arg(&bin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(text.contains("evil^[]0;pwned^G^[[2Jvar"), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
}

#[test]
fn a_label_or_argument_cannot_forge_summary_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    // A newline would start a fake findings line; U+202E would reorder what follows it.
    let label = "x\nfindings:\n   99%  lock_contention  FAKE: forged\u{202e}";
    let out = scalprof(&db)
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--label",
            label,
        ])
        .args(["--", "sh", "-c", "echo ops=1", "fake\n   98%  forged-arg"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    for args in [&["show", "1"][..], &["runs"]] {
        let out = scalprof(&db).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("99%")
                || l.trim_start().starts_with("98%")
                || l.trim_start().starts_with("findings:")),
            "{args:?}: a forged line:\n{text}"
        );
        assert!(!text.contains('\u{202e}'), "{text}");
    }
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn folded_stacks_reach_a_terminal_escaped() {
    require_root("folded_stacks_reach_a_terminal_escaped");
    let _turn = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let bin = binary_with_symbol(
        tmp.path(),
        "volatile long sink;\n__attribute__((noinline)) void spin(void) { for (long i = 0; i < 300000000; i++) sink += i; }\nint main(void) { spin(); return 0; }\n",
        "spin",
        "spin\x1b[2J",
        false,
    );
    let out = scalprof(&db)
        .args(["run", "-t", "1", "--repeat", "1", "--no-locks", "--"])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let folded = |args: &str| {
        // `script` gives the command a terminal; what it printed is in the typescript.
        let log = tmp.path().join("typescript");
        let cmd = format!(
            "{} --db {} {args}",
            assert_cmd::cargo::cargo_bin("scalprof").display(),
            db.display()
        );
        let st = StdCommand::new("script")
            .args(["-qec", &cmd])
            .arg(&log)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::read_to_string(&log).unwrap()
    };
    for args in ["flame 1 --folded", "export 1 --format folded -o -"] {
        let text = folded(args);
        assert!(text.contains("spin^[[2J"), "{args}: {text}");
        assert!(
            !text.contains("spin\x1b"),
            "{args}: raw ESC on the terminal"
        );
    }
    // To a pipe the data stays as it is.
    let out = scalprof(&db)
        .args(["flame", "1", "--folded"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("spin\x1b[2J"));
}

/// Runs scalprof as nobody (setpriv), in a folder nobody may write.
fn as_nobody(args: &[&str]) -> std::process::Output {
    require_root("as_nobody");
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = StdCommand::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("scalprof"))
        .arg("--db")
        .arg(dir.join("n.db"))
        .args(args)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn unprivileged_locks_and_attach_fail_before_running_and_say_why() {
    let out = as_nobody(&["locks", "--", "sh", "-c", "touch /tmp/scalprof-ran-anyway"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs root"), "{err}");
    // Every-CPU sampling needs paranoid ≤ 0, not the 1 that per-process profiling needs.
    if scalprof_collect::caps::paranoid().is_some_and(|p| p > 0) {
        let sleeper = StdCommand::new("sleep").arg("30").spawn().unwrap();
        let out = as_nobody(&[
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--no-locks",
            "--attach-name",
            "sleep",
            "--",
            "true",
        ]);
        let mut sleeper = sleeper;
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("perf_event_paranoid=0"), "{err}");
    }
}

#[test]
fn values_that_make_no_sense_are_refused_when_parsed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    for (args, what) in [
        (
            &["compare", "1", "2", "--fail-if-slower", "nan"][..],
            "--fail-if-slower",
        ),
        (&["run", "--timeout", "0", "--", "true"], "--timeout"),
        (&["run", "--timeout", "0s", "--", "true"], "--timeout"),
        (&["locks", "-t", "0", "--", "true"], "--threads"),
        (&["suite", "--repeat", "0"], "--repeat"),
        (&["suite", "--seconds", "nan"], "--seconds"),
        (&["demo", "--repeat", "0"], "--repeat"),
        (&["run", "--ops-regex", "(", "--", "true"], "--ops-regex"),
        (&["suite", "--tests", "bogus"], "no test \"bogus\""),
    ] {
        let out = scalprof(&db).args(args).output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
    assert!(!db.exists(), "a refused command created the store");
}

#[test]
fn a_stopped_sweep_and_a_non_numeric_ops_capture_are_told_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let out = scalprof(&db)
        .args(["run", "-t", "1,2", "--repeat", "2", "--diagnose", "0", "--"])
        .args(["sh", "-c", "exit 3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2));
    assert!(!text.contains("one repeat per point"), "{text}");
    assert!(!text.contains("0 measured points"), "{text}");
    let out = scalprof(&db)
        .args(["run", "-t", "1", "--repeat", "1", "--diagnose", "0"])
        .args([
            "--ops-regex",
            r"ops=(\w+)",
            "--",
            "sh",
            "-c",
            "echo ops=abc",
        ])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(
        err.contains("matched \"ops=abc\"") && err.contains("not a number"),
        "{err}"
    );
}

#[test]
fn pipe_mode_perf_data_is_named_as_such() {
    // The 16-byte header of `perf record -o -` (magic, header size 16), then records.
    let tmp = tempfile::tempdir().unwrap();
    let mut bytes = b"PERFILE2".to_vec();
    bytes.extend_from_slice(&16u64.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 200]);
    let file = tmp.path().join("pipe.data");
    std::fs::write(&file, bytes).unwrap();
    let out = scalprof(&tmp.path().join("runs.db"))
        .arg("import")
        .arg(&file)
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("pipe-mode perf.data") && err.contains("perf record -o FILE"),
        "{err}"
    );
}

#[test]
fn a_fifo_given_as_a_file_is_refused_not_waited_on() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let db = tmp.path().join("runs.db");
    for args in [&["import"][..], &["layout"]] {
        let out = scalprof(&db)
            .args(args)
            .arg(&fifo)
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
    // A folder given as the store is named as one, not "disk I/O error".
    let out = scalprof(tmp.path()).arg("runs").output().unwrap();
    assert!(
        stderr_of(&out).contains("is a directory"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_report_of_a_run_too_short_to_sample_is_still_written() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("runs.db");
    let out = scalprof(&db)
        .args([
            "run",
            "-t",
            "1,2",
            "--repeat",
            "1",
            "--diagnose",
            "1",
            "--no-locks",
        ])
        .args(["--", "sh", "-c", "echo ops=$1", "sh", "{threads}"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let html = tmp.path().join("r.html");
    let out = report_to(&db, &html);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<html"));
}
