//! Lock tables as data: merging repeats, the on-CPU side of locks, and the lock findings.
//! The naming vocabulary both the converter and this analysis read is
//! `scalprof_model::vocabulary`.
//!
//! - Spin paths and the futex system call's on-CPU time, found in the profile, are added
//!   to the rows they belong to (`attribute_spin`, `attribute_futex_cpu`).
//! - Kernel contention on the futex hash-bucket lock is attributed to the user locks.
//!
//! One job per file: [`attribute`] (on-CPU time), [`merge`] (repeats, sides, arrays),
//! [`off_path`] (waits of threads that do no work) and [`findings`].

mod attribute;
mod findings;
mod merge;
mod off_path;
#[cfg(test)]
mod tests;

pub use attribute::{
    attribute_futex_cpu, attribute_spin, attribute_syscall_cpu, futex_share, takes_futex_cpu,
};
pub(crate) use findings::budget_detail;
pub use findings::lock_findings;
pub use merge::{group_objects, merge};
pub use off_path::{mark_off_path, OFF_PATH};

use scalprof_model::locks::LockProfile;
use scalprof_model::Point;

/// One point of the sweep as the lock findings read it: a point that has a lock table.
#[derive(Clone, Copy, Debug)]
pub struct LockPoint<'a> {
    /// The point: its parameter value and clean throughput.
    pub point: &'a Point,
    /// The point's work (operations, or the input size), which the waits are divided by.
    pub work: f64,
    /// The point's lock table, its repeats merged.
    pub locks: &'a LockProfile,
}

/// A lock whose wait growth explains at least this share of the lost time is a finding…
pub const LOCK_MIN_SCORE: f64 = 0.05;
/// …if it was waited for at least this often at the last point: one long wait is an event
/// (a join, a startup barrier), not contention.
pub const LOCK_MIN_WAITS: u64 = 10;
