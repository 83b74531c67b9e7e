//! How long locks are held: the raw holds the interposer (user locks) and the kernel's
//! mmap_lock events time, and the times a lock row carries (lockmeter's HOLD columns).

use serde::{Deserialize, Serialize};

/// The holds of one user lock address of one process, timed by the interposer preloaded
/// into a traced repeat: every acquisition counted, a sample of the holds timed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserHoldRaw {
    pub uaddr: u64,
    pub tgid: u32,
    pub acquisitions: u64,
    /// The sampled holds, nanoseconds from the acquire's return to the release's call.
    pub holds_ns: Vec<u64>,
}

fn one() -> u32 {
    1
}

/// The mmap_lock holds of one process, one side, timed at the kernel's mmap_lock events:
/// every hold, in power-of-two buckets of nanoseconds (bucket `i` holds `[2^i, 2^(i+1))`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelHoldRaw {
    pub tgid: u32,
    /// The `mm_struct` whose lock it is.
    pub mm: u64,
    pub write: bool,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub buckets: Vec<u64>,
}

/// How long a lock was held (lockmeter's HOLD columns), from a sample of its holds, and how
/// often it was taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HoldTimes {
    /// Acquisitions in the traced repeats.
    pub acquisitions: u64,
    /// Holds timed.
    pub sampled: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub mean_ns: f64,
    /// The longest hold timed: a rare long holder shows here and in the mean, not in
    /// the percentiles.
    #[serde(default)]
    pub max_ns: u64,
    /// The traced repeats that timed them (the first of each point does not: its waits
    /// and holders are measured without the interposer).
    #[serde(default = "one")]
    pub repeats: u32,
    /// Acquisitions per operation of the point's work (set when the run document is built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquisitions_per_op: Option<f64>,
}

impl HoldTimes {
    /// The times of `holds_ns` (sorted here), for `acquisitions` acquisitions; `None`
    /// when no hold was timed.
    pub fn of(acquisitions: u64, mut holds_ns: Vec<u64>) -> Option<HoldTimes> {
        if holds_ns.is_empty() {
            return None;
        }
        holds_ns.sort_unstable();
        let n = holds_ns.len();
        let at = |q: f64| holds_ns[((n as f64 * q).ceil() as usize).clamp(1, n) - 1];
        Some(HoldTimes {
            acquisitions,
            sampled: n as u64,
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            mean_ns: holds_ns.iter().sum::<u64>() as f64 / n as f64,
            max_ns: holds_ns[n - 1],
            repeats: 1,
            acquisitions_per_op: None,
        })
    }

    /// The times of holds counted in power-of-two buckets (every hold timed): the
    /// percentiles are the geometric middles of their buckets, kept within the longest.
    pub fn of_buckets(
        count: u64,
        total_ns: u64,
        max_ns: u64,
        buckets: &[u64],
    ) -> Option<HoldTimes> {
        let n: u64 = buckets.iter().sum();
        if n == 0 {
            return None;
        }
        let at = |q: f64| {
            let rank = ((n as f64 * q).ceil() as u64).clamp(1, n);
            let mut seen = 0;
            let i = buckets
                .iter()
                .position(|&b| {
                    seen += b;
                    seen >= rank
                })
                .unwrap_or(buckets.len() - 1);
            ((2f64.powi(i as i32) * std::f64::consts::SQRT_2) as u64).min(max_ns.max(1))
        };
        Some(HoldTimes {
            acquisitions: count,
            sampled: n,
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            mean_ns: total_ns as f64 / count.max(1) as f64,
            max_ns,
            repeats: 1,
            acquisitions_per_op: None,
        })
    }

    /// Two samples of one lock's holds as one (two repeats, two elements of an array):
    /// acquisitions and samples summed, the times weighed by their samples. The
    /// percentiles of the union are not those of the parts; for repeats of one workload
    /// they are close, and the samples themselves are not kept in the document.
    pub fn merge(a: Option<&HoldTimes>, b: Option<&HoldTimes>) -> Option<HoldTimes> {
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (one, other) => return one.or(other).cloned(),
        };
        let n = (a.sampled + b.sampled).max(1) as f64;
        let weigh = |x: f64, y: f64| (x * a.sampled as f64 + y * b.sampled as f64) / n;
        Some(HoldTimes {
            acquisitions: a.acquisitions + b.acquisitions,
            sampled: a.sampled + b.sampled,
            p50_ns: weigh(a.p50_ns as f64, b.p50_ns as f64).round() as u64,
            p99_ns: weigh(a.p99_ns as f64, b.p99_ns as f64).round() as u64,
            mean_ns: weigh(a.mean_ns, b.mean_ns),
            max_ns: a.max_ns.max(b.max_ns),
            repeats: a.repeats + b.repeats,
            acquisitions_per_op: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_times_from_buckets_are_their_middles_within_the_longest() {
        // 90 holds in [64, 128) ns, 10 in [4096, 8192): p50 in the first, p99 in the last.
        let mut buckets = vec![0; 40];
        buckets[6] = 90;
        buckets[12] = 10;
        let t = HoldTimes::of_buckets(100, 100 * 500, 5000, &buckets).unwrap();
        assert_eq!((t.acquisitions, t.sampled), (100, 100));
        assert_eq!(t.p50_ns, 90); // 64·√2
        assert_eq!(t.p99_ns, 5000); // 4096·√2 = 5792, but none was longer than 5000
        assert_eq!(t.mean_ns, 500.0);
        assert_eq!(HoldTimes::of_buckets(0, 0, 0, &[0; 40]), None);
    }

    #[test]
    fn hold_times_are_the_sample_s_percentiles_and_merge_by_their_samples() {
        let t = HoldTimes::of(1000, (1..=100).rev().collect()).unwrap();
        assert_eq!((t.acquisitions, t.sampled), (1000, 100));
        assert_eq!((t.p50_ns, t.p99_ns), (50, 99));
        assert_eq!(t.mean_ns, 50.5);
        assert_eq!(t.max_ns, 100);
        assert_eq!(HoldTimes::of(3, Vec::new()), None);
        let u = HoldTimes::of(10, vec![200; 300]).unwrap();
        let m = HoldTimes::merge(Some(&t), Some(&u)).unwrap();
        assert_eq!((m.acquisitions, m.sampled), (1010, 400));
        // Weighed 1:3 by the samples.
        assert_eq!(m.p50_ns, (50 + 3 * 200) / 4 + 1);
        assert_eq!(HoldTimes::merge(None, Some(&u)), Some(u.clone()));
    }
}
