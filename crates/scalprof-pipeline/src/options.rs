//! What a sweep is asked to do: the options every command that measures fills in.

use std::time::Duration;

use scalprof_collect::locks::LockConfig;
use scalprof_collect::perf::SamplingConfig;
use scalprof_model::{SweepParameter, ThroughputSource};

/// Everything a sweep needs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub command: Vec<String>,
    /// A scaling sweep (threads) or a complexity sweep (size).
    pub parameter: SweepParameter,
    /// The sweep's values; `None`: 1, 2, 4, … up to the CPUs.
    pub values: Option<Vec<u64>>,
    /// Clean (untraced) repeats per point.
    pub repeat: u32,
    /// While a point's clean repeats leave its throughput unsteady (the 80% interval of
    /// their mean wider than ±[`STEADY`]), more run, up to this many in
    /// all; `None`: `repeat` (never more), or with `predict` 3 × `repeat`: a prediction
    /// from small points is only as good as their throughput.
    /// [`STEADY`]: crate::options::STEADY
    pub repeat_max: Option<u32>,
    /// Diagnosis repeats per point (profiler and tracers attached); 0 = timing only.
    pub diagnose: u32,
    /// While a point's traced repeats disagree on its verdict, more run, up to this many
    /// in all (a thread sweep's points after the first; at most `diagnose` elsewhere).
    pub diagnose_max: u32,
    pub warmup: u32,
    /// A shell command run before every execution of the workload, untimed (`--prepare`).
    pub prepare: Option<String>,
    /// A shell command run after every execution of the workload, untimed (`--cleanup`).
    pub cleanup: Option<String>,
    pub label: Option<String>,
    pub ops_regex: String,
    /// Weak or strong scaling when the workload prints no ops; `None` infers it.
    pub scaling: Option<ThroughputSource>,
    pub timeout: Option<Duration>,
    pub keep_going: bool,
    /// Keep every repeat's stdout and stderr (up to 64 MiB each); by default only the ops
    /// lines and stderr's head and tail are kept.
    pub keep_output: bool,
    /// Profile the diagnosis repeats (`None`: no profiles).
    pub sampling: Option<SamplingConfig>,
    /// Trace locks in the diagnosis repeats (`None`: no lock tables).
    pub locks: Option<LockConfig>,
    /// Running processes observed in the traced repeats (`--attach`, `--attach-name`).
    pub attach: scalprof_collect::attach::AttachSpec,
    /// Cgroups the workload runs in (`--cgroup`), whose limits apply to it.
    pub cgroups: Vec<std::path::PathBuf>,
    /// The commit of the code measured (`--commit`); `None`: found from the workload's
    /// git checkout or the CI's variables when the run is created.
    pub commit: Option<String>,
    /// The thread count the document's prediction reaches (`--predict`); `None`: the
    /// CPUs × 4.
    pub predict: Option<u64>,
    /// Time the user locks' holds at every point (`--hold-times-everywhere`), not only
    /// where the point's first traced repeat saw one contended, and never at 1 thread.
    pub hold_times_everywhere: bool,
}

impl RunOptions {
    /// A sweep of `command` over `parameter` with the defaults of `scalprof run`: 3 clean
    /// repeats and 2 to 6 traced per point, profiled and lock-traced, the sweep's values from
    /// the CPU count, throughput from an `ops=N` line. Callers change what differs.
    pub fn new(command: Vec<String>, parameter: SweepParameter) -> Self {
        RunOptions {
            command,
            parameter,
            values: None,
            repeat: 3,
            repeat_max: None,
            diagnose: DIAGNOSE,
            diagnose_max: DIAGNOSE_MAX,
            warmup: 0,
            prepare: None,
            cleanup: None,
            label: None,
            ops_regex: r"ops=(\d+)".into(),
            scaling: None,
            timeout: None,
            keep_going: false,
            keep_output: false,
            sampling: Some(SamplingConfig::default()),
            locks: Some(LockConfig::default()),
            attach: Default::default(),
            cgroups: Vec::new(),
            commit: None,
            predict: None,
            hold_times_everywhere: false,
        }
    }
}

/// A point's throughput is steady once the 80% interval of its clean repeats' mean is
/// within this share of the mean (adaptive repeats, `repeat_max`).
pub const STEADY: f64 = 0.05;

/// Traced repeats per point by default: two, so that every share has an interval.
pub const DIAGNOSE: u32 = 2;
/// At most this many traced repeats per point while the verdict is unsettled: at 6 the
/// intervals' t factor (80%) is 1.48, against 3.08 at 2, so two causes 1.3 standard
/// errors apart in 2 repeats stand apart in 6 that scatter alike.
pub const DIAGNOSE_MAX: u32 = 6;
