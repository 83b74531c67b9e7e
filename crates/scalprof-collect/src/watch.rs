//! `scalprof watch`: a running server's scaling curve from its own load, without a sweep.
//!
//! The watch cuts time into windows. In each it measures the server's operations (from its
//! log, [`follow`], or its CPU time) and its concurrency: how many of its threads were busy
//! ([`load`]). Every `trace_every`-th window has the sampler and the lock tracer attached;
//! the others run with nothing attached, and are what the curve is made of (as a sweep's
//! clean repeats are), and, set against the traced ones, what the tracing cost the server.
//! A window is handed to the sink as a repeat of the point of its level (its concurrency,
//! rounded) once its operations are known: the log line after its end has been read.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use regex::Regex;
use scalprof_model::Repeat;

use crate::attach::AttachSpec;
use crate::interrupt::Interrupt;
use crate::locks::{LockConfig, ResidentTracer, ResidentWindow};
use crate::perf::SamplingConfig;
use crate::sweep::{
    Collected, Collectors, LockCollector, ProfileCollector, SweepEnd, SweepEvent, SweepSink,
    SystemCollectors,
};
use crate::CollectError;

pub mod follow;
pub mod load;
pub mod scrape;
mod watcher;

use watcher::{OpsSource, Watcher, TICK};

/// The collectors of a watch's traced windows: the sampler, opened for each window as a
/// sweep's repeat opens one, and one lock tracer, loaded at the first traced window and
/// attached for each ([`ResidentTracer`]).
#[derive(Default)]
pub struct WatchCollectors {
    tracer: Option<Rc<RefCell<ResidentTracer>>>,
}

impl Collectors for WatchCollectors {
    fn sampler(&mut self, config: &SamplingConfig) -> Box<dyn ProfileCollector> {
        SystemCollectors::default().sampler(config)
    }

    fn lock_tracer(&mut self, config: &LockConfig) -> Box<dyn LockCollector> {
        let tracer = self
            .tracer
            .get_or_insert_with(|| Rc::new(RefCell::new(ResidentTracer::new(config.clone()))));
        Box::new(ResidentWindow::new(tracer.clone(), config.clone()))
    }
}

/// What a watch observes, and how.
#[derive(Clone, Debug)]
pub struct WatchPlan {
    /// The server: its processes and their descendants, found again every window.
    pub attach: AttachSpec,
    pub ops: WatchOps,
    pub window: Duration,
    /// Ends after this long (`None`: at Ctrl-C, or when the server exits).
    pub duration: Option<Duration>,
    pub sampling: Option<SamplingConfig>,
    pub locks: Option<LockConfig>,
    /// Lines of the log whose first group is one operation's latency in milliseconds: a
    /// window's concurrency is then Little's law's, its throughput × its mean latency,
    /// rather than its busy threads.
    pub latency: Option<Regex>,
    /// One window in this many is traced (the last of each group), besides the first
    /// [`TRACED_PER_LEVEL`] of each level, which follow the level's first untraced ones.
    pub trace_every: u32,
}

/// Where a window's operations come from.
#[derive(Clone, Debug)]
pub enum WatchOps {
    /// Lines of the server's log that match `regex` add its first group.
    Log { path: PathBuf, regex: Regex },
    /// A counter of a metrics endpoint on this host (`URL#METRIC`), its increase.
    Url { spec: String },
    /// No operations given: the server's CPU time, in microseconds, is its work.
    Cpu,
}

/// Each level's first this many traced windows come as soon as it has had an untraced
/// one, whatever `trace_every` says: every level the server goes through gets its causes.
pub const TRACED_PER_LEVEL: u32 = 2;

/// A window below this many busy threads is idle: not a level.
pub const IDLE_BELOW: f64 = 0.5;

/// One finished window, as the progress line shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowDone {
    /// From 0, in the order measured.
    pub index: u32,
    /// Mean busy threads.
    pub concurrency: f64,
    /// The point it joins; `None`: idle (below [`IDLE_BELOW`]).
    pub level: Option<u64>,
    pub ops_per_s: f64,
    pub traced: bool,
    /// Windows per level so far.
    pub levels: Vec<(u64, u32)>,
    /// Seconds since the watch started.
    pub elapsed_s: f64,
}

/// A window measured, its operations not yet known.
struct Measured {
    index: u32,
    t0: Instant,
    t1: Instant,
    busy: load::Busy,
    traced: bool,
    collected: Collected,
}

