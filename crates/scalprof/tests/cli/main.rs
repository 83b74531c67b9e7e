//! The command line end to end, in one test binary (as ripgrep keeps its integration
//! tests): short shell scripts run and recorded for real, the habits a user of perf and
//! hyperfine expects, the 16-CPU recordings re-analysed, perf.data imports, the team
//! store on PostgreSQL, the sandbox, and the attacks on it (another local
//! user, a teammate with write access to the store, scalprof stopped part-way). Nothing
//! here measures a program's timing, so these tests may run side by side; the measuring
//! tests are in `tests/measured/`, where they take turns.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod end_to_end;
mod habits;
mod hardening;
mod import;
mod many_core;
mod postgres_store;
mod sandbox;
mod watch;
