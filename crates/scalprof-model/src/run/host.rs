//! The machine a run was recorded on: its CPUs and how they are built, and what the kernel
//! lets the workload use.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub kernel: String,
    /// Online CPUs.
    pub cpus: u32,
    pub cpu_model: String,
    /// Whether a hardware PMU (cycles) is usable.
    pub pmu: bool,
    /// The limits in force for the workload: CPU quota, CPU set, affinity, memory
    /// (absent in runs recorded before they were read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Cores, SMT, frequency scaling and the hypervisor (absent in runs recorded before
    /// they were read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// What one sample takes of the sampled thread's time here, in nanoseconds: the
    /// sampler's timer, callchain and stack copy, invisible to the samples themselves
    /// (measured before the sweep; absent without a profile, or where it could not be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_cost_ns: Option<f64>,
    /// What the sampler's events cost a thread each time it blocks and runs again, by the
    /// rate (measured before the sweep; absent without a profile, or where no cost
    /// showed): no sample shows it either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_cost: Option<SwitchCost>,
}

/// The sampler's cost to a thread that blocks, per block (switched out and in again): a
/// thread's sampling events go out and in with it, and their timer is cancelled and
/// started again, which a virtual machine's emulated timer makes dear. Measured at two
/// rates; between and beyond them it is taken to grow in a straight line with the rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwitchCost {
    /// At no rate: what the events cost by being there.
    pub base_ns: f64,
    /// And for each sample a second.
    pub per_hz_ns: f64,
}

impl SwitchCost {
    /// The line through the costs measured at two rates (`low` below `high`), neither
    /// part below zero.
    pub fn through((low_hz, low_ns): (u64, f64), (high_hz, high_ns): (u64, f64)) -> SwitchCost {
        let per_hz_ns = if high_hz > low_hz {
            ((high_ns - low_ns) / (high_hz - low_hz) as f64).max(0.0)
        } else {
            0.0
        };
        SwitchCost {
            base_ns: (low_ns - per_hz_ns * low_hz as f64).max(0.0),
            per_hz_ns,
        }
    }

    /// Nanoseconds a block costs at `hz` samples a second.
    pub fn at(&self, hz: u64) -> f64 {
        self.base_ns + self.per_hz_ns * hz as f64
    }
}

/// How the online CPUs are built: SMT siblings share a core (two threads on one core are
/// not two CPUs), the frequency may follow the load, and a virtual machine's CPUs may be
/// taken by other tenants (steal, measured per repeat in [`crate::Interference::steal_s`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Physical cores among the online CPUs.
    pub cores: u32,
    /// The most hardware threads one core runs (1: no SMT).
    pub threads_per_core: u32,
    /// The CPU frequency driver's governor (`performance`, `powersave`, `schedutil`);
    /// absent where the kernel exposes no frequency scaling (most VMs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
    /// The frequency range in MHz (cpuinfo_min_freq, cpuinfo_max_freq).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mhz: Option<u32>,
    /// Whether the CPUs are virtual (the `hypervisor` CPU flag).
    pub virtual_machine: bool,
    /// The most online CPUs that share one last-level cache (sysfs `cache/index*`'s
    /// highest level): a cache line passes between two of them without leaving it. Absent
    /// where the kernel does not say, and in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_cpus: Option<u32>,
}

/// What the machine lets the workload use, as the kernel applies it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// The cgroup whose CPU quota applies (v1: the cpu controller's), from its
    /// hierarchy's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_version: Option<u8>,
    /// The CPU quota in CPUs (quota ÷ period), the tightest along the cgroup's path;
    /// absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// The effective CPU set (`0-3,8`) and how many CPUs it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset_cpus: Option<u32>,
    /// CPUs in scalprof's affinity mask (the workload inherits it).
    pub affinity_cpus: u32,
    pub online_cpus: u32,
    /// The tightest memory limit along the cgroup's path; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// min(quota rounded up, CPU set, affinity, online): the CPUs the workload's threads
    /// can run on at once.
    pub usable_cpus: u32,
}

#[cfg(test)]
mod tests {
    use super::SwitchCost;

    #[test]
    fn a_switch_cost_is_the_line_through_its_two_rates_and_never_below_zero() {
        // 0.8 µs at 49 Hz, 5 µs at 645 Hz.
        let c = SwitchCost::through((49, 800.0), (645, 5_000.0));
        assert!((c.at(49) - 800.0).abs() < 1e-6 && (c.at(645) - 5_000.0).abs() < 1e-6);
        assert!((c.per_hz_ns - 4_200.0 / 596.0).abs() < 1e-9);
        // Cheaper at the higher rate (noise): nothing grows with the rate.
        let flat = SwitchCost::through((49, 900.0), (645, 700.0));
        assert_eq!((flat.per_hz_ns, flat.base_ns), (0.0, 900.0));
        // Steeper than the low rate allows: no negative base.
        assert_eq!(SwitchCost::through((49, 0.0), (645, 5_000.0)).base_ns, 0.0);
        // One rate: its cost at every rate.
        assert_eq!(
            SwitchCost::through((645, 5_000.0), (645, 5_000.0)).at(49),
            5_000.0
        );
    }
}