/// Watches the server until `duration`, Ctrl-C, or its exit, handing each window to the
/// sink as a repeat of its level's point. How it ended: `Complete` at the duration or the
/// server's exit (said in a note), `Interrupted` at a signal.
pub fn execute_watch(
    plan: &WatchPlan,
    collectors: &mut dyn Collectors,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
) -> Result<SweepEnd, CollectError> {
    let source = match &plan.ops {
        WatchOps::Log { path, regex } => Some(OpsSource::Log(
            follow::Follower::open(path, regex.clone())
                .map_err(CollectError::Attach)?
                .with_latency(plan.latency.clone()),
        )),
        WatchOps::Url { spec } => Some(OpsSource::Url(
            scrape::Scraper::open(spec).map_err(CollectError::Attach)?,
        )),
        WatchOps::Cpu => None,
    };
    let first = plan.attach.resolve_noting()?;
    let watcher = Watcher::start(source, first.pids)?;
    let started = Instant::now();
    let mut on = (plan.sampling.clone(), plan.locks.clone());
    let mut pending: VecDeque<Measured> = VecDeque::new();
    let mut levels: BTreeMap<u64, u32> = BTreeMap::new();
    let mut end = SweepEnd::Complete;
    let mut schedule = Schedule::default();
    // The log's first ops line marks where counting starts: the lines before it cover
    // a time before the watch.
    if !matches!(plan.ops, WatchOps::Cpu) {
        wait_for_first_line(&watcher, plan, interrupt, sink)?;
    }
    for index in 0u32.. {
        if interrupt.requested() {
            end = SweepEnd::Interrupted(interrupt.signal());
            break;
        }
        if plan
            .duration
            .is_some_and(|d| started.elapsed() + plan.window > d + plan.window / 2)
        {
            break;
        }
        let pids = match plan.attach.resolve_noting() {
            Ok(found) => {
                for line in &found.dropped {
                    note(sink, line)?;
                }
                // An exited process its parent has not reaped yet runs nothing.
                let live: Vec<i32> = found
                    .pids
                    .into_iter()
                    .filter(|&pid| !load::exited(pid))
                    .collect();
                if live.is_empty() {
                    note(
                        sink,
                        "the server is gone (it exited): the watch ends with what it measured",
                    )?;
                    break;
                }
                live
            }
            Err(e) => {
                note(
                    sink,
                    &format!("the server is gone ({e}): the watch ends with what it measured"),
                )?;
                break;
            }
        };
        watcher.set_pids(&pids);
        let traced = (on.0.is_some() || on.1.is_some()) && schedule.traces(index, plan.trace_every);
        let window = measure_window(
            plan, index, &pids, traced, collectors, &mut on, sink, interrupt,
        )?;
        // Its level as far as known now (the waits sampled so far): what the next
        // window's tracing is decided on.
        let level = {
            let t = watcher.timeline();
            let waits = blocked_shares(&t.waits, window.t0, window.t1);
            let wall_s = (window.t1 - window.t0).as_secs_f64();
            level_of(
                window
                    .busy
                    .concurrency(wall_s, |th| waits.get(&th).copied().unwrap_or(0.0)),
            )
        };
        schedule.measured(level, window.traced);
        pending.push_back(window);
        tell_notes(&watcher, sink)?;
        hand_over_ready(
            plan,
            &watcher,
            &mut pending,
            &mut levels,
            started,
            sink,
            false,
        )?;
    }
    // The last windows' operations: the line after their end, a little later.
    let settle = Instant::now() + plan.window.max(Duration::from_secs(1));
    while !pending.is_empty() && Instant::now() < settle && !interrupt.requested() {
        std::thread::sleep(TICK);
        hand_over_ready(
            plan,
            &watcher,
            &mut pending,
            &mut levels,
            started,
            sink,
            false,
        )?;
    }
    hand_over_ready(
        plan,
        &watcher,
        &mut pending,
        &mut levels,
        started,
        sink,
        true,
    )?;
    tell_notes(&watcher, sink)?;
    let unknown = watcher.timeline().unknown_waits;
    if unknown > 0 {
        note(
            sink,
            &format!(
                "the waits of up to {unknown} sleeping threads could not be read (/proc/PID/task/TID/syscall needs ptrace access): a lock wait among them is not counted as busy"
            ),
        )?;
    }
    Ok(end)
}

