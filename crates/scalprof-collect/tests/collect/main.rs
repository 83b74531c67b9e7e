//! The collector's integration tests, one binary (each file a module): the lock tracer,
//! the hold timer, the delay probes and perf.data import cases.

// Tests build, run and open what they made themselves (clippy.toml's checks are for the
// product).
#![allow(clippy::disallowed_methods)]

mod common;
mod delay;
mod holds;
mod import_cases;
mod lock_tracer;
