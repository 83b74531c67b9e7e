//! The lock tracer's own cost over one execution: its BPF programs' run time where the
//! kernel timed them, and the Go runtime probes' bursts, hits and the cost of one.

use serde::{Deserialize, Serialize};

/// The BPF tracer's own run time, measured by the kernel (`BPF_ENABLE_STATS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TracerCost {
    /// Time spent in scalprof's BPF programs, over all CPUs.
    pub bpf_run_ns: u64,
    /// How many times they ran.
    pub bpf_runs: u64,
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
}