/// Which windows are traced: every `trace_every`-th, and each level's first
/// [`TRACED_PER_LEVEL`] after an untraced window at that level.
#[derive(Default)]
struct Schedule {
    /// The last window's level and whether it was traced.
    last: Option<(Option<u64>, bool)>,
    traced: BTreeMap<u64, u32>,
}

impl Schedule {
    fn traces(&self, index: u32, every: u32) -> bool {
        let every = every.max(1);
        if index % every == every - 1 {
            return true;
        }
        match self.last {
            Some((Some(level), false)) => {
                self.traced.get(&level).copied().unwrap_or(0) < TRACED_PER_LEVEL
            }
            _ => false,
        }
    }

    fn measured(&mut self, level: Option<u64>, traced: bool) {
        if let (Some(l), true) = (level, traced) {
            *self.traced.entry(l).or_default() += 1;
        }
        self.last = Some((level, traced));
    }
}

/// Waits (up to three windows) for the log's first ops line, and says so if none came.
fn wait_for_first_line(
    watcher: &Watcher,
    plan: &WatchPlan,
    interrupt: &Interrupt,
    sink: &mut dyn SweepSink,
) -> Result<(), CollectError> {
    let until = Instant::now() + 3 * plan.window.max(Duration::from_secs(1));
    while Instant::now() < until && !interrupt.requested() {
        if !watcher.timeline().ops.is_empty() {
            return Ok(());
        }
        std::thread::sleep(TICK);
    }
    match &plan.ops {
        WatchOps::Log { path, regex } => note(
            sink,
            &format!(
                "no new line of {} matches {} yet: a window's operations are counted from the first that does",
                path.display(),
                regex.as_str()
            ),
        )?,
        WatchOps::Url { spec } => note(
            sink,
            &format!("{spec} has not been read yet: a window's operations are counted from its first answer"),
        )?,
        WatchOps::Cpu => {}
    }
    Ok(())
}

/// One window: the collectors attached when it is traced, its threads' times read at both
/// ends. A collector that cannot attach is switched off for the rest of the watch (said).
// The window's parts, passed one by one: a struct for them would exist for this call alone.
#[allow(clippy::too_many_arguments)]
fn measure_window(
    plan: &WatchPlan,
    index: u32,
    pids: &[i32],
    traced: bool,
    collectors: &mut dyn Collectors,
    on: &mut (Option<SamplingConfig>, Option<LockConfig>),
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
) -> Result<Measured, CollectError> {
    let (first, rest) = (pids[0], pids);
    let mut sampler =
        on.0.as_ref()
            .filter(|_| traced)
            .map(|c| collectors.sampler(c));
    if let Some(s) = sampler.as_mut() {
        match s.attach(first, rest) {
            Ok(()) => {}
            Err(CollectError::Profiling(reason)) => {
                sink.event(SweepEvent::NoProfiling(&reason))
                    .map_err(CollectError::Sink)?;
                on.0 = None;
                sampler = None;
            }
            Err(e) => return Err(e),
        }
    }
    // A running server's lock calls cannot be interposed: the tracer's own view only.
    let mut tracer = on.1.as_ref().filter(|_| traced).map(|c| {
        collectors.lock_tracer(&LockConfig {
            hold_times: false,
            ..c.clone()
        })
    });
    if let Some(t) = tracer.as_mut() {
        match t.attach(first, rest) {
            Ok(()) => {}
            Err(CollectError::Locks(reason)) => {
                sink.event(SweepEvent::NoLockTracing(&reason))
                    .map_err(CollectError::Sink)?;
                on.1 = None;
                tracer = None;
            }
            Err(e) => return Err(e),
        }
    }
    let before = load::Snapshot::take(pids);
    let t0 = Instant::now();
    let until = t0 + plan.window;
    while !interrupt.requested() {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
    }
    let t1 = Instant::now();
    let busy = load::Snapshot::take(pids).since(&before);
    let mut collected = Collected::default();
    if let Some(mut s) = sampler {
        s.finish();
        collected.lost.extend(s.lost());
        collected.profile = s.take();
    }
    if let Some(mut t) = tracer {
        t.finish();
        collected.lost.extend(t.lost());
        collected.locks = t.take();
    }
    Ok(Measured {
        index,
        t0,
        t1,
        busy,
        traced: collected.profile.is_some() || collected.locks.is_some(),
        collected,
    })
}

