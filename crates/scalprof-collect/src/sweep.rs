//! The sweep: every point, warm-ups, then clean repeats (nothing attached: the numbers
//! scalprof reports), then diagnosis repeats (the profiler and tracers attached: what the
//! findings are made of). Each repeat is handed to a sink the moment it ends (the store
//! commits it there, so a crash loses at most one repeat).

use std::cell::RefCell;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use regex::Regex;

use crate::attach::AttachSpec;
use crate::counters::EventCounter;
use crate::delay::HoldTimer;
use crate::exec::{self, Attach, ExecSpec};
use crate::interrupt::Interrupt;
use crate::locks::{LockConfig, LockTracer, RawLocks, ResidentTracer, ResidentWindow};
use crate::perf::{RawProfile, Sampler, SamplingConfig};
use crate::CollectError;

mod events;
mod execution;
mod hooks;
mod step;
pub use events::{Collected, RepeatKind, SweepEnd, SweepEvent, SweepSink};
use step::{run_step, Step, Stepped, SweepState};

/// [`SweepPlan::output`]'s policies (defined beside the capped run that applies them).
pub use crate::exec::{Keep, OutputPolicy, OUTPUT_LIMIT};

/// The environment variable that carries a sweep parameter to the workload.
pub fn parameter_env(parameter: &str) -> String {
    format!("SCALPROF_{}", parameter.to_ascii_uppercase())
}

#[derive(Clone, Debug)]
pub struct SweepPlan {
    pub command: Vec<String>,
    /// Threads or size: names the `{placeholder}` and the environment variable.
    pub parameter: scalprof_model::SweepParameter,
    pub values: Vec<u64>,
    /// Clean (untraced) repeats per point: throughput, speedup and the model.
    pub repeat: u32,
    /// More clean repeats run while the sink's [`SweepSink::more_clean`] asks for them
    /// (the point's throughput is not yet known closely enough), up to this many in all.
    pub repeat_max: u32,
    /// Diagnosis repeats per point, with the collectors attached (none when no collector
    /// is on).
    pub diagnose: u32,
    /// More diagnosis repeats run while the sink's [`SweepSink::more_traced`] asks for
    /// them, up to this many in all.
    pub diagnose_max: u32,
    /// Repeats of a point measured again because other processes disturbed them, at
    /// most ([`scalprof_model::stability::MAX_RERUNS`] by default; 0: never).
    pub max_reruns: u32,
    pub warmup: u32,
    /// A shell command (`sh -c`) run before every execution of the workload, outside its
    /// timed window (`--prepare`); `{parameter}` is replaced in it as in the command.
    pub prepare: Option<String>,
    /// Like `prepare`, run after every execution (`--cleanup`).
    pub cleanup: Option<String>,
    pub timeout: Option<Duration>,
    pub keep_going: bool,
    /// Where each repeat's stdout/stderr files go.
    pub output_dir: PathBuf,
    /// Must have one capture group: the operation count.
    pub ops_regex: Regex,
    /// What each repeat keeps of its stdout and stderr, as it is written: by default only
    /// the ops lines and stderr's head and tail ([`OutputPolicy::ops_lines`]).
    pub output: OutputPolicy,
    /// Profile the diagnosis repeats with the sampler; `None` = off.
    pub sampling: Option<SamplingConfig>,
    /// Trace lock contention in the diagnosis repeats; `None` = off.
    pub locks: Option<LockConfig>,
    /// Running processes the traced repeats observe alongside the command (a server).
    pub attach: AttachSpec,
    /// Set in the traced repeats' environment only: what makes a runtime's frames visible
    /// to the profiler (a JVM's perf map and frame pointers).
    pub traced_env: Vec<(String, String)>,
}

/// Parses `1,2,4`, `1-8`, `1-4,8,16`; keeps the order given, drops duplicates.
pub fn parse_values(text: &str) -> Result<Vec<u64>, CollectError> {
    let bad = |reason: &str| CollectError::BadSweepList {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let mut out: Vec<u64> = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad("empty item"));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a.trim()), num(b.trim())),
            None => (num(part), num(part)),
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Err(bad(&format!("{part:?} is not a positive integer or range")));
        };
        if lo == 0 {
            return Err(bad("values start at 1"));
        }
        if hi < lo {
            return Err(bad(&format!("range {part:?} runs backwards")));
        }
        if hi - lo > 4096 {
            return Err(bad(&format!("range {part:?} has more than 4096 values")));
        }
        for v in lo..=hi {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    Ok(out)
}

