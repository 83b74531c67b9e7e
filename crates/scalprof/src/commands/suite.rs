//! `scalprof suite`: the kernel measured with the OS microbenchmarks.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_pipeline::facade::Interrupt;

use super::open_store;
use crate::cli;
use crate::refusal::tests_worded;

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
