//! scalprof: find out why a workload does not scale, and prove the fix.
//!
//! This binary is glue: clap definitions (`cli`), turning them into option structs,
//! calling the pipeline (`scalprof-pipeline`), and printing (`scalprof-report`).

#[macro_use]
mod out;
mod cli;
mod corpus;
mod export;
mod flame;
mod report;
mod run;
mod suite;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{Cli, Command, Scaling};
use run::Show;
use scalprof_collect::interrupt::Interrupt;
use scalprof_model::{RunStatus, ThroughputSource};
use scalprof_pipeline::RunOptions;
use scalprof_store::Store;

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
            std::process::exit(1);
        }
        if !scalprof_pipeline::import::PARSING.with(|p| p.get()) {
            default(info);
        }
    }));
}

fn main() -> ExitCode {
    quiet_import_panics();
    // An empty SCALPROF_DB means unset (as an empty XDG_DATA_HOME does), not `--db ""`.
    if std::env::var_os("SCALPROF_DB").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("SCALPROF_DB");
    }
    let cli = Cli::parse();
    let db = cli.db.clone();
    // compare's exit codes are a CI contract: 1 a regression, 2 usage, 3 any other error.
    let error_code = if matches!(cli.command, Command::Compare(_)) {
        3
    } else {
        1
    };
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
            if let Some(h) = hint(&e, &db) {
                eprintln!("scalprof: {h}");
            }
            if e.chain().any(|c| c.downcast_ref::<Usage>().is_some()) {
                return ExitCode::from(2);
            }
            ExitCode::from(error_code)
        }
    }
}

/// Arguments that make no sense together, found after parsing: exit 2, as clap's errors.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn open_store(cli_db: &Option<std::path::PathBuf>) -> Result<Store> {
    let path = cli_db.clone().unwrap_or_else(scalprof_store::default_path);
    Ok(Store::open(&path)?)
}

/// For the commands that only read the store.
fn open_store_read_only(cli_db: &Option<std::path::PathBuf>) -> Result<Store> {
    let path = cli_db.clone().unwrap_or_else(scalprof_store::default_path);
    Ok(Store::open_read_only(&path)?)
}

