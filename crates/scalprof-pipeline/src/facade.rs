//! The names of the layers below that the binary uses, and the short flows it asks for
//! that are no sweep: the pipeline is the binary's only door (ripgrep's `grep` facade
//! re-exports its crates the same way). Each name is listed; nothing is re-exported whole.

use std::path::Path;

use scalprof_model::layout::{LaidOutLine, Layout};

/// Two runs compared point by point, the CI gate on the comparison, and its words.
pub use scalprof_analyze::compare::{compare as compare_runs, gate, ratio_words, slower_points};
pub use scalprof_analyze::history::history;
/// A profile's functions by self time, and those whose self cost per operation changed
/// between two profiles: the report's function table and its differential flame graph.
pub use scalprof_analyze::top::{changed_functions, top_functions};
/// The USL fitted to a two-column CSV (`scalprof fit`).
pub use scalprof_analyze::{parse_two_column_csv, usl::fit as fit_usl};
/// The machine: its online CPUs (the default sweep's top).
pub use scalprof_collect::host::online_cpus;
/// The signal flag every sweep polls: Ctrl-C stops it between repeats.
pub use scalprof_collect::interrupt::Interrupt;
/// The helper process that empties the workload's cgroup if scalprof dies.
pub use scalprof_collect::keeper;
/// The output-file guard: files the user named are written without following another
/// user's link, and such a path is refused when parsed.
pub use scalprof_collect::private::{append_user_file, foreign_output, write_user_file};
/// A sweep list (`1,2,4`, `1-8`), parsed as every command that takes one parses it.
pub use scalprof_collect::sweep::parse_values as parse_sweep_list;
/// What one execution is for, what a sweep says as it goes, and how it ended: what an
/// [`crate::Observer`] is told.
pub use scalprof_collect::sweep::{RepeatKind, SweepEnd, SweepEvent};
// What a watch window reports (`scalprof watch`).
pub use scalprof_collect::watch::WindowDone;
/// How a sweep is sampled, traced and attached: parts of [`crate::RunOptions`].
pub use scalprof_collect::{attach::AttachSpec, locks::LockConfig, perf::SamplingConfig};
/// The parser children's entry point and switch, and the kernel's symbols and structs.
pub use scalprof_debuginfo::{
    cache_line_size, child, kernel_layout::kernel_struct, sandbox, Kallsyms,
};

/// A binary's data layout, read from its debug information in a parser child, and its
/// cache lines laid out and judged for `line`-byte lines (`scalprof layout`).
pub fn lay_out_binary(
    path: &Path,
    line: u64,
) -> Result<(Layout, Vec<LaidOutLine>), scalprof_debuginfo::DebugInfoError> {
    let layout = scalprof_debuginfo::layout::read_layout(path)?;
    let lines = scalprof_analyze::layout::lay_out(&layout, line);
    Ok((layout, lines))
}
