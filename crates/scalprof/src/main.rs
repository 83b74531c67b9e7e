//! scalprof: find out why a workload does not scale, and prove the fix.
//!
//! This binary is glue: clap definitions (`cli`), one function per command (`commands`:
//! `commands::run` builds the options and calls `run::run`, which records through
//! `scalprof-pipeline` and prints with `scalprof-report`), and here the exit codes: one
//! table for every command ([`cli::EXIT_STATUS`]): 0 success, 1 a gate failed, 2 an
//! error, 128 + the signal when interrupted.

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

#[macro_use]
mod out;
mod cli;
mod commands;
mod db_password;
mod export;
mod flame;
mod mistakes;
mod oom;
mod refusal;
mod report;
mod run;
mod suite;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command};

/// A failed allocation is said in one line that names `ulimit -v`, not an abort ([`oom`]).
#[global_allocator]
static ALLOCATOR: oom::SayOutOfMemory = oom::SayOutOfMemory;

/// A panic while parsing an untrusted perf.data file is reported as an import error (see
/// `scalprof_pipeline::import::import`); every other panic is printed as usual. Installed once, here at the
/// edge, rather than swapped in and out around the parser.
fn quiet_import_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // eprintln! panics when standard error is a closed pipe or a full disk: there is
        // nowhere left to say anything, so leave quietly (the store has what was measured).
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") {
            std::process::exit(2);
        }
        if !scalprof_pipeline::import::PARSING.with(|p| p.get()) {
            default(info);
        }
    }));
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    // A parser child: it gives up privileges before it reads anything.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == scalprof_pipeline::facade::sandbox::PARSER_ARG)
    {
        let job = std::env::args().nth(2).unwrap_or_default();
        if job == "import" {
            // Out of memory is said in one line, which the parent passes on.
            scalprof_pipeline::import::serve_child();
        }
        oom::leave_to_std();
        scalprof_pipeline::facade::child::serve(&job);
    }
    // Everything that parses bytes another user may control runs in such children. The
    // link, not the path it names: a rebuilt or replaced binary keeps its running image.
    scalprof_pipeline::facade::sandbox::enable("/proc/self/exe".into());
    if args
        .next()
        .is_some_and(|a| a == scalprof_pipeline::facade::keeper::KEEPER_ARG)
    {
        scalprof_pipeline::facade::keeper::serve();
    }
    // Before anything else can start a thread or a child: the store's password out of the
    // command line (a re-execution) and out of the environment children inherit.
    db_password::hide();
    catch_file_size_limit();
    quiet_import_panics();
    // An empty SCALPROF_DB means unset (as an empty XDG_DATA_HOME does), not `--db ""`.
    if std::env::var_os("SCALPROF_DB").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("SCALPROF_DB");
    }
    let parsed = Cli::try_parse();
    db_password::forget_db_variable();
    let cli = match parsed {
        Ok(cli) => cli,
        // Usage errors exit 2 (help and version 0), with scalprof's tip where it has one.
        Err(e) => {
            let args: Vec<String> = std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let e = mistakes::with_tip(e, &args);
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let db = cli.db.clone();
    if runs_workloads(&cli.command) {
        keep_the_workloads_tree();
    }
    match dispatch(cli).and_then(|code| Ok(out::flush().map(|()| code)?)) {
        Ok(code) => code,
        // The reader went away (`scalprof runs | head -1`): nothing more to say.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<out::WriteError>()
                    .is_some_and(|w| w.is_broken_pipe())
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "scalprof: error: {}",
                scalprof_report::terminal_safe(&format!("{e:#}"))
            );
            if let Some(h) = commands::hint(&e, &db) {
                eprintln!("scalprof: {h}");
            }
            ExitCode::from(2)
        }
    }
}

/// Under a file size limit (`ulimit -f`), a write past it raises SIGXFSZ, whose default
/// action kills scalprof without a word. With a handler that does nothing the write fails
/// with EFBIG instead, and the error says which file could not grow. A handler, not
/// SIG_IGN: an exec resets handled signals to their default, so the workloads and other
/// children keep the usual behavior (an ignored signal would stay ignored in them).
fn catch_file_size_limit() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: sigaction with a zeroed struct naming a handler that does nothing (and so is
    // async-signal-safe) and an emptied mask.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

/// The commands that start workloads.
fn runs_workloads(command: &Command) -> bool {
    matches!(
        command,
        Command::Run(_)
            | Command::Demo(_)
            | Command::Suite(_)
            | Command::Complexity(_)
            | Command::Locks(_)
            | Command::Verify(_)
    )
}

/// Starts the keeper that kills what is left of the workloads when scalprof ends, even by
/// SIGKILL ([`scalprof_collect::keeper`]). Without it a SIGKILLed scalprof could leave a
/// workload's grandchildren running: said, and the run goes on.
fn keep_the_workloads_tree() {
    let started =
        std::env::current_exe().and_then(|exe| scalprof_pipeline::facade::keeper::start(&exe));
    if let Err(e) = started {
        eprintln!(
            "scalprof: warning: could not start the process that cleans up after the workload \
             ({e}); if scalprof is killed with SIGKILL, what the workload started may keep running"
        );
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    out::set_style(cli.color);
    let db = &cli.db;
    match cli.command {
        Command::Run(args) => commands::run(db, *args),
        Command::Watch(args) => commands::watch(db, *args),
        Command::Fit(args) => commands::fit(args),
        Command::Runs(args) => commands::runs(db, args),
        Command::Gc(args) => commands::gc(db, args),
        Command::Show(args) => commands::show(db, args),
        Command::Corpus(args) => commands::corpus(args),
        Command::Demo(args) => commands::demo(db, args),
        Command::Layout(args) => commands::layout(args),
        Command::Report(args) => commands::report(db, args),
        Command::Complexity(args) => commands::complexity(db, args),
        Command::Compare(args) => commands::compare(db, args),
        Command::History(args) => commands::history(db, args),
        Command::Verify(args) => commands::verify(db, args),
        Command::Locks(args) => commands::locks(db, args),
        Command::Import(args) => commands::import(db, args),
        Command::Flame(args) => commands::flame(db, args),
        Command::Suite(args) => commands::suite(db, args),
        Command::Export(args) => commands::export(db, args),
        Command::Completions(args) => commands::completions(args),
        Command::Man => commands::man(),
    }
}
