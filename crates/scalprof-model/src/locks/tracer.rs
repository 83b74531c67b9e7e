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
    /// How long the kernel-lock contention programs were attached, where they went off
    /// between bursts (their runs at every spinlock contention on the machine cost more
    /// than 1% of the CPUs, and no traced task contended for a sleeping lock in the burst
    /// before). Zero where they were on throughout. Their rows are as seen.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub klock_probed_ns: u64,
    /// The time from their attach to the end of the execution, where they went off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub klock_span_ns: u64,
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
        // A repeat on throughout adds its whole span to both.
        let (probed, span) = match (o.klock_probed_ns, o.klock_span_ns) {
            (0, 0) => (o.bpf_span_ns, o.bpf_span_ns),
            other => other,
        };
        if self.klock_span_ns > 0 || o.klock_span_ns > 0 {
            if self.klock_span_ns == 0 {
                // This one was on throughout until now.
                self.klock_probed_ns = self.bpf_span_ns - o.bpf_span_ns;
                self.klock_span_ns = self.bpf_span_ns - o.bpf_span_ns;
            }
            self.klock_probed_ns += probed;
            self.klock_span_ns += span;
        }
    }

    /// Sets a family's runs to an exact count (the programs' own), its time to that many
    /// runs at what a run cost in the timed windows (`default_ns` where none ran in them):
    /// for programs on and off in bursts, which windows of timing scaled to the span
    /// would count as if on throughout.
    pub fn with_exact_runs(&mut self, family: ProbeFamily, runs: u64, default_ns: f64) {
        if self.bpf_span_ns == 0 || runs == 0 {
            return;
        }
        let per_run = self
            .bpf_families
            .iter()
            .find(|f| f.family == family)
            .filter(|f| f.runs > 0)
            .map_or(default_ns, |f| f.run_ns as f64 / f.runs as f64);
        let run_ns = (runs as f64 * per_run).round() as u64;
        match self.bpf_families.iter_mut().find(|f| f.family == family) {
            Some(f) => {
                f.runs = runs;
                f.run_ns = run_ns;
            }
            None => self.bpf_families.push(FamilyCost {
                family,
                run_ns,
                runs,
            }),
        }
        self.bpf_families.sort_by_key(|f| f.family);
        self.bpf_run_ns = self.bpf_families.iter().map(|f| f.run_ns).sum();
        self.bpf_runs = self.bpf_families.iter().map(|f| f.runs).sum();
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
    fn kernel_lock_programs_in_bursts_count_their_own_runs_and_add_up_over_repeats() {
        let family = |family, run_ns, runs| FamilyCost {
            family,
            run_ns,
            runs,
        };
        // The windows timed 10 runs at 60 ns each and scaled them to 200; the programs
        // were on a sixth of the time and counted their 40 runs themselves.
        let mut cost = TracerCost {
            bpf_run_ns: 12_000 + 5_000,
            bpf_runs: 200 + 50,
            bpf_families: vec![
                family(ProbeFamily::Scheduler, 5_000, 50),
                family(ProbeFamily::KernelLocks, 12_000, 200),
            ],
            bpf_span_ns: 600,
            ..TracerCost::default()
        };
        cost.with_exact_runs(ProbeFamily::KernelLocks, 40, 100.0);
        assert_eq!(
            cost.bpf_families[1],
            family(ProbeFamily::KernelLocks, 2_400, 40)
        );
        assert_eq!((cost.bpf_run_ns, cost.bpf_runs), (7_400, 90));
        // None in the windows: at the assumed cost of a run.
        let mut unseen = TracerCost {
            bpf_span_ns: 600,
            ..TracerCost::default()
        };
        unseen.with_exact_runs(ProbeFamily::KernelLocks, 30, 100.0);
        assert_eq!(unseen.bpf_run_ns, 3_000);
        // Not timed at all (refused): left alone.
        let mut refused = TracerCost::default();
        refused.with_exact_runs(ProbeFamily::KernelLocks, 30, 100.0);
        assert_eq!(refused, TracerCost::default());

        // A repeat on throughout (600 ns), then one on for 100 of its 400: 700 of 1000.
        let mut sum = TracerCost::default();
        sum.add(&TracerCost {
            bpf_span_ns: 600,
            ..TracerCost::default()
        });
        assert_eq!((sum.klock_probed_ns, sum.klock_span_ns), (0, 0));
        sum.add(&TracerCost {
            bpf_span_ns: 400,
            klock_probed_ns: 100,
            klock_span_ns: 400,
            ..TracerCost::default()
        });
        assert_eq!((sum.klock_probed_ns, sum.klock_span_ns), (700, 1000));
        sum.add(&TracerCost {
            bpf_span_ns: 500,
            ..TracerCost::default()
        });
        assert_eq!((sum.klock_probed_ns, sum.klock_span_ns), (1200, 1500));
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
