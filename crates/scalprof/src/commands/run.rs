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
    if let Some(skipped) = &checked.attach_skipped {
        eprintln!("scalprof: {}", scalprof_report::terminal_safe(skipped));
    }
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    // With --verify the document is written once the experiments are in it.
    let show = Show {
        summary: true,
        json: args.json.clone().filter(|_| !args.verify),
    };
    let outcome = crate::run::record_and_show(&store, &opts, &checked, &show, &interrupt)?;
    // What follows reads the run this process recorded, never the store's rows, which a
    // teammate sharing the store may have rewritten meanwhile (`recording.rs`).
    let mut inputs = outcome.recording.inputs();
    inputs.predict_to = opts.predict;
    if args.verify {
        inputs.experiments = verify_after(&store, &outcome, &interrupt)?;
    }
    let run = scalprof_pipeline::LoadedRun::of(inputs);
    if args.verify {
        if let Some(path) = &args.json {
            crate::run::write_json(path, &run.doc)?;
        }
    }
    if let Some(path) = &args.report {
        crate::report::write_report_of(&run, path)?;
    }
    Ok(exit_code_for(&outcome.doc, &interrupt))
}
/// `run --verify`: the finished run's top findings, proved as `scalprof verify` would. An
/// interrupted or failed sweep, or one without findings, is left as it is, and said so.
fn verify_after(
    store: &scalprof_store::Store,
    outcome: &scalprof_pipeline::RunOutcome,
    interrupt: &Interrupt,
) -> Result<Vec<scalprof_model::experiment::Experiment>> {
    let id = outcome.id;
    if interrupt.requested() || outcome.doc.status != scalprof_model::RunStatus::Complete {
        eprintln!("scalprof: verify: skipped, the sweep did not complete");
        return Ok(Vec::new());
    }
    if outcome.doc.findings.is_empty() {
        eprintln!(
            "scalprof: verify: no finding to prove (scalprof verify {id} --cause NAME tries one)"
        );
        return Ok(Vec::new());
    }
    let opts = scalprof_pipeline::verify::VerifyOptions {
        causes: Vec::new(),
        point: None,
        rounds: 6,
        command: None,
    };
    let done = scalprof_pipeline::verify::verify_recorded(
        store,
        &outcome.recording,
        &opts,
        interrupt,
        &mut super::verify::progress,
    )?;
    super::verify::print(id, &done, outcome.doc.sweep.parameter, false)?;
    Ok(done)
}
