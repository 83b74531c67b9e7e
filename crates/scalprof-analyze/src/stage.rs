//! A saturated stage: one thread that every operation passes through.
//!
//! The sweep's parameter counts units of work (threads, or the connections of a client, or
//! the clients of a server), and a unit is not always a thread: one client thread drives
//! all of redis-benchmark's connections, one event loop serves all of Redis's clients. At N
//! units, a process that has fewer busy threads than N, and whose busiest thread was on a
//! CPU for a share `b` of the sampled time, is a stage every operation waits for in turn:
//! like a serial phase, the other N − 1 units lose `b·(N − 1)/N` of the thread-time, and
//! the budget gives it only what the named waits and costs leave. The processes looked at
//! are all that were sampled: the command's and, with `--attach`, the server's, so the
//! budget covers the whole system and a stage in the server is named with its process.

use std::collections::HashMap;

use scalprof_model::locks::Scope;
use scalprof_model::{
    Finding, FindingDetails, FindingKind, Point, PointProfile, SerialDetails, SerialStats,
};

use crate::budget::Series;

/// A thread on a CPU for less of the time than this is not a stage.
pub const STAGE_MIN_BUSY: f64 = 0.6;
/// Threads on a CPU for less than this share do not count as a process's busy threads.
const ACTIVE_MIN_BUSY: f64 = 0.05;

/// A stage at one point: the process, its busiest thread's share, its busy threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub process: String,
    pub busy: f64,
    pub active: usize,
}

/// The busiest stage at a point of `n` units: a process with fewer busy threads than `n`
/// whose busiest thread is on a CPU for at least [`STAGE_MIN_BUSY`] of the time.
pub fn stage_at(n: u64, serial: &SerialStats, frequency: u64) -> Option<Stage> {
    if n < 2 {
        return None;
    }
    let mut per_process: HashMap<&str, (f64, usize)> = HashMap::new();
    for t in &serial.threads {
        let busy = t.busy(frequency);
        let e = per_process.entry(t.process.as_str()).or_default();
        e.0 = e.0.max(busy);
        if busy >= ACTIVE_MIN_BUSY {
            e.1 += 1;
        }
    }
    per_process
        .into_iter()
        .filter(|&(_, (busy, active))| busy >= STAGE_MIN_BUSY && (active as u64) < n)
        .map(|(process, (busy, active))| Stage {
            process: process.to_string(),
            busy,
            active,
        })
        .max_by(|a, b| {
            a.busy
                .total_cmp(&b.busy)
                .then_with(|| b.process.cmp(&a.process))
        })
}

/// The subject a stage's cause and finding are named by.
pub fn subject(process: &str) -> String {
    format!("{process} (one thread for all)")
}

/// One series per process that is a stage at some point: its share at every point.
pub fn stage_series(points: &[Point], profiles: &[Option<&PointProfile>]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for (i, (p, prof)) in points.iter().zip(profiles).enumerate() {
        let Some(prof) = prof else { continue };
        let Some(s) = stage_at(p.value, &prof.serial, prof.frequency) else {
            continue;
        };
        let n = p.value as f64;
        let name = subject(&s.process);
        let k = match out.iter().position(|x| x.subject == name) {
            Some(k) => k,
            None => {
                out.push(Series {
                    run_queue: None,
                    kind: FindingKind::SerialFraction,
                    scope: Some(Scope::User),
                    subject: name,
                    detail: "one thread serves every unit".into(),
                    per_op: vec![None; points.len()],
                    shares: Some(vec![None; points.len()]),
                    late: None,
                });
                out.len() - 1
            }
        };
        if let Some(shares) = out[k].shares.as_mut() {
            shares[i] = Some(s.busy * (n - 1.0) / n);
        }
    }
    out
}

