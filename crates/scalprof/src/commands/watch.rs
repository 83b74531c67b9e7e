//! `scalprof watch`: a running server's scaling curve from its own load.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_pipeline::facade::Interrupt;

use super::{exit_code_for, open_store};
use crate::cli;
use crate::refusal::worded;
use crate::run::Show;

/// The CPU time of this process and the children it waited for (the symbol parsers).
fn own_cpu_s() -> f64 {
    let seconds = |who| {
        // SAFETY: getrusage fills the zeroed struct it is given.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a rusage.
        unsafe { libc::getrusage(who, &mut r) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(r.ru_utime) + tv(r.ru_stime)
    };
    seconds(libc::RUSAGE_SELF) + seconds(libc::RUSAGE_CHILDREN)
}

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
    let started = std::time::Instant::now();
    let outcome = crate::run::watch_and_show(&store, &opts, &checked, &show, &interrupt)?;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = own_cpu_s();
    eprintln!(
        "scalprof: the watch took {cpu_s:.1} s of CPU in {wall_s:.0} s ({:.1}% of one CPU: the watcher, loading the tracer and naming the traced windows' stacks); each level's perturbation is its traced windows' throughput against its untraced ones'",
        100.0 * cpu_s / wall_s.max(1e-9)
    );
    Ok(exit_code_for(&outcome.doc, &interrupt))
}
