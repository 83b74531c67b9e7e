//! The scalprof run document (`scalprof.run/1`) and its parts.
//!
//! These are plain serde types shared by every stage of the pipeline
//! (collect → analyze → model → store → report). The JSON shape is a contract read by
//! other tools and by our acceptance tests: add fields freely, never rename or remove one.

use serde::{Deserialize, Serialize};

pub mod compare;
pub mod layout;
pub mod locks;
pub mod profile;
pub mod suite;
pub use profile::{
    ComplexityReport, FoldedStack, FunctionComplexity, FunctionGrowth, HotInstruction,
    PointProfile, PowerFit, ProfileStats, ScalingDiff, SerialStats, MAX_UNREADABLE,
};

/// The value of the `schema` field of every run document.
pub const RUN_SCHEMA: &str = "scalprof.run/1";

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

/// What a sweep varies; serialized as `threads` or `size` (the contract's
/// `sweep.parameter`), which also names the `{placeholder}` and `SCALPROF_<NAME>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepParameter {
    /// A scaling sweep: concurrency (`scalprof run`).
    Threads,
    /// A complexity sweep: input size (`scalprof complexity`).
    Size,
}

impl SweepParameter {
    pub fn as_str(self) -> &'static str {
        match self {
            SweepParameter::Threads => "threads",
            SweepParameter::Size => "size",
        }
    }

    pub fn parse(s: &str) -> Option<SweepParameter> {
        match s {
            "threads" => Some(SweepParameter::Threads),
            "size" => Some(SweepParameter::Size),
            _ => None,
        }
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub kernel: String,
    /// Online CPUs.
    pub cpus: u32,
    pub cpu_model: String,
    /// Whether a hardware PMU (cycles) is usable.
    pub pmu: bool,
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
    /// A repeat counts towards throughput only if the workload exited 0 in time.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// A short description of how the repeat ended, for terminals and logs.
    pub fn outcome(&self) -> String {
        if self.timed_out {
            "timed out".to_string()
        } else if let Some(sig) = self.signal {
            format!("killed by signal {sig}")
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
    /// Median throughput over successful repeats (`null` if none succeeded).
    pub throughput: Option<f64>,
    /// Throughput relative to the first point, scaled to its parameter value.
    pub speedup: Option<f64>,
    /// Speedup divided by the parameter value.
    pub efficiency: Option<f64>,
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
}

/// A point's thread-time per operation, split: `useful` (the efficiency) + the causes'
/// shares + `overhead` (scalprof's own) + `unexplained` = 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub useful: f64,
    pub overhead: f64,
    pub unexplained: f64,
    /// Heaviest first.
    pub causes: Vec<Cause>,
}

/// One cause of lost thread-time: the growth of its time per operation since the first
/// point, as a share of this point's thread-time per operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    pub kind: FindingKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<locks::Scope>,
    pub subject: String,
    pub share: f64,
    /// A few words that identify it further (lock type and callers, a function).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The speedup at point `value` if a cause's share became useful work (an upper bound).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    pub value: u64,
    pub speedup: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// Universal Scalability Law (σ, κ, λ).
    Usl,
    /// Amdahl's law (κ fixed at 0), used when there are fewer than 3 distinct points.
    Amdahl,
}

/// Standard errors and 95% confidence intervals of the fitted parameters, where the
/// fit had degrees of freedom to spare.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub std_error: f64,
    pub ci95: [f64; 2],
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub kind: ModelKind,
    /// Contention (serial fraction).
    pub sigma: f64,
    /// Coherency (crosstalk) penalty; 0 for Amdahl.
    pub kappa: f64,
    /// Throughput of one unit of concurrency, fitted.
    pub lambda: f64,
    /// N* = sqrt((1−σ)/κ); `null` when κ = 0 (throughput never peaks).
    pub peak: Option<f64>,
    pub r2: f64,
    /// Number of observations the fit used.
    pub observations: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_est: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa_est: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_est: Option<Estimate>,
    /// Why a simpler model was used, or what limits this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Model {
    /// Predicted throughput at concurrency `n`.
    pub fn predict(&self, n: f64) -> f64 {
        // λ last, so that a λ near the largest double does not overflow before the division.
        self.lambda * (n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0)))
    }
}

