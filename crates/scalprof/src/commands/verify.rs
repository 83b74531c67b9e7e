//! `scalprof verify`: a stored run's causes lengthened by known delays, and what the
//! throughput said.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_pipeline::facade::Interrupt;
use scalprof_pipeline::verify::{Approval, VerifyOptions};
use scalprof_store::Store;

use super::open_store;
use crate::cli;
use crate::out;

/// `scalprof verify RUN`: one experiment per cause, stored with the run.
pub fn verify(db: &Option<PathBuf>, args: cli::VerifyArgs) -> Result<ExitCode> {
    let store = open_store(db)?;
    let id = store.resolve(&args.run)?;
    let interrupt = Interrupt::install()?;
    let opts = VerifyOptions {
        causes: args.causes,
        point: args.point,
        rounds: args.rounds,
        command: (!args.command.is_empty()).then_some(args.command),
    };
    print_experiments(&store, id, &opts, &interrupt, args.json)?;
    if interrupt.requested() {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the experiments on run `id`, stores them with it, and prints them: one line each,
/// or `experiments[]` as JSON.
pub fn print_experiments(
    store: &Store,
    id: i64,
    opts: &VerifyOptions,
    interrupt: &Interrupt,
    json: bool,
) -> Result<()> {
    let experiments =
        scalprof_pipeline::verify::verify(store, id, opts, interrupt, &mut progress, &mut ask)?;
    let parameter = scalprof_pipeline::document(store, id)?.sweep.parameter;
    print(id, &experiments, parameter, json)
}

/// What an experiment reports as it goes.
pub fn progress(message: &str) {
    eprintln!(
        "scalprof: verify: {}",
        scalprof_report::terminal_safe(message)
    );
}

/// Prints run `id`'s experiments: one line each, or `experiments[]` as JSON.
pub fn print(
    id: i64,
    experiments: &[scalprof_model::experiment::Experiment],
    parameter: scalprof_model::SweepParameter,
    json: bool,
) -> Result<()> {
    if json {
        out::data(&(serde_json::to_string_pretty(&experiments)? + "\n"))?;
    } else {
        for e in experiments {
            outln!(
                "{}",
                scalprof_report::terminal_safe(&scalprof_report::experiment_line(
                    e,
                    parameter.as_str()
                ))
            );
        }
    }
    eprintln!("scalprof: stored with run {id} (scalprof show {id})");
    Ok(())
}

/// Asks on the terminal whether to run a stored command this user did not record; says no
/// where there is no terminal to ask on (the error then says how to give the command).
fn ask(a: &Approval) -> Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(false);
    }
    let safe = scalprof_report::terminal_safe;
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "scalprof: verify: run {} is not known to be yours: {}.",
        a.run,
        safe(&a.why)
    )?;
    writeln!(
        err,
        "scalprof: verify: it would run, as uid {}, several times, at {} {}:\n    {}",
        // SAFETY: getuid has no preconditions and cannot fail.
        unsafe { libc::getuid() },
        a.parameter,
        a.value,
        safe(&scalprof_report::shell_line(&a.command))
    )?;
    if !a.causes.is_empty() {
        writeln!(
            err,
            "scalprof: verify: lengthening: {}",
            safe(&a.causes.join(", "))
        )?;
    }
    write!(err, "Run it? [y/N] ")?;
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "Yes"))
}
