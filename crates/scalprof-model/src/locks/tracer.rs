//! The lock tracer's own cost over one execution: its BPF programs' run time as the
//! kernel timed it, by the events they hook, and the Go runtime probes' bursts, hits and
//! the cost of one.

use serde::{Deserialize, Serialize};

/// The events a group of the tracer's BPF programs run on: what each costs grows with a
/// different thing the program does (switching threads, contending for kernel locks,
/// mapping memory, handing off goroutines).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeFamily {
    /// Context switches, wakeups, forks and execs (the scheduler's tracepoints).
    Scheduler,
    /// The kernel's lock contention tracepoints.
    KernelLocks,
    /// The mmap_lock tracepoints (timing the traced processes' holds).
    MmapLock,
    /// The Go runtime's uprobes (the programs only; their traps are `go_hits`).
    GoRuntime,
}

impl ProbeFamily {
    /// What the tracing line calls it.
    pub fn label(self) -> &'static str {
        match self {
            ProbeFamily::Scheduler => "scheduler events",
            ProbeFamily::KernelLocks => "kernel lock events",
            ProbeFamily::MmapLock => "mmap_lock events",
            ProbeFamily::GoRuntime => "Go probes' programs",
        }
    }
}

/// One family's BPF programs over an execution: their run time and runs, as the kernel
/// timed them in windows and scaled to the whole execution (`TracerCost::bpf_timed_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FamilyCost {
    pub family: ProbeFamily,
    pub run_ns: u64,
    pub runs: u64,
}

/// The BPF tracer's own run time, measured by the kernel (`BPF_ENABLE_STATS`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TracerCost {
    /// Time spent in scalprof's BPF programs, over all CPUs: the sum of `bpf_families`
    /// (scaled from the timed windows), or exact with `--bpf-stats`.
    pub bpf_run_ns: u64,
    /// How many times they ran.
    pub bpf_runs: u64,
    /// By family, where the kernel timed them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bpf_families: Vec<FamilyCost>,
    /// How long the kernel timed the programs: timing adds two clock reads to every run,
    /// so it is on in short windows (all along with `--bpf-stats`), and the families'
    /// figures are the windows' scaled by `bpf_span_ns / bpf_timed_ns`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bpf_timed_ns: u64,
    /// The time from the programs' attach to the end of the execution.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bpf_span_ns: u64,
    /// How long the Go runtime's probes were attached: they run in bursts where their
    /// hits cost the program more than 1% of the CPUs, and the goroutines' waits seen in
    /// the bursts are scaled to `go_span_ns`. Zero where no Go program was probed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub go_probed_ns: u64,
    /// The time from the first Go probes' attach to the end of the execution.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub go_span_ns: u64,
    /// The Go probes' hits in the traced processes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub go_hits: u64,
    /// What one hit costs the goroutine it traps, measured on this machine (once a boot):
    /// `go_hits × go_hit_ns` is the probes' share of the slowdown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub go_hit_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl TracerCost {
    /// Adds a later repeat's cost.
    pub fn add(&mut self, o: &TracerCost) {
        self.bpf_run_ns += o.bpf_run_ns;
        self.bpf_runs += o.bpf_runs;
        for f in &o.bpf_families {
            match self.bpf_families.iter_mut().find(|m| m.family == f.family) {
                Some(m) => {
                    m.run_ns += f.run_ns;
                    m.runs += f.runs;
                }
                None => self.bpf_families.push(*f),
            }
        }
        self.bpf_families.sort_by_key(|f| f.family);
        self.bpf_timed_ns += o.bpf_timed_ns;
        self.bpf_span_ns += o.bpf_span_ns;
        self.go_probed_ns += o.go_probed_ns;
        self.go_span_ns += o.go_span_ns;
        self.go_hits += o.go_hits;
        self.go_hit_ns = self.go_hit_ns.max(o.go_hit_ns);
    }

    /// The factor that makes the goroutines' waits seen while the Go probes were on stand
    /// for the whole span: 1 where they were on throughout (or nothing was probed).
    pub fn go_scale(&self) -> f64 {
        if self.go_probed_ns == 0 || self.go_probed_ns >= self.go_span_ns {
            1.0
        } else {
            self.go_span_ns as f64 / self.go_probed_ns as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_waits_seen_in_bursts_scale_to_the_span_and_older_documents_read_as_probed_throughout() {
        let cost = |probed, span| TracerCost {
            go_probed_ns: probed,
            go_span_ns: span,
            ..TracerCost::default()
        };
        assert!((cost(40, 2000).go_scale() - 50.0).abs() < 1e-12);
        assert_eq!(cost(2000, 2000).go_scale(), 1.0);
        assert_eq!(cost(0, 0).go_scale(), 1.0);
        let old: TracerCost = serde_json::from_str(r#"{"bpf_run_ns": 5, "bpf_runs": 1}"#).unwrap();
        assert_eq!(old.go_scale(), 1.0);
        // Not written where nothing was probed: older readers see the same document.
        let written = serde_json::to_value(old).unwrap();
        assert_eq!(written, serde_json::json!({"bpf_run_ns": 5, "bpf_runs": 1}));
    }

    #[test]
    fn repeats_add_up_by_family() {
        let family = |family, run_ns, runs| FamilyCost {
            family,
            run_ns,
            runs,
        };
        let mut first = TracerCost {
            bpf_run_ns: 10,
            bpf_runs: 2,
            bpf_families: vec![family(ProbeFamily::Scheduler, 10, 2)],
            bpf_timed_ns: 50,
            bpf_span_ns: 500,
            go_hit_ns: 900,
            ..TracerCost::default()
        };
        first.add(&TracerCost {
            bpf_run_ns: 7,
            bpf_runs: 3,
            bpf_families: vec![
                family(ProbeFamily::KernelLocks, 4, 1),
                family(ProbeFamily::Scheduler, 3, 2),
            ],
            bpf_timed_ns: 50,
            bpf_span_ns: 700,
            go_hit_ns: 1000,
            ..TracerCost::default()
        });
        assert_eq!((first.bpf_run_ns, first.bpf_runs), (17, 5));
        assert_eq!(
            first.bpf_families,
            vec![
                family(ProbeFamily::Scheduler, 13, 4),
                family(ProbeFamily::KernelLocks, 4, 1)
            ]
        );
        assert_eq!((first.bpf_timed_ns, first.bpf_span_ns), (100, 1200));
        // The cost of one hit is the host's, not a sum.
        assert_eq!(first.go_hit_ns, 1000);
        let written = serde_json::to_value(first.bpf_families[1]).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"family": "kernel_locks", "run_ns": 4, "runs": 1})
        );
    }
}
