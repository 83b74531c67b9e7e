//! `scalprof complexity`: an input-size sweep and the functions that grow faster than it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::ThroughputSource;
use scalprof_pipeline::facade::{parse_sweep_list, Interrupt, SamplingConfig};
use scalprof_pipeline::RunOptions;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::worded;
use crate::run::Show;

/// `scalprof complexity`: an input-size sweep and the functions that grow faster than it.
pub fn complexity(db: &Option<PathBuf>, args: cli::ComplexityArgs) -> Result<ExitCode> {
    let opts = RunOptions {
        values: Some(parse_sweep_list(&args.sizes)?),
        repeat: args.repeat,
        diagnose: args.diagnose,
        label: args.label,
        scaling: Some(ThroughputSource::Strong),
        sampling: Some(SamplingConfig {
            frequency: args.freq,
            ..Default::default()
        }),
        locks: None,
        ..RunOptions::new(args.command, scalprof_model::SweepParameter::Size)
    };
    let checked = scalprof_pipeline::check(&opts).map_err(worded)?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let show = Show {
        summary: true,
        json: args.json,
    };
    let outcome = crate::run::record_and_show(&store, &opts, &checked, &show, &interrupt)?;
    Ok(exit_code_for(&outcome.doc, &interrupt))
}
