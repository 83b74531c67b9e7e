//! One execution of the workload, as the sweep's steps and its hooks both name it.

use super::RepeatKind;

/// One execution of the workload: which point, what for, its index in the point's index
/// space (`of`: its number within its kind, for progress).
pub(super) struct Step {
    pub(super) value: u64,
    pub(super) kind: RepeatKind,
    pub(super) index: u32,
    pub(super) of: u32,
}
