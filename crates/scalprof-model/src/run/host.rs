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