/// The finding for the last point's stage, if it has one (scored by the budget). `cpus`:
/// the machine's (0: unknown).
pub fn stage_finding(last: &Point, profile: &PointProfile, cpus: u64) -> Option<Finding> {
    let s = stage_at(last.value, &profile.serial, profile.frequency)?;
    // More threads only help where CPUs are left for them.
    let busy_cpus: f64 = profile
        .serial
        .threads
        .iter()
        .map(|t| t.busy(profile.frequency))
        .sum();
    let crowded = if cpus > 0 && busy_cpus >= 0.75 * cpus as f64 {
        format!(
            "; here the sampled threads already kept {busy_cpus:.1} of the {cpus} CPUs busy, so \
             more threads would share them: try it where CPUs are left over"
        )
    } else {
        String::new()
    };
    let n = last.value;
    let threads = match s.active {
        0 | 1 => "its only busy thread".to_string(),
        k => format!("the busiest of its {k} busy threads"),
    };
    Some(Finding { score_interval: None,
        kind: FindingKind::SerialFraction,
        scope: Some(Scope::User),
        subject: subject(&s.process),
        score: 0.0,
        evidence: format!(
            "with {n} in flight one thread of {} was on a CPU {:.0}% of the sampled time ({threads}, for \
             {n} units of work): every operation passes through it, so the others queue \
             behind it; scored by what the named waits and costs leave",
            s.process,
            s.busy * 100.0,
        ),
        suggestion: format!(
            "give {} more threads for its work (a client's --threads or -j, a server's worker \
             or I/O threads), or make its work per operation cheaper{crowded}",
            s.process
        ),
        details: FindingDetails::Serial(SerialDetails {
            threads: n,
            single_thread_share: s.busy,
            bins: profile.serial.bins,
            bin_ms: profile.serial.bin_ms,
        }),
        what_if: None,
        experiment: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::ThreadLoad;

    fn serial(threads: &[(&str, u64)]) -> SerialStats {
        SerialStats {
            threads: threads
                .iter()
                .map(|&(process, samples)| ThreadLoad {
                    process: process.into(),
                    samples,
                    span_ns: 1_000_000_000,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn one_busy_thread_for_many_units_is_a_stage() {
        // redis-benchmark: one thread at 93% for 8 connections; the server at 70%.
        let s = serial(&[("redis-benchmark", 930), ("redis-server", 700)]);
        let stage = stage_at(8, &s, 1000).expect("a stage");
        assert_eq!(stage.process, "redis-benchmark");
        assert!((stage.busy - 0.93).abs() < 1e-9);
        assert_eq!(stage.active, 1);
        // One unit has nothing to queue behind it.
        assert_eq!(stage_at(1, &s, 1000), None);
    }

    #[test]
    fn a_thread_per_unit_is_not_a_stage() {
        // Two workers each on a CPU all the time at 2 threads: parallel, not a stage.
        let s = serial(&[("worker", 990), ("worker", 980)]);
        assert_eq!(stage_at(2, &s, 1000), None);
        // A thread that is mostly off CPU is not one either.
        let s = serial(&[("client", 400)]);
        assert_eq!(stage_at(4, &s, 1000), None);
        // But two busy threads for 8 units are.
        let s = serial(&[("server", 900), ("server", 850), ("server", 10)]);
        assert_eq!(stage_at(8, &s, 1000).map(|s| s.active), Some(2));
    }

    #[test]
    fn the_series_share_is_the_others_loss() {
        let point = |value| Point {
            outliers: Vec::new(),
            other_mode: Vec::new(),
            perturbation_interval: None,
            settling: None,
            interference: None,
            value,
            repeats: Vec::new(),
            traced_repeats: Vec::new(),
            perturbation: None,
            throughput: None,
            speedup: None,
            efficiency: None,
            wall_speedup: None,
            wall_s: None,
            user_s: None,
            sys_s: None,
            throughput_spread: None,
            profile: None,
            locks: None,
            budget: None,
            counters: None,
        };
        let prof = |busy: u64| PointProfile {
            frequency: 1000,
            serial: serial(&[("server", busy)]),
            ..Default::default()
        };
        let (a, b) = (prof(500), prof(800));
        let series = stage_series(&[point(1), point(4)], &[Some(&a), Some(&b)]);
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].subject, "server (one thread for all)");
        let shares = series[0].shares.as_ref().unwrap();
        assert_eq!(shares[0], None);
        assert!((shares[1].unwrap() - 0.8 * 3.0 / 4.0).abs() < 1e-9);
        let f = stage_finding(&point(4), &b, 0).expect("a finding");
        assert!(f.evidence.contains("80%"), "{}", f.evidence);
        assert!(!f.suggestion.contains("CPUs busy"), "{}", f.suggestion);
        // On one CPU that thread already fills the machine.
        let f = stage_finding(&point(4), &b, 1).expect("a finding");
        assert!(
            f.suggestion.contains("0.8 of the 1 CPUs busy"),
            "{}",
            f.suggestion
        );
    }
}