/// Typed measurement-quality warnings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// Repeats of one point spread more than 10% in wall time.
    NoisyRepeats,
    /// A point asks for more threads than online CPUs.
    OversubscribedPoint,
    /// Fewer than 3 distinct points: the USL cannot be fitted.
    TooFewPoints,
    /// Some repeats failed, crashed or timed out.
    FailedRepeats,
    /// Only one repeat per point: spread is unknown.
    SingleRepeat,
    /// The profile lost samples, or many stacks could not be walked or symbolized.
    ProfileQuality,
    /// The traced repeats ran more than 5% slower (or faster) than the clean ones: the
    /// findings describe a perturbed run.
    PerturbedDiagnosis,
    /// Weak scaling was assumed (no ops printed), but the CPU time did not grow with the
    /// thread count: the command probably does a fixed amount of work (`--scaling strong`).
    FixedWork,
    /// More than 10% of the last point's thread-time is unexplained; the message says what
    /// may have left it so.
    Unexplained,
    /// The command does not contain the sweep parameter's placeholder: unless it reads
    /// SCALPROF_THREADS (or SCALPROF_SIZE), every point ran the same thing.
    NotSwept,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub kind: WarningKind,
    /// The sweep point concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<u64>,
    pub message: String,
}

/// What a finding is about; serialized as its snake_case name (the contract's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Waits on one lock grow with the sweep.
    LockContention,
    /// Different fields on one cache line written by different threads.
    FalseSharing,
    /// One variable written by many threads.
    TrueSharing,
    /// A function's cost grows faster than the input (size sweeps).
    SuperlinearCost,
    /// A kernel path whose share grows without a named lock.
    KernelHotspot,
    /// A user function whose own on-CPU time per op grows with the sweep, and that is
    /// neither a lock's code nor the writes of a shared cache line.
    UserHotspot,
    /// Time when only one thread runs.
    SerialFraction,
    /// Off-CPU time that is not a lock grows: sleeping, I/O, another blocking call.
    BlockedWait,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::LockContention => "lock_contention",
            FindingKind::FalseSharing => "false_sharing",
            FindingKind::TrueSharing => "true_sharing",
            FindingKind::SuperlinearCost => "superlinear_cost",
            FindingKind::KernelHotspot => "kernel_hotspot",
            FindingKind::UserHotspot => "user_hotspot",
            FindingKind::SerialFraction => "serial_fraction",
            FindingKind::BlockedWait => "blocked_wait",
        }
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<locks::Scope>,
    pub subject: String,
    /// 0..1: the share of lost scaling (or cost) this finding explains.
    pub score: f64,
    pub evidence: String,
    pub suggestion: String,
    #[serde(default)]
    pub details: FindingDetails,
    /// The speedup at the last point without this cause (set from the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIf>,
}

/// What each kind of finding carries besides its sentence. The JSON is the same object a
/// reader always saw (fields in alphabetical order); a `details` this build does not
/// recognise (an older or newer store) is kept as it was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FindingDetails {
    Lock(LockDetails),
    Sharing(SharingDetails),
    Complexity(ComplexityDetails),
    Hotspot(HotspotDetails),
    Serial(SerialDetails),
    Other(serde_json::Value),
}

impl Default for FindingDetails {
    fn default() -> FindingDetails {
        FindingDetails::Other(serde_json::Value::Object(Default::default()))
    }
}

/// `lock_contention`: the lock's row across the points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockDetails {
    pub address: String,
    /// The top callers at the last point.
    pub callers: Vec<locks::LockCaller>,
    /// Contended waits per point.
    pub count: Vec<u64>,
    pub max_wait_ns: u64,
    pub points: Vec<u64>,
    #[serde(rename = "type")]
    pub lock_type: locks::LockKind,
    /// Blocked wait per operation at each point (as the lock rows' `wait_ns_per_op`).
    pub wait_ns_per_op: Vec<f64>,
    /// On-CPU time in the lock per operation at each point: spinning, the lock code, the
    /// futex system call (the rows' `spin_ns` per operation). The score counts both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_cpu_ns_per_op: Vec<f64>,
}

/// `false_sharing` / `true_sharing`: the global, its cache line and the fields on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharingDetails {
    /// The object's stated address (hex).
    pub address: String,
    /// The written cache line (hex).
    pub cache_line: String,
    pub evidence_kind: String,
    /// The fields that share a line with the written ones.
    pub fields: Vec<String>,
    pub file: String,
    pub indexed: bool,
    /// The locked instructions, `file+0x…`.
    pub instructions: Vec<String>,
    /// `strong` or `moderate`.
    pub strength: String,
    pub written_fields: Vec<String>,
    /// The functions the locked instructions are in: their whole growth is this line's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
}

