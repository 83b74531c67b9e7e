//! How the online CPUs are built, from sysfs: which share a core (SMT), the frequency
//! driver's governor and range, and whether they are virtual. Written by hand: a few
//! files under /sys/devices/system/cpu and the flags line of /proc/cpuinfo.

use std::collections::BTreeSet;
use std::path::Path;

use scalprof_model::Topology;

/// The topology of this machine's online CPUs.
pub fn probe() -> Topology {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    read(Path::new("/sys/devices/system/cpu"), &cpuinfo)
}

/// The topology from a tree like /sys/devices/system/cpu and the text of /proc/cpuinfo.
pub fn read(sys: &Path, cpuinfo: &str) -> Topology {
    let online = std::fs::read_to_string(sys.join("online"))
        .ok()
        .and_then(|l| cpu_list(l.trim()))
        .unwrap_or_default();
    // A core is the set of CPUs that share it; online CPUs only.
    let mut cores: BTreeSet<Vec<u32>> = BTreeSet::new();
    for &cpu in &online {
        let topology = sys.join(format!("cpu{cpu}/topology"));
        let siblings = ["core_cpus_list", "thread_siblings_list"]
            .iter()
            .find_map(|f| std::fs::read_to_string(topology.join(f)).ok())
            .and_then(|l| cpu_list(l.trim()))
            .unwrap_or_else(|| vec![cpu]);
        cores.insert(
            siblings
                .into_iter()
                .filter(|c| online.contains(c))
                .collect(),
        );
    }
    let freq = |file: &str| -> Option<String> {
        let text = std::fs::read_to_string(sys.join("cpu0/cpufreq").join(file)).ok()?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    };
    let mhz = |file: &str| freq(file)?.parse::<u32>().ok().map(|khz| khz / 1000);
    Topology {
        cores: cores.len().max(1) as u32,
        threads_per_core: cores.iter().map(|c| c.len()).max().unwrap_or(1).max(1) as u32,
        governor: freq("scaling_governor"),
        min_mhz: mhz("cpuinfo_min_freq"),
        max_mhz: mhz("cpuinfo_max_freq"),
        virtual_machine: cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor")),
        llc_cpus: llc_cpus(sys, &online),
    }
}

/// The most online CPUs sharing one last-level cache: of each CPU's caches
/// (`cpuN/cache/indexK`), the highest level's `shared_cpu_list`.
fn llc_cpus(sys: &Path, online: &[u32]) -> Option<u32> {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok();
    online
        .iter()
        .filter_map(|cpu| {
            let caches = std::fs::read_dir(sys.join(format!("cpu{cpu}/cache"))).ok()?;
            let last = caches
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
                .filter_map(|e| {
                    let level: u32 = read(e.path().join("level"))?.trim().parse().ok()?;
                    let shared = cpu_list(read(e.path().join("shared_cpu_list"))?.trim())?;
                    Some((level, shared))
                })
                .max_by_key(|(level, _)| *level)?;
            Some(last.1.iter().filter(|c| online.contains(c)).count() as u32)
        })
        .max()
        .filter(|&n| n > 0)
}

/// The CPUs of a kernel CPU list (`0-3,8`); `None` for a malformed one (`3-1`, `x`).
pub(crate) fn cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
                if b < a {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
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
    fn smt_siblings_are_one_core_and_offline_cpus_are_left_out() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // 4 online CPUs on 2 cores (0,2 and 1,3); CPU 5 is offline.
        write(r, "online", "0-3\n");
        for (cpu, siblings) in [(0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")] {
            write(r, &format!("cpu{cpu}/topology/core_cpus_list"), siblings);
        }
        write(r, "cpu0/cpufreq/scaling_governor", "powersave\n");
        write(r, "cpu0/cpufreq/cpuinfo_min_freq", "800000\n");
        write(r, "cpu0/cpufreq/cpuinfo_max_freq", "3500000\n");
        let t = read(r, "flags\t\t: fpu vme de\n");
        assert_eq!((t.cores, t.threads_per_core), (2, 2));
        assert_eq!(t.governor.as_deref(), Some("powersave"));
        assert_eq!((t.min_mhz, t.max_mhz), (Some(800), Some(3500)));
        assert!(!t.virtual_machine);
        // A VM without cpufreq and one thread per core.
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "online", "0-1\n");
        write(r, "cpu0/topology/thread_siblings_list", "0\n");
        write(r, "cpu1/topology/thread_siblings_list", "1\n");
        let t = read(r, "flags\t\t: fpu hypervisor lahf_lm\n");
        assert_eq!((t.cores, t.threads_per_core), (2, 1));
        assert_eq!(t.governor, None);
        assert!(t.virtual_machine);
        assert_eq!(t.llc_cpus, None, "no cache directory: not known");
    }

    #[test]
    fn the_last_level_cache_is_the_highest_level_s_sharers() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // 4 online CPUs, private L1 and L2, two L3s of 2 CPUs each (4 and 5 offline).
        write(r, "online", "0-3\n");
        for cpu in 0..4u32 {
            let l3 = if cpu < 2 { "0-1" } else { "2-3,4" };
            for (k, level, shared) in [(0, "1", cpu.to_string()), (2, "2", cpu.to_string())]
                .into_iter()
                .chain([(3, "3", l3.to_string())])
            {
                write(
                    r,
                    &format!("cpu{cpu}/cache/index{k}/level"),
                    &format!("{level}\n"),
                );
                write(
                    r,
                    &format!("cpu{cpu}/cache/index{k}/shared_cpu_list"),
                    &format!("{shared}\n"),
                );
            }
        }
        assert_eq!(read(r, "").llc_cpus, Some(2));
    }
}