fn num(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// Powers of two up to the online CPU count, plus the count itself.
pub fn default_values(cpus: u32) -> Vec<u64> {
    let cpus = u64::from(cpus.max(1));
    let mut v: Vec<u64> = std::iter::successors(Some(1u64), |x| Some(x * 2))
        .take_while(|&x| x <= cpus)
        .collect();
    if v.last() != Some(&cpus) {
        v.push(cpus);
    }
    v
}

/// The command for one point: `{parameter}` replaced in every argument.
pub fn substitute(command: &[String], parameter: &str, value: u64) -> Vec<String> {
    let placeholder = format!("{{{parameter}}}");
    command
        .iter()
        .map(|a| a.replace(&placeholder, &value.to_string()))
        .collect()
}

/// The last match of the ops regex in the workload's stdout.
pub fn parse_ops(stdout: &str, re: &Regex) -> Option<u64> {
    match_ops(stdout, re).ok()?
}

/// Like [`parse_ops`], telling "no match" (`Ok(None)`) from a match whose capture is not
/// a number (`Err(the whole match)`).
pub fn match_ops(stdout: &str, re: &Regex) -> Result<Option<u64>, String> {
    let Some(caps) = re.captures_iter(stdout).last() else {
        return Ok(None);
    };
    let Some(text) = caps.get(1).or_else(|| caps.get(0)).map(|m| m.as_str()) else {
        return Ok(None);
    };
    text.parse::<u64>()
        .ok()
        .or_else(|| {
            text.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .map(|f| f.round() as u64)
        })
        .map(Some)
        .ok_or_else(|| caps.get(0).map_or("", |m| m.as_str()).to_string())
}

/// Reads at most the last 4 MiB of a workload's stdout (where `ops=` lines are).
#[allow(clippy::disallowed_methods)] // opens: a workload output in the run's private folder
pub fn read_tail(path: &PathBuf, max: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max {
        let _ = f.seek(SeekFrom::Start(len - max));
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// A profiler for one traced repeat: attached before the workload execs, its recording
/// taken after the workload was reaped.
pub trait ProfileCollector: Attach {
    fn take(&mut self) -> Option<RawProfile>;
    /// Why this repeat's recording was lost, if it was.
    fn lost(&self) -> Option<String> {
        None
    }
}

/// A lock tracer for one traced repeat (see [`ProfileCollector`]).
pub trait LockCollector: Attach {
    fn take(&mut self) -> Option<RawLocks>;
    /// Why this repeat's recording was lost, if it was.
    fn lost(&self) -> Option<String> {
        None
    }
}

impl ProfileCollector for Sampler {
    fn take(&mut self) -> Option<RawProfile> {
        Sampler::take(self)
    }
    fn lost(&self) -> Option<String> {
        Sampler::lost(self)
    }
}

impl LockCollector for LockTracer {
    fn take(&mut self) -> Option<RawLocks> {
        LockTracer::take(self)
    }
    fn lost(&self) -> Option<String> {
        LockTracer::lost(self)
    }
}

/// Makes the collectors of each traced repeat. [`SystemCollectors`] makes the real ones;
/// tests inject others, to drive the paths where a collector fails.
pub trait Collectors {
    fn sampler(&mut self, config: &SamplingConfig) -> Box<dyn ProfileCollector>;
    fn lock_tracer(&mut self, config: &LockConfig) -> Box<dyn LockCollector>;
}

/// The perf_event sampler, and the BPF lock tracer loaded once for the sweep's traced
/// repeats and attached for each ([`ResidentTracer`]): loading it took 25-100 ms of a CPU
/// a repeat, before the workload started.
#[derive(Default)]
pub struct SystemCollectors {
    tracer: Option<Rc<RefCell<ResidentTracer>>>,
}

impl Collectors for SystemCollectors {
    fn sampler(&mut self, config: &SamplingConfig) -> Box<dyn ProfileCollector> {
        Box::new(Sampler::new(config.clone()))
    }

    fn lock_tracer(&mut self, config: &LockConfig) -> Box<dyn LockCollector> {
        let tracer = match &self.tracer {
            Some(t) if t.borrow().serves(config) => t.clone(),
            _ => {
                let t = Rc::new(RefCell::new(ResidentTracer::new(config.clone())));
                self.tracer = Some(t.clone());
                t
            }
        };
        Box::new(ResidentWindow::new(tracer, config.clone()))
    }
}

/// Runs the sweep with the system's collectors. Returns how it ended; every finished
/// repeat went to the sink.
pub fn execute_plan(
    plan: &SweepPlan,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
) -> Result<SweepEnd, CollectError> {
    execute_plan_with(plan, &mut SystemCollectors::default(), sink, interrupt)
}

/// Runs the sweep with the given collectors.
pub fn execute_plan_with(
    plan: &SweepPlan,
    collectors: &mut dyn Collectors,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
) -> Result<SweepEnd, CollectError> {
    // Owner-only, like the store: outputs reveal command lines, paths and data.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&plan.output_dir)
        .map_err(|source| CollectError::OutputFile {
            path: plan.output_dir.clone(),
            source,
        })?;
    let mut state = SweepState {
        on: Enabled {
            sampling: plan.sampling.clone(),
            locks: plan.locks.clone(),
        },
        count_pmu: true,
        cpus: crate::host::online_cpus(),
        quota: crate::limits::QuotaMeter::probe(),
        ceiling_hz: plan.sampling.as_ref().map(|c| c.frequency),
        clean_cpu_s: Vec::new(),
    };
    for &value in &plan.values {
        let ended = match warm_up(plan, value, collectors, sink, interrupt, &mut state)? {
            None => measure(plan, value, collectors, sink, interrupt, &mut state)?,
            end => end,
        };
        if let Some(end) = ended {
            return Ok(end);
        }
    }
    if interrupt.requested() {
        return Ok(SweepEnd::Interrupted(interrupt.signal()));
    }
    Ok(SweepEnd::Complete)
}

/// A point's warm-up runs (not stored); how the sweep ended if it ended there.
fn warm_up(
    plan: &SweepPlan,
    value: u64,
    collectors: &mut dyn Collectors,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
    state: &mut SweepState,
) -> Result<Option<SweepEnd>, CollectError> {
    for index in 0..plan.warmup {
        let step = Step {
            value,
            kind: RepeatKind::Warmup,
            index,
            of: index,
        };
        if let Stepped::End(end) = run_step(plan, &step, collectors, sink, interrupt, state)? {
            return Ok(Some(end));
        }
    }
    Ok(None)
}

/// A point's clean, then traced repeats, in one index space. A repeat that other processes
/// disturbed is kept, marked, and measured again (a bounded number of times per point);
/// traced repeats go on while the sink says the verdict has not settled, up to
/// `diagnose_max`. How the sweep ended if it ended there.
fn measure(
    plan: &SweepPlan,
    value: u64,
    collectors: &mut dyn Collectors,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
    state: &mut SweepState,
) -> Result<Option<SweepEnd>, CollectError> {
    let mut index = 0;
    let mut reruns = 0;
    for kind in [RepeatKind::Clean, RepeatKind::Traced] {
        let mut done = 0;
        // A disturbed repeat to measure again: it runs whatever the verdict says.
        let mut again = false;
        while again || wants_another(plan, kind, done, value, sink, state) {
            again = false;
            let step = Step {
                value,
                kind,
                index,
                of: done,
            };
            index += 1;
            match run_step(plan, &step, collectors, sink, interrupt, state)? {
                // Paused: not a measurement; run again under the same index, whatever
                // the verdict and however many re-runs were spent.
                Stepped::Suspended => {
                    index -= 1;
                    again = true;
                }
                // Disturbed: measured again in its place, while re-runs are left.
                Stepped::Disturbed(repeat) if reruns < plan.max_reruns => {
                    reruns += 1;
                    again = true;
                    sink.event(SweepEvent::Rerun {
                        value,
                        disturbed: &repeat,
                    })
                    .map_err(CollectError::Sink)?;
                }
                Stepped::Measured | Stepped::Disturbed(_) => done += 1,
                Stepped::End(end) => return Ok(Some(end)),
            }
        }
    }
    Ok(None)
}

/// Whether a point wants another repeat of `kind` after `done`: the ones asked for, then
/// clean ones while the sink finds the throughput unsteady (up to `repeat_max`) and
/// traced ones while it finds the verdict unsettled (up to `diagnose_max`).
fn wants_another(
    plan: &SweepPlan,
    kind: RepeatKind,
    done: u32,
    value: u64,
    sink: &mut dyn SweepSink,
    state: &SweepState,
) -> bool {
    let wanted = match kind {
        RepeatKind::Clean => plan.repeat,
        _ if !state.on.any() => 0,
        _ => plan.diagnose,
    };
    done < wanted
        || (kind == RepeatKind::Clean && done < plan.repeat_max && sink.more_clean(value, done))
        || (kind == RepeatKind::Traced
            && wanted > 0
            && done < plan.diagnose_max
            && sink.more_traced(value, done))
}

/// The collectors still on for the traced repeats of this sweep.
struct Enabled {
    sampling: Option<SamplingConfig>,
    locks: Option<LockConfig>,
}

impl Enabled {
    fn any(&self) -> bool {
        self.sampling.is_some() || self.locks.is_some()
    }
}

/// Runs one repeat with the collectors that are on; a collector that cannot start is
/// switched off for the rest of the sweep (the sink says why) and the repeat runs without it.
// The step's parts, passed one by one: a struct for them would exist for this call alone.
#[allow(clippy::too_many_arguments)]
fn run_collected(
    spec: &ExecSpec,
    output: &OutputPolicy,
    interrupt: &Interrupt,
    traced: bool,
    time_holds: bool,
    collectors: &mut dyn Collectors,
    on: &mut Enabled,
    counter: &mut EventCounter,
    sink: &mut dyn SweepSink,
) -> Result<(exec::ExecResult, Collected), CollectError> {
    loop {
        let mut sampler = on
            .sampling
            .as_ref()
            .filter(|_| traced)
            .map(|c| collectors.sampler(c));
        // The kernel's hold events too are left out where the holds are not timed.
        let mut tracer = on.locks.as_ref().filter(|_| traced).map(|c| {
            collectors.lock_tracer(&LockConfig {
                hold_times: c.hold_times && time_holds,
                ..c.clone()
            })
        });
        let mut attached: Vec<&mut dyn Attach> = vec![&mut *counter];
        if let Some(s) = sampler.as_mut() {
            attached.push(s.as_mut());
        }
        if let Some(t) = tracer.as_mut() {
            attached.push(t.as_mut());
        }
        let (timed, untimed) = hold_timer(spec, on, time_holds);
        let run_spec = timed.as_ref().map_or(spec, |(_, s)| s);
        match exec::run_capped(run_spec, output, interrupt, &mut attached) {
            // The workload did not start: retry without the collector that failed.
            Err(CollectError::Profiling(reason)) => {
                sink.event(SweepEvent::NoProfiling(&reason))
                    .map_err(CollectError::Sink)?;
                on.sampling = None;
            }
            Err(CollectError::Locks(reason)) => {
                sink.event(SweepEvent::NoLockTracing(&reason))
                    .map_err(CollectError::Sink)?;
                on.locks = None;
            }
            Err(e) => return Err(e),
            Ok(r) => {
                let mut lost: Vec<String> = sampler
                    .as_ref()
                    .and_then(|s| s.lost())
                    .into_iter()
                    .chain(tracer.as_ref().and_then(|t| t.lost()))
                    .chain(untimed)
                    .collect();
                let mut locks = tracer.as_mut().and_then(|t| t.take());
                if let (Some(l), Some((timer, timed_spec))) = (locks.as_mut(), timed) {
                    let records = timer.read(&timed_spec.stderr);
                    lost.extend(records.lost());
                    l.holds = records.holds;
                    l.holds_timed = true;
                }
                let collected = Collected {
                    profile: sampler.as_mut().and_then(|s| s.take()),
                    locks,
                    lost,
                };
                return Ok((r, collected));
            }
        }
    }
}

/// The hold-timing interposer and the spec that loads it, where this repeat times the
/// lock holds; or, where it could not be prepared, why the repeat runs without them.
fn hold_timer(
    spec: &ExecSpec,
    on: &Enabled,
    time_holds: bool,
) -> (Option<(HoldTimer, ExecSpec)>, Option<String>) {
    match on.locks.as_ref().filter(|c| time_holds && c.hold_times) {
        None => (None, None),
        // The interposer goes next to the repeat's outputs.
        Some(_) => match HoldTimer::prepare(spec.stdout.parent().unwrap_or(Path::new("."))) {
            Ok(timer) => {
                let timed_spec = timer.timed(spec);
                (Some((timer, timed_spec)), None)
            }
            // The repeat runs without them, and says why.
            Err(e) => (None, Some(no_hold_times(&e))),
        },
    }
}

/// Why a traced repeat has no hold times, its causes included.
fn no_hold_times(e: &crate::DelayError) -> String {
    let mut why = format!("this repeat has no hold times: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why.push_str(&format!(": {s}"));
        source = s.source();
    }
    why
}

#[cfg(test)]
mod tests;
