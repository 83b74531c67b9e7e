//! The limits the machine puts on the workload, read the way the kernel applies them: a
//! CPU quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`, the
//! tightest along the cgroup's path, since a parent's quota caps its children), the CPU
//! set (the effective one, which already holds the ancestors'), the affinity mask and the
//! memory limit (the tightest along the path). The workload runs in scalprof's own cgroup
//! for these controllers (its workload cgroup is in the freezer hierarchy, or a child
//! without controllers on v2), so scalprof's are the workload's.
//!
//! Written by hand: a few files under /sys/fs/cgroup and one system call.

use std::path::{Path, PathBuf};

use scalprof_model::{Limits, Throttling};

/// Where cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The limits on this process (and so on the workloads it starts).
pub fn probe(online: u32) -> Limits {
    let own = crate::given_cgroups::workload_cgroups(
        &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
    );
    read(Path::new(CGROUP_ROOT), &own, online, affinity_cpus())
}

/// The limits from the cgroup files under `root` (a mount point tree like
/// /sys/fs/cgroup), for the process whose `/proc/PID/cgroup` is `own`.
pub fn read(root: &Path, own: &str, online: u32, affinity: u32) -> Limits {
    let v1 = |controller: &str| -> Option<(PathBuf, String)> {
        let path = crate::cgroup::cgroup_of(own, controller)?;
        let mount = root.join(controller);
        mount.is_dir().then_some((mount, path))
    };
    let v2 = crate::cgroup::cgroup_of(own, "").and_then(|path| {
        // Unified at the root, or beside v1 at `unified` (hybrid, usually no controllers).
        [root.to_path_buf(), root.join("unified")]
            .into_iter()
            .find(|m| m.join("cgroup.controllers").is_file())
            .map(|m| (m, path))
    });
    let mut limits = Limits {
        online_cpus: online,
        affinity_cpus: affinity.min(online).max(1),
        ..Limits::default()
    };
    // CPU quota: v1 where its cpu controller is mounted, else v2's cpu.max.
    if let Some(cpu) = cpu_hierarchy(root, own) {
        limits.cgroup = Some(format!("/{}", cpu.path));
        limits.cgroup_version = Some(cpu.version);
        limits.cpu_quota = tightest(&cpu.mount, &cpu.path, |dir| cpu.quota(dir));
    }
    // The CPU set: the effective one at the leaf.
    let cpuset = match v1("cpuset") {
        Some((mount, path)) => read_trimmed(&mount.join(&path).join("cpuset.effective_cpus")),
        None => v2.as_ref().and_then(|(mount, path)| {
            read_trimmed(&mount.join(path).join("cpuset.cpus.effective"))
        }),
    };
    if let Some(list) = cpuset.filter(|l| !l.is_empty()) {
        limits.cpuset_cpus = cpu_list_len(&list);
        limits.cpuset = Some(list);
    }
    // Memory: the tightest limit along the path; v1's "no limit" is a huge number.
    limits.memory_limit_bytes = match v1("memory") {
        Some((mount, path)) => tightest(&mount, &path, |dir| {
            let bytes: u64 = read_trimmed(&dir.join("memory.limit_in_bytes"))?
                .parse()
                .ok()?;
            (bytes < 1 << 60).then_some(bytes as f64)
        }),
        None => v2.as_ref().and_then(|(mount, path)| {
            tightest(mount, path, |dir| {
                read_trimmed(&dir.join("memory.max"))?
                    .parse::<u64>()
                    .ok()
                    .map(|b| b as f64)
            })
        }),
    }
    .map(|b| b as u64);
    limits.usable_cpus = usable(&limits);
    limits
}

/// Where the workload's CPU quota is set: the v1 cpu controller's hierarchy where it is
/// mounted, else the unified (v2) one.
struct CpuHierarchy {
    mount: PathBuf,
    /// The cgroup, relative to the mount.
    path: String,
    version: u8,
}

fn cpu_hierarchy(root: &Path, own: &str) -> Option<CpuHierarchy> {
    if let Some(path) = crate::cgroup::cgroup_of(own, "cpu") {
        // `cpu,cpuacct` is mounted once under either name.
        if let Some(mount) = ["cpu", "cpu,cpuacct"]
            .into_iter()
            .map(|m| root.join(m))
            .find(|m| m.is_dir())
        {
            return Some(CpuHierarchy {
                mount,
                path,
                version: 1,
            });
        }
    }
    let path = crate::cgroup::cgroup_of(own, "")?;
    let mount = [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|m| m.join("cgroup.controllers").is_file())?;
    Some(CpuHierarchy {
        mount,
        path,
        version: 2,
    })
}

