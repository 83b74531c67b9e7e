//! What a sweep tells its sink as it goes (`SweepEvent`), what the sink answers
//! (`SweepSink`), and how a sweep ends.

use scalprof_model::Repeat;

use crate::locks::RawLocks;
use crate::perf::RawProfile;

/// What one execution of the workload is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepeatKind {
    /// Unmeasured, before a point's repeats.
    Warmup,
    /// Measured with nothing attached.
    Clean,
    /// Measured with the collectors attached; its throughput shows what tracing changed.
    Traced,
}

/// What the collectors recorded during one repeat.
#[derive(Debug, Default)]
pub struct Collected {
    pub profile: Option<RawProfile>,
    pub locks: Option<RawLocks>,
    /// What a collector lost of this repeat, said in a sentence (a reader thread that
    /// panicked, hold records dropped): the loss is reported, not hidden.
    pub lost: Vec<String>,
}

/// What happens in a sweep, as it happens. The sweep tells its sink each one in turn; the
/// pipeline records the repeats and forwards every event to its observer.
#[derive(Debug)]
pub enum SweepEvent<'a> {
    /// A repeat is about to start: number `index` (from 0) of the `of` of its kind that
    /// the point runs (traced repeats beyond `diagnose` run while the verdict is unsettled).
    Starting {
        value: u64,
        kind: RepeatKind,
        index: u32,
        of: u32,
    },
    /// A measured repeat (clean or traced: `repeat.traced`) finished, with what the
    /// collectors recorded when traced: the sink stores it now.
    RepeatDone {
        value: u64,
        repeat: &'a Repeat,
        collected: Box<Collected>,
    },
    /// A warm-up run finished (not stored).
    WarmupDone { value: u64, repeat: &'a Repeat },
    /// A repeat that other processes disturbed is measured again.
    Rerun { value: u64, disturbed: &'a Repeat },
    /// scalprof was stopped (Ctrl-Z) while a repeat ran: that repeat is not stored and
    /// runs again. `wall_s` is what it would have been stored with.
    Suspended { value: u64, wall_s: f64 },
    /// Profiling could not be set up; the sweep goes on without it.
    NoProfiling(&'a crate::ProfilingError),
    /// Lock tracing could not be set up; the sweep goes on without it.
    NoLockTracing(&'a crate::LockTracerError),
    /// The workload exited but left processes running (pid, command name).
    LeftoverProcesses {
        value: u64,
        processes: &'a [(i32, String)],
    },
    /// A workload output file, `bytes` long, was cut to its first and last
    /// `kept_bytes` / 2.
    OutputCapped {
        path: &'a std::path::Path,
        bytes: u64,
        kept_bytes: u64,
    },
    /// The ops regex matched `matched`, but what it captured is not a number.
    OpsNotANumber { value: u64, matched: &'a str },
    /// A traced repeat at `value` had this share of its user stacks cut short: the next
    /// ones copy `to` bytes of stack per sample rather than `from`.
    StackGrown {
        value: u64,
        cut: f64,
        from: u32,
        to: u32,
    },
    /// The traced repeats at `value` sample at `hz`: what gives about `target` samples
    /// from clean repeats of `cpu_s` CPU seconds.
    RateChosen {
        value: u64,
        hz: u64,
        cpu_s: f64,
        target: u64,
    },
    /// A watch window finished (`scalprof watch`): its level, concurrency and throughput.
    /// A window that joins a level was handed over as a repeat of its point just before.
    Window(&'a crate::watch::WindowDone),
    /// What a watch noticed, in a sentence: the log rotated, the server exited.
    WatchNote(&'a str),
}

/// Where a sweep's events go.
pub trait SweepSink {
    /// One event of the sweep. An error (a repeat that could not be stored) stops it.
    fn event(&mut self, event: SweepEvent<'_>) -> Result<(), crate::SinkError>;
    /// `done` traced repeats of the point have finished: whether its verdict needs
    /// another (the repeats disagree). Asked only below the plan's `diagnose_max`.
    fn more_traced(&mut self, _value: u64, _done: u32) -> bool {
        false
    }
    /// `done` clean repeats of the point have finished: whether its throughput needs
    /// another (the repeats spread too wide). Asked only below the plan's `repeat_max`.
    fn more_clean(&mut self, _value: u64, _done: u32) -> bool {
        false
    }
    /// Whether the traced repeats of the point after its first time the user locks'
    /// holds (with the lock tracer's hold option on); asked before each.
    fn time_holds(&mut self, _value: u64) -> bool {
        true
    }
    /// The share of the last traced repeat's user stacks that could not be walked to
    /// their root (`None`: not known); asked after the repeat was handed over.
    fn stacks_cut(&mut self) -> Option<f64> {
        None
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SweepEnd {
    Complete,
    /// Stopped by a signal; carries the signal number.
    Interrupted(Option<i32>),
    /// A repeat failed and `keep_going` was off.
    Failed {
        value: u64,
        repeat: Box<Repeat>,
    },
}
