//! `scalprof report`: a stored run as a self-contained HTML page.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::open_store_read_only;
use crate::cli;

/// `scalprof report`: a run's HTML report.
pub fn report(db: &Option<PathBuf>, args: cli::ReportArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    let id = store.resolve(&args.run)?;
    let out = args
        .output
        .unwrap_or_else(|| std::path::PathBuf::from(format!("scalprof-report-{id}.html")));
    crate::report::write_report(&store, id, &out)?;
    Ok(ExitCode::SUCCESS)
}