impl CpuHierarchy {
    /// The quota set on the cgroup at `dir`, in CPUs; `None` without one.
    fn quota(&self, dir: &Path) -> Option<f64> {
        if self.version == 1 {
            let quota: i64 = read_trimmed(&dir.join("cpu.cfs_quota_us"))?.parse().ok()?;
            let period: i64 = read_trimmed(&dir.join("cpu.cfs_period_us"))?.parse().ok()?;
            (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
        } else {
            let text = read_trimmed(&dir.join("cpu.max"))?;
            let (quota, period) = text.split_once(' ')?;
            let (quota, period): (f64, f64) = (quota.parse().ok()?, period.parse().ok()?);
            (period > 0.0).then(|| quota / period)
        }
    }
}

/// The cgroups along the workload's path that have a CPU quota, whose `cpu.stat` is read
/// before and after each repeat: the deltas are how long the quota held it back.
pub struct QuotaMeter {
    groups: Vec<QuotaGroup>,
    version: u8,
}

struct QuotaGroup {
    /// From the hierarchy's root, as the user names it (`/ci`).
    name: String,
    stat: PathBuf,
    quota: f64,
}

/// One reading of a `cpu.stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuStat {
    periods: u64,
    throttled_periods: u64,
    throttled_ns: u64,
}

impl QuotaMeter {
    /// The meter for this process's cgroups; `None` where no quota applies.
    pub fn probe() -> Option<QuotaMeter> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = crate::given_cgroups::workload_cgroups(&own);
        QuotaMeter::find(Path::new(CGROUP_ROOT), &own)
    }

    fn find(root: &Path, own: &str) -> Option<QuotaMeter> {
        let cpu = cpu_hierarchy(root, own)?;
        let mut groups = Vec::new();
        let mut dir = cpu.mount.join(&cpu.path);
        loop {
            if let Some(quota) = cpu.quota(&dir) {
                let name = dir.strip_prefix(&cpu.mount).unwrap_or(&dir);
                groups.push(QuotaGroup {
                    name: format!("/{}", name.display()),
                    stat: dir.join("cpu.stat"),
                    quota,
                });
            }
            if dir == cpu.mount || !dir.pop() || !dir.starts_with(&cpu.mount) {
                break;
            }
        }
        (!groups.is_empty()).then_some(QuotaMeter {
            groups,
            version: cpu.version,
        })
    }

    /// Each group's `cpu.stat` now (`None` where it cannot be read).
    pub fn read(&self) -> Vec<Option<CpuStat>> {
        self.groups
            .iter()
            .map(|g| {
                let text = std::fs::read_to_string(&g.stat).ok()?;
                parse_cpu_stat(&text, self.version)
            })
            .collect()
    }

    /// What the quota denied since `before`: the group that throttled longest.
    pub fn since(&self, before: &[Option<CpuStat>]) -> Option<Throttling> {
        self.between(before, &self.read())
    }

    fn between(&self, before: &[Option<CpuStat>], after: &[Option<CpuStat>]) -> Option<Throttling> {
        self.groups
            .iter()
            .zip(before.iter().zip(after))
            .filter_map(|(g, pair)| match pair {
                (Some(a), Some(b)) => Some(Throttling {
                    cgroup: g.name.clone(),
                    quota: g.quota,
                    periods: b.periods.saturating_sub(a.periods),
                    throttled_periods: b.throttled_periods.saturating_sub(a.throttled_periods),
                    throttled_s: b.throttled_ns.saturating_sub(a.throttled_ns) as f64 / 1e9,
                }),
                _ => None,
            })
            // The longest throttled; among equals (none throttled), the tightest quota.
            .max_by(|a, b| {
                a.throttled_s
                    .total_cmp(&b.throttled_s)
                    .then(b.quota.total_cmp(&a.quota))
            })
    }
}

/// v1: `nr_periods`, `nr_throttled`, `throttled_time` (ns); v2: `throttled_usec`.
fn parse_cpu_stat(text: &str, version: u8) -> Option<CpuStat> {
    let mut stat = CpuStat::default();
    let mut seen = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match (key, version) {
            ("nr_periods", _) => stat.periods = value,
            ("nr_throttled", _) => stat.throttled_periods = value,
            ("throttled_time", 1) => {
                stat.throttled_ns = value;
                seen = true;
            }
            ("throttled_usec", 2) => {
                stat.throttled_ns = value.saturating_mul(1000);
                seen = true;
            }
            _ => {}
        }
    }
    seen.then_some(stat)
}

/// min(quota rounded up, CPU set, affinity, online), at least 1: the CPUs the workload's
/// threads can be on at once.
fn usable(l: &Limits) -> u32 {
    let mut n = l.online_cpus.min(l.affinity_cpus);
    if let Some(c) = l.cpuset_cpus {
        n = n.min(c);
    }
    if let Some(q) = l.cpu_quota {
        n = n.min(q.ceil() as u32);
    }
    n.max(1)
}

