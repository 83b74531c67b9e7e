//! `scalprof demo`: the built-in example.

use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::{RunStatus, ThroughputSource};
use scalprof_pipeline::facade::Interrupt;
use scalprof_pipeline::RunOptions;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::run::Show;

/// Builds the corpus and sweeps the false-sharing pair, then sets their efficiencies
/// side by side.
pub fn demo(db: &Option<std::path::PathBuf>, args: cli::DemoArgs) -> Result<ExitCode> {
    let dir = scalprof_pipeline::corpus::default_dir();
    eprintln!(
        "scalprof: building the pathology corpus in {}",
        dir.display()
    );
    let programs = scalprof_pipeline::corpus::build(&dir)?;
    let path_of = |name: &str| {
        programs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.display().to_string())
            .expect("corpus program")
    };
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let values = args
        .threads
        .as_deref()
        .map(scalprof_pipeline::facade::parse_sweep_list)
        .transpose()?;
    let mut docs = Vec::new();
    for name in ["counters_packed", "counters_padded"] {
        outln!("\n=== {name}: {} ===", describe(name));
        let opts = RunOptions {
            values: values.clone(),
            repeat: args.repeat,
            label: Some(format!("demo-{name}")),
            scaling: Some(ThroughputSource::Weak),
            timeout: Some(std::time::Duration::from_secs(120)),
            ..RunOptions::new(
                vec![path_of(name), "{threads}".into()],
                scalprof_model::SweepParameter::Threads,
            )
        };
        let show = Show {
            summary: true,
            json: None,
        };
        let checked = scalprof_pipeline::check(&opts).map_err(crate::refusal::worded)?;
        let outcome = crate::run::record_and_show(&store, &opts, &checked, &show, &interrupt)?;
        if outcome.doc.status != RunStatus::Complete {
            return Ok(exit_code_for(&outcome.doc, &interrupt));
        }
        docs.push((name, outcome.doc));
    }
    outln!("\n=== packed vs padded ===");
    for (name, doc) in &docs {
        let last = doc.points.iter().rev().find(|p| p.efficiency.is_some());
        if let Some(p) = last {
            outln!(
                "{name:<16} efficiency at {} threads: {:>4.0}%   (run {}, scalprof show {})",
                p.value,
                p.efficiency.unwrap_or(0.0) * 100.0,
                doc.id,
                doc.id
            );
        }
    }
    outln!(
        "The counters are the same work; only their layout differs. Packed in one cache line, \
         every atomic add by one thread invalidates the line in the other CPU's cache."
    );
    Ok(ExitCode::SUCCESS)
}

fn describe(name: &str) -> &'static str {
    match name {
        "counters_packed" => "per-thread atomic counters packed in one struct (FreeBSD vmmeter)",
        "counters_padded" => "the same counters, each on its own cache line (the fix)",
        _ => "",
    }
}
