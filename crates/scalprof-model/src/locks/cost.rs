//! What a lock row costs per operation: the one definition, used by the budget, `compare`
//! and the report.

use super::LockRow;

impl LockRow {
    /// The row's wait plus its on-CPU time (spinning, the lock code) per operation: its
    /// wait per operation, and the on-CPU time at the same rate. The one definition of a
    /// lock row's cost per operation, with [`Self::cost_per_op_over`] for its parts on
    /// their own clocks. `None` without a wait per operation.
    pub fn cost_per_op(&self) -> Option<f64> {
        let wait = self.wait_ns_per_op?;
        Some(match self.spin_ns {
            Some(s) if self.total_wait_ns > 0 => wait + s as f64 * wait / self.total_wait_ns as f64,
            _ => wait,
        })
    }

    /// The row's cost per operation over `work` operations with each part on its own clock:
    /// the waits scaled by `wait_scale`, the on-CPU time by `cpu_scale` (a budget converts
    /// traced time to the clean repeats' this way).
    pub fn cost_per_op_over(&self, work: f64, wait_scale: f64, cpu_scale: f64) -> f64 {
        self.total_wait_ns as f64 / work * wait_scale
            + self.spin_ns.unwrap_or(0) as f64 * cpu_scale / work
    }
}
