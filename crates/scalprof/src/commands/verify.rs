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
    let doc = scalprof_pipeline::document(&store, id)?;
    if !doc.sweep.parameter.swept() {
        return what_if(&doc, &args.causes);
    }
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

/// A watched server was not started by scalprof, and is not restarted to lengthen a
/// cause: what its budget says of removing each cause (named, else every finding) is said
/// instead, as what it is.
fn what_if(doc: &scalprof_model::RunDocument, causes: &[String]) -> Result<ExitCode> {
    let chosen: Vec<&scalprof_model::Finding> = if causes.is_empty() {
        doc.findings.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for name in causes {
            let Some(f) = doc.findings.iter().find(|f| &f.subject == name) else {
                let names: Vec<&str> = doc.findings.iter().map(|f| f.subject.as_str()).collect();
                anyhow::bail!(
                    "run {} has no finding {name:?} (its findings: {})",
                    doc.id,
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                );
            };
            chosen.push(f);
        }
        chosen
    };
    eprintln!(
        "scalprof: verify: run {} watched a running server, which verify does not restart to lengthen a cause; what its measured budget says instead (an upper bound, not an experiment; sweep a client against the server with `run --attach-name` to prove one):",
        doc.id
    );
    if chosen.is_empty() {
        out!("no finding: nothing bends the curve enough to name\n");
    }
    for f in chosen {
        let line = match f.what_if {
            Some(w) => format!(
                "{}: without it, up to {:.2}× at concurrency {}\n",
                f.subject, w.speedup, w.value
            ),
            None => format!(
                "{}: {:.0}% of the thread-time; no what-if from this run\n",
                f.subject,
                f.score * 100.0
            ),
        };
        out!("{}", scalprof_report::terminal_safe(&line));
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