/// `superlinear_cost`: the function's power-law fit over the sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComplexityDetails {
    pub ci95: [f64; 2],
    pub exponent: f64,
    pub r2: f64,
    pub self_cost: Vec<f64>,
    pub sizes: Vec<u64>,
    pub unit: String,
}

/// `kernel_hotspot`: the function's cost per operation across the points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotspotDetails {
    pub inclusive_per_op: Vec<f64>,
    pub points: Vec<u64>,
    pub self_per_op: Vec<f64>,
    pub unit: String,
}

/// `serial_fraction`: how the single-thread share was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SerialDetails {
    pub bin_ms: f64,
    pub bins: u64,
    pub single_thread_share: f64,
    pub threads: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_its_string() {
        for s in [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Interrupted,
            RunStatus::Failed,
        ] {
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::Value::String(s.as_str().into())
            );
        }
        assert_eq!(RunStatus::parse("done"), None);
    }

    #[test]
    fn finding_kinds_serialize_as_their_contract_names() {
        for k in [
            FindingKind::LockContention,
            FindingKind::FalseSharing,
            FindingKind::TrueSharing,
            FindingKind::SuperlinearCost,
            FindingKind::KernelHotspot,
            FindingKind::UserHotspot,
            FindingKind::SerialFraction,
            FindingKind::BlockedWait,
        ] {
            let v = serde_json::to_value(k).unwrap();
            assert_eq!(v, serde_json::Value::String(k.as_str().into()));
            assert_eq!(serde_json::from_value::<FindingKind>(v).unwrap(), k);
        }
    }

    #[test]
    fn usl_prediction_matches_the_formula() {
        let m = Model {
            kind: ModelKind::Usl,
            sigma: 0.1,
            kappa: 0.01,
            lambda: 100.0,
            peak: None,
            r2: 1.0,
            observations: 0,
            sigma_est: None,
            kappa_est: None,
            lambda_est: None,
            note: None,
        };
        assert_eq!(m.predict(1.0), 100.0);
        // 100*4 / (1 + 0.3 + 0.12)
        assert!((m.predict(4.0) - 400.0 / 1.42).abs() < 1e-9);
    }

    #[test]
    fn repeat_outcome_names_signal_and_timeout() {
        let mut r = Repeat {
            index: 0,
            wall_s: 1.0,
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
        };
        assert!(r.succeeded());
        r.exit_code = None;
        r.signal = Some(11);
        assert_eq!(r.outcome(), "killed by signal 11");
        assert!(!r.succeeded());
        r.timed_out = true;
        assert_eq!(r.outcome(), "timed out");
    }
}

#[cfg(test)]
mod details_tests {
    use super::*;

    #[test]
    fn typed_details_write_the_object_readers_always_saw_and_read_back_as_their_kind() {
        let lock = FindingDetails::Lock(LockDetails {
            address: "0x4040".into(),
            callers: vec![locks::LockCaller {
                function: "table_lookup".into(),
                share: 1.0,
            }],
            count: vec![3, 900],
            max_wait_ns: 50_000,
            points: vec![1, 2],
            lock_type: locks::LockKind::Mutex,
            wait_ns_per_op: vec![1.0, 20.0],
            on_cpu_ns_per_op: Vec::new(),
        });
        let text = serde_json::to_string(&lock).unwrap();
        // The same bytes as the untyped object (serde_json sorts object keys).
        let untyped = serde_json::json!({
            "type": "mutex", "address": "0x4040",
            "callers": [{"function": "table_lookup", "share": 1.0}],
            "points": [1, 2], "wait_ns_per_op": [1.0, 20.0], "count": [3, 900],
            "max_wait_ns": 50000,
        });
        assert_eq!(text, serde_json::to_string(&untyped).unwrap());
        assert_eq!(serde_json::from_str::<FindingDetails>(&text).unwrap(), lock);

        let serial: FindingDetails = serde_json::from_str(
            r#"{"bin_ms":10.0,"bins":200,"single_thread_share":0.6,"threads":2}"#,
        )
        .unwrap();
        assert!(matches!(
            serial,
            FindingDetails::Serial(SerialDetails { bins: 200, .. })
        ));
        // What an older store kept, or a newer build wrote, stays as it was.
        for old in ["{}", r#"{"bins":3,"future_field":true}"#] {
            let d: FindingDetails = serde_json::from_str(old).unwrap();
            assert!(matches!(d, FindingDetails::Other(_)), "{old}");
            assert_eq!(serde_json::to_string(&d).unwrap(), old);
        }
    }
}
