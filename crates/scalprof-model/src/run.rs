//! A run and its points: status, sweep, host, repeats, per-point summaries, what the
//! store keeps (`RunInputs`) and the assembled document.

use serde::{Deserialize, Serialize};

use crate::{
    layout, locks, Budget, ComplexityReport, Finding, Interference, Interval, Model, PointProfile,
    ScalingDiff, Settling, Warning,
};

mod host;
pub use host::{Host, Limits, SwitchCost, Topology};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still measuring (only seen while scalprof runs, or after scalprof itself was killed).
    Running,
    /// Every point was measured.
    Complete,
    /// Stopped by SIGINT/SIGTERM (or scalprof died); every finished repeat is kept.
    Interrupted,
    /// The sweep stopped because the workload failed (without `--keep-going`).
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "running" => RunStatus::Running,
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            "failed" => RunStatus::Failed,
            _ => return None,
        })
    }
}

/// Where a point's throughput comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThroughputSource {
    /// Operations printed by the workload (`--ops-regex`), divided by wall time.
    Ops,
    /// Weak scaling: each thread does the same work, throughput = N / wall.
    Weak,
    /// Strong scaling: fixed total work, throughput = 1 / wall.
    Strong,
}

impl ThroughputSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ThroughputSource::Ops => "ops",
            ThroughputSource::Weak => "weak",
            ThroughputSource::Strong => "strong",
        }
    }

    /// The unit of throughput values computed from this source.
    pub fn unit(self) -> &'static str {
        match self {
            ThroughputSource::Ops => "ops/s",
            ThroughputSource::Weak => "thread-runs/s",
            ThroughputSource::Strong => "runs/s",
        }
    }
}

/// What a sweep varies; serialized as `threads`, `size` or `concurrency` (the contract's
/// `sweep.parameter`), which also names the `{placeholder}` and `SCALPROF_<NAME>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepParameter {
    /// A scaling sweep: concurrency (`scalprof run`).
    Threads,
    /// A complexity sweep: input size (`scalprof complexity`).
    Size,
    /// A running server's own load (`scalprof watch`): each point is a level of busy
    /// threads the server went through by itself, not one scalprof started it at.
    Concurrency,
}

impl SweepParameter {
    pub fn as_str(self) -> &'static str {
        match self {
            SweepParameter::Threads => "threads",
            SweepParameter::Size => "size",
            SweepParameter::Concurrency => "concurrency",
        }
    }

    pub fn parse(s: &str) -> Option<SweepParameter> {
        match s {
            "threads" => Some(SweepParameter::Threads),
            "size" => Some(SweepParameter::Size),
            "concurrency" => Some(SweepParameter::Concurrency),
            _ => None,
        }
    }

    /// Whether its points are levels of concurrency, to which the USL, speedups and
    /// efficiencies apply: a thread sweep's or a watched server's, not a size sweep's.
    pub fn scales(self) -> bool {
        self != SweepParameter::Size
    }

    /// Whether its points were each run by scalprof (a sweep), rather than found in a
    /// running server's own load (`watch`): only a sweep's command can be run again.
    pub fn swept(self) -> bool {
        self != SweepParameter::Concurrency
    }
}

impl std::fmt::Display for SweepParameter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub parameter: SweepParameter,
    pub values: Vec<u64>,
}

/// One execution of the workload at one sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// 0-based index of the repeat within its point (warm-up runs are not stored).
    pub index: u32,
    pub wall_s: f64,
    /// CPU time of the whole process tree (rusage of the waited-for children).
    pub user_s: f64,
    pub sys_s: f64,
    /// Operations the workload reported (`--ops-regex`), if it printed any.
    pub ops: Option<u64>,
    /// Exit code, or `null` when the workload died on a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed the workload, if any.
    pub signal: Option<i32>,
    /// Killed by scalprof after `--timeout`.
    #[serde(default)]
    pub timed_out: bool,
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Events counted (not sampled) over the whole process tree: CPU migrations, and the
    /// PMU's cycles, instructions and LLC misses where the machine has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<EventCounts>,
    /// Files holding the workload's stdout and stderr for this repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_path: Option<String>,
    /// A diagnosis repeat: the profiler and tracers were attached. Its throughput is not
    /// reported; it measures what tracing changed (`Point::perturbation`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub traced: bool,
    /// CPU time processes outside the workload took from this repeat (`None`: not
    /// measured, as in runs recorded before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<Interference>,
    /// How long the CPU quota held the workload back during this repeat (`None`: no
    /// quota, or not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<Throttling>,
}

/// The `cpu.stat` deltas of the workload's cgroup over one repeat: the quota's periods,
/// those in which it ran out, and the time its run queues were throttled, summed over
/// the CPUs (CPU-seconds the quota denied). Where several cgroups along the path have a
/// quota, the one that throttled most.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Throttling {
    /// The cgroup, from its hierarchy's root.
    pub cgroup: String,
    /// Its quota in CPUs.
    pub quota: f64,
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_s: f64,
}

