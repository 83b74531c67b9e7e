//! Lock tables as data: the naming vocabulary, merging repeats, the on-CPU side of
//! locks, and the lock findings.
//!
//! - Naming rules the converter (`scalprof_symbolize::locks`) applies to each repeat's
//!   records: a dynamic kernel lock gets the conventional name its callers identify
//!   (`mmap_lock`, `runqueue lock`, `futex hash bucket`, `siglock`), else `TYPE@caller`;
//!   a user futex wait is a mutex, condvar, join… by the libc frames on its stack.
//! - Spin paths and the futex system call's on-CPU time, found in the profile, are added
//!   to the rows they belong to (`attribute_spin`, `attribute_futex_cpu`).
//! - Kernel contention on the futex hash-bucket lock is attributed to the user locks.
//!
//! One job per file: [`vocabulary`] (names), [`attribute`] (on-CPU time), [`merge`]
//! (repeats, sides, arrays) and [`findings`].

mod attribute;
mod findings;
mod merge;
#[cfg(test)]
mod tests;
mod vocabulary;

pub use attribute::*;
pub use findings::*;
pub use merge::*;
pub use vocabulary::*;

/// Callers kept per lock.
const TOP_CALLERS: usize = 3;
/// A lock whose wait growth explains at least this share of the lost time is a finding…
pub const LOCK_MIN_SCORE: f64 = 0.05;
/// …if it was waited for at least this often at the last point: one long wait is an event
/// (a join, a startup barrier), not contention.
pub const LOCK_MIN_WAITS: u64 = 10;
