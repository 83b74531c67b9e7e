//! How far a point's verdict can be trusted: the intervals of its shares over the traced
//! repeats, whether the repeats agree on its top cause, and the CPU time processes outside
//! the workload took from it.

use serde::{Deserialize, Serialize};

/// `[low, high]` of one share over a point's traced repeats: the share ± Student's t at
/// 80% (two-sided) times the standard error of the per-repeat shares, `s/√n`, clamped to
/// 0..1. It narrows as repeats are added (a min–max range would only widen), which is
/// what lets more traced repeats settle a verdict.
pub type Interval = [f64; 2];

/// Whether the traced repeats of a point agree on its verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settling {
    /// Traced repeats the point's diagnosis was made from.
    pub traced_repeats: u32,
    /// The point's top cause (at least 5%), when its interval stands clear of the next
    /// cause's: settled even if a smaller cause is still on the edge of the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<String>,
    /// The repeats agree on the top cause and it stands clear of the next one (and, at
    /// the last point, of the reporting threshold).
    pub settled: bool,
    /// When not settled: the causes the repeats could not tell apart, heaviest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    /// When not settled: why, in a sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The repeats of one kind (clean or traced) of a point that count: those that succeeded,
/// less those other processes disturbed when at least one quiet one is left.
pub fn kept(repeats: &[crate::Repeat]) -> Vec<&crate::Repeat> {
    let disturbed = |r: &crate::Repeat| r.interference.as_ref().is_some_and(|i| i.is_disturbed());
    let quiet = repeats.iter().any(|r| r.succeeded() && !disturbed(r));
    repeats
        .iter()
        .filter(|r| r.succeeded() && !(quiet && disturbed(r)))
        .collect()
}

/// A process outside the workload's tree that ran while the workload did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForeignProcess {
    pub comm: String,
    pub pid: i32,
    /// CPU time it used during the repeats (summed over a point's repeats).
    pub cpu_s: f64,
}

/// CPU time that processes outside the workload's tree took from it.
///
/// `share` is the part of the CPUs the workload could use (its threads, at most the online
/// CPUs) that other processes held during its wall time: their CPU time beyond what the
/// CPUs the workload left idle could absorb, over `min(threads, cpus) × wall`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// For a point: the median over its repeats.
    pub share: f64,
    /// For a point: the largest share one repeat saw (a burst in one repeat of five has a
    /// median of none); absent for one repeat, and where no repeat saw any.
    #[serde(default, skip_serializing_if = "is_no_time")]
    pub peak: f64,
    /// The heaviest foreign processes, heaviest first (at most 5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ForeignProcess>,
    /// Repeats of the point (clean and traced) that other processes disturbed beyond
    /// [`DISTURBED_SHARE`]; up to [`MAX_RERUNS`] of them were measured again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub disturbed: u32,
    /// CPU-seconds the hypervisor gave to other virtual machines during the repeat, summed
    /// over the online CPUs (`/proc/stat` steal); 0 on bare metal.
    #[serde(default, skip_serializing_if = "is_no_time")]
    pub steal_s: f64,
}

fn is_no_time(s: &f64) -> bool {
    *s == 0.0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A repeat disturbed beyond this interference share is measured again (up to
/// [`MAX_RERUNS`] per point). 10%: the noise CI benchmarking services measure on shared
/// runners is about 3%; a tenth of the usable CPUs taken is well outside it.
pub const DISTURBED_SHARE: f64 = 0.10;

/// Re-runs of disturbed repeats per point, clean and traced together.
pub const MAX_RERUNS: u32 = 2;

impl Interference {
    /// Computes the share of one repeat: `foreign_cpu_s` used by other processes during
    /// `wall_s`, on a machine of `cpus` CPUs, while the workload could use `demand` of them.
    pub fn share_of(foreign_cpu_s: f64, wall_s: f64, cpus: u32, demand: f64) -> f64 {
        let cpus = f64::from(cpus.max(1));
        let demand = demand.clamp(1.0, cpus);
        if wall_s <= 0.0 {
            return 0.0;
        }
        // What the CPUs the workload left idle absorbed took nothing from it.
        let taken = foreign_cpu_s - (cpus - demand) * wall_s;
        if taken <= 0.0 {
            return 0.0;
        }
        (taken / (demand * wall_s)).min(1.0)
    }

    /// Whether this repeat was disturbed enough to measure again.
    pub fn is_disturbed(&self) -> bool {
        self.share > DISTURBED_SHARE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_process_on_a_cpu_the_workload_left_idle_takes_nothing() {
        // 2 CPUs, a 1-thread workload and a spinner: the spinner has the other CPU.
        assert_eq!(Interference::share_of(1.0, 1.0, 2, 1.0), 0.0);
        // 2 threads: the spinner takes half of what the workload could use.
        assert!((Interference::share_of(1.0, 1.0, 2, 2.0) - 0.5).abs() < 1e-12);
        // More threads than CPUs: the demand is the CPUs.
        assert!((Interference::share_of(0.5, 1.0, 2, 8.0) - 0.25).abs() < 1e-12);
        assert_eq!(Interference::share_of(1.0, 0.0, 2, 2.0), 0.0);
    }

    #[test]
    fn a_disturbed_repeat_counts_only_when_no_quiet_one_is_left() {
        let rep = |index, share: f64| crate::Repeat {
            interference: Some(Interference {
                share,
                ..Default::default()
            }),
            ..crate::Repeat::ok(index, 1.0)
        };
        let both = [rep(0, 0.5), rep(1, 0.0)];
        let kept_idx: Vec<u32> = kept(&both).iter().map(|r| r.index).collect();
        assert_eq!(kept_idx, [1]);
        assert_eq!(kept(&[rep(0, 0.5), rep(1, 0.4)]).len(), 2);
    }
}
