//! `scalprof run` in the terminal: a progress bar and messages for what the pipeline
//! reports, the summary, and the run document written with `--json`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use scalprof_model::{Repeat, RunDocument, SweepParameter};
use scalprof_pipeline::facade::Interrupt;
use scalprof_pipeline::facade::{RepeatKind, SweepEnd, SweepEvent};
use scalprof_pipeline::sweep::Shape;
use scalprof_pipeline::{Event, Observer, RunOptions, RunOutcome};
use scalprof_store::Store;

/// What the terminal adds to a sweep.
pub struct Show {
    /// Print the summary at the end (the demo and `locks` print their own).
    pub summary: bool,
    /// Write the run document here.
    pub json: Option<PathBuf>,
}

pub fn record_and_show(
    store: &Store,
    opts: &RunOptions,
    checked: &scalprof_pipeline::Checked,
    show: &Show,
    interrupt: &Interrupt,
) -> Result<RunOutcome> {
    let mut progress = Progress {
        bar: ProgressBar::hidden(),
        parameter: opts.parameter,
        started: None,
        watching: None,
    };
    let outcome = scalprof_pipeline::record(store, opts, checked, &mut progress, interrupt);
    progress.bar.finish_and_clear();
    let outcome = outcome.map_err(crate::refusal::reworded)?;
    show_outcome(outcome, opts.parameter, show)
}

/// `scalprof watch` in the terminal: a line per window (on a terminal, the spinner's
/// message), what the watch noticed, and at the end the summary of the levels it saw.
pub fn watch_and_show(
    store: &Store,
    opts: &scalprof_pipeline::watch::WatchOptions,
    checked: &scalprof_pipeline::watch::WatchChecked,
    show: &Show,
    interrupt: &Interrupt,
) -> Result<RunOutcome> {
    let mut progress = Progress {
        bar: ProgressBar::hidden(),
        parameter: SweepParameter::Concurrency,
        started: None,
        watching: Some(format!(
            "a window every {}, one in {} traced{}; {} ends it, keeping what it measured",
            humantime::format_duration(opts.window),
            opts.trace_every,
            match (&opts.ops_file, &opts.ops_url) {
                (Some((path, _)), _) => format!(", operations from {}", path.display()),
                (None, Some(url)) => format!(", operations from {url}"),
                (None, None) => {
                    ", its CPU time as the work (--ops-file or --ops-url gives its operations)"
                        .into()
                }
            },
            match opts.duration {
                Some(d) => format!("--duration {} or Ctrl-C", humantime::format_duration(d)),
                None => "Ctrl-C (or the server's exit)".into(),
            }
        )),
    };
    let outcome =
        scalprof_pipeline::watch::record_watch(store, opts, checked, &mut progress, interrupt);
    progress.bar.finish_and_clear();
    let outcome = outcome.map_err(crate::refusal::reworded)?;
    show_outcome(outcome, SweepParameter::Concurrency, show)
}

/// The summary, how the run ended, and the document where `--json` asks for it.
fn show_outcome(outcome: RunOutcome, parameter: SweepParameter, show: &Show) -> Result<RunOutcome> {
    let id = outcome.id;
    let json_to_stdout = show.json.as_deref() == Some(Path::new("-"));
    if show.summary && !json_to_stdout {
        out!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::summary(&outcome.doc))
        );
    }
    match &outcome.end {
        SweepEnd::Interrupted(sig) => eprintln!(
            "scalprof: interrupted{}; run {id} keeps every finished repeat (scalprof show {id})",
            sig.map(|s| format!(" by {}", scalprof_model::signal::name(s)))
                .unwrap_or_default()
        ),
        SweepEnd::Failed { value, .. } => eprintln!(
            "scalprof: the sweep stopped at {} {value} because the workload failed \
             (see above); --keep-going continues past failures. Run {id} keeps what was measured.",
            parameter
        ),
        SweepEnd::Complete => {}
    }
    if let Some(path) = &show.json {
        write_json(path, &outcome.doc)?;
    }
    Ok(outcome)
}

