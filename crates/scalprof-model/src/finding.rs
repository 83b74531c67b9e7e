//! What a run says: warnings, findings with their kind-specific details, and the time
//! budget each point's findings are scored from.

use serde::{Deserialize, Serialize};

use crate::{locks, Interval};

/// The least share of a point's thread-time a budget lists as a cause, and a report
/// shows as one.
pub const LISTED_SHARE: f64 = 0.005;

/// A point's thread-time per operation, split: `useful` (the efficiency) + the causes'
/// shares + `overhead` (scalprof's own) + `unexplained` = 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub useful: f64,
    /// `useful` from the slowest to the fastest clean repeat of the point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub useful_interval: Option<Interval>,
    pub overhead: f64,
    pub unexplained: f64,
    /// `unexplained` over the traced repeats ([`Interval`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexplained_interval: Option<Interval>,
    /// Heaviest first.
    pub causes: Vec<Cause>,
}

/// One cause of lost thread-time: the growth of its time per operation since the first
/// point, as a share of this point's thread-time per operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredCause")]
pub struct Cause {
    /// Which wait for a CPU this cause is, where it is one: set from the lock rows'
    /// addresses by the analysis, from the subject where a document is read back
    /// ([`StoredCause`]). Not in the document: its subject says it.
    #[serde(skip)]
    pub run_queue: Option<locks::RunQueueBehind>,
    pub kind: FindingKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<locks::Scope>,
    pub subject: String,
    pub share: f64,
    /// `share` over the traced repeats ([`Interval`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_interval: Option<Interval>,
    /// Time taken by processes outside the workload (interference): kept in the budget so
    /// that it sums to 1, never the program's cause or a finding.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub foreign: bool,
    /// Of `share`, the time one thread then ran alone at the end of the run because it
    /// had waited here: it had as much work as the threads that had finished, and ended
    /// late. A wait costs its own time and the lone run it leaves.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_share: f64,
    /// A few words that identify it further (lock type and callers, a function).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Cause {
    /// Which wait for a CPU this cause is (behind the workload's own threads, other
    /// processes, scalprof), if it is one.
    pub fn run_queue(&self) -> Option<locks::RunQueueBehind> {
        self.run_queue
    }
}

/// A budget cause as a run document writes it: read back into a [`Cause`], whose typed
/// identity is made here, the one place a cause's subject is read.
#[derive(Deserialize)]
struct StoredCause {
    kind: FindingKind,
    #[serde(default)]
    scope: Option<locks::Scope>,
    subject: String,
    share: f64,
    #[serde(default)]
    share_interval: Option<Interval>,
    #[serde(default)]
    foreign: bool,
    #[serde(default)]
    late_share: f64,
    #[serde(default)]
    detail: String,
}

impl From<StoredCause> for Cause {
    fn from(c: StoredCause) -> Cause {
        Cause {
            run_queue: locks::RunQueueBehind::named(c.scope, &c.subject),
            kind: c.kind,
            scope: c.scope,
            subject: c.subject,
            share: c.share,
            share_interval: c.share_interval,
            foreign: c.foreign,
            late_share: c.late_share,
            detail: c.detail,
        }
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The speedup at point `value` if a cause's share became useful work (an upper bound).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    pub value: u64,
    pub speedup: f64,
}

/// Typed measurement-quality warnings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// Repeats of one point spread more than 10% in wall time.
    NoisyRepeats,
    /// A point asks for more threads than online CPUs, or than physical cores where
    /// SMT siblings share them.
    OversubscribedPoint,
    /// A point asks for more threads than the CPUs a CPU quota, CPU set or affinity
    /// mask leaves the workload: it measures the limit (the message names it, and the
    /// point's efficiency against the usable CPUs).
    BeyondLimits,
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
    /// A large part of a point's thread-time per operation is wakeups onto idle CPUs
    /// (the time until the woken thread ran): the point is latency-bound, each hand-off
    /// between threads or processes waking a sleeping CPU.
    IdleWakeups,
    /// Processes outside the workload took CPU time from a point's repeats (the message
    /// names them); repeats disturbed beyond 10% were measured again.
    Interference,
    /// A repeat's throughput lay far outside its point's others: excluded from the
    /// point's throughput, and named.
    OutlierRepeat,
    /// Efficiency above 100%: the points do more than linear work per thread.
    SuperLinear,
    /// The verdict names a cause above 10% of the thread-time that has no finding: the
    /// message says why (the loss is within the clean repeats' noise, …).
    FindingsWithheld,
    /// A watched server's level with fewer untraced windows than a point needs
    /// ([`MIN_LEVEL_WINDOWS`]): listed, not fitted.
    BriefLevel,
}