/// The smallest value `of` gives for the cgroup at `path` under `mount` and each of its
/// ancestors up to the mount's root.
fn tightest(mount: &Path, path: &str, of: impl Fn(&Path) -> Option<f64>) -> Option<f64> {
    let mut dir = mount.join(path);
    let mut best: Option<f64> = None;
    loop {
        if let Some(v) = of(&dir) {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
        if dir == mount || !dir.pop() || !dir.starts_with(mount) {
            return best;
        }
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// CPUs in a kernel CPU list (`0-3,8,10-11`).
pub fn cpu_list_len(list: &str) -> Option<u32> {
    crate::topology::cpu_list(list).map(|cpus| cpus.len() as u32)
}

/// CPUs in this process's affinity mask.
fn affinity_cpus() -> u32 {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return u32::MAX;
        }
        libc::CPU_COUNT(&set) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_list_len("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_len("0"), Some(1));
        assert_eq!(cpu_list_len("3-1"), None);
        assert_eq!(cpu_list_len("x"), None);
    }

    #[test]
    fn v2_takes_the_tightest_quota_and_memory_along_the_path() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "cgroup.controllers", "cpuset cpu memory\n");
        // A parent's 1.5 CPUs cap the child's 4; a child's memory.max is tighter.
        write(r, "kubepods/cpu.max", "150000 100000\n");
        write(r, "kubepods/memory.max", "max\n");
        write(r, "kubepods/pod1/cpu.max", "400000 100000\n");
        write(r, "kubepods/pod1/memory.max", "536870912\n");
        write(r, "kubepods/pod1/cpuset.cpus.effective", "0-3\n");
        let l = read(r, "0::/kubepods/pod1\n", 8, 8);
        assert_eq!(l.cgroup_version, Some(2));
        assert_eq!(l.cgroup.as_deref(), Some("/kubepods/pod1"));
        assert_eq!(l.cpu_quota, Some(1.5));
        assert_eq!(l.cpuset_cpus, Some(4));
        assert_eq!(l.memory_limit_bytes, Some(512 << 20));
        assert_eq!(l.usable_cpus, 2);
        // No quota anywhere: none, and the CPU set and affinity decide.
        write(r, "kubepods/cpu.max", "max 100000\n");
        write(r, "kubepods/pod1/cpu.max", "max 100000\n");
        let l = read(r, "0::/kubepods/pod1\n", 8, 3);
        assert_eq!(l.cpu_quota, None);
        assert_eq!(l.usable_cpus, 3);
    }

    #[test]
    fn v1_reads_each_controller_s_own_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        write(r, "cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        write(r, "cpu,cpuacct/ci/cpu.cfs_quota_us", "100000\n");
        write(r, "cpu,cpuacct/ci/cpu.cfs_period_us", "100000\n");
        write(r, "cpuset/cpuset.effective_cpus", "0-1\n");
        write(r, "memory/memory.limit_in_bytes", "9223372036854771712\n");
        let own = "4:memory:/\n3:cpuset:/\n1:cpu,cpuacct:/ci\n0::/\n";
        let l = read(r, own, 2, 2);
        assert_eq!(l.cgroup_version, Some(1));
        assert_eq!(l.cgroup.as_deref(), Some("/ci"));
        assert_eq!(l.cpu_quota, Some(1.0));
        assert_eq!(l.cpuset_cpus, Some(2));
        assert_eq!(l.memory_limit_bytes, None);
        assert_eq!(l.usable_cpus, 1);
    }

    #[test]
    fn throttling_is_the_cpu_stat_delta_of_the_group_that_throttled_longest() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        write(r, "cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        write(r, "cpu,cpuacct/pod/cpu.cfs_quota_us", "200000\n");
        write(r, "cpu,cpuacct/pod/cpu.cfs_period_us", "100000\n");
        write(r, "cpu,cpuacct/pod/c1/cpu.cfs_quota_us", "100000\n");
        write(r, "cpu,cpuacct/pod/c1/cpu.cfs_period_us", "100000\n");
        let stat = |periods: u64, throttled: u64, ns: u64| {
            format!("nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {ns}\nnr_bursts 0\nburst_time 0\n")
        };
        write(r, "cpu,cpuacct/pod/cpu.stat", &stat(10, 0, 0));
        write(r, "cpu,cpuacct/pod/c1/cpu.stat", &stat(10, 2, 50_000_000));
        let meter = QuotaMeter::find(r, "1:cpu,cpuacct:/pod/c1\n0::/\n").unwrap();
        let before = meter.read();
        write(r, "cpu,cpuacct/pod/cpu.stat", &stat(20, 1, 10_000_000));
        write(r, "cpu,cpuacct/pod/c1/cpu.stat", &stat(20, 9, 600_000_000));
        let t = meter.since(&before).unwrap();
        assert_eq!(t.cgroup, "/pod/c1");
        assert_eq!(t.quota, 1.0);
        assert_eq!((t.periods, t.throttled_periods), (10, 7));
        assert!((t.throttled_s - 0.55).abs() < 1e-9, "{t:?}");
        // No quota on the path: no meter.
        assert!(QuotaMeter::find(r, "1:cpu,cpuacct:/\n").is_none());
    }

    #[test]
    fn v2_cpu_stat_counts_microseconds() {
        let s = parse_cpu_stat(
            "usage_usec 9\nnr_periods 4\nnr_throttled 3\nthrottled_usec 1500\n",
            2,
        );
        assert_eq!(
            s,
            Some(CpuStat {
                periods: 4,
                throttled_periods: 3,
                throttled_ns: 1_500_000
            })
        );
        // v1's names are not v2's.
        assert_eq!(parse_cpu_stat("throttled_usec 1500\n", 1), None);
    }
}
