//! Watching a running server (`scalprof watch`): its windows recorded as the repeats of the
//! concurrency levels it went through, into a run like a sweep's (parameter
//! `concurrency`), which `show`, `report`, `compare` and `history` read as they read any.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use regex::Regex;
use scalprof_collect::attach::AttachSpec;
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::locks::LockConfig;
use scalprof_collect::perf::SamplingConfig;
use scalprof_collect::sweep::Collectors;
use scalprof_collect::watch::{WatchCollectors, WatchOps, WatchPlan};
use scalprof_model::{ObserverCpu, Sweep, SweepParameter};
use scalprof_store::{NewRun, Store};

use crate::check::Refusal;
use crate::recording::Recorder;
use crate::sweep::{record_end, sharing_sites, Event, HoldPolicy, Observer, RunOutcome, StoreSink};

/// Everything a watch needs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub attach: AttachSpec,
    /// The server's log and the regex of its ops lines; `None`: CPU time is the work
    /// (or `ops_url`'s counter).
    pub ops_file: Option<(PathBuf, String)>,
    /// A counter of a metrics endpoint on this host, `URL#METRIC`.
    pub ops_url: Option<String>,
    /// The regex of the log's latency lines (the first group in milliseconds): the
    /// windows' concurrency by Little's law.
    pub latency_regex: Option<String>,
    pub window: Duration,
    pub duration: Option<Duration>,
    pub label: Option<String>,
    pub sampling: Option<SamplingConfig>,
    pub locks: Option<LockConfig>,
    /// One window in this many is traced.
    pub trace_every: u32,
    /// The thread count the document's prediction reaches.
    pub predict: Option<u64>,
}

impl WatchOptions {
    /// A watch of `attach` with `scalprof watch`'s defaults: 1-second windows, one in 8
    /// traced (and each level's first two), profiled and lock-traced, CPU time as the work.
    pub fn new(attach: AttachSpec) -> WatchOptions {
        WatchOptions {
            attach,
            ops_file: None,
            ops_url: None,
            latency_regex: None,
            window: Duration::from_secs(1),
            duration: None,
            label: None,
            sampling: Some(SamplingConfig::default()),
            locks: Some(LockConfig::default()),
            trace_every: 8,
            predict: None,
        }
    }
}

/// What the checks found a watch's options to mean.
#[derive(Debug)]
pub struct WatchChecked {
    pub ops: WatchOps,
    pub latency: Option<Regex>,
    /// The server's processes now.
    pub attached: Vec<i32>,
    /// Other users' processes that matched and are left alone, in words.
    pub skipped: Option<String>,
    /// The command line of the first process: what the run's command shows.
    pub command: Vec<String>,
    pub label: String,
}

/// Checks a watch's options before anything is created: the regex, the log, the
/// privileges the collectors need, and the server.
pub fn check_watch(opts: &WatchOptions) -> Result<WatchChecked, Refusal> {
    let ops = match &opts.ops_file {
        None => match &opts.ops_url {
            None => WatchOps::Cpu,
            Some(spec) => {
                // Read once now: an endpoint that is not there, or lacks the counter, is
                // said before anything is created.
                scalprof_collect::watch::scrape::Scraper::open(spec)
                    .map_err(|why| Refusal::Attach(scalprof_collect::CollectError::Attach(why)))?;
                WatchOps::Url { spec: spec.clone() }
            }
        },
        Some((path, regex)) => {
            let compiled = Regex::new(regex).map_err(|error| Refusal::OpsRegex {
                regex: regex.clone(),
                error,
            })?;
            // Followed from the watch's start; refused now if it cannot be.
            scalprof_collect::watch::follow::Follower::open(path, compiled.clone())
                .map_err(|why| Refusal::Attach(scalprof_collect::CollectError::Attach(why)))?;
            WatchOps::Log {
                path: path.clone(),
                regex: compiled,
            }
        }
    };
    let latency = match &opts.latency_regex {
        None => None,
        Some(regex) => {
            let compiled = Regex::new(regex).map_err(|error| Refusal::OpsRegex {
                regex: regex.clone(),
                error,
            })?;
            if compiled.captures_len() < 2 {
                return Err(Refusal::OpsRegexNoGroup {
                    regex: regex.clone(),
                });
            }
            Some(compiled)
        }
    };
    if opts.sampling.is_some() && !scalprof_collect::caps::may_sample_every_cpu() {
        return Err(Refusal::AttachMaySample {
            paranoid: scalprof_collect::caps::paranoid(),
        });
    }
    if opts.locks.is_some() && !scalprof_collect::caps::may_load_bpf() {
        return Err(Refusal::AttachMayTrace);
    }
    let found = opts.attach.resolve_found().map_err(Refusal::Attach)?;
    let command = found
        .pids
        .first()
        .map(|&pid| command_line(pid))
        .unwrap_or_default();
    let label = opts.label.clone().unwrap_or_else(|| {
        format!("watch {}", crate::label::default_label(&command))
            .trim()
            .to_string()
    });
    Ok(WatchChecked {
        ops,
        latency,
        attached: found.pids,
        skipped: found.skipped,
        command,
        label,
    })
}

