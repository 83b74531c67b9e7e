//! `scalprof export`: a point's profile for other tools (pprof, speedscope, folded).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::open_store_read_only;
use crate::cli;

/// `scalprof export`: a point's profile for other tools.
pub fn export(db: &Option<PathBuf>, args: cli::ExportArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    crate::export::export(&store, args)?;
    Ok(ExitCode::SUCCESS)
}
