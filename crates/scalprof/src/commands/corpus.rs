//! `scalprof corpus`: builds the pathology corpus.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli;

/// `scalprof corpus`: builds the pathology corpus.
pub fn corpus(args: cli::CorpusArgs) -> Result<ExitCode> {
    let dir = args
        .out
        .unwrap_or_else(scalprof_pipeline::corpus::default_dir);
    for (name, path) in scalprof_pipeline::corpus::build(&dir)? {
        outln!("{name:<20} {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