/// A process's command line, as `ps -o args` shows it (its command name when it has none:
/// a kernel thread, or one that exited).
fn command_line(pid: i32) -> Vec<String> {
    let words: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if words.is_empty() {
        return scalprof_collect::attach::comm_of(pid).into_iter().collect();
    }
    words
}

/// The CPU time of this process and of the children it waited for (the symbol parsers).
fn own_cpu_s() -> f64 {
    use scalprof_collect::perf::{children_cpu_ns, process_cpu_ns};
    (process_cpu_ns() + children_cpu_ns()) as f64 / 1e9
}

/// Watches the server into the store and returns the run's document. Stopped by Ctrl-C,
/// at `duration`, or by the server's exit, it keeps every window measured.
pub fn record_watch(
    store: &Store,
    opts: &WatchOptions,
    checked: &WatchChecked,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
) -> Result<RunOutcome> {
    record_watch_with(
        store,
        opts,
        checked,
        &mut WatchCollectors::default(),
        observer,
        interrupt,
    )
}

/// [`record_watch`] with the given collectors.
pub fn record_watch_with(
    store: &Store,
    opts: &WatchOptions,
    checked: &WatchChecked,
    collectors: &mut dyn Collectors,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
) -> Result<RunOutcome> {
    let mut host = scalprof_collect::host::probe();
    host.sample_cost_ns = opts.sampling.as_ref().and_then(|c| {
        scalprof_collect::perf::cached_sample_cost_ns(&SamplingConfig {
            use_pmu: host.pmu,
            ..c.clone()
        })
    });
    let sampling = opts.sampling.clone().map(|mut c| {
        c.use_pmu = host.pmu;
        // The sampler keeps to its share of a thread at what a sample costs here.
        if let Some(most) = host
            .sample_cost_ns
            .filter(|_| c.adaptive)
            .and_then(scalprof_collect::perf::cost_ceiling)
        {
            c.frequency = c.frequency.min(most);
        }
        c
    });
    let new = NewRun {
        label: checked.label.clone(),
        created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: checked.command.clone(),
        sweep: Sweep {
            parameter: SweepParameter::Concurrency,
            values: Vec::new(),
        },
        host,
        scaling: None,
        ops_regex: match &checked.ops {
            WatchOps::Log { regex, .. } => regex.as_str().to_string(),
            WatchOps::Url { spec } => spec.clone(),
            WatchOps::Cpu => String::new(),
        },
        commit: None,
    };
    let id = store.create_run(&new)?;
    let output_dir = store.run_output_dir(id)?;
    store.set_output_dir(id, &output_dir)?;
    let header = crate::sweep::header_of(id, new, &output_dir);
    let tracing = sampling.is_some() || opts.locks.is_some();
    observer.event(&Event::Started {
        id,
        label: &checked.label,
        shape: &crate::sweep::Shape {
            points: 0,
            repeat: 0,
            warmup: 0,
            traced: 0,
        },
    });
    let plan = WatchPlan {
        attach: opts.attach.clone(),
        ops: checked.ops.clone(),
        latency: checked.latency.clone(),
        window: opts.window,
        duration: opts.duration,
        sampling,
        locks: opts.locks.clone(),
        trace_every: opts.trace_every,
    };
    let mut sink = StoreSink::new(
        Recorder::new(store, id, header),
        observer,
        tracing,
        &[],
        HoldPolicy {
            everywhere: false,
            threads: true,
        },
    );
    let (cpu_at_start, started) = (own_cpu_s(), std::time::Instant::now());
    let end = scalprof_collect::watch::execute_watch(&plan, collectors, &mut sink, interrupt);
    let (mut recorder, symbols) = sink.into_parts();
    // The levels it went through are the run's points, in order.
    let mut values: Vec<u64> = recorder
        .recording()
        .inputs()
        .repeats
        .iter()
        .map(|r| r.value)
        .collect();
    values.sort_unstable();
    values.dedup();
    recorder.set_sweep_values(&values)?;
    let end = record_end(&mut recorder, end)?;
    if let Some(symbols) = symbols.filter(|_| plan.sampling.is_some()) {
        sharing_sites(&mut recorder, symbols)?;
    }
    recorder.set_observer(ObserverCpu {
        cpu_s: own_cpu_s() - cpu_at_start,
        span_s: started.elapsed().as_secs_f64(),
    })?;
    let recording = recorder.into_recording();
    let mut inputs = recording.inputs();
    inputs.predict_to = opts.predict;
    let doc = scalprof_analyze::assemble(&inputs);
    Ok(RunOutcome {
        id,
        doc,
        end,
        recording,
    })
}
