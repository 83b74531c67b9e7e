//! Experiments: a cause lengthened by known delays, the throughput measured at each, and
//! what that proves (`scalprof verify`). Stored with the run; `experiments[]` of the run
//! document, and `findings[].experiment` points at the one that tested a finding.

use serde::{Deserialize, Serialize};

use crate::FindingKind;

/// What an experiment found the cause to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Lengthening it slowed the workload as a bottleneck would, within the interval.
    OnCriticalPath,
    /// Lengthening it barely moved the throughput (or no more than the CPU the delay took).
    OffCriticalPath,
    /// Too noisy, or between the two: the reason says what would settle it.
    Inconclusive,
    /// This kind of cause cannot be lengthened (yet): the reason says why.
    NotLengthened,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::OnCriticalPath => "on_critical_path",
            Verdict::OffCriticalPath => "off_critical_path",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotLengthened => "not_lengthened",
        }
    }
}

/// The throughput at one delay level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelThroughput {
    pub delay_ns: u64,
    /// Mean throughput over the level's executions, in the run's unit.
    pub throughput: f64,
    /// Its 95% interval (Student's t over the executions); a level run once (an experiment
    /// that settled after its first round runs the shorter delay once) has no spread to
    /// tell, and its interval is its one value.
    pub ci95: [f64; 2],
    pub executions: u32,
}

/// The speedup the measured response says removing the cause would give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibratedWhatIf {
    pub speedup: f64,
    pub interval: [f64; 2],
    /// For a lock whose holds were timed: the speedup if its hold were halved (the
    /// measured slope times half the mean hold per operation), with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halved_hold: Option<[f64; 3]>,
}

/// What an experiment lengthened. The run document writes it as one word, as it always
/// has; code reads the variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExperimentKind {
    /// A lock's hold, directly (a global of the workload) or through the system call its
    /// holder makes under it (`lock`).
    Lock,
    /// A kernel lock's hold, where a waiter gets it (`kernel_lock`).
    KernelLock,
    /// A system call, where it returns (`syscall`).
    Syscall,
    /// A function of the workload's executable, at its entry (`function`).
    Function,
    /// Not lengthened: the finding's kind (`false_sharing`), or `unknown` (`None`) where
    /// no finding named the cause.
    NotLengthened(Option<FindingKind>),
}

impl ExperimentKind {
    pub fn as_str(&self) -> &str {
        match self {
            ExperimentKind::Lock => "lock",
            ExperimentKind::KernelLock => "kernel_lock",
            ExperimentKind::Syscall => "syscall",
            ExperimentKind::Function => "function",
            ExperimentKind::NotLengthened(kind) => kind.map_or("unknown", FindingKind::as_str),
        }
    }

    pub fn parse(s: &str) -> ExperimentKind {
        match s {
            "lock" => ExperimentKind::Lock,
            "kernel_lock" => ExperimentKind::KernelLock,
            "syscall" => ExperimentKind::Syscall,
            "function" => ExperimentKind::Function,
            other => ExperimentKind::NotLengthened(FindingKind::parse(other)),
        }
    }
}

impl Serialize for ExperimentKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ExperimentKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ExperimentKind::parse(&String::deserialize(d)?))
    }
}

/// One cause, lengthened at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// The cause as it was named (`--cause`, or a finding's subject).
    pub subject: String,
    /// What was lengthened (written `lock`, `kernel_lock`, `syscall`, `function`; a cause
    /// that was not lengthened keeps its finding's kind).
    pub kind: ExperimentKind,
    /// The sweep point it ran at.
    pub point: u64,
    /// How the cause was lengthened (empty when it was not).
    pub primitive: String,
    /// The delay per occurrence of each level, the control (0) first.
    pub delays_ns: Vec<u64>,
    /// The throughput at each level, in `delays_ns`' order.
    pub throughput: Vec<LevelThroughput>,
    /// Occurrences of the cause per unit of work, counted at the control level.
    pub occurrences_per_op: f64,
    /// The slowdown at the longest delay if the cause were a bottleneck: each occurrence's
    /// delay added to the time per operation.
    pub predicted_slowdown: f64,
    /// The slowdown the spinning delay alone would cause by taking CPU from the workload,
    /// were the cause off its critical path.
    pub burn_slowdown: f64,
    /// The measured slowdown at the longest delay, its 95% interval.
    pub measured_slowdown: [f64; 2],
    /// The added time per operation over the injected time per operation (1: a
    /// bottleneck, 0: off the path), with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope: Option<[f64; 3]>,
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated_what_if: Option<CalibratedWhatIf>,
    /// A lock whose holds the run timed: its hold times at the point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<crate::locks::HoldTimes>,
    /// The share of the control's wall time the lock was held (its releases per operation
    /// in the control times the run's mean hold, over the time per operation): near 1,
    /// a bottleneck before any delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_share: Option<f64>,
    /// The slowdown at the longest delay once the lock is held all the time: the time per
    /// operation is at least its releases per operation times the lengthened hold. A
    /// lower bound of a bottleneck's (no queueing counted), from the hold times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation_slowdown: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_not_lengthened_keeps_its_finding_s_kind_through_the_document() {
        for kind in FindingKind::ALL {
            assert_eq!(FindingKind::parse(kind.as_str()), Some(kind));
            let e = ExperimentKind::NotLengthened(Some(kind));
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(text, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<ExperimentKind>(&text).unwrap(), e);
        }
        let unknown = ExperimentKind::NotLengthened(None);
        assert_eq!(serde_json::to_string(&unknown).unwrap(), "\"unknown\"");
        assert_eq!(ExperimentKind::parse("unknown"), unknown);
        assert_eq!(ExperimentKind::parse("syscall"), ExperimentKind::Syscall);
    }
}
