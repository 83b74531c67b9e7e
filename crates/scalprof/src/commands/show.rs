//! `scalprof show`: a stored run, re-analysed by this build: its summary or its document.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::open_store_read_only;
use crate::cli;
use crate::out;

/// `scalprof show`: a stored run's summary or document; `--top` its functions at a point.
pub fn show(db: &Option<PathBuf>, args: cli::ShowArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    let id = store.resolve(&args.run)?;
    let run = scalprof_pipeline::LoadedRun::load_predicting(&store, id, args.predict)?;
    if args.json {
        out::data(&(serde_json::to_string_pretty(&run.doc)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(n) = args.top {
        let doc = &run.doc;
        outln!(
            "run {} · {} · {}",
            doc.id,
            doc.label,
            scalprof_report::shell_line(&doc.command)
        );
        out!("{}", top_at(&run, args.point, n)?);
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{}",
        scalprof_report::summary_with(&run.doc, args.locks, args.verbose)
    );
    if args.verbose && !run.inputs.profiles.is_empty() {
        out!("\n{}", top_at(&run, None, 10)?);
    }
    Ok(ExitCode::SUCCESS)
}
/// The top-functions table of `point` (default: the largest profiled one).
pub(super) fn top_at(
    run: &scalprof_pipeline::LoadedRun,
    point: Option<u64>,
    n: usize,
) -> Result<String> {
    let profiled: Vec<u64> = run.inputs.profiles.iter().map(|(v, _)| *v).collect();
    let Some(value) = point.or(profiled.last().copied()) else {
        anyhow::bail!(
            "run {} has no profiles (recorded with --no-profile or --diagnose 0): nothing to list",
            run.doc.id
        );
    };
    let Some(profile) = run.profile(value) else {
        anyhow::bail!(super::Usage(format!(
            "run {} has no profile at {} {}; profiled: {}",
            run.doc.id,
            run.doc.sweep.parameter,
            value,
            profiled
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let top = scalprof_pipeline::facade::top_functions(profile, n);
    let counts_ops = run.doc.throughput.source == scalprof_model::ThroughputSource::Ops;
    Ok(scalprof_report::top_table(
        run.doc.sweep.parameter.as_str(),
        value,
        &top,
        counts_ops.then(|| run.work(value)),
    ))
}
