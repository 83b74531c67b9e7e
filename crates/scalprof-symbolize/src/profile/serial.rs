//! How much of the sampled time one thread ran alone, and each thread's share on a CPU.

use std::collections::HashMap;

use scalprof_model::profile::{THREAD_LOADS, THREAD_LOAD_MIN};
use scalprof_model::{SerialStats, ThreadLoad};

use super::{ProfileBuilder, MAX_SERIAL_BINS, SERIAL_BIN_NS};

/// A thread that finished with at least this share of a lone thread's samples did the same
/// work (sampling noise allowed): the lone thread ran late, it did not have more to do.
const LATE_SAME_WORK: f64 = 0.9;

/// A bin no sample fell in, and one with samples of more than one thread (any other
/// value is the one thread's id).
const NONE: i64 = i64::MIN;
const MANY: i64 = i64::MIN + 1;

/// The bin of [`SERIAL_BIN_NS`] a sample taken at `t` falls in, counted from `t0`.
fn bin(t: u64, t0: u64) -> usize {
    ((t - t0) / SERIAL_BIN_NS) as usize
}

impl ProfileBuilder {
    pub(super) fn serial_stats(&mut self) -> SerialStats {
        if self.timeline.is_empty() {
            return SerialStats::default();
        }
        // Two passes in any order (no sort): which threads each bin saw (none, one, more),
        // then the leaves of the samples in bins that saw one thread only.
        let t0 = self.timeline.iter().map(|t| t.0).min().unwrap_or(0);
        let t1 = self.timeline.iter().map(|t| t.0).max().unwrap_or(0);
        let nbins = ((t1 - t0) / SERIAL_BIN_NS + 1) as usize;
        // Over ~3 hours of samples, or timestamps that make no sense: no estimate.
        if nbins > MAX_SERIAL_BINS {
            return SerialStats::default();
        }
        let seen = self.threads_per_bin(t0, nbins);
        let idle = seen.iter().filter(|&&b| b == NONE).count() as u64;
        let single = seen.iter().filter(|&&b| b != NONE && b != MANY).count() as u64;
        SerialStats {
            bins: nbins as u64,
            bin_ms: SERIAL_BIN_NS as f64 / 1e6,
            single_thread_bins: single,
            idle_bins: idle,
            late_bins: self.late_bins(&seen, t0),
            top_function: self.lone_top_function(&seen, t0),
            threads: self.thread_loads(t1 - t0),
        }
    }

    /// Per bin of [`SERIAL_BIN_NS`] from `t0`: [`NONE`], the one thread's id, or [`MANY`].
    fn threads_per_bin(&self, t0: u64, nbins: usize) -> Vec<i64> {
        let mut seen = vec![NONE; nbins];
        for &(t, tid, _) in &self.timeline {
            let b = &mut seen[bin(t, t0)];
            *b = match *b {
                NONE => i64::from(tid),
                one if one == i64::from(tid) => one,
                _ => MANY,
            };
        }
        seen
    }

    /// The lone-thread bins where the thread ran late. Each thread's samples and last bin;
    /// `done[b]` is the most samples of a thread whose last sample came before bin b. A
    /// lone thread with no more samples than that (within sampling noise) had the same
    /// work and finished late.
    fn late_bins(&self, seen: &[i64], t0: u64) -> u64 {
        let mut per_tid: HashMap<i32, (u64, usize)> = HashMap::new();
        for &(t, tid, _) in &self.timeline {
            let e = per_tid.entry(tid).or_default();
            e.0 += 1;
            e.1 = e.1.max(bin(t, t0));
        }
        let mut done = vec![0u64; seen.len() + 1];
        for &(samples, last) in per_tid.values() {
            done[last + 1] = done[last + 1].max(samples);
        }
        for b in 1..done.len() {
            done[b] = done[b].max(done[b - 1]);
        }
        seen.iter()
            .enumerate()
            .filter(|&(b, &one)| {
                one != NONE && one != MANY && {
                    let mine = per_tid.get(&(one as i32)).map_or(0, |e| e.0);
                    done[b] as f64 >= LATE_SAME_WORK * mine as f64
                }
            })
            .count() as u64
    }

    /// The function most often on top of the stack in the lone-thread bins.
    fn lone_top_function(&self, seen: &[i64], t0: u64) -> Option<String> {
        let mut tops: HashMap<u32, u64> = HashMap::new();
        for &(t, _, leaf) in &self.timeline {
            let b = seen[bin(t, t0)];
            // Lock code linked into the program (a static libc's, Rust std's) is the lock's,
            // not the phase's work: the phase is named by the program's own functions.
            if b != NONE
                && b != MANY
                && leaf != u32::MAX
                && !scalprof_model::vocabulary::is_user_lock_code(&self.names[leaf as usize])
            {
                *tops.entry(leaf).or_default() += 1;
            }
        }
        // Ties go to the first name in order, not to an id (ids depend on the order
        // names were met, which differs between one builder and several).
        tops.into_iter()
            .map(|(id, n)| (n, &self.names[id as usize]))
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
            .map(|(_, name)| name.clone())
    }

    /// The threads on a CPU for at least [`THREAD_LOAD_MIN`] of the span, busiest first.
    fn thread_loads(&self, span_ns: u64) -> Vec<ThreadLoad> {
        let mut per_tid: HashMap<i32, u64> = HashMap::new();
        for &(_, tid, _) in &self.timeline {
            *per_tid.entry(tid).or_default() += 1;
        }
        let mut out: Vec<(i32, ThreadLoad)> = per_tid
            .into_iter()
            .map(|(tid, samples)| {
                let pid = self.thread_pid.get(&tid).copied().unwrap_or(tid);
                let process = self
                    .processes
                    .get(&pid)
                    .map(|p| p.comm.clone())
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| format!("pid-{pid}"));
                let load = ThreadLoad {
                    process,
                    samples,
                    span_ns,
                };
                (tid, load)
            })
            .filter(|(_, l)| l.busy(self.frequency) >= THREAD_LOAD_MIN)
            .collect();
        out.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then_with(|| a.0.cmp(&b.0)));
        out.truncate(THREAD_LOADS);
        out.into_iter().map(|(_, l)| l).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thread 1 alone for bins 0..50, then thread 2 alone for bins 50..100, `per_bin`
    /// samples each bin.
    fn relay(per_bin: u64) -> SerialStats {
        let mut b = ProfileBuilder::new("cpu-clock", 1000, false);
        for bin in 0..50u64 {
            b.timeline.push((bin * SERIAL_BIN_NS, 1, u32::MAX));
        }
        for bin in 50..100u64 {
            for k in 0..per_bin {
                b.timeline.push((bin * SERIAL_BIN_NS + k, 2, u32::MAX));
            }
        }
        b.serial_stats()
    }

    #[test]
    fn a_thread_with_the_same_work_that_ends_alone_ran_late() {
        let s = relay(1);
        assert_eq!((s.bins, s.single_thread_bins), (100, 100));
        // Thread 2 did what thread 1 did, after it: its 50 bins are late.
        assert_eq!(s.late_bins, 50);
        assert!((s.late_share() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_thread_with_more_work_that_ends_alone_is_not_late() {
        // Thread 2 had twice the work: running alone at the end is its work, not a delay.
        let s = relay(2);
        assert_eq!(s.single_thread_bins, 100);
        assert_eq!(s.late_bins, 0);
    }
}