/// A watched server's level is fitted from this many untraced windows or more.
pub const MIN_LEVEL_WINDOWS: usize = 3;

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
    /// The cgroup's CPU quota ran out: its threads were runnable and held off the CPUs
    /// (`cpu.stat` throttled time).
    CpuThrottling,
}

impl FindingKind {
    /// Every kind, in the order of the enum.
    pub const ALL: [FindingKind; 9] = [
        FindingKind::LockContention,
        FindingKind::FalseSharing,
        FindingKind::TrueSharing,
        FindingKind::SuperlinearCost,
        FindingKind::KernelHotspot,
        FindingKind::UserHotspot,
        FindingKind::SerialFraction,
        FindingKind::BlockedWait,
        FindingKind::CpuThrottling,
    ];

    /// The kind named `name` in a run document (`lock_contention`), if there is one.
    pub fn parse(name: &str) -> Option<FindingKind> {
        FindingKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

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
            FindingKind::CpuThrottling => "cpu_throttling",
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
    /// `score` over the traced repeats of the last point ([`Interval`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_interval: Option<Interval>,
    pub evidence: String,
    pub suggestion: String,
    #[serde(default)]
    pub details: FindingDetails,
    /// The speedup at the last point without this cause (set from the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIf>,
    /// The experiment that lengthened this cause: its index in `experiments[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<usize>,
}

impl Finding {
    /// Which wait for a CPU this finding is, where it is one: its lock row's address.
    pub fn run_queue(&self) -> Option<locks::RunQueueBehind> {
        match &self.details {
            FindingDetails::Lock(d) => d.address.run_queue(),
            _ => None,
        }
    }
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
    Throttling(ThrottlingDetails),
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
    pub address: locks::LockAddress,
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
    /// Who held the lock while the waiters waited, at the last point: the functions the
    /// holders were sampled running in during the waits (`state` `on_cpu`), else those
    /// whose unlock ended the waits (`at_release`), by the wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<locks::LockCaller>,
    /// The share of the waits' time the holders were running (at the last point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_running: Option<f64>,
    /// The holders' own waits during the waits, shares of that time: the chain's links.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holder_waits: Vec<locks::HolderWait>,
    /// How long the lock was held and how often it was taken, at the last point (user
    /// locks the interposer timed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<locks::HoldTimes>,
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

/// `cpu_throttling`: the quota and what it denied at each point (`None` where it was
/// not measured).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottlingDetails {
    pub cgroup: String,
    /// CPU-seconds the quota denied per second of wall time (`cpu.stat` throttled time).
    pub denied_cpus: Vec<Option<f64>>,
    pub points: Vec<u64>,
    /// In CPUs.
    pub quota: f64,
    /// The share of the quota's periods in which it ran out.
    pub throttled_periods: Vec<Option<f64>>,
}

#[cfg(test)]
mod details_tests {
    use super::*;

    #[test]
    fn a_budget_cause_read_back_knows_which_wait_for_a_cpu_it_is_and_writes_as_before() {
        let made = |run_queue, subject: &str| Cause {
            run_queue,
            kind: FindingKind::BlockedWait,
            scope: Some(locks::Scope::Kernel),
            subject: subject.into(),
            share: 0.25,
            share_interval: None,
            foreign: false,
            late_share: 0.0,
            detail: "cpu-wait".into(),
        };
        for behind in locks::RunQueueBehind::ALL {
            let cause = made(Some(behind), behind.row_name());
            let text = serde_json::to_string(&cause).unwrap();
            assert!(!text.contains("run_queue"), "{text}");
            let back: Cause = serde_json::from_str(&text).unwrap();
            assert_eq!(back, cause);
        }
        // A user-scope cause of the same name is not one.
        let mut user = made(None, locks::CPU_WAIT);
        user.scope = Some(locks::Scope::User);
        let back: Cause = serde_json::from_str(&serde_json::to_string(&user).unwrap()).unwrap();
        assert_eq!(back.run_queue(), None);
    }

    #[test]
    fn typed_details_write_the_object_readers_always_saw_and_read_back_as_their_kind() {
        let lock = FindingDetails::Lock(LockDetails {
            address: locks::LockAddress::Traced(0x4040),
            callers: vec![locks::LockCaller {
                function: "table_lookup".into(),
                share: 1.0,
                state: None,
                stack: None,
            }],
            count: vec![3, 900],
            max_wait_ns: 50_000,
            points: vec![1, 2],
            lock_type: locks::LockKind::Mutex,
            wait_ns_per_op: vec![1.0, 20.0],
            on_cpu_ns_per_op: Vec::new(),
            holders: Vec::new(),
            holder_running: None,
            holder_waits: Vec::new(),
            hold: None,
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