/// `scalprof compare A.json B.json`: two suites, test by test. The runs come from the store
/// when they are in it; a suite from another machine is compared from its document.
fn compare_suites(
    db: &Option<std::path::PathBuf>,
    args: &cli::CompareArgs,
    a: &scalprof_model::suite::SuiteDocument,
    b: &scalprof_model::suite::SuiteDocument,
) -> Result<ExitCode> {
    if args.flame.is_some() {
        return Err(Usage("compare: --flame compares two runs; for a suite, compare one test's runs (their ids are in the table)".into()).into());
    }
    let store = open_store_read_only(db).ok();
    let c = suite::compare(store.as_ref(), a, b);
    if args.json {
        out::data(&(serde_json::to_string_pretty(&c)? + "\n"))?;
    } else {
        out!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::suite::comparison(&c))
        );
    }
    if let Some(path) = &args.report {
        crate::out::file(path, scalprof_report::suite::html_comparison(&c))?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    if let Some(pct) = args.fail_if_slower {
        let mut slower = false;
        for t in &c.tests {
            for (v, d) in scalprof_analyze::compare::slower_points(&t.comparison, pct) {
                eprintln!(
                    "scalprof: B is slower in {} ({}) at {v} workers: throughput {d:+.1}% (proven at 95% confidence)",
                    t.name, t.mode
                );
                slower = true;
            }
        }
        if slower {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What to do about an error, when its cause is one the user can fix: a full disk. SQLite
/// reports it as "disk full", or as an I/O error when its shared-memory file cannot grow,
/// so an I/O error is checked against the free space where the store lives.
fn hint(e: &anyhow::Error, db: &Option<std::path::PathBuf>) -> Option<String> {
    // An output the user named (or standard output): its own disk, not the store's.
    if let Some(w) = e.chain().find_map(|c| c.downcast_ref::<out::WriteError>()) {
        return (w.source.raw_os_error() == Some(libc::ENOSPC)).then(|| {
            format!(
                "no space left where {} is written: free space there or write it elsewhere; the run itself is kept in the store",
                w.target
            )
        });
    }
    let full = e.chain().any(|c| {
        let sqlite = c
            .downcast_ref::<rusqlite::Error>()
            .and_then(|e| e.sqlite_error_code());
        sqlite == Some(rusqlite::ErrorCode::DiskFull)
            || (sqlite == Some(rusqlite::ErrorCode::SystemIoFailure) && store_disk_full(db))
            || c.downcast_ref::<std::io::Error>()
                .and_then(|e| e.raw_os_error())
                == Some(libc::ENOSPC)
    });
    full.then(|| "the disk is full: free space where the store and the workload output live (--db), then rerun; every finished repeat is kept".to_string())
}

/// Whether the filesystem holding the store has no space left.
fn store_disk_full(db: &Option<std::path::PathBuf>) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = db.clone().unwrap_or_else(scalprof_store::default_path);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs is plain old data; zeroed is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a writable statvfs.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    r == 0 && st.f_bavail == 0
}

/// 0 for a complete run with a measurement; 128 + the signal when interrupted (130 for
/// SIGINT, 143 for SIGTERM); 1 when the workload failed, also when `--keep-going` went on
/// past failures and no repeat succeeded.
fn exit_code_for(doc: &scalprof_model::RunDocument, interrupt: &Interrupt) -> ExitCode {
    match doc.status {
        RunStatus::Interrupted => {
            ExitCode::from(128u8.saturating_add(interrupt.signal().unwrap_or(2) as u8))
        }
        RunStatus::Failed => ExitCode::from(1),
        RunStatus::Complete | RunStatus::Running => {
            let any_ok = doc
                .points
                .iter()
                .any(|p| p.repeats.iter().any(|r| r.succeeded()));
            if any_ok || doc.points.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Run(args) => {
            let values = args
                .threads
                .as_deref()
                .map(scalprof_collect::sweep::parse_values)
                .transpose()?;
            let opts = RunOptions {
                command: args.command,
                parameter: scalprof_model::SweepParameter::Threads,
                values,
                repeat: args.repeat,
                diagnose: args.diagnose,
                warmup: args.warmup,
                label: args.label,
                ops_regex: args.ops_regex,
                scaling: args.scaling.map(|s| match s {
                    Scaling::Weak => ThroughputSource::Weak,
                    Scaling::Strong => ThroughputSource::Strong,
                }),
                timeout: args.timeout,
                keep_going: args.keep_going,
                sampling: (!args.no_profile).then(|| scalprof_collect::perf::SamplingConfig {
                    frequency: args.freq,
                    stack_bytes: args.stack_size,
                    ..Default::default()
                }),
                locks: (!args.no_locks).then_some(scalprof_collect::locks::LockConfig {
                    system_wide: args.system_wide,
                    bpf_stats: args.bpf_stats,
                }),
                attach: scalprof_collect::attach::AttachSpec {
                    pids: args.attach.clone(),
                    names: args.attach_name.clone(),
                },
            };
            if args.freq == 0 || args.freq > 100_000 {
                anyhow::bail!("--freq must be between 1 and 100000 samples per second");
            }
            // Check the command before touching the store: a typo fails at once.
            scalprof_collect::resolve_program(
                &scalprof_collect::sweep::substitute(&opts.command, opts.parameter.as_str(), 1)[0],
            )?;
            if !opts.attach.is_empty() {
                // So does a server that is not running.
                let found = opts.attach.resolve()?;
                if opts.diagnose == 0 || (opts.sampling.is_none() && opts.locks.is_none()) {
                    anyhow::bail!(
                        "--attach observes processes in the traced repeats, and this run has \
                         none (--diagnose 0, or --no-profile with --no-locks)"
                    );
                }
                // Refused before anything runs, rather than a run without the profiles it
                // was for.
                if opts.sampling.is_some() && !scalprof_collect::caps::may_sample_every_cpu() {
                    anyhow::bail!(
                        "--attach samples every CPU, which needs root (or CAP_PERFMON) or \
                         perf_event_paranoid ≤ 0 (it is {}): `sudo sysctl kernel.perf_event_paranoid=0`, \
                         or add --no-profile to trace only locks",
                        scalprof_collect::caps::paranoid().map_or("unknown".into(), |p| p.to_string())
                    );
                }
                if opts.locks.is_some() && !scalprof_collect::caps::may_load_bpf() {
                    anyhow::bail!(
                        "--attach traces the processes' locks with BPF, which needs root (or \
                         CAP_BPF and CAP_PERFMON); or add --no-locks to profile only"
                    );
                }
                eprintln!(
                    "scalprof: attaching to {} running process{} in the traced repeats",
                    found.len(),
                    if found.len() == 1 { "" } else { "es" }
                );
            }
            let store = open_store(&cli.db)?;
            let interrupt = Interrupt::install()?;
            let show = Show {
                summary: true,
                json: args.json,
            };
            let outcome = run::run(&store, &opts, &show, &interrupt)?;
            if let Some(path) = &args.report {
                report::write_report(&store, outcome.id, path)?;
            }
            Ok(exit_code_for(&outcome.doc, &interrupt))
        }
        Command::Fit(args) => {
            let text = std::fs::read_to_string(&args.file)
                .with_context(|| format!("reading {}", args.file.display()))?;
            let obs = scalprof_analyze::parse_two_column_csv(&text)
                .with_context(|| format!("parsing {}", args.file.display()))?;
            let model = scalprof_analyze::usl::fit(&obs)
                .with_context(|| format!("fitting {}", args.file.display()))?;
            if args.json {
                out::data(&(serde_json::to_string_pretty(&model)? + "\n"))?;
            } else {
                outln!("{}", scalprof_report::model_line(Some(&model), "N"));
                if let Some(note) = &model.note {
                    outln!("  note: {note}");
                }
                for (name, est) in [
                    ("σ", model.sigma_est),
                    ("κ", model.kappa_est),
                    ("λ", model.lambda_est),
                ] {
                    if let Some(e) = est {
                        outln!(
                            "  {name}: std. error {:.4e}, 95% interval {:.4e} … {:.4e}",
                            e.std_error,
                            e.ci95[0],
                            e.ci95[1]
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Runs => {
            let path = cli.db.clone().unwrap_or_else(scalprof_store::default_path);
            let store = match Store::open_read_only(&path) {
                Err(scalprof_store::StoreError::Missing { .. }) => {
                    outln!(
                        "no runs in {} yet: scalprof run -- CMD, or scalprof demo",
                        path.display()
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                other => other?,
            };
            let rows: Vec<scalprof_report::RunRow> = store
                .list()?
                .into_iter()
                .map(|r| scalprof_report::RunRow {
                    id: r.id,
                    label: r.label,
                    command: scalprof_report::shell_line(&r.command),
                    created: r.created,
                    status: r.status.as_str().to_string(),
                    points: format!("{}/{}", r.points, r.planned),
                })
                .collect();
            if rows.is_empty() {
                outln!(
                    "no runs in {} yet: scalprof run -- CMD, or scalprof demo",
                    store.path().display()
                );
            } else {
                outln!(
                    "{}",
                    scalprof_report::terminal_safe(&scalprof_report::runs_table(&rows).to_string())
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            let store = open_store_read_only(&cli.db)?;
            let id = store.resolve(&args.run)?;
            let doc = scalprof_pipeline::document(&store, id)?;
            if args.json {
                out::data(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
            } else {
                out!(
                    "{}",
                    scalprof_report::terminal_safe(&scalprof_report::summary_with(
                        &doc,
                        args.locks,
                        args.verbose
                    ))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Corpus(args) => {
            let dir = args.out.unwrap_or_else(corpus::default_dir);
            for (name, path) in corpus::build(&dir)? {
                outln!("{name:<20} {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => demo(&cli.db, args),
        Command::Layout(args) => {
            let line = args
                .line_size
                .unwrap_or_else(scalprof_debuginfo::cache_line_size);
            if line == 0 || !line.is_power_of_two() {
                anyhow::bail!(
                    "--line-size must be a power of two (64 on x86-64, 128 on some arm64)"
                );
            }
            if args.kernel {
                out!("{}", kernel_layout(&args, line)?);
                return Ok(ExitCode::SUCCESS);
            }
            let binary = args
                .binary
                .as_ref()
                .expect("clap requires it without --kernel");
            let layout = scalprof_debuginfo::layout::read_layout(binary)?;
            out!(
                "{}",
                scalprof_report::layout_text(&layout, &binary.display().to_string(), line)
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Report(args) => {
            let store = open_store_read_only(&cli.db)?;
            let id = store.resolve(&args.run)?;
            let out = args
                .output
                .unwrap_or_else(|| std::path::PathBuf::from(format!("scalprof-report-{id}.html")));
            report::write_report(&store, id, &out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Complexity(args) => {
            let sizes = scalprof_collect::sweep::parse_values(&args.sizes)?;
            if sizes.len() < 3 {
                anyhow::bail!("--sizes needs at least three sizes to fit an exponent (e.g. 5000,10000,20000,40000)");
            }
            scalprof_collect::resolve_program(
                &scalprof_collect::sweep::substitute(&args.command, "size", sizes[0])[0],
            )?;
            let store = open_store(&cli.db)?;
            let interrupt = Interrupt::install()?;
            let opts = RunOptions {
                command: args.command,
                parameter: scalprof_model::SweepParameter::Size,
                values: Some(sizes),
                repeat: args.repeat,
                diagnose: args.diagnose,
                warmup: 0,
                label: args.label,
                ops_regex: r"ops=(\d+)".into(),
                scaling: Some(ThroughputSource::Strong),
                timeout: None,
                keep_going: false,
                sampling: Some(scalprof_collect::perf::SamplingConfig {
                    frequency: args.freq,
                    ..Default::default()
                }),
                locks: None,
                attach: Default::default(),
            };
            let show = Show {
                summary: true,
                json: args.json,
            };
            let outcome = run::run(&store, &opts, &show, &interrupt)?;
            Ok(exit_code_for(&outcome.doc, &interrupt))
        }
        Command::Compare(args) => {
            match (suite::read_document(&args.a)?, suite::read_document(&args.b)?) {
                (Some(a), Some(b)) => return compare_suites(&cli.db, &args, &a, &b),
                (None, None) => {}
                (Some(_), None) | (None, Some(_)) => {
                    return Err(Usage(
                        "compare: one of A and B is a suite document and the other is not; compare two suites (scalprof suite --json FILE) or two runs".into(),
                    )
                    .into())
                }
            }
            let store = open_store_read_only(&cli.db)?;
            let (ia, ib) = (store.resolve(&args.a)?, store.resolve(&args.b)?);
            let (ra, rb) = (
                scalprof_pipeline::LoadedRun::load(&store, ia)?,
                scalprof_pipeline::LoadedRun::load(&store, ib)?,
            );
            let (a, b) = (&ra.doc, &rb.doc);
            let mut c = scalprof_analyze::compare::compare(a, b);
            c.gate = args
                .fail_if_slower
                .map(|pct| scalprof_analyze::compare::gate(&c, pct));
            if args.json {
                out::data(&(serde_json::to_string_pretty(&c)? + "\n"))?;
            } else {
                out!(
                    "{}",
                    scalprof_report::terminal_safe(&scalprof_report::comparison(
                        &c, &a.label, &b.label
                    ))
                );
            }
            if let Some(out) = &args.flame {
                let last = c.points.last().map(|p| p.value);
                match last {
                    Some(v) => flame::flame(
                        &store,
                        cli::FlameArgs {
                            run: a.id.clone(),
                            point: None,
                            output: Some(out.clone()),
                            folded: false,
                            diff: Some(vec![format!("{}@{v}", a.id), format!("{}@{v}", b.id)]),
                        },
                    )?,
                    None => eprintln!("scalprof: no common point: no differential flame graph"),
                }
            }
            if let Some(path) = &args.report {
                let diff = report::compare_diff(&ra, &rb, &c)?;
                let html =
                    scalprof_report::html::compare_report(&c, &a.label, &b.label, diff.as_deref());
                crate::out::file(path, html)?;
                eprintln!("scalprof: wrote {}", path.display());
            }
            if let Some(g) = &c.gate {
                for p in c
                    .points
                    .iter()
                    .filter(|p| g.slower_points.contains(&p.value))
                {
                    let r = p.throughput_ratio.expect("a slower point has a ratio");
                    eprintln!(
                        "scalprof: regression: B is {} at point {}, beyond the {}% allowed for all {} points at once (interval {:.2}–{:.2}× of A)",
                        scalprof_analyze::compare::ratio_words(&r),
                        p.value,
                        g.threshold_pct,
                        c.points.len(),
                        r.ci_family[0],
                        r.ci_family[1]
                    );
                }
                if !g.untested_points.is_empty() {
                    eprintln!(
                        "scalprof: warning: --fail-if-slower could not test point(s) {:?}: fewer than 2 repeats on a side (--repeat 3)",
                        g.untested_points
                    );
                }
                if g.failed {
                    return Ok(ExitCode::from(1));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Locks(args) => {
            // Lock tracing is what this command is for: without it, say so before running.
            if !cfg!(feature = "bpf") {
                return Err(scalprof_collect::LockTracerError::NotBuilt.into());
            }
            if !scalprof_collect::caps::may_load_bpf() {
                anyhow::bail!(
                    "tracing locks loads BPF programs, which needs root (or CAP_BPF and \
                     CAP_PERFMON): run it with sudo"
                );
            }
            scalprof_collect::resolve_program(
                &scalprof_collect::sweep::substitute(&args.command, "threads", 1)[0],
            )?;
            let store = open_store(&cli.db)?;
            let interrupt = Interrupt::install()?;
            let opts = RunOptions {
                command: args.command,
                parameter: scalprof_model::SweepParameter::Threads,
                values: Some(scalprof_collect::sweep::parse_values(&args.threads)?),
                repeat: 1,
                diagnose: 1,
                warmup: 0,
                label: None,
                ops_regex: r"ops=(\d+)".into(),
                scaling: Some(ThroughputSource::Weak),
                timeout: None,
                keep_going: true,
                // Sampled too, so that a lock's on-CPU time (spinning, the lock code) counts as
                // it does in `run`: without it `locks -t 2` gave table_lock 6% where `run`
                // gave 79%.
                sampling: Some(Default::default()),
                locks: Some(scalprof_collect::locks::LockConfig {
                    system_wide: args.system_wide,
                    bpf_stats: args.bpf_stats,
                }),
                attach: Default::default(),
            };
            let show = Show {
                summary: false,
                json: args.json,
            };
            let outcome = run::run(&store, &opts, &show, &interrupt)?;
            let doc = &outcome.doc;
            let mut no_lock_data = doc.points.iter().any(|p| p.locks.is_none());
            // `--json -`: the document alone on standard output.
            let text = show.json.as_deref() != Some(std::path::Path::new("-"));
            for p in doc.points.iter().filter(|_| text) {
                match &p.locks {
                    Some(l) => out!(
                        "{}",
                        scalprof_report::terminal_safe(&scalprof_report::lock_table(
                            doc.sweep.parameter.as_str(),
                            p.value,
                            l
                        ))
                    ),
                    None => {
                        outln!("no lock data (see the warning above)");
                        no_lock_data = true;
                    }
                }
            }
            let lock_findings: Vec<_> = doc
                .findings
                .iter()
                .filter(|f| f.kind == scalprof_model::FindingKind::LockContention)
                .collect();
            if text && !lock_findings.is_empty() {
                outln!("\nfindings:");
                for f in lock_findings {
                    outln!(
                        "{}",
                        scalprof_report::terminal_safe(&format!(
                            "  {:>4.0}%  {} ({}): {}",
                            f.score * 100.0,
                            f.subject,
                            f.scope.map_or("", |s| s.as_str()),
                            f.evidence
                        ))
                    );
                }
            }
            eprintln!(
                "scalprof: stored as run {} (scalprof show {})",
                doc.id, doc.id
            );
            if no_lock_data && !interrupt.requested() {
                // The tracer failed to start: the command did not do what was asked.
                return Ok(ExitCode::from(1));
            }
            Ok(exit_code_for(doc, &interrupt))
        }
        Command::Import(args) => {
            let store = open_store(&cli.db)?;
            let id = scalprof_pipeline::import::import(&store, &args.file, args.label)?;
            let doc = scalprof_pipeline::document(&store, id)?;
            // An imported profile has no sweep to speak of: its details are the point.
            out!(
                "{}",
                scalprof_report::terminal_safe(&scalprof_report::summary_with(&doc, false, true))
            );
            eprintln!("scalprof: imported as run {id} (scalprof flame {id})");
            Ok(ExitCode::SUCCESS)
        }
        Command::Flame(args) => {
            let store = open_store_read_only(&cli.db)?;
            flame::flame(&store, args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Suite(args) => {
            let store = open_store(&cli.db)?;
            let interrupt = Interrupt::install()?;
            let (json, report) = (args.json.clone(), args.report.clone());
            let doc = suite::suite(&store, args, &interrupt)?;
            let json_to_stdout = json.as_deref() == Some(std::path::Path::new("-"));
            if !json_to_stdout {
                outln!(
                    "{}",
                    scalprof_report::terminal_safe(&scalprof_report::suite::table(&doc.tests))
                );
            }
            if let Some(path) = &json {
                suite::write_json(path, &doc)?;
                if !json_to_stdout {
                    eprintln!("scalprof: wrote {}", path.display());
                }
            }
            if let Some(path) = &report {
                suite::write_report(&store, path, &doc)?;
                eprintln!("scalprof: wrote {}", path.display());
            }
            if interrupt.requested() {
                eprintln!("scalprof: suite interrupted; the tests above are stored");
                return Ok(ExitCode::from(130));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export(args) => {
            let store = open_store_read_only(&cli.db)?;
            export::export(&store, args)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Builds the corpus and sweeps the false-sharing pair, then sets their efficiencies
/// side by side.
fn demo(db: &Option<std::path::PathBuf>, args: cli::DemoArgs) -> Result<ExitCode> {
    let dir = corpus::default_dir();
    eprintln!(
        "scalprof: building the pathology corpus in {}",
        dir.display()
    );
    let programs = corpus::build(&dir)?;
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
        .map(scalprof_collect::sweep::parse_values)
        .transpose()?;
    let mut docs = Vec::new();
    for name in ["counters_packed", "counters_padded"] {
        outln!("\n=== {name}: {} ===", describe(name));
        let opts = RunOptions {
            command: vec![path_of(name), "{threads}".into()],
            parameter: scalprof_model::SweepParameter::Threads,
            values: values.clone(),
            repeat: args.repeat,
            diagnose: 1,
            warmup: 0,
            label: Some(format!("demo-{name}")),
            ops_regex: r"ops=(\d+)".into(),
            scaling: Some(ThroughputSource::Weak),
            timeout: Some(std::time::Duration::from_secs(120)),
            keep_going: false,
            sampling: Some(Default::default()),
            locks: Some(Default::default()),
            attach: Default::default(),
        };
        let show = Show {
            summary: true,
            json: None,
        };
        let outcome = run::run(&store, &opts, &show, &interrupt)?;
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

/// `layout --kernel`: a struct from BTF, or the globals around an address from kallsyms.
fn kernel_layout(args: &cli::LayoutArgs, line: u64) -> Result<String> {
    let mut out = String::new();
    if let Some(name) = &args.struct_name {
        let s = scalprof_debuginfo::kernel_layout::kernel_struct(name)?;
        out += &scalprof_report::kernel_struct_text(&s.name, s.size, &s.members, line);
    }
    if let Some(addr) = &args.addr {
        let a = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
            .with_context(|| format!("--addr {addr:?} is not a hex address"))?;
        let k = scalprof_debuginfo::Kallsyms::load();
        if !k.is_usable() {
            anyhow::bail!(
                "/proc/kallsyms shows no addresses: run as root (kernel.kptr_restrict hides them)"
            );
        }
        let start = a / line * line;
        out += &format!("kernel cache line {start:#x}..{:#x} around {a:#x} (sizes are upper bounds: the distance to the next symbol)\n", start + line);
        let near = k.data_around(start, start + line);
        if k.data_symbols() < 1000 {
            out += &format!(
                "  note: kallsyms lists only {} kernel variables (CONFIG_KALLSYMS_ALL is off): most globals cannot be named\n",
                k.data_symbols()
            );
        }
        if near.is_empty() {
            out += "  no kernel variable here: a dynamic (slab or per-CPU) address\n";
        }
        for (addr, name, size) in near {
            let mark = if addr <= a && a < addr + size.max(1) {
                "  ← this address"
            } else {
                ""
            };
            out += &format!("  {addr:#x}  {name:<40} ≤{size} B{mark}\n");
        }
    }
    if out.is_empty() {
        anyhow::bail!("layout --kernel needs --struct NAME or --addr ADDR");
    }
    Ok(out)
}

fn describe(name: &str) -> &'static str {
    match name {
        "counters_packed" => "per-thread atomic counters packed in one struct (FreeBSD vmmeter)",
        "counters_padded" => "the same counters, each on its own cache line (the fix)",
        _ => "",
    }
}
