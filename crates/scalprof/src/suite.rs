//! `scalprof suite` in the terminal: the pipeline runs the tests ([`scalprof_pipeline::suite`]);
//! this draws each test's sweep as `run` does, says as each test starts and ends, and writes
//! the suite's document and page.

use std::path::Path;

use anyhow::Result;
use scalprof_model::suite::{SuiteDocument, TestResult};
use scalprof_model::RunDocument;
use scalprof_pipeline::facade::{parse_sweep_list, Interrupt};
use scalprof_pipeline::suite::{SuiteObserver, SuiteOptions, Test};
use scalprof_pipeline::{RunOptions, RunOutcome};
use scalprof_store::Store;

use crate::cli::SuiteArgs;
use crate::run::{self, Show};

/// Runs the suite the flags ask for into `store`.
pub fn run(store: &Store, args: SuiteArgs, interrupt: &Interrupt) -> Result<SuiteDocument> {
    let opts = SuiteOptions {
        tests: args.tests,
        values: args.threads.as_deref().map(parse_sweep_list).transpose()?,
        seconds: args.seconds,
        repeat: args.repeat,
        quick: args.quick,
        timeout: args.timeout,
    };
    let mut terminal = Terminal { store, interrupt };
    scalprof_pipeline::suite::run(&opts, interrupt, &mut terminal).map_err(crate::refusal::reworded)
}

/// The suite in the terminal: a line as each test starts and ends, and each sweep drawn
/// as `run` draws it, without its summary (the table of all tests follows the suite).
struct Terminal<'a> {
    store: &'a Store,
    interrupt: &'a Interrupt,
}

impl SuiteObserver for Terminal<'_> {
    fn test_starting(&mut self, index: usize, of: usize, test: &Test, mode: &str) {
        eprintln!(
            "scalprof: suite {}/{of}: {} ({mode}): {}",
            index + 1,
            test.name,
            test.what
        );
    }

    fn sweep(&mut self, opts: &RunOptions) -> Result<RunOutcome> {
        let show = Show {
            summary: false,
            json: None,
        };
        let checked = scalprof_pipeline::check(opts).map_err(crate::refusal::worded)?;
        run::record_and_show(self.store, opts, &checked, &show, self.interrupt)
    }

    fn test_done(&mut self, result: &TestResult) {
        eprintln!(
            "scalprof: suite: {} ({}) stored as run {}{}",
            result.name,
            result.mode,
            result.run_id,
            result.top_cause.as_ref().map_or(String::new(), |c| format!(
                "; top cause {} {:.0}%",
                scalprof_report::one_line(&c.subject),
                c.score * 100.0
            ))
        );
    }
}

/// Writes the suite document; `-` is standard output.
pub fn write_json(path: &Path, doc: &SuiteDocument) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    if path == Path::new("-") {
        return Ok(crate::out::data(&(text + "\n"))?);
    }
    Ok(crate::out::file(path, text + "\n")?)
}

/// Writes the suite's HTML page, with each test's stored run.
pub fn write_report(store: &Store, path: &Path, doc: &SuiteDocument) -> Result<()> {
    let runs: Vec<Option<RunDocument>> = doc
        .tests
        .iter()
        .map(|t| {
            let id = store.resolve(&t.run_id).ok()?;
            Some(scalprof_pipeline::LoadedRun::load(store, id).ok()?.doc)
        })
        .collect();
    let html = scalprof_report::suite::html_report(doc, &runs);
    Ok(crate::out::file(path, html)?)
}
