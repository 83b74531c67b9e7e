//! How far a point's verdict can be trusted: the intervals of its shares over the traced
//! repeats, whether the repeats agree on its top cause, and the CPU time processes outside
//! the workload took from it.

use serde::{Deserialize, Serialize};

/// `[low, high]` of one share over a point's traced repeats: the smallest and largest of
/// the per-repeat values (and of the merged one). As an interval for the median it holds
/// with probability 1 − 2^(1−n) for n repeats (75% at 3, 94% at 5): the order-statistic
/// interval for the median (Conover, *Practical Nonparametric Statistics*, §3.2), which
/// assumes nothing about the distribution of the shares.
pub type Interval = [f64; 2];

/// The coverage of the min–max interval of `n` independent repeats for their median.
pub fn interval_coverage(n: u32) -> f64 {
    if n < 2 {
        return 0.0;
    }
    1.0 - 0.5f64.powi(n as i32 - 1)
}

/// Whether the traced repeats of a point agree on its verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settling {
    /// Traced repeats the point's diagnosis was made from.
    pub traced_repeats: u32,
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
    pub share: f64,
    /// The heaviest foreign processes, heaviest first (at most 5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ForeignProcess>,
    /// Repeats of the point (clean and traced) that other processes disturbed beyond
    /// [`DISTURBED_SHARE`]; up to [`MAX_RERUNS`] of them were measured again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub disturbed: u32,
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
        let taken = (foreign_cpu_s - (cpus - demand) * wall_s).max(0.0);
        (taken / (demand * wall_s)).clamp(0.0, 1.0)
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
    fn the_min_max_interval_covers_the_median_more_often_with_more_repeats() {
        assert_eq!(interval_coverage(1), 0.0);
        assert_eq!(interval_coverage(2), 0.5);
        assert_eq!(interval_coverage(3), 0.75);
        assert!((interval_coverage(5) - 0.9375).abs() < 1e-12);
    }
}
