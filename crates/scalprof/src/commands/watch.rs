//! `scalprof watch`: a running server's scaling curve from its own load.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_pipeline::facade::Interrupt;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::worded;
use crate::run::Show;

pub fn watch(db: &Option<PathBuf>, args: cli::WatchArgs) -> Result<ExitCode> {
    let opts = args.options();
    // Checked before touching the store: a server that is not running, a log that is not
    // there, a regex without a group fail at once.
    let checked = scalprof_pipeline::watch::check_watch(&opts).map_err(worded)?;
    let n = checked.attached.len();
    eprintln!(
        "scalprof: watching {n} running process{}",
        if n == 1 { "" } else { "es" }
    );
    if let Some(skipped) = &checked.skipped {
        eprintln!("scalprof: {}", scalprof_report::terminal_safe(skipped));
    }
    let store = open_store(db)?;
    let interrupt = Interrupt::install()?;
    let show = Show {
        summary: true,
        json: args.json.clone(),
    };
    let outcome = crate::run::watch_and_show(&store, &opts, &checked, &show, &interrupt)?;
    Ok(exit_code_for(&outcome.doc, &interrupt))
}
