//! The symbolizer's integration tests, one binary: perf.data import cases and the
//! parallel profile builder on a live recording.

// Tests build, run and open what they made themselves (clippy.toml's checks are for the
// product).
#![allow(clippy::disallowed_methods)]

mod import_cases;
mod parallel_live;
