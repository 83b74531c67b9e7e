//! Attacks on scalprof, grouped by how they are provoked: paths another
//! local user controls (`planted_paths`), scalprof stopped or killed part-way
//! (`interruptions`), and limits on memory and disk (`limits`). "Another user" is uid
//! 65534 (nobody), whose files root makes with chown. Each test reproduces its defect
//! first, and was seen failing before the fix.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use crate::common::cli::{scalprof_process, show_json, stderr_of, store_with_a_run, QUICK_RUN};
use crate::common::require_root;
use crate::common::scalprof;

const NOBODY: u32 = 65534;

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A folder of nobody's (their project folder, their home, their TMPDIR), mode 0755.
fn nobodys_folder(path: &Path) -> PathBuf {
    std::fs::create_dir(path).unwrap();
    mode(path, 0o755);
    std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    path.to_path_buf()
}

/// A link nobody made at `link`, to `target`.
fn nobodys_link(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
    std::os::unix::fs::lchown(link, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// scalprof with nothing of the test's environment but PATH and `env`.
fn bare_scalprof(env: &[(&str, &Path)]) -> StdCommand {
    let mut c = StdCommand::new(assert_cmd::cargo::cargo_bin("scalprof"));
    c.env_clear().env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

mod planted_paths {
    use super::*;

    /// Defect 2: `report -o`, `--json`, `--report` checked only the last component for
    /// another user's link; a link in a folder of the path made root replace its own
    /// 0600 file, in a folder the other user chose.
    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn an_output_is_never_written_through_a_link_in_one_of_its_folders() {
        require_root("an_output_is_never_written_through_a_link_in_one_of_its_folders");
        let tmp = tempfile::tempdir().unwrap();
        let db = store_with_a_run(tmp.path());
        let victim_dir = tmp.path().join("victimdir");
        std::fs::create_dir(&victim_dir).unwrap();
        mode(&victim_dir, 0o700);
        for name in ["report.html", "out.json", "r.html"] {
            std::fs::write(victim_dir.join(name), "secret").unwrap();
            mode(&victim_dir.join(name), 0o600);
        }
        // Their folder (not sticky: the kernel's protected_symlinks does not apply), and
        // a shared sticky one like /tmp: a link of theirs to root's folder in each.
        let theirs = nobodys_folder(&tmp.path().join("theirs"));
        nobodys_link(&victim_dir, &theirs.join("out"));
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        mode(&shared, 0o1777);
        nobodys_link(&victim_dir, &shared.join("out"));
        for folder in [&theirs, &shared] {
            let via = folder.join("out");
            for (args, code) in [
                (vec!["report", "1", "-o", "{}/report.html"], 2),
                // Checked when parsed, before the sweep.
                (
                    vec!["run", "-t", "1", "--json", "{}/out.json", "--", "true"],
                    2,
                ),
                (
                    vec!["run", "-t", "1", "--report", "{}/r.html", "--", "true"],
                    2,
                ),
            ] {
                let args: Vec<String> = args
                    .iter()
                    .map(|a| a.replace("{}", via.to_str().unwrap()))
                    .collect();
                let out = scalprof(&db).args(&args).output().unwrap();
                let err = stderr_of(&out);
                assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
                assert!(
                    err.contains("a link made by another user (uid 65534)"),
                    "{args:?}: {err}"
                );
            }
            for name in ["report.html", "out.json", "r.html"] {
                let text = std::fs::read_to_string(victim_dir.join(name)).unwrap();
                assert_eq!(text, "secret", "{name} was replaced through {via:?}");
            }
        }
        // Root's own link in a folder of the path (as /tmp may be) is followed.
        let mine = tmp.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::os::unix::fs::symlink(&mine, shared.join("roots")).unwrap();
        let out = scalprof(&db)
            .args(["report", "1", "-o"])
            .arg(shared.join("roots/report.html"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert!(mine.join("report.html").exists());
    }

    /// Defect 10: the private-folder check ran on the canonical path only, so a link in
    /// a folder another user owns (their TMPDIR) moved root's corpus build into a root
    /// folder of their choice, where root wrote 25 programs.
    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn a_link_in_another_users_tmpdir_does_not_move_the_corpus_build() {
        require_root("a_link_in_another_users_tmpdir_does_not_move_the_corpus_build");
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victimroot");
        std::fs::create_dir(&victim).unwrap();
        mode(&victim, 0o700);
        // Their TMPDIR, and a shared sticky one like /tmp, each with a link of theirs
        // where root's build folder would be.
        let theirs = nobodys_folder(&tmp.path().join("tmp4"));
        nobodys_link(&victim, &theirs.join("scalprof-0"));
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        mode(&shared, 0o1777);
        nobodys_link(&victim, &shared.join("scalprof-0"));
        for (tmpdir, said) in [
            (&theirs, "its parent"),
            (&shared, "a link made by another user (uid 65534)"),
        ] {
            let out = bare_scalprof(&[("TMPDIR", tmpdir)])
                .arg("corpus")
                .output()
                .unwrap();
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(2), "{tmpdir:?}: {err}");
            assert!(err.contains("refusing to use"), "{err}");
            assert!(err.contains(said), "{err}");
            assert!(
                std::fs::read_dir(&victim).unwrap().next().is_none(),
                "the build went into root's folder through {tmpdir:?}"
            );
        }
        // A dangling link of theirs is refused as such, not "File exists".
        let dangling = nobodys_folder(&tmp.path().join("tmp5"));
        nobodys_link(&tmp.path().join("nowhere"), &dangling.join("scalprof-0"));
        let out = bare_scalprof(&[("TMPDIR", &dangling)])
            .arg("corpus")
            .output()
            .unwrap();
        assert!(
            stderr_of(&out).contains("refusing to use"),
            "{}",
            stderr_of(&out)
        );
        assert!(!tmp.path().join("nowhere").exists());
    }

    /// Defect 20: a refused `sudo -E scalprof demo` (HOME is another user's) left a
    /// root-owned ~/.cache/scalprof in their home, which then broke their own runs.
    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn a_refused_home_is_left_as_it_was() {
        require_root("a_refused_home_is_left_as_it_was");
        let tmp = tempfile::tempdir().unwrap();
        let home = nobodys_folder(&tmp.path().join("home"));
        let out = bare_scalprof(&[("HOME", &home)])
            .arg("--db")
            .arg(tmp.path().join("runs.db"))
            .args(["demo", "-t", "1", "--repeat", "1"])
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("owned by uid 65534"), "{err}");
        let left: Vec<_> = std::fs::read_dir(&home).unwrap().flatten().collect();
        assert!(left.is_empty(), "left in their home: {left:?}");
    }
}

mod interruptions {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// Defect 15: outputs were truncated, then written, so a scalprof stopped part-way (a
    /// signal, a file size limit, a full disk) left a piece of the new file in place of
    /// the previous one. Here the file size limit stops the write: its SIGXFSZ kills
    /// scalprof (or, ignored, fails the write) after 64 KiB of a 130 KB report.
    #[test]
    fn an_interrupted_output_leaves_the_previous_file_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("runs.db");
        // 120 points: a report of about 130 KB.
        let out = scalprof(&db)
            .args([
                "run",
                "-t",
                "1-120",
                "--repeat",
                "1",
                "--diagnose",
                "0",
                "--",
            ])
            .args(["sh", "-c", "echo ops=1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let folder = tmp.path().join("reports");
        std::fs::create_dir(&folder).unwrap();
        let target = folder.join("big.html");
        std::fs::write(&target, "OLD\n").unwrap();
        let mut cmd = scalprof_process(&db);
        cmd.args(["report", "1", "-o"]).arg(&target);
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 64 << 10,
                    rlim_max: 64 << 10,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{}", stderr_of(&out));
        let left = std::fs::read_to_string(&target).unwrap();
        assert!(
            left == "OLD\n",
            "the previous file was replaced by {} bytes of the report",
            left.len()
        );
        let names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["big.html"], "left behind: {names:?}");
        // Without the limit the report replaces it, keeping its mode.
        mode(&target, 0o640);
        let out = scalprof(&db)
            .args(["report", "1", "-o"])
            .arg(&target)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert!(std::fs::read_to_string(&target)
            .unwrap()
            .starts_with("<!DOCTYPE html>"));
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o640);
    }

    fn comm(pid: u32) -> String {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// `pid`'s descendants, from /proc's children lists.
    fn descendants(pid: u32) -> Vec<u32> {
        let mut out = vec![pid];
        let mut i = 0;
        while i < out.len() {
            let tasks = std::fs::read_dir(format!("/proc/{}/task", out[i]));
            i += 1;
            for t in tasks.into_iter().flatten().flatten() {
                let text = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                out.extend(
                    text.split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
        out
    }

    /// The state letter of a process, from /proc/PID/stat.
    fn state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next())
            .unwrap_or('?')
    }

    /// Defect 13: Ctrl-Z (SIGTSTP) reached only scalprof, while the workload (its own
    /// process group) ran on; the pause was stored as the repeat's wall time (a 1 s
    /// workload as 2.8 s, no warning). Now the workload is stopped with scalprof, and
    /// the paused repeat is dropped, said, and measured again.
    #[test]
    fn a_suspended_scalprof_does_not_count_the_pause_as_wall_time() {
        let _turn = crate::common::exclusive();
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("runs.db");
        let child = scalprof_process(&db)
            .args(QUICK_RUN)
            .args(["sh", "-c", "sleep 1; echo ops=1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Once the repeat runs (scalprof's start-up may take a while on a busy machine).
        let t0 = std::time::Instant::now();
        while !descendants(pid).iter().any(|&p| comm(p) == "sleep") {
            assert!(t0.elapsed().as_secs() < 20, "the workload never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTSTP) };
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(state(pid), 'T', "scalprof did not stop");
        let sleeping: Vec<u32> = descendants(pid)
            .into_iter()
            .filter(|&p| comm(p) == "sleep")
            .collect();
        assert!(
            sleeping.iter().all(|&p| state(p) == 'T'),
            "the workload ran on while scalprof was stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(2200));
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        let out = child.wait_with_output().unwrap();
        let err = stderr_of(&out);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("was stopped while a repeat ran"), "{err}");
        let doc = show_json(&db, "1");
        // One repeat, or more when other work on the machine disturbed it (a disturbed
        // repeat is measured again): none of them counts the pause.
        let repeats = doc["points"][0]["repeats"].as_array().unwrap();
        assert!(!repeats.is_empty());
        for r in repeats {
            let wall_s = r["wall_s"].as_f64().unwrap();
            assert!(
                (0.9..1.8).contains(&wall_s),
                "wall {wall_s} s: the pause counted ({repeats:?})"
            );
        }
    }
}

mod limits {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A tmpfs of `mib` MiB mounted at `path` while it lives.
    struct Tmpfs(PathBuf);

    impl Tmpfs {
        fn mount(path: &Path, mib: u32) -> Tmpfs {
            std::fs::create_dir(path).unwrap();
            let out = StdCommand::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
                .arg(path)
                .output()
                .unwrap();
            assert!(out.status.success(), "mount: {}", stderr_of(&out));
            Tmpfs(path.to_path_buf())
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = StdCommand::new("umount").arg(&self.0).status();
        }
    }

    /// Defect 21: the workload's stdout went straight to a file in the store's folder,
    /// cut to 64 MiB only after the repeat: a big writer filled the disk first. Now the
    /// file never holds more than the limit, even while the workload writes.
    #[test]
    fn a_big_writer_is_cut_while_it_writes() {
        let _turn = crate::common::exclusive();
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("runs.db");
        // All output is kept only on request; by default only the ops lines are.
        let child = scalprof_process(&db)
            .args(&QUICK_RUN[..QUICK_RUN.len() - 1])
            .args([
                "--keep-output",
                "--",
                "sh",
                "-c",
                "head -c 150000000 /dev/zero; sleep 1; echo ops=1",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = tmp.path().join("runs.db.d/1/p1-r0.stdout");
        let mut largest = 0;
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_secs() < 60 {
            largest = largest.max(std::fs::metadata(&stdout).map_or(0, |m| m.len()));
            if std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
                .map_or(true, |s| s.contains(") Z"))
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        let err = stderr_of(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            largest <= (64 << 20) + 200,
            "the output file reached {largest} bytes"
        );
        assert!(err.contains("wrote 143 MiB"), "{err}");
        // The tail, where the ops line is, is kept.
        let doc = show_json(&db, "1");
        assert_eq!(doc["points"][0]["repeats"][0]["ops"], 1);
        let text = std::fs::read(&stdout).unwrap();
        assert!(text.ends_with(b"ops=1\n"));
    }

    /// Defect 21 too: when the output cannot be written (a full disk), that is said, not
    /// "exited with status 1 (nothing on stderr)" (the workload's own writes failed).
    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn a_full_disk_under_the_output_is_said_as_such() {
        require_root("a_full_disk_under_the_output_is_said_as_such");
        let tmp = tempfile::tempdir().unwrap();
        let fs = Tmpfs::mount(&tmp.path().join("tfs"), 20);
        // Kept output (by default only the ops lines are written).
        let out = scalprof_process(&fs.0.join("full.db"))
            .args(&QUICK_RUN[..QUICK_RUN.len() - 1])
            .args(["--keep-output", "--", "sh", "-c"])
            .arg("head -c 60000000 /dev/zero; echo ops=1")
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("writing the workload's output to"), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert!(err.contains("the disk is full"), "{err}");
    }

    /// A perf.data record: type, misc, size, body.
    fn record(ty: u32, body: &[u8]) -> Vec<u8> {
        let mut r = ty.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(8 + body.len() as u16).to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    /// `values` appended to `out` as little-endian u64s.
    fn put_u64s(out: &mut Vec<u8>, values: &[u64]) {
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A file-mode perf.data with one attribute (IP|TID|TIME|CPU|PERIOD|CALLCHAIN,
    /// sample_id_all) and `records` as its data section.
    fn perf_data(records: &[u8]) -> Vec<u8> {
        // perf_event_attr: type 1 (software), size 128; config 0, sample_freq 999,
        // sample_type, read_format 0, flags freq (bit 10) | sample_id_all (bit 18).
        let mut attr = [1u32.to_le_bytes(), 128u32.to_le_bytes()].concat();
        let sample_type = 1 | 2 | 4 | 32 | 128 | 256;
        put_u64s(&mut attr, &[0, 999, sample_type, 0, (1 << 10) | (1 << 18)]);
        // The attribute's ids section (none): offset, size.
        attr.resize(128 + 16, 0);
        let mut file = b"PERFILE2".to_vec();
        // Header size, attribute size; attrs section; data section; event types (none).
        let data_at = 104 + attr.len() as u64;
        let (attrs_len, data_len) = (attr.len() as u64, records.len() as u64);
        put_u64s(
            &mut file,
            &[104, 144, 104, attrs_len, data_at, data_len, 0, 0],
        );
        file.resize(104, 0);
        file.extend_from_slice(&attr);
        file.extend_from_slice(records);
        file
    }

    /// A FORK record of `pid` from `ppid` at time `t`, with its sample id.
    fn fork(pid: u32, ppid: u32, t: u64) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [pid, ppid, pid, ppid] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&t.to_le_bytes());
        for v in [pid, pid] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&t.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        record(7, &b)
    }

    /// scalprof under an address-space limit of `kib` KiB (`ulimit -v kib`).
    fn under_ulimit_v(db: &Path, kib: u64) -> StdCommand {
        let mut cmd = scalprof_process(db);
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe {
            cmd.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: kib << 10,
                    rlim_max: kib << 10,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    /// Defect 17: an allocation that failed under `ulimit -v` aborted with Rust's "memory
    /// allocation of N bytes failed" and a backtrace (SIGABRT, exit 134). Now it is one
    /// line that names the limit and how to raise it, and exit code 1: in scalprof's own
    /// process (`fit` reads a 300 MB file whole) and in the import's parser child (400,000
    /// forks take about 300 MB). 200,000 KiB is enough for scalprof to start.
    #[test]
    fn running_out_of_memory_under_ulimit_v_is_one_line_naming_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let mut records = Vec::new();
        for i in 0..400_000u32 {
            records.extend(fork(1000 + i, 100, 1_000_000_000 + u64::from(i)));
        }
        let forks = tmp.path().join("forks.data");
        std::fs::write(&forks, perf_data(&records)).unwrap();
        let csv = tmp.path().join("big.csv");
        std::fs::File::create(&csv)
            .unwrap()
            .set_len(300 << 20)
            .unwrap();
        let db = tmp.path().join("runs.db");
        // The limit leaves room for scalprof itself...
        let out = under_ulimit_v(&db, 200_000).arg("runs").output().unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        // ...not for these.
        for args in [
            ["fit".as_ref(), csv.as_os_str()],
            ["import".as_ref(), forks.as_os_str()],
        ] {
            let out = under_ulimit_v(&db, 200_000).args(args).output().unwrap();
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("scalprof: error: "), "{args:?}: {err}");
            assert!(err.contains("out of memory"), "{args:?}: {err}");
            assert!(err.contains("(RLIMIT_AS) of 195 MiB"), "{args:?}: {err}");
            assert!(err.contains("`ulimit -v 200000`"), "{args:?}: {err}");
            assert!(err.contains("raise it"), "{args:?}: {err}");
            assert!(!err.contains("memory allocation of"), "{args:?}: {err}");
            // The parser child's own sentence, whole: not wrapped as a failed import.
            assert!(!err.contains("nothing was imported"), "{args:?}: {err}");
        }
    }
}

/// What a teammate wrote to a shared store, or another user
/// planted in a shared place, is data, never code.
mod teammates;