/// Hands the sink each pending window, oldest first, whose operations are known (the log
/// has a line past its end; at once when the operations are CPU time); with `last`, every
/// one left, those without that line being dropped (said).
fn hand_over_ready(
    plan: &WatchPlan,
    watcher: &Watcher,
    pending: &mut VecDeque<Measured>,
    levels: &mut BTreeMap<u64, u32>,
    started: Instant,
    sink: &mut dyn SweepSink,
    last: bool,
) -> Result<(), CollectError> {
    while let Some(w) = pending.front() {
        let (ops, waits, latency) = {
            let mut t = watcher.timeline();
            let ops = match plan.ops {
                WatchOps::Cpu => Some(w.busy.on_cpu_s * 1e6),
                WatchOps::Log { .. } | WatchOps::Url { .. } => t
                    .ops
                    .last()
                    .filter(|(at, _)| *at >= w.t1)
                    .map(|_| ops_between(&t.ops, w.t0, w.t1)),
            };
            if ops.is_none() && !last {
                return Ok(());
            }
            let waits = blocked_shares(&t.waits, w.t0, w.t1);
            let latency = mean_latency(&t.latencies, w.t0, w.t1);
            t.latencies.retain(|(at, _, _)| *at > w.t0);
            // What no later window needs: before this one's start (one ops entry kept,
            // the start of the next's spread).
            let keep_from = t.ops.iter().rposition(|(at, _)| *at < w.t0).unwrap_or(0);
            t.ops.drain(..keep_from);
            t.waits.retain(|(at, _)| *at >= w.t0);
            (ops, waits, latency)
        };
        let Some(w) = pending.pop_front() else { break };
        let Some(ops) = ops else {
            note(
                sink,
                &format!(
                    "window {} is left out: no ops line came after its end",
                    w.index + 1
                ),
            )?;
            continue;
        };
        hand_over(w, ops, waits, latency, levels, started, sink)?;
    }
    Ok(())
}

/// Tells the sink one window: stored as a repeat of its level's point unless idle.
fn hand_over(
    w: Measured,
    ops: f64,
    waits: std::collections::HashMap<load::ThreadId, f64>,
    latency: Option<f64>,
    levels: &mut BTreeMap<u64, u32>,
    started: Instant,
    sink: &mut dyn SweepSink,
) -> Result<(), CollectError> {
    let wall_s = (w.t1 - w.t0).as_secs_f64().max(1e-9);
    // Little's law where the log gives latencies: requests in the server = throughput ×
    // time each spends there.
    let concurrency = match latency {
        Some(r) => ops / wall_s * r,
        None => w
            .busy
            .concurrency(wall_s, |t| waits.get(&t).copied().unwrap_or(0.0)),
    };
    let level = level_of(concurrency);
    if let Some(value) = level {
        let index = levels.entry(value).or_default();
        let repeat = Repeat {
            user_s: w.busy.user_s,
            sys_s: w.busy.sys_s,
            ops: Some(ops.round() as u64),
            traced: w.traced,
            ..Repeat::ok(*index, wall_s)
        };
        *index += 1;
        sink.event(SweepEvent::RepeatDone {
            value,
            repeat: &repeat,
            collected: Box::new(w.collected),
        })
        .map_err(CollectError::Sink)?;
    }
    let done = WindowDone {
        index: w.index,
        concurrency,
        level,
        ops_per_s: ops / wall_s,
        traced: w.traced,
        levels: levels.iter().map(|(&v, &n)| (v, n)).collect(),
        elapsed_s: (w.t1 - started).as_secs_f64(),
    };
    sink.event(SweepEvent::Window(&done))
        .map_err(CollectError::Sink)
}

/// The level a window of `concurrency` busy threads joins; `None`: idle.
pub fn level_of(concurrency: f64) -> Option<u64> {
    (concurrency >= IDLE_BELOW).then(|| (concurrency.round() as u64).max(1))
}

/// The operations in `[a, b)`: each poll's count spread evenly over the time since the
/// poll before it (the first poll's count only marks where counting starts).
pub(crate) fn ops_between(entries: &[(Instant, u64)], a: Instant, b: Instant) -> f64 {
    let mut total = 0.0;
    for pair in entries.windows(2) {
        let ((from, _), (to, n)) = (pair[0], pair[1]);
        let span = (to - from).as_secs_f64();
        if span <= 0.0 || to <= a || from >= b {
            continue;
        }
        let overlap = (to.min(b) - from.max(a)).as_secs_f64();
        total += n as f64 * overlap / span;
    }
    total
}

