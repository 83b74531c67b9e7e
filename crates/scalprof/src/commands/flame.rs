//! `scalprof flame`: a point's flame graph, its folded stacks, or a difference of two.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::open_store_read_only;
use crate::cli;

/// `scalprof flame`: a flame graph, folded stacks or a differential flame graph.
pub fn flame(db: &Option<PathBuf>, args: cli::FlameArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    crate::flame::flame(&store, args)?;
    Ok(ExitCode::SUCCESS)
}