/// Writes the run document to `path`; `-` is standard output (the summary is then left
/// out, so that the output is the document alone).
pub fn write_json(path: &Path, doc: &RunDocument) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    if path == Path::new("-") {
        return Ok(crate::out::data(&(text + "\n"))?);
    }
    Ok(crate::out::file(path, text + "\n")?)
}

/// "45 s", "3.2 min", "1.5 h".
fn human_duration(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// The bar's estimate of the time left; while a file's symbols take a second or more to
/// read, that file instead: the estimate cannot know how long it will take.
fn time_left(state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write) {
    let _ = match scalprof_pipeline::facade::sandbox::slowest_read() {
        Some((path, took)) => write!(
            w,
            "reading symbols of {} ({:.0} s)",
            scalprof_report::terminal_line(&path.to_string_lossy()),
            took.as_secs_f64().floor()
        ),
        None => write!(w, "~{:#} left", indicatif::HumanDuration(state.eta())),
    };
}

/// The progress bar, and the messages printed above it.
struct Progress {
    bar: ProgressBar,
    parameter: SweepParameter,
    /// When the sweep started and how many executions it has, for the estimate said
    /// once the first one is done.
    started: Option<(std::time::Instant, u64)>,
    /// A watch, not a sweep: how it goes, said when it starts.
    watching: Option<String>,
}

impl Progress {
    fn print(&self, msg: &str) {
        let msg = scalprof_report::terminal_safe(msg);
        self.bar.suspend(|| {
            let _ = std::io::stderr().write_all(msg.as_bytes());
        });
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event<'_>) {
        match event {
            Event::Started { id, label, shape } => self.started(*id, label, shape),
            Event::Sweep(e) => self.sweep_event(e),
            Event::Symbolizing { value, samples } => self.bar.set_message(format!(
                "{} {value}: symbolizing {samples} samples",
                self.parameter
            )),
            Event::ProfileUnusable { value, error } => self.print(&format!(
                "scalprof: profile of {} {value} unusable: {error}\n",
                self.parameter
            )),
            Event::Unsealed { why } => self.print(&format!(
                "scalprof: warning: the run has no seal ({}): `scalprof verify` will show its \
                 command and ask before running it again\n",
                scalprof_report::terminal_safe(why)
            )),
            Event::SamplerCeiling { hz, was, tick, .. } if *tick => self.print(&format!(
                "scalprof: sampling at {hz} Hz at most, not {was}: the kernel's tick takes the \
                 samples here, with nothing switched when a thread blocks \
                 (SCALPROF_SAMPLER=perf samples faster, with a perf event per thread)\n"
            )),
            Event::SamplerCeiling {
                hz,
                was,
                cost_ns,
                share,
                ..
            } => self.print(&format!(
                "scalprof: sampling at {hz} Hz at most, not {was}: a sample costs {:.1} µs of \
                 the sampled thread on this machine, and the sampler keeps to {:.0}% of a \
                 thread (-F sets the rate)\n",
                cost_ns / 1e3,
                share * 100.0
            )),
            Event::TickSamplerRefused { why } => self.print(&format!(
                "scalprof: warning: the tick sampler could not sample ({}): a perf event per \
                 thread samples instead, which costs each block of a thread microseconds on a \
                 virtual machine (docs/profiles.md, \"The tick sampler\")\n",
                scalprof_report::terminal_safe(why)
            )),
            Event::CollectorLost { value, what } => self.print(&format!(
                "scalprof: warning: at {} {value}, {what}\n",
                self.parameter
            )),
            Event::UntrustedCheckout(untrusted) => {
                self.print(&format!("scalprof: warning: {untrusted}\n"))
            }
            Event::Unsteady {
                value,
                done,
                spread,
            } => {
                self.bar.inc_length(1);
                self.print(&format!(
                    "scalprof: at {} {value}, {done} clean repeats leave the throughput within ±{:.1}% (80%), more than ±{:.0}%; measuring another\n",
                    self.parameter,
                    spread * 100.0,
                    scalprof_pipeline::sweep::STEADY * 100.0
                ));
            }
            Event::Unsettled {
                value,
                done,
                settling,
            } => {
                self.bar.inc_length(1);
                self.print(&format!(
                    "scalprof: at {} {value}, {done} traced repeats leave the verdict unsettled: {}; tracing another\n",
                    self.parameter,
                    scalprof_report::terminal_safe(&settling.reason)
                ));
            }
        }
    }
}

impl Progress {
    /// The run's first line, and the bar.
    fn started(&mut self, id: i64, label: &str, shape: &Shape) {
        if let Some(how) = &self.watching {
            eprintln!(
                "scalprof: run {id} ({}): watching the server: {how}",
                scalprof_report::terminal_line(label)
            );
            self.bar = ProgressBar::new_spinner();
            self.bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .expect("static template"),
            );
            self.bar
                .enable_steady_tick(std::time::Duration::from_millis(500));
            return;
        }
        eprintln!(
            "scalprof: run {id} ({}): {} point{} × {} repeat{}{}",
            scalprof_report::terminal_line(label),
            shape.points,
            if shape.points == 1 { "" } else { "s" },
            shape.repeat,
            if shape.repeat == 1 { "" } else { "s" },
            if shape.traced > 0 {
                format!(" + {} traced", shape.traced)
            } else {
                String::new()
            }
        );
        self.bar = ProgressBar::new(shape.steps());
        self.started = Some((std::time::Instant::now(), shape.steps()));
        self.bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {left} {msg}",
            )
            .expect("static template")
            .with_key("left", time_left)
            .progress_chars("=> "),
        );
        // Redrawn while the sweep waits (on a parser child, say), not only when it reports.
        self.bar
            .enable_steady_tick(std::time::Duration::from_millis(500));
    }

    /// What the sweep said: the bar's message and position, and what went wrong.
    fn sweep_event(&mut self, event: &SweepEvent<'_>) {
        match *event {
            SweepEvent::Starting {
                value,
                kind,
                index,
                of,
            } => {
                let what = match kind {
                    RepeatKind::Warmup => "warm-up",
                    RepeatKind::Clean => "repeat",
                    RepeatKind::Traced => "traced repeat",
                };
                self.bar.set_message(format!(
                    "{} {value} {what} {}/{of}",
                    self.parameter,
                    index + 1
                ));
            }
            SweepEvent::Window(w) => self.window_done(w),
            SweepEvent::RepeatDone { .. } if self.watching.is_some() => {}
            SweepEvent::RepeatDone { value, repeat, .. } => self.step_done(value, repeat, false),
            SweepEvent::WarmupDone { value, repeat } => self.step_done(value, repeat, true),
            SweepEvent::Rerun { value, disturbed } => {
                if let Some(interference) = &disturbed.interference {
                    self.bar.inc_length(1);
                    self.print(&format!(
                        "scalprof: at {} {value}, other processes took {:.0}% of the CPUs the workload could use ({}); measuring that repeat again\n",
                        self.parameter,
                        interference.share * 100.0,
                        scalprof_report::foreign_processes(&interference.processes)
                    ));
                }
            }
            SweepEvent::Suspended { value, wall_s } => {
                self.bar.inc_length(1);
                self.print(&format!(
                    "scalprof: warning: at {} {value}, scalprof was stopped while a repeat ran ({wall_s:.3} s with the pause); that repeat is not kept and runs again\n",
                    self.parameter
                ));
            }
            _ => {
                if let Some(msg) = self.sweep_warning(event) {
                    self.print(&(msg + "\n"));
                }
            }
        }
    }

    /// A warning of the sweep's, which changes nothing on the bar.
    fn sweep_warning(&self, event: &SweepEvent<'_>) -> Option<String> {
        Some(match *event {
            SweepEvent::NoProfiling(reason) => format!(
                "scalprof: warning: continuing without profiles: {}",
                with_sources(reason)
            ),
            SweepEvent::NoLockTracing(reason) => format!(
                "scalprof: warning: continuing without lock tracing: {}",
                with_sources(reason)
            ),
            SweepEvent::LeftoverProcesses { value, processes } => {
                let list: Vec<String> = processes
                    .iter()
                    .take(5)
                    .map(|(pid, comm)| format!("{pid} {comm}"))
                    .collect();
                format!(
                    "scalprof: warning: at {} {value} the workload exited but left {} process{} running ({}{}); scalprof stopped {} (nothing of a workload outlives its repeat)",
                    self.parameter,
                    processes.len(),
                    if processes.len() == 1 { "" } else { "es" },
                    list.join(", "),
                    if processes.len() > 5 { ", …" } else { "" },
                    if processes.len() == 1 { "it" } else { "them" }
                )
            }
            SweepEvent::OutputCapped {
                path,
                bytes,
                kept_bytes,
            } => format!(
                "scalprof: warning: the workload wrote {:.0} MiB to {}; kept its first and last {} MiB",
                bytes as f64 / (1u64 << 20) as f64,
                path.display(),
                kept_bytes >> 21
            ),
            SweepEvent::StackGrown {
                value,
                cut,
                from,
                to,
            } => format!(
                "scalprof: at {} {value}, {:.0}% of the user stacks could not be walked to their root with {} KiB copies: copying {} KiB in the next traced repeats (--stack-size sets it)",
                self.parameter,
                cut * 100.0,
                from >> 10,
                to >> 10
            ),
            SweepEvent::RateChosen {
                value,
                hz,
                cpu_s,
                target,
            } => format!(
                "scalprof: at {} {value}, sampling at {hz} Hz: about {} samples from {cpu_s:.1} CPU seconds a run, for a target of {target} (-F sets the rate)",
                self.parameter,
                (hz as f64 * cpu_s).round()
            ),
            SweepEvent::OpsNotANumber { value, matched } => format!(
                "scalprof: warning: at {} {value}, the ops regex matched {matched:?}, but what it captures is not a number: capture the count, e.g. --ops-regex 'ops=(\\d+)'",
                self.parameter
            ),
            SweepEvent::WatchNote(line) => format!("scalprof: {line}"),
            SweepEvent::Starting { .. }
            | SweepEvent::Window(_)
            | SweepEvent::RepeatDone { .. }
            | SweepEvent::WarmupDone { .. }
            | SweepEvent::Rerun { .. }
            | SweepEvent::Suspended { .. } => return None,
        })
    }

    /// A watch window finished: the spinner's message on a terminal, else a line.
    fn window_done(&mut self, w: &scalprof_pipeline::facade::WindowDone) {
        let level = match w.level {
            Some(l) => format!("level {l}"),
            None => "idle".into(),
        };
        let levels: Vec<String> = w
            .levels
            .iter()
            .map(|(l, n)| format!("{l} ({n} window{})", if *n == 1 { "" } else { "s" }))
            .collect();
        let line = format!(
            "window {} at {:.0} s{}: {:.2} busy threads, {level}, {} ops/s; levels so far: {}",
            w.index + 1,
            w.elapsed_s,
            if w.traced { " (traced)" } else { "" },
            w.concurrency,
            scalprof_report::si(w.ops_per_s),
            if levels.is_empty() {
                "none".into()
            } else {
                levels.join(", ")
            }
        );
        if self.bar.is_hidden() {
            eprintln!("scalprof: {line}");
        } else {
            self.bar.set_message(line);
        }
    }

    /// A repeat or warm-up finished: what went wrong if it failed, and a step of the bar
    /// (with the sweep's estimate after the first).
    fn step_done(&mut self, value: u64, r: &Repeat, warmup: bool) {
        if !r.succeeded() {
            self.repeat_failed(value, r, warmup);
        }
        self.bar.inc(1);
        // How long the sweep should take: its executions × the first one's time (with its
        // symbolizing), said once, before the wait is long.
        if let Some((t0, steps)) = self.started.take() {
            let first = t0.elapsed().as_secs_f64();
            if steps > 1 {
                self.print(&format!(
                    "scalprof: the first run took {first:.1} s; the sweep's {steps} runs should take about {} (the bar's estimate follows the runs)\n",
                    human_duration(first * steps as f64)
                ));
            }
        }
    }

    /// What a failed repeat or warm-up said on stderr.
    fn repeat_failed(&mut self, value: u64, r: &Repeat, warmup: bool) {
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
        self.print(&msg);
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
