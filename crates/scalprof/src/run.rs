//! `scalprof run`: glue between the sweep (collect), the store, the analysis and the
//! terminal. Every finished repeat is committed to the store before the next starts.

use scalprof_model::SweepParameter;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use regex::Regex;
use scalprof_analyze::profile::{ProfileBuilder, Symbols};
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::locks::LockConfig;
use scalprof_collect::perf::SamplingConfig;
use scalprof_collect::sweep::{self, Collected, RepeatKind, SweepEnd, SweepPlan, SweepSink};
use scalprof_model::{Repeat, RunDocument, RunStatus, Sweep, ThroughputSource};
use scalprof_store::{NewRun, Store};

/// Everything `run` needs, free of clap.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub command: Vec<String>,
    /// A scaling sweep (threads) or a complexity sweep (size).
    pub parameter: SweepParameter,
    pub values: Option<Vec<u64>>,
    /// Clean (untraced) repeats per point.
    pub repeat: u32,
    /// Diagnosis repeats per point (profiler and tracers attached); 0 = timing only.
    pub diagnose: u32,
    pub warmup: u32,
    pub label: Option<String>,
    pub json: Option<PathBuf>,
    pub ops_regex: String,
    pub scaling: ThroughputSource,
    pub timeout: Option<Duration>,
    pub keep_going: bool,
    /// Print the summary at the end (the demo prints its own).
    pub print_summary: bool,
    /// Profile the diagnosis repeats (`None` with --no-profile).
    pub sampling: Option<SamplingConfig>,
    /// Trace locks in the diagnosis repeats (`None` with --no-locks).
    pub locks: Option<LockConfig>,
}

/// How the run ended, for the exit code.
pub struct RunOutcome {
    pub doc: RunDocument,
}

pub fn run(store: &Store, opts: &RunOptions, interrupt: &Interrupt) -> Result<RunOutcome> {
    if opts.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    // What the workload leaves running is reparented to scalprof, and reported.
    scalprof_collect::exec::become_subreaper();
    let host = scalprof_collect::host::probe();
    let host_pmu = host.pmu;
    let values = match &opts.values {
        Some(v) => v.clone(),
        None => sweep::default_values(host.cpus),
    };
    // Fail at once, before a run exists, if the program cannot be found.
    let first = sweep::substitute(&opts.command, opts.parameter.as_str(), values[0]);
    let program = scalprof_collect::resolve_program(&first[0])?;
    let ops_regex = Regex::new(&opts.ops_regex)
        .with_context(|| format!("--ops-regex {:?} is not a valid regex", opts.ops_regex))?;
    if ops_regex.captures_len() < 2 {
        bail!(
            "--ops-regex {:?} needs a capture group around the number, e.g. 'ops=(\\d+)'",
            opts.ops_regex
        );
    }
    let label = opts.label.clone().unwrap_or_else(|| {
        program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| first[0].clone())
    });

    let id = store.create_run(&NewRun {
        label: label.clone(),
        created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: opts.command.clone(),
        sweep: Sweep {
            parameter: opts.parameter,
            values: values.clone(),
        },
        host,
        scaling: opts.scaling,
        ops_regex: opts.ops_regex.clone(),
    })?;
    let output_dir = output_dir_for(store.path(), id);
    store.set_output_dir(id, &output_dir)?;

    let tracing = (opts.sampling.is_some() || opts.locks.is_some()) && opts.diagnose > 0;
    let plan = SweepPlan {
        command: opts.command.clone(),
        parameter: opts.parameter.as_str().to_string(),
        values: values.clone(),
        repeat: opts.repeat,
        diagnose: opts.diagnose,
        warmup: opts.warmup,
        timeout: opts.timeout,
        keep_going: opts.keep_going,
        output_dir: output_dir.clone(),
        ops_regex,
        output_limit: sweep::OUTPUT_LIMIT,
        sampling: opts.sampling.clone().filter(|_| tracing).map(|mut c| {
            c.use_pmu = host_pmu;
            c
        }),
        locks: opts.locks.clone().filter(|_| tracing),
    };
    let diagnose = if tracing { opts.diagnose } else { 0 };
    let total = values.len() as u64 * u64::from(opts.repeat + opts.warmup + diagnose);
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let label_shown = scalprof_report::terminal_safe(&label);
    eprintln!(
        "scalprof: run {id} ({label_shown}): {} points × {} repeats{}",
        values.len(),
        opts.repeat,
        if diagnose > 0 {
            format!(" + {diagnose} traced")
        } else {
            String::new()
        }
    );
    let mut sink = StoreSink {
        store,
        parameter: opts.parameter.as_str().to_string(),
        id,
        bar: &bar,
        repeat: opts.repeat,
        diagnose,
        warmup: opts.warmup,
        symbols: tracing.then(Symbols::load),
        profile_error_shown: false,
    };
    let end = sweep::run(&plan, &mut sink, interrupt);
    bar.finish_and_clear();
    let end = match end {
        Ok(end) => end,
        Err(e) => {
            store.set_status(id, RunStatus::Failed)?;
            return Err(e).context(format!(
                "run {id} stopped; the repeats measured so far are kept"
            ));
        }
    };
    let status = match &end {
        SweepEnd::Complete => RunStatus::Complete,
        SweepEnd::Interrupted(_) => RunStatus::Interrupted,
        SweepEnd::Failed { .. } => RunStatus::Failed,
    };
    store.set_status(id, status)?;

    let mut doc = load_document(store, id)?;
    // Sharing findings read the binaries, so they are made now, while the files are
    // here, and stored with the run.
    if opts.sampling.is_some() && opts.parameter == SweepParameter::Threads {
        let profiles = merged_profiles(store, id)?;
        let input: Vec<(u64, f64, &scalprof_model::PointProfile)> = doc
            .points
            .iter()
            .filter_map(|p| {
                let prof = profiles
                    .iter()
                    .find(|(v, _)| *v == p.value)
                    .map(|(_, pr)| pr)?;
                Some((
                    p.value,
                    scalprof_analyze::summary::point_work(p, doc.throughput.source),
                    prof,
                ))
            })
            .collect();
        let mut files = scalprof_debuginfo::SymbolCache::default();
        let found = scalprof_analyze::sharing::sharing_findings(
            &input,
            &mut files,
            scalprof_debuginfo::cache_line_size(),
        );
        if !found.is_empty() {
            store.set_findings(id, &found)?;
            doc = load_document(store, id)?;
        }
    }
    if opts.print_summary {
        print!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::summary(&doc))
        );
    }
    match &end {
        SweepEnd::Interrupted(sig) => eprintln!(
            "scalprof: interrupted{}; run {id} keeps every finished repeat (scalprof show {id})",
            sig.map(|s| format!(" by signal {s}")).unwrap_or_default()
        ),
        SweepEnd::Failed { value, .. } => eprintln!(
            "scalprof: the sweep stopped at {} {value} because the workload failed \
             (see above); --keep-going continues past failures. Run {id} keeps what was measured.",
            opts.parameter
        ),
        SweepEnd::Complete => {}
    }
    if let Some(path) = &opts.json {
        write_json(path, &doc)?;
    }
    Ok(RunOutcome { doc })
}

