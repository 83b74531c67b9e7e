//! `scalprof locks`: the lock tables at each thread count, without the rest of a run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::ThroughputSource;
use scalprof_pipeline::facade::{parse_sweep_list, Interrupt, LockConfig};
use scalprof_pipeline::RunOptions;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::worded;
use crate::run::Show;

/// `scalprof locks`: the lock tables of a few thread counts, without the model.
pub fn locks(db: &Option<PathBuf>, args: cli::LocksArgs) -> Result<ExitCode> {
    // Lock tracing is what this command is for: without it, say so before running.
    scalprof_pipeline::check::lock_tracing().map_err(worded)?;
    let opts = RunOptions {
        values: Some(parse_sweep_list(&args.threads)?),
        repeat: 1,
        scaling: Some(ThroughputSource::Weak),
        keep_going: true,
        // Sampled too, so that a lock's on-CPU time (spinning, the lock code) counts as
        // it does in `run`: without it `locks -t 2` gave table_lock 6% where `run`
        // gave 79%.
        sampling: Some(Default::default()),
        locks: Some(LockConfig {
            system_wide: args.system_wide,
            bpf_stats: args.bpf_stats,
            hold_times: !args.no_hold_times,
            ..Default::default()
        }),
        ..RunOptions::new(args.command, scalprof_model::SweepParameter::Threads)
    };
    let checked = scalprof_pipeline::check(&opts).map_err(worded)?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let show = Show {
        summary: false,
        json: args.json,
    };
    let outcome = crate::run::record_and_show(&store, &opts, &checked, &show, &interrupt)?;
    let doc = &outcome.doc;
    let mut no_lock_data = doc.points.iter().any(|p| p.locks.is_none());
    // `--json -`: the document alone on standard output.
    let text = show.json.as_deref() != Some(std::path::Path::new("-"));
    for p in doc.points.iter().filter(|_| text) {
        match &p.locks {
            Some(l) => out!(
                "{}",
                scalprof_report::terminal_safe(&scalprof_report::lock_table(
                    doc.sweep.parameter.as_str(),
                    p.value,
                    l
                ))
            ),
            None => {
                outln!("no lock data (see the warning above)");
                no_lock_data = true;
            }
        }
    }
    let lock_findings: Vec<_> = doc
        .findings
        .iter()
        .filter(|f| f.kind == scalprof_model::FindingKind::LockContention)
        .collect();
    if text && !lock_findings.is_empty() {
        outln!("\nfindings:");
        for f in lock_findings {
            outln!(
                "{}",
                scalprof_report::terminal_safe(&format!(
                    "  {:>4.0}%  {} ({}): {}",
                    f.score * 100.0,
                    f.subject,
                    f.scope.map_or("", |s| s.as_str()),
                    f.evidence
                ))
            );
        }
    }
    eprintln!(
        "scalprof: stored as run {} (scalprof show {})",
        doc.id, doc.id
    );
    if no_lock_data && !interrupt.requested() {
        // The tracer failed to start: the command did not do what was asked.
        return Ok(ExitCode::from(2));
    }
    Ok(exit_code_for(doc, &interrupt))
}
