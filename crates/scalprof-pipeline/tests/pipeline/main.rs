//! The pipeline's integration tests, one binary (each file a module): the collectors
//! through a sweep, perf.data import against golden documents, the prediction and the
//! settling of the 16-CPU recordings.

// Tests build, run and open what they made themselves (clippy.toml's checks are for the
// product).
#![allow(clippy::disallowed_methods)]

mod collectors;
mod golden_import;
mod predict;
mod settling;
