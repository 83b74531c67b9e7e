//! The machine's limits, read for real: scalprof started inside a cgroup v1 `cpu` group
//! with a quota (in the host record; throttling as a cause), and inside a `cpuset` group
//! of one CPU.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::common::cli::{scalprof_process, stderr_of};
use crate::common::corpus::{corpus, read_json, require_profiling};
use crate::common::exclusive;

/// A cgroup of a v1 hierarchy, removed when dropped.
struct CpuGroup(PathBuf);

impl CpuGroup {
    /// `None` where the v1 cpu controller is not mounted or cannot be written.
    fn make(name: &str, quota_us: i64) -> Option<CpuGroup> {
        let group = CpuGroup::new(&["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"], name)?;
        std::fs::write(group.0.join("cpu.cfs_period_us"), "100000").ok()?;
        std::fs::write(group.0.join("cpu.cfs_quota_us"), quota_us.to_string()).ok()?;
        Some(group)
    }

    /// A v1 cpuset group of the CPUs `cpus` (memory node 0).
    fn cpuset(name: &str, cpus: &str) -> Option<CpuGroup> {
        let group = CpuGroup::new(&["/sys/fs/cgroup/cpuset"], name)?;
        std::fs::write(group.0.join("cpuset.cpus"), cpus).ok()?;
        std::fs::write(group.0.join("cpuset.mems"), "0").ok()?;
        Some(group)
    }

    fn new(mounts: &[&str], name: &str) -> Option<CpuGroup> {
        let mount = mounts
            .iter()
            .map(Path::new)
            .find(|m| m.join("cgroup.procs").exists())?;
        let dir = mount.join(name);
        std::fs::create_dir(&dir).ok()?;
        Some(CpuGroup(dir))
    }

    /// `cmd`, started inside the group.
    fn enter(&self, cmd: &mut std::process::Command) {
        let procs = self.0.join("cgroup.procs");
        // SAFETY: only a write(2) to a path prepared before the fork.
        unsafe {
            cmd.pre_exec(move || std::fs::write(&procs, "0"));
        }
    }
}