/// perf events counted over one execution's process tree (inherited by every thread and
/// child). The PMU's are `None` on a machine without one (many VMs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    pub cpu_migrations: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_misses: Option<u64>,
}

/// A point's counters: medians over its clean repeats, per repeat (the whole process
/// tree's run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Voluntary plus involuntary context switches.
    pub context_switches: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_migrations: Option<u64>,
    /// Minor page faults.
    pub page_faults: u64,
    pub major_faults: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    /// Instructions per cycle (from the two medians).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_misses: Option<u64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Repeat {
    /// A clean repeat that exited 0 after `wall_s`, with nothing else measured: the
    /// start of a repeat that tests and imports fill in.
    pub fn ok(index: u32, wall_s: f64) -> Self {
        Repeat {
            index,
            wall_s,
            user_s: 0.0,
            sys_s: 0.0,
            ops: None,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            voluntary_csw: 0,
            involuntary_csw: 0,
            minor_faults: 0,
            major_faults: 0,
            counts: None,
            stdout_path: None,
            stderr_path: None,
            traced: false,
            interference: None,
            throttling: None,
        }
    }

    /// A repeat counts towards throughput only if the workload exited 0 in time.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// A short description of how the repeat ended, for terminals and logs.
    pub fn outcome(&self) -> String {
        if self.timed_out {
            "timed out".to_string()
        } else if let Some(sig) = self.signal {
            format!("killed by {}", crate::signal::name(sig))
        } else {
            match self.exit_code {
                Some(0) => "ok".to_string(),
                Some(code) => format!("exited with status {code}"),
                None => "unknown exit".to_string(),
            }
        }
    }
}

/// Median, minimum and maximum of one measure over a point's successful repeats.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Median (mean of the middle two for even counts), minimum and maximum of the finite
    /// values; `None` without one.
    pub fn of(values: impl Iterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The sweep parameter's value (thread count).
    pub value: u64,
    /// The clean repeats: nothing attached. Throughput, speedup and the model come from these.
    pub repeats: Vec<Repeat>,
    /// The diagnosis repeats: profiles, lock tables and findings come from these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traced_repeats: Vec<Repeat>,
    /// Traced throughput ÷ clean throughput − 1 (medians): how much the diagnosis repeats
    /// were slowed (negative) or sped up by being traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perturbation: Option<f64>,
    /// `perturbation` from the slowest traced repeat against the fastest clean one to the
    /// fastest traced against the slowest clean: an interval that holds 0 is within the
    /// clean repeats' own noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perturbation_interval: Option<Interval>,
    /// Indices of clean repeats whose throughput lay far outside the others' (a modified
    /// z-score above 3.5, and more than 25% off the median): left out of `throughput`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outliers: Vec<u32>,
    /// Indices of traced repeats that ran in another mode than the clean ones: their
    /// voluntary context switches more than 4× more or fewer than the clean repeats'
    /// median (the larger count at least 1000), and their throughput more than 25% off (a lock convoy entered or escaped:
    /// mmap_churn at 2 threads blocks 130 000 times in a run, or 7 000 and runs twice as
    /// fast). Left out of `perturbation` and of the hold-timing cost where a traced repeat
    /// in the clean repeats' mode is left; the lock table and the profile keep them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_mode: Vec<u32>,
    /// Median throughput over successful repeats (`null` if none succeeded).
    pub throughput: Option<f64>,
    /// Throughput relative to the first point, scaled to its parameter value.
    pub speedup: Option<f64>,
    /// Speedup divided by the parameter value.
    pub efficiency: Option<f64>,
    /// The first point's median wall time over this one's, scaled like `speedup`: the
    /// speedup at fixed work, shown beside one computed on another assumption (weak
    /// scaling). `None` for a size sweep or where a median is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_speedup: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_s: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_s: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_spread: Option<Spread>,
    /// The point's profile summary (event, counters, serial share); stacks are in the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<PointProfile>,
    /// The point's lock table (kernel and user locks, repeats merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locks: Option<locks::LockProfile>,
    /// Where this point's thread-time per operation went (points after the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Counted events of the clean repeats (medians).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
    /// Whether the traced repeats agree on the point's top cause (points after the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settling: Option<Settling>,
    /// CPU time processes outside the workload took from the point's repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<Interference>,
}

impl Point {
    /// The thread-time one unit of work costs at this point, in ns: its threads times the
    /// wall time of a unit, from the clean throughput (`None` without one). Every share of
    /// a budget, a lock row or a finding is a part of this.
    pub fn thread_ns_per_op(&self) -> Option<f64> {
        let x = self.throughput.filter(|&x| x > 0.0)?;
        Some(self.value as f64 * 1e9 / x)
    }
}

/// What the store keeps about a run besides its repeats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub id: String,
    pub label: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub command: Vec<String>,
    pub status: RunStatus,
    pub sweep: Sweep,
    pub host: Host,
    /// Throughput when the workload prints no ops: `weak` or `strong` as the user said,
    /// `None` to infer it from the CPU time across the points.
    pub scaling: Option<ThroughputSource>,
    /// The regex that extracts `ops` from the workload's stdout.
    pub ops_regex: String,
    /// Where the workload's stdout/stderr files are kept.
    pub output_dir: String,
    /// The commit of the code measured, when known.
    pub commit: Option<String>,
    /// What scalprof itself took while it recorded the run (a watch's, stored at its end).
    pub observer: Option<ObserverCpu>,
}

