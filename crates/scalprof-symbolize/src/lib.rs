//! The converter between what the collectors record and what the analysis reads.
//!
//! Everything here reads files: the workload's binaries (symbols, `.eh_frame`, DWARF),
//! `/proc/kallsyms`, and the machine code around sampled instructions. It runs while those
//! files are present — right after each repeat, or once at the end of a sweep — and its
//! output is stored, so the analysis (`scalprof-analyze`) is pure and can recompute a run
//! document from the store at any time.
//!
//! - [`profile`]: perf records → folded stacks, hot instructions, serial bins.
//! - [`locks`]: lock-tracer records → a named lock table.
//! - [`sharing`]: hot instructions → the globals their locked writes target, with layouts.

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod convert;
pub mod locks;
pub mod perf_map;
pub mod profile;
pub mod sharing;

pub use profile::{ProfileBuilder, ProfileError, Symbols};
