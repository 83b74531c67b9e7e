//! The machine's limits in the host record, read for real: scalprof started inside a
//! cgroup v1 `cpu` group with a quota of half a CPU.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

mod common;
use common::cli::{scalprof_process, stderr_of};
use common::corpus::read_json;

/// A cgroup of the v1 cpu hierarchy, removed when dropped.
struct CpuGroup(PathBuf);

impl CpuGroup {
    /// `None` where the v1 cpu controller is not mounted or cannot be written.
    fn make(name: &str, quota_us: i64) -> Option<CpuGroup> {
        let mount = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
            .into_iter()
            .map(Path::new)
            .find(|m| m.join("cgroup.procs").exists())?;
        let dir = mount.join(name);
        std::fs::create_dir(&dir).ok()?;
        let group = CpuGroup(dir);
        std::fs::write(group.0.join("cpu.cfs_period_us"), "100000").ok()?;
        std::fs::write(group.0.join("cpu.cfs_quota_us"), quota_us.to_string()).ok()?;
        Some(group)
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_cpu_quota_is_in_the_host_record_and_the_summary() {
    let name = format!("scalprof-limits-test-{}", std::process::id());
    let Some(group) = CpuGroup::make(&name, 50_000) else {
        assert!(
            std::env::var_os("CI").is_none() || !Path::new("/sys/fs/cgroup/cpu").exists(),
            "the v1 cpu hierarchy is mounted but a group could not be made (root needed)"
        );
        eprintln!("skipped: no writable cgroup v1 cpu hierarchy (root needed)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let procs = group.0.join("cgroup.procs");
    let mut cmd = scalprof_process(&dir.path().join("runs.db"));
    cmd.args([
        "run",
        "-t",
        "1",
        "--repeat",
        "1",
        "--diagnose",
        "0",
        "--json",
    ])
    .arg(&json)
    .args(["--", "sh", "-c", "echo ops=1"]);
    // SAFETY: only a write(2) to a path prepared before the fork.
    unsafe {
        cmd.pre_exec(move || std::fs::write(&procs, "0"));
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("limits:  CPU quota 0.50 CPUs (cgroup v1 /"),
        "{text}"
    );
    let doc = read_json(&json);
    let limits = &doc["host"]["limits"];
    assert_eq!(limits["cpu_quota"], 0.5, "{limits}");
    assert_eq!(limits["usable_cpus"], 1, "{limits}");
    assert_eq!(limits["cgroup_version"], 1, "{limits}");
    assert!(
        limits["cgroup"].as_str().unwrap().ends_with(&name),
        "{limits}"
    );
    // And without the group: no quota.
    let plain = dir.path().join("plain.json");
    let out = scalprof_process(&dir.path().join("runs.db"))
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--json",
        ])
        .arg(&plain)
        .args(["--", "sh", "-c", "echo ops=1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc = read_json(&plain);
    assert!(
        doc["host"]["limits"]["cpu_quota"].is_null(),
        "{}",
        doc["host"]
    );
    drop(group);
}
