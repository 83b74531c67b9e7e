//! What a sweep tells its observer as it goes: its shape at the start, the sweep's own
//! events as recorded, and what the pipeline adds (symbolizing, lost collectors, the
//! sampler's ceiling, unsteady and unsettled points).

use scalprof_collect::sweep::SweepEvent;
use scalprof_symbolize::profile::ProfileError;

/// How many executions a sweep runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub points: usize,
    /// Per point: clean repeats, warm-ups, traced repeats.
    pub repeat: u32,
    pub warmup: u32,
    pub traced: u32,
}

impl Shape {
    /// Executions of the workload in the whole sweep.
    pub fn steps(&self) -> u64 {
        self.points as u64 * u64::from(self.repeat + self.warmup + self.traced)
    }
}

/// What a sweep reports to its observer as it goes: what the sweep itself said, as it
/// said it, and what the pipeline adds while it records the repeats.
#[derive(Debug)]
pub enum Event<'a> {
    /// The run exists in the store and its sweep starts.
    Started {
        id: i64,
        label: &'a str,
        shape: &'a Shape,
    },
    /// An event of the sweep, forwarded once recorded (a repeat's `collected` is then
    /// stored, and empty here).
    Sweep(&'a SweepEvent<'a>),
    /// A repeat's samples are being turned into stacks.
    Symbolizing { value: u64, samples: u64 },
    /// A repeat's profile could not be read (reported once per sweep).
    ProfileUnusable { value: u64, error: &'a ProfileError },
    /// A collector lost what it recorded of one repeat (`what` says which and why).
    CollectorLost { value: u64, what: &'a str },
    /// The tick sampler could not sample (`why`): a perf event per thread did, which costs
    /// each block of a thread. Said once a run.
    TickSamplerRefused { why: &'a str },
    /// The git checkout the run started in belongs to another user: its HEAD is not the
    /// run's commit (see [`crate::commit`]).
    UntrustedCheckout(&'a crate::commit::UntrustedCheckout),
    /// The run's seal could not be made: `verify` will show its command and ask before
    /// running it again (see [`crate::seal`]).
    Unsealed { why: &'a str },
    /// The sampler's rate is kept at or under `hz`, not the default `was`: a sample costs
    /// `cost_ns` of the sampled thread here, and the sampler keeps to `share` of it.
    SamplerCeiling {
        hz: u64,
        was: u64,
        cost_ns: f64,
        share: f64,
        /// The kernel's tick is the ceiling: the tick sampler takes the samples.
        tick: bool,
    },
    /// A point's `done` clean repeats leave its throughput unsteady: the 80% interval of
    /// their mean is ±`spread` of it (more than [`STEADY`](crate::options::STEADY)), so another one runs.
    Unsteady { value: u64, done: u32, spread: f64 },
    /// A point's `done` traced repeats leave its verdict unsettled: another one runs.
    Unsettled {
        value: u64,
        done: u32,
        settling: &'a scalprof_model::Settling,
    },
}

/// What a sweep reports as it goes; the default ignores it.
pub trait Observer {
    fn event(&mut self, _event: &Event<'_>) {}
}

/// An observer that ignores everything.
impl Observer for () {}
