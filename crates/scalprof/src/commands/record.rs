//! The commands that measure: `run` (a thread sweep), `complexity` (an input-size sweep),
//! `locks` (lock tables only), `suite` (the OS suite) and `import` (a perf.data file).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::ThroughputSource;
use scalprof_pipeline::facade::{parse_sweep_list, Interrupt, LockConfig, SamplingConfig};
use scalprof_pipeline::RunOptions;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::{tests_worded, worded};
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
    let outcome = crate::run::run(&store, &opts, &show, &interrupt)?;
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
    scalprof_pipeline::check(&opts).map_err(worded)?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let show = Show {
        summary: true,
        json: args.json,
    };
    let outcome = crate::run::run(&store, &opts, &show, &interrupt)?;
    Ok(exit_code_for(&outcome.doc, &interrupt))
}

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
    scalprof_pipeline::check(&opts).map_err(worded)?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let show = Show {
        summary: false,
        json: args.json,
    };
    let outcome = crate::run::run(&store, &opts, &show, &interrupt)?;
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

/// `scalprof suite`: the OS scalability suite.
pub fn suite(db: &Option<PathBuf>, args: cli::SuiteArgs) -> Result<ExitCode> {
    // A misspelt test is said before the store is created.
    scalprof_pipeline::suite::select(args.tests.as_deref()).map_err(tests_worded)?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let (json, report) = (args.json.clone(), args.report.clone());
    let doc = crate::suite::run(&store, args, &interrupt)?;
    let json_to_stdout = json.as_deref() == Some(std::path::Path::new("-"));
    if !json_to_stdout {
        outln!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::suite::table(&doc.tests))
        );
    }
    if let Some(path) = &json {
        crate::suite::write_json(path, &doc)?;
        if !json_to_stdout {
            eprintln!("scalprof: wrote {}", path.display());
        }
    }
    if let Some(path) = &report {
        crate::suite::write_report(&store, path, &doc)?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    if interrupt.requested() {
        eprintln!("scalprof: suite interrupted; the tests above are stored");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// `scalprof import`: a perf.data file as a run of one point.
pub fn import(db: &Option<PathBuf>, args: cli::ImportArgs) -> Result<ExitCode> {
    let store = open_store(db)?;
    let id = scalprof_pipeline::import::import(&store, &args.file, args.label)?;
    let run = scalprof_pipeline::LoadedRun::load(&store, id)?;
    // An imported profile has no sweep to speak of: where its time went is the point.
    out!("{}", scalprof_report::summary_with(&run.doc, false, false));
    out!("\n{}", super::inspect::top_at(&run, None, 20)?);
    eprintln!("scalprof: imported as run {id} (scalprof flame {id})");
    Ok(ExitCode::SUCCESS)
}
