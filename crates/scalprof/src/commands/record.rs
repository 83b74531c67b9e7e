//! The commands that measure: `run` (a thread sweep), `complexity` (an input-size sweep),
//! `locks` (lock tables only), `suite` (the OS suite) and `import` (a perf.data file).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_collect::interrupt::Interrupt;
use scalprof_model::ThroughputSource;
use scalprof_pipeline::RunOptions;

use super::*;
use crate::cli;
use crate::run::Show;

/// `scalprof run`: a thread sweep, measured, profiled and diagnosed.
pub fn run(db: &Option<PathBuf>, args: cli::RunArgs) -> Result<ExitCode> {
    let (opts, sampling_notice) = args.options()?;
    if let Some(n) = sampling_notice {
        eprintln!("scalprof: {n}");
    }
    // Check the command before touching the store: a typo fails at once.
    scalprof_collect::resolve_program(
        &scalprof_collect::sweep::substitute(&opts.command, opts.parameter.as_str(), 1)[0],
    )?;
    if !opts.attach.is_empty() {
        // So does a server that is not running.
        let found = opts.attach.resolve()?;
        if opts.diagnose == 0 || (opts.sampling.is_none() && opts.locks.is_none()) {
            anyhow::bail!(
                "--attach observes processes in the traced repeats, and this run has \
                 none (--diagnose 0, or --no-profile with --no-locks)"
            );
        }
        // Refused before anything runs, rather than a run without the profiles it
        // was for.
        if opts.sampling.is_some() && !scalprof_collect::caps::may_sample_every_cpu() {
            anyhow::bail!(
                "--attach samples every CPU, which needs root (or CAP_PERFMON) or \
                 perf_event_paranoid ≤ 0 (it is {}): `sudo sysctl kernel.perf_event_paranoid=0`, \
                 or add --no-profile to trace only locks",
                scalprof_collect::caps::paranoid().map_or("unknown".into(), |p| p.to_string())
            );
        }
        if opts.locks.is_some() && !scalprof_collect::caps::may_load_bpf() {
            anyhow::bail!(
                "--attach traces the processes' locks with BPF, which needs root (or \
                 CAP_BPF and CAP_PERFMON); or add --no-locks to profile only"
            );
        }
        eprintln!(
            "scalprof: attaching to {} running process{} in the traced repeats",
            found.len(),
            if found.len() == 1 { "" } else { "es" }
        );
    }
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let show = Show {
        summary: true,
        json: args.json,
    };
    let outcome = crate::run::run(&store, &opts, &show, &interrupt)?;
    if let Some(path) = &args.report {
        crate::report::write_report(&store, outcome.id, path)?;
    }
    Ok(exit_code_for(&outcome.doc, &interrupt))
}

/// `scalprof complexity`: an input-size sweep and the functions that grow faster than it.
pub fn complexity(db: &Option<PathBuf>, args: cli::ComplexityArgs) -> Result<ExitCode> {
    let sizes = scalprof_collect::sweep::parse_values(&args.sizes)?;
    if sizes.len() < 3 {
        anyhow::bail!(
            "--sizes needs at least three sizes to fit an exponent (e.g. 5000,10000,20000,40000)"
        );
    }
    scalprof_collect::resolve_program(
        &scalprof_collect::sweep::substitute(&args.command, "size", sizes[0])[0],
    )?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let opts = RunOptions {
        values: Some(sizes),
        repeat: args.repeat,
        diagnose: args.diagnose,
        label: args.label,
        scaling: Some(ThroughputSource::Strong),
        sampling: Some(scalprof_collect::perf::SamplingConfig {
            frequency: args.freq,
            ..Default::default()
        }),
        locks: None,
        ..RunOptions::new(args.command, scalprof_model::SweepParameter::Size)
    };
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
    if !cfg!(feature = "bpf") {
        return Err(scalprof_collect::LockTracerError::NotBuilt.into());
    }
    if !scalprof_collect::caps::may_load_bpf() {
        anyhow::bail!(
            "tracing locks loads BPF programs, which needs root (or CAP_BPF and \
             CAP_PERFMON): run it with sudo"
        );
    }
    scalprof_collect::resolve_program(
        &scalprof_collect::sweep::substitute(&args.command, "threads", 1)[0],
    )?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let opts = RunOptions {
        values: Some(scalprof_collect::sweep::parse_values(&args.threads)?),
        repeat: 1,
        scaling: Some(ThroughputSource::Weak),
        keep_going: true,
        // Sampled too, so that a lock's on-CPU time (spinning, the lock code) counts as
        // it does in `run`: without it `locks -t 2` gave table_lock 6% where `run`
        // gave 79%.
        sampling: Some(Default::default()),
        locks: Some(scalprof_collect::locks::LockConfig {
            system_wide: args.system_wide,
            bpf_stats: args.bpf_stats,
        }),
        ..RunOptions::new(args.command, scalprof_model::SweepParameter::Threads)
    };
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
        return Ok(ExitCode::from(1));
    }
    Ok(exit_code_for(doc, &interrupt))
}

/// `scalprof suite`: the OS scalability suite.
pub fn suite(db: &Option<PathBuf>, args: cli::SuiteArgs) -> Result<ExitCode> {
    // A misspelt test is said before the store is created.
    crate::suite::select(args.tests.as_deref())?;
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let (json, report) = (args.json.clone(), args.report.clone());
    let doc = crate::suite::suite(&store, args, &interrupt)?;
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
    let doc = scalprof_pipeline::document(&store, id)?;
    // An imported profile has no sweep to speak of: its details are the point.
    out!(
        "{}",
        scalprof_report::terminal_safe(&scalprof_report::summary_with(&doc, false, true))
    );
    eprintln!("scalprof: imported as run {id} (scalprof flame {id})");
    Ok(ExitCode::SUCCESS)
}
