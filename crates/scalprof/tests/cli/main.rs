//! The command line end to end, in one test binary (as ripgrep keeps its integration
//! tests): short shell scripts run and recorded for real, the habits a user of perf and
//! hyperfine expects, and the 16-CPU recordings re-analysed. Nothing here measures a
//! program's timing, so these tests may run side by side; the measuring tests keep their
//! own binaries (`corpus.rs`, `everyday.rs`, `keeper.rs`, …), whose tests take turns.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

#[path = "../common/mod.rs"]
mod common;

mod end_to_end;
mod habits;
mod many_core;