/// The mean latency of the latency lines read in `(a, b]`; `None` without one.
fn mean_latency(polls: &[(Instant, f64, u64)], a: Instant, b: Instant) -> Option<f64> {
    let (sum, n) = polls
        .iter()
        .filter(|(at, _, _)| *at > a && *at <= b)
        .fold((0.0, 0u64), |(s, n), (_, sum, count)| (s + sum, n + count));
    (n > 0).then(|| sum / n as f64)
}

/// Per thread, the share of the samples taken in `[a, b]` that found it blocked.
fn blocked_shares(
    samples: &[(Instant, Vec<load::ThreadId>)],
    a: Instant,
    b: Instant,
) -> std::collections::HashMap<load::ThreadId, f64> {
    let inside: Vec<&Vec<load::ThreadId>> = samples
        .iter()
        .filter(|(at, _)| *at >= a && *at <= b)
        .map(|(_, blocked)| blocked)
        .collect();
    let mut shares = std::collections::HashMap::new();
    for blocked in &inside {
        for &t in blocked.iter() {
            *shares.entry(t).or_insert(0.0) += 1.0 / inside.len() as f64;
        }
    }
    shares
}

fn tell_notes(watcher: &Watcher, sink: &mut dyn SweepSink) -> Result<(), CollectError> {
    let (notes, not_numbers) = {
        let mut t = watcher.timeline();
        (
            std::mem::take(&mut t.notes),
            std::mem::take(&mut t.not_numbers),
        )
    };
    for line in notes {
        note(sink, &line)?;
    }
    if not_numbers > 0 {
        note(
            sink,
            &format!("{not_numbers} ops lines matched, but what their group captured is not a number: not counted"),
        )?;
    }
    Ok(())
}

fn note(sink: &mut dyn SweepSink, line: &str) -> Result<(), CollectError> {
    sink.event(SweepEvent::WatchNote(line))
        .map_err(CollectError::Sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_polls_count_is_spread_over_the_time_since_the_poll_before() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        // Lines every 200 ms, 100 operations each: 500 a second.
        let entries: Vec<(Instant, u64)> = (0..=10).map(|i| (at(i * 200), 100)).collect();
        let ops = ops_between(&entries, at(300), at(1300));
        assert!((ops - 500.0).abs() < 1e-6, "{ops}");
        // Before the first line: nothing is known, nothing counted.
        assert_eq!(
            ops_between(&entries, at(0) - Duration::from_secs(1), at(0)),
            0.0
        );
        // A window inside one line's span gets its share.
        assert!((ops_between(&entries, at(450), at(500)) - 25.0).abs() < 1e-6);
    }

    #[test]
    fn each_level_gets_its_first_traced_windows_then_one_in_every() {
        let mut s = Schedule::default();
        let mut traced = Vec::new();
        // Level 1 for 12 windows, then level 2 for 12.
        for index in 0..24u32 {
            let t = s.traces(index, 8);
            traced.push(t);
            s.measured(Some(if index < 12 { 1 } else { 2 }), t);
        }
        let at: Vec<u32> = (0..24).filter(|&i| traced[i as usize]).collect();
        // 1, 3 (level 1's two), 7 (every 8th), 13, 15 (level 2's two after its first
        // untraced window), 23.
        assert_eq!(at, vec![1, 3, 7, 13, 15, 23]);
        // Idle windows trace nothing of their own.
        let mut idle = Schedule::default();
        idle.measured(None, false);
        assert!(!idle.traces(1, 8));
    }

    #[test]
    fn levels_round_the_busy_threads_and_idle_windows_join_none() {
        assert_eq!(level_of(0.2), None);
        assert_eq!(level_of(0.6), Some(1));
        assert_eq!(level_of(1.49), Some(1));
        assert_eq!(level_of(1.5), Some(2));
        assert_eq!(level_of(3.7), Some(4));
    }

    #[test]
    fn a_threads_blocked_share_counts_only_the_windows_samples() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        let samples = vec![
            (at(0), vec![(1, 1)]),
            (at(100), vec![(1, 1), (1, 2)]),
            (at(200), vec![]),
            (at(900), vec![(1, 2)]),
        ];
        let shares = blocked_shares(&samples, at(50), at(250));
        assert_eq!(shares.get(&(1, 1)), Some(&0.5));
        assert_eq!(shares.get(&(1, 2)), Some(&0.5));
        assert!(blocked_shares(&samples, at(300), at(400)).is_empty());
    }
}
