//! `scalprof import`: a perf.data recorded elsewhere, as a one-point run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::open_store;
use crate::cli;

/// `scalprof import`: a perf.data file as a run of one point.
pub fn import(db: &Option<PathBuf>, args: cli::ImportArgs) -> Result<ExitCode> {
    let store = open_store(db)?;
    let id = scalprof_pipeline::import::import(&store, &args.file, args.label)?;
    let run = scalprof_pipeline::LoadedRun::load(&store, id)?;
    // An imported profile has no sweep to speak of: where its time went is the point.
    out!("{}", scalprof_report::summary_with(&run.doc, false, false));
    out!("\n{}", super::show::top_at(&run, None, 20)?);
    eprintln!("scalprof: imported as run {id} (scalprof flame {id})");
    Ok(ExitCode::SUCCESS)
}
