//! `scalprof run`: a thread sweep, measured and diagnosed (and its causes verified with
//! `--verify`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_pipeline::facade::Interrupt;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::worded;
use crate::run::Show;

/// `scalprof run`: a thread sweep, measured, profiled and diagnosed.
pub fn run(db: &Option<PathBuf>, args: cli::RunArgs) -> Result<ExitCode> {
    let (opts, sampling_notice) = args.options()?;
    if let Some(n) = sampling_notice {
        eprintln!("scalprof: {n}");
    }
    // Checked before touching the store: a typo, or a server that is not running, fails
    // at once.
    let checked = scalprof_pipeline::check(&opts).map_err(worded)?;
    if !checked.attached.is_empty() {
        let n = checked.attached.len();
        eprintln!(
            "scalprof: attaching to {n} running process{} in the traced repeats",
            if n == 1 { "" } else { "es" }
        );
    }
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    // With --verify the document is written once the experiments are in it.
    let show = Show {
        summary: true,
        json: args.json.clone().filter(|_| !args.verify),
    };
    let outcome = crate::run::record_and_show(&store, &opts, &show, &interrupt)?;
    if args.verify {
        verify_after(&store, &outcome, &interrupt)?;
        if let Some(path) = &args.json {
            crate::run::write_json(path, &scalprof_pipeline::document(&store, outcome.id)?)?;
        }
    }
    if let Some(path) = &args.report {
        crate::report::write_report(&store, outcome.id, path)?;
    }
    Ok(exit_code_for(&outcome.doc, &interrupt))
}
/// `run --verify`: the finished run's top findings, proved as `scalprof verify` would. An
/// interrupted or failed sweep, or one without findings, is left as it is, and said so.
fn verify_after(
    store: &scalprof_store::Store,
    outcome: &scalprof_pipeline::RunOutcome,
    interrupt: &Interrupt,
) -> Result<()> {
    let id = outcome.id;
    if interrupt.requested() || outcome.doc.status != scalprof_model::RunStatus::Complete {
        eprintln!("scalprof: verify: skipped, the sweep did not complete");
        return Ok(());
    }
    if outcome.doc.findings.is_empty() {
        eprintln!(
            "scalprof: verify: no finding to prove (scalprof verify {id} --cause NAME tries one)"
        );
        return Ok(());
    }
    let opts = scalprof_pipeline::verify::VerifyOptions {
        causes: Vec::new(),
        point: None,
        rounds: 6,
        // The command this process just ran, not what the store now says.
        command: Some(outcome.doc.command.clone()),
    };
    super::verify::print_experiments(store, id, &opts, interrupt, false)
}
