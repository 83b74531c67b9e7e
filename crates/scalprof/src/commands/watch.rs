//! `scalprof watch`: a running server's scaling curve from its own load.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_pipeline::facade::Interrupt;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::worded;
use crate::run::Show;

/// The niceness a watch runs at: the lowest priority, below every default thread.
const WATCH_NICE: libc::c_int = 19;

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
    // The server comes first: what scalprof does between windows (loading the tracer,
    // naming stacks) waits for CPUs the server leaves idle. Threads and children made
    // from now on inherit it.
    // SAFETY: setpriority on this thread has no memory-safety preconditions.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, WATCH_NICE);
    }
    let show = Show {
        summary: true,
        json: args.json.clone(),
    };
    let outcome = crate::run::watch_and_show(&store, &opts, &checked, &show, &interrupt)?;
    if let Some(cost) = outcome.doc.observer {
        eprintln!(
            "scalprof: the watch took {:.1} s of CPU in {:.0} s ({:.1}% of one CPU: the watcher, the tracer and naming the traced windows' stacks); each level's perturbation is its traced windows' throughput against its untraced ones'",
            cost.cpu_s,
            cost.span_s,
            100.0 * cost.share()
        );
    }
    Ok(exit_code_for(&outcome.doc, &interrupt))
}