/// The run document of a stored run: repeats, merged profiles, analysis.
pub fn load_document(store: &Store, id: i64) -> Result<RunDocument> {
    let (header, repeats, findings) = store.load(id)?;
    let profiles = merged_profiles(store, id)?;
    let locks = merged_locks(store, id)?;
    Ok(scalprof_analyze::assemble(
        &header, &repeats, &profiles, &locks, findings,
    ))
}

/// Groups per-repeat items by sweep point, keeping the points' order.
fn by_point<T>(items: Vec<(u64, T)>) -> Vec<(u64, Vec<T>)> {
    let mut out: Vec<(u64, Vec<T>)> = Vec::new();
    for (v, item) in items {
        match out.iter_mut().find(|(pv, _)| *pv == v) {
            Some((_, list)) => list.push(item),
            None => out.push((v, vec![item])),
        }
    }
    out
}

/// Each point's profile, its repeats merged.
pub fn merged_profiles(store: &Store, id: i64) -> Result<Vec<(u64, scalprof_model::PointProfile)>> {
    Ok(by_point(store.load_profiles(id)?)
        .into_iter()
        .filter_map(|(v, list)| scalprof_analyze::profile::merge(list).map(|p| (v, p)))
        .collect())
}

/// Each point's lock table, its repeats merged.
pub fn merged_locks(
    store: &Store,
    id: i64,
) -> Result<Vec<(u64, scalprof_model::locks::LockProfile)>> {
    Ok(by_point(store.load_locks(id)?)
        .into_iter()
        .filter_map(|(v, list)| scalprof_analyze::locks::merge(list).map(|p| (v, p)))
        .collect())
}

/// Workload outputs live next to the store, in a folder named after it:
/// `<dir>/runs.db.d/<id>/`. Two stores in one folder number their runs alike, so the
/// folder must belong to one store.
pub fn output_dir_for(db: &Path, id: i64) -> PathBuf {
    let mut name = db
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "runs.db".into());
    name.push(".d");
    db.with_file_name(name).join(id.to_string())
}

pub fn write_json(path: &Path, doc: &RunDocument) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

struct StoreSink<'a> {
    store: &'a Store,
    parameter: String,
    id: i64,
    bar: &'a ProgressBar,
    repeat: u32,
    diagnose: u32,
    warmup: u32,
    /// Kernel and ELF symbols, loaded once for the whole sweep.
    symbols: Option<Symbols>,
    profile_error_shown: bool,
}