/// Where the group could not be made: a failure in CI (root, v1 mounted), else a skip.
fn skipped(mount: &str) -> bool {
    assert!(
        std::env::var_os("CI").is_none() || !Path::new(mount).exists(),
        "the v1 {mount} hierarchy is mounted but a group could not be made (root needed)"
    );
    eprintln!("skipped: no writable cgroup v1 {mount} hierarchy (root needed)");
    true
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // The workload's tasks may still be leaving the group just after it exited: an
        // empty group left behind each time is what a single try did.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_cpu_quota_is_in_the_host_record_and_the_summary() {
    let _guard = exclusive();
    let name = format!("scalprof-limits-test-{}", std::process::id());
    let Some(group) = CpuGroup::make(&name, 50_000) else {
        skipped("/sys/fs/cgroup/cpu");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
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
    group.enter(&mut cmd);
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
    assert!(
        doc["points"][0]["repeats"][0]["throttling"].is_null(),
        "{}",
        doc["points"][0]
    );
    drop(group);
}

/// A program that scales (clean_parallel), swept to 2 threads inside `group`.
fn sweep_clean(dir: &Path, group: &CpuGroup, json: &Path) -> String {
    let mut cmd = scalprof_process(&dir.join("runs.db"));
    cmd.args(["run", "-t", "1,2", "--repeat", "3", "--json"])
        .arg(json)
        .arg("--")
        .arg(corpus().join("clean_parallel"))
        .arg("{threads}");
    group.enter(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn warning_kinds(doc: &serde_json::Value) -> Vec<String> {
    doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_one_cpu_quota_is_the_top_cause_of_a_program_that_scales() {
    require_profiling();
    let _guard = exclusive();
    let name = format!("scalprof-quota-test-{}", std::process::id());
    let Some(group) = CpuGroup::make(&name, 100_000) else {
        skipped("/sys/fs/cgroup/cpu");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let text = sweep_clean(dir.path(), &group, &json);
    let doc = read_json(&json);
    assert_eq!(doc["host"]["limits"]["cpu_quota"], 1.0, "{}", doc["host"]);
    // Every clean repeat at 2 threads was throttled, by this group.
    let last = &doc["points"][1];
    for r in last["repeats"].as_array().unwrap() {
        let t = &r["throttling"];
        assert!(t["cgroup"].as_str().unwrap().ends_with(&name), "{t}");
        assert!(t["throttled_s"].as_f64().unwrap() > 0.0, "{t}");
    }
    // The top cause of the last point is the quota, at 30% or more.
    let causes = last["budget"]["causes"].as_array().unwrap();
    let top = &causes[0];
    assert_eq!(top["kind"], "cpu_throttling", "{causes:?}\n{text}");
    let share = top["share"].as_f64().unwrap();
    assert!(share >= 0.30, "{top}\n{text}");
    assert!(
        !causes
            .iter()
            .any(|c| c["subject"] == "waiting for a CPU" && c["share"].as_f64().unwrap() >= 0.10),
        "the throttled time is counted twice: {causes:?}"
    );
    // A finding names the quota; its share agrees with cpu.stat's own count: CPU-seconds
    // denied per second, over the 2 threads' seconds.
    let f = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "cpu_throttling")
        .unwrap_or_else(|| panic!("no cpu_throttling finding:\n{text}"));
    let subject = f["subject"].as_str().unwrap();
    assert!(subject.starts_with("CPU quota 1.00 CPU (cgroup /"), "{f}");
    assert!(subject.contains(&name), "{f}");
    let denied = f["details"]["denied_cpus"][1].as_f64().unwrap();
    assert!((0.5..=1.1).contains(&denied), "{f}");
    assert!(
        (share - denied / 2.0).abs() < 0.15,
        "share {share} vs cpu.stat {denied}/2"
    );
    assert!(
        text.contains("cpu_throttling  CPU quota 1.00 CPU"),
        "{text}"
    );
    // The point beyond the quota is said to be, with its efficiency against 1 CPU.
    assert!(
        warning_kinds(&doc).contains(&"beyond_limits".to_string()),
        "{text}"
    );
    assert!(text.contains("set by the CPU quota (1.00 CPU"), "{text}");
    drop(group);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_one_cpu_set_leaves_one_usable_cpu_and_the_default_sweep_stops_there() {
    let _guard = exclusive();
    let name = format!("scalprof-cpuset-test-{}", std::process::id());
    let Some(group) = CpuGroup::cpuset(&name, "0") else {
        skipped("/sys/fs/cgroup/cpuset");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The default sweep goes to the usable CPUs: one point.
    let json = dir.path().join("default.json");
    let mut cmd = scalprof_process(&dir.path().join("runs.db"));
    cmd.args(["run", "--repeat", "1", "--diagnose", "0", "--json"])
        .arg(&json)
        .args(["--", "sh", "-c", "echo ops=1"]);
    group.enter(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CPU set 0"), "{text}");
    let doc = read_json(&json);
    let online = doc["host"]["limits"]["online_cpus"].as_u64().unwrap();
    assert_eq!(doc["host"]["limits"]["cpuset_cpus"], 1, "{}", doc["host"]);
    assert_eq!(doc["host"]["limits"]["usable_cpus"], 1, "{}", doc["host"]);
    assert_eq!(
        doc["sweep"]["values"],
        serde_json::json!([1]),
        "{}",
        doc["sweep"]
    );
    if online < 2 {
        eprintln!("skipped the sweep past the CPU set: one CPU online");
        return;
    }
    assert!(
        text.contains(&format!("usable: 1 of {online} CPUs")),
        "{text}"
    );
    // Past it: the warning names the CPU set, and no quota is blamed.
    require_profiling();
    let json = dir.path().join("run.json");
    let text = sweep_clean(dir.path(), &group, &json);
    let doc = read_json(&json);
    assert!(
        warning_kinds(&doc).contains(&"beyond_limits".to_string()),
        "{text}"
    );
    assert!(text.contains("set by the CPU set 0"), "{text}");
    let causes = doc["points"][1]["budget"]["causes"].as_array().unwrap();
    assert!(
        !causes.iter().any(|c| c["kind"] == "cpu_throttling"),
        "{causes:?}"
    );
    assert_eq!(
        causes[0]["subject"], "waiting for a CPU",
        "{causes:?}\n{text}"
    );
    drop(group);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn cgroup_runs_the_workload_under_a_given_group_s_limits() {
    let _guard = exclusive();
    let name = format!("scalprof-given-test-{}", std::process::id());
    let Some(group) = CpuGroup::make(&name, 150_000) else {
        skipped("/sys/fs/cgroup/cpu");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // The workload prints the cgroup it ran in.
    let out = scalprof_process(&dir.path().join("runs.db"))
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "0",
            "--keep-output",
            "--cgroup",
        ])
        .arg(&group.0)
        .arg("--json")
        .arg(&json)
        .args(["--", "sh", "-c", "cat /proc/self/cgroup; echo ops=1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc = read_json(&json);
    assert_eq!(doc["host"]["limits"]["cpu_quota"], 1.5, "{}", doc["host"]);
    assert_eq!(
        doc["host"]["limits"]["usable_cpus"],
        2.min(doc["host"]["cpus"].as_u64().unwrap())
    );
    let stdout = doc["points"][0]["repeats"][0]["stdout_path"]
        .as_str()
        .unwrap();
    let seen = std::fs::read_to_string(stdout).unwrap();
    assert!(seen.contains(&format!("/{name}\n")), "{seen}");
    // A path that is no cgroup: a usage error that says so.
    let out = scalprof_process(&dir.path().join("runs.db"))
        .args(["run", "-t", "1", "--cgroup", "/tmp", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_of(&out).contains("--cgroup /tmp: not a cgroup"),
        "{}",
        stderr_of(&out)
    );
    drop(group);
}