/// The CPU time scalprof itself took while it recorded a run (its threads and the symbol
/// parsers it ran), over the recording's span. A watch stores it: besides its traced
/// windows' slowdown, it is what watching costs the machine the server runs on.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObserverCpu {
    pub cpu_s: f64,
    pub span_s: f64,
}

impl ObserverCpu {
    /// The share of one CPU it took.
    pub fn share(&self) -> f64 {
        self.cpu_s / self.span_s.max(1e-9)
    }
}

/// One stored repeat together with the sweep point it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRepeat {
    pub value: u64,
    pub repeat: Repeat,
}

/// Everything a run document is computed from, as the store keeps it. The document is
/// always recomputed from these (`scalprof_analyze::assemble`); nothing derived is stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInputs {
    pub header: RunHeader,
    /// Stored repeats, clean and traced, in the order they ran.
    pub repeats: Vec<PointRepeat>,
    /// Each point's profile, its traced repeats merged, in sweep order.
    pub profiles: Vec<(u64, PointProfile)>,
    /// Each point's lock table, its traced repeats merged, in sweep order.
    pub locks: Vec<(u64, locks::LockProfile)>,
    /// What the sharing analysis read from the binaries at the end of the sweep.
    pub sharing: Option<layout::SharingInputs>,
    /// Findings that stores before schema 6 kept as results (their sharing findings,
    /// whose inputs were not stored); shown as they were.
    pub legacy_findings: Vec<Finding>,
    /// Each traced repeat's own profile and lock table, for the points after the first
    /// that have two or more: the budget's intervals are computed from them.
    pub per_repeat: Vec<RepeatTrace>,
    /// The experiments run on this run's causes (`scalprof verify`).
    pub experiments: Vec<crate::experiment::Experiment>,
    /// The distribution packages of the binaries the profiles could not name (file name,
    /// package), read on the host that loads the run: the debug-symbol hint names the
    /// package to install (`sort` is coreutils', not "sort-dbgsym").
    pub packages: Vec<(String, String)>,
    /// The thread count to predict the throughput up to (`--predict`); `None`: the
    /// run's CPUs × 4. An analysis option, not stored.
    pub predict_to: Option<u64>,
}

/// What the collectors recorded in one traced repeat, before it was merged with its
/// point's others.
#[derive(Clone, Debug, PartialEq)]
pub struct RepeatTrace {
    pub value: u64,
    /// The repeat's index in its point (`Repeat::index`).
    pub index: u32,
    pub profile: Option<PointProfile>,
    pub locks: Option<locks::LockProfile>,
}

impl RunInputs {
    /// A run with repeats only (no profiles, lock tables or sharing inputs).
    pub fn timing(header: RunHeader, repeats: Vec<PointRepeat>) -> RunInputs {
        RunInputs {
            header,
            repeats,
            profiles: Vec::new(),
            locks: Vec::new(),
            sharing: None,
            legacy_findings: Vec::new(),
            per_repeat: Vec::new(),
            experiments: Vec::new(),
            packages: Vec::new(),
            predict_to: None,
        }
    }

    /// The merged profile of a point.
    pub fn profile(&self, value: u64) -> Option<&PointProfile> {
        self.profiles
            .iter()
            .find(|(v, _)| *v == value)
            .map(|(_, p)| p)
    }
}

/// The whole run document, `scalprof.run/1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    pub schema: String,
    pub id: String,
    pub label: String,
    pub created: String,
    pub status: RunStatus,
    pub command: Vec<String>,
    pub sweep: Sweep,
    pub host: Host,
    pub throughput: ThroughputInfo,
    pub points: Vec<Point>,
    /// `null` when no point has a throughput.
    pub model: Option<Model>,
    pub warnings: Vec<Warning>,
    pub findings: Vec<Finding>,
    pub output_dir: String,
    /// How the points were profiled (`null` with --no-profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// What grew across the sweep (`null` without profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_diff: Option<ScalingDiff>,
    /// Power-law fits of a size sweep (`scalprof complexity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complexity: Option<ComplexityReport>,
    /// Causes lengthened by known delays and what the throughput did (`scalprof verify`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub experiments: Vec<crate::experiment::Experiment>,
    /// The commit of the code measured (`run --commit`, else the workload's git checkout
    /// or the CI's variables); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The CPU scalprof itself took while it recorded the run (`watch`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer: Option<ObserverCpu>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// `cycles` or `cpu-clock`.
    pub event: String,
    /// Samples per second per CPU.
    pub frequency: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputInfo {
    pub source: ThroughputSource,
    pub unit: String,
    /// Why weak or strong scaling was chosen when the user did not say (`--scaling`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_regex: Option<String>,
}