impl StoreSink<'_> {
    fn report_failure(&self, value: u64, r: &Repeat, warmup: bool) {
        let what = if warmup { "warm-up" } else { "repeat" };
        let mut msg = format!(
            "scalprof: {} {value}, {what} {}: {}\n",
            self.parameter,
            r.index + 1,
            r.outcome()
        );
        if let Some(path) = &r.stderr_path {
            let tail = tail_lines(Path::new(path), 10);
            if tail.is_empty() {
                msg += &format!("  (nothing on stderr; full output in {path})\n");
            } else {
                msg += &format!("  last lines of stderr ({path}):\n");
                for line in tail {
                    msg += &format!("  | {line}\n");
                }
            }
        }
        let msg = scalprof_report::terminal_safe(&msg);
        self.bar.suspend(|| {
            let _ = std::io::stderr().write_all(msg.as_bytes());
        });
    }
}

impl SweepSink for StoreSink<'_> {
    fn starting(&mut self, value: u64, index: u32, kind: RepeatKind) {
        let (what, of) = match kind {
            RepeatKind::Warmup => ("warm-up", self.warmup),
            RepeatKind::Clean => ("repeat", self.repeat),
            RepeatKind::Traced => ("traced repeat", self.diagnose),
        };
        self.bar.set_message(format!(
            "{} {value} {what} {}/{of}",
            self.parameter,
            index + 1
        ));
    }

    fn repeat_done(
        &mut self,
        value: u64,
        repeat: &Repeat,
        collected: Collected,
    ) -> Result<(), scalprof_collect::SinkError> {
        self.store
            .add_repeat(self.id, value, repeat)
            .map_err(Box::new)?;
        // Name locks now that the workload has exited; only successful repeats count.
        if let (Some(raw), Some(symbols)) = (collected.locks, self.symbols.as_mut()) {
            if repeat.succeeded() {
                let table = scalprof_analyze::locks::lock_profile(&raw, symbols);
                self.store
                    .add_locks(self.id, value, repeat.index, &table)
                    .map_err(Box::new)?;
            }
        }
        // Symbolize now that the workload has exited; only successful repeats count.
        if let (Some(raw), Some(symbols)) = (collected.profile, self.symbols.as_mut()) {
            if repeat.succeeded() {
                self.bar.set_message(format!(
                    "{} {value}: symbolizing {} samples",
                    self.parameter, raw.samples
                ));
                let mut b = ProfileBuilder::new(&raw.event, raw.frequency, raw.kernel);
                match b.handle_buffer(&raw.attr, &raw.records, symbols) {
                    Ok(()) => {
                        let mut p = b.finish();
                        p.stats.bad_records += raw.bad_records;
                        self.store
                            .add_profile(self.id, value, repeat.index, &p)
                            .map_err(Box::new)?;
                    }
                    Err(e) if !self.profile_error_shown => {
                        self.profile_error_shown = true;
                        self.bar.suspend(|| {
                            eprintln!(
                                "scalprof: profile of {} {value} unusable: {e}",
                                self.parameter
                            )
                        });
                    }
                    Err(_) => {}
                }
            }
        }
        if !repeat.succeeded() {
            self.report_failure(value, repeat, false);
        }
        self.bar.inc(1);
        Ok(())
    }

    fn profiling_unavailable(&mut self, reason: &scalprof_collect::ProfilingError) {
        self.bar.suspend(|| {
            eprintln!(
                "scalprof: warning: continuing without profiles: {}",
                with_sources(reason)
            );
        });
    }

    fn leftover_processes(&mut self, value: u64, processes: &[(i32, String)]) {
        let list: Vec<String> = processes
            .iter()
            .take(5)
            .map(|(pid, comm)| format!("{pid} {comm}"))
            .collect();
        let msg = scalprof_report::terminal_safe(&format!(
            "scalprof: warning: at {} {value} the workload exited but left {} process{} running ({}{}); they are not measured and compete with the next repeats",
            self.parameter,
            processes.len(),
            if processes.len() == 1 { "" } else { "es" },
            list.join(", "),
            if processes.len() > 5 { ", …" } else { "" }
        ));
        self.bar.suspend(|| eprintln!("{msg}"));
    }

    fn output_capped(&mut self, path: &Path, bytes: u64) {
        let msg = scalprof_report::terminal_safe(&format!(
            "scalprof: warning: the workload wrote {:.0} MiB to {}; kept its first and last {} MiB",
            bytes as f64 / (1u64 << 20) as f64,
            path.display(),
            sweep::OUTPUT_LIMIT >> 21
        ));
        self.bar.suspend(|| eprintln!("{msg}"));
    }

    fn locks_unavailable(&mut self, reason: &scalprof_collect::LockTracerError) {
        self.bar.suspend(|| {
            eprintln!(
                "scalprof: warning: continuing without lock tracing: {}",
                with_sources(reason)
            );
        });
    }

    fn warmup_done(&mut self, value: u64, repeat: &Repeat) {
        if !repeat.succeeded() {
            self.report_failure(value, repeat, true);
        }
        self.bar.inc(1);
    }
}

/// An error and its causes, "outer: inner: …", as `{:#}` prints an anyhow error.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text += &format!(": {c}");
        cause = c.source();
    }
    text
}

fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read(path).unwrap_or_default();
    let start = text.len().saturating_sub(64 * 1024);
    let text = String::from_utf8_lossy(&text[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}
