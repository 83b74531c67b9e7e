//! The tests that measure, in one test binary: the pathology corpus's diagnoses, the
//! runtimes' locks, profiles, `verify`'s experiments, the suite, everyday tools, limits and
//! the keeper. Each takes its turn ([`common::exclusive`]) so that no other test competes
//! for the CPUs while it measures scaling; the command line's tests that measure nothing
//! are in `tests/cli/`.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

#[path = "../common/mod.rs"]
mod common;

mod corpus;
mod everyday;
mod keeper;
mod limits;
mod profiles;
mod regressions;
mod runtimes;
mod suite;
mod verify;
mod watch;
