//! The checks a sweep passes before anything runs: one door, so that the binary asks once
//! and a library caller gets the same answers (ripgrep's `HiArgs::from_low_args`).
//!
//! A [`Refusal`] is typed and says what is wrong in the options' own terms; the binary
//! words it with the flag that set the option.

use regex::Regex;
use scalprof_collect::{caps, CollectError, LockTracerError};
use scalprof_model::SweepParameter;

use scalprof_collect::sweep::{default_values, substitute};

use crate::options::RunOptions;

/// Why a sweep cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("the repeat count must be at least 1")]
    NoRepeats,
    #[error("the sweep has no values")]
    NoValues,
    /// A cgroup given for the workload cannot be used.
    #[error(transparent)]
    Cgroup(scalprof_collect::given_cgroups::CgroupError),
    /// An input-size sweep needs three sizes to fit an exponent.
    #[error("an input-size sweep needs at least three sizes to fit an exponent")]
    TooFewSizes,
    /// The command cannot be run (not found, not executable, empty).
    #[error(transparent)]
    Program(CollectError),
    #[error("the ops regex {regex:?} is not a valid regex")]
    OpsRegex {
        regex: String,
        #[source]
        error: regex::Error,
    },
    #[error("the ops regex {regex:?} needs a capture group around the number")]
    OpsRegexNoGroup { regex: String },
    /// A process to attach to is not there.
    #[error(transparent)]
    Attach(CollectError),
    /// Processes to attach to, but no traced repeat to observe them in.
    #[error("attached processes are observed in the traced repeats, and this sweep has none")]
    AttachUntraced,
    /// Attaching samples every CPU, which this process may not do.
    #[error(
        "sampling every CPU needs CAP_PERFMON or perf_event_paranoid ≤ 0 (it is {paranoid:?})"
    )]
    AttachMaySample { paranoid: Option<i32> },
    /// Attaching traces locks with BPF, which this process may not load.
    #[error("tracing the attached processes' locks needs CAP_BPF and CAP_PERFMON")]
    AttachMayTrace,
    /// Lock tracing was asked for, and this scalprof was built without it.
    #[error(transparent)]
    LocksNotBuilt(LockTracerError),
    /// Lock tracing was asked for, and this process may not load BPF programs.
    #[error("tracing locks loads BPF programs, which needs CAP_BPF and CAP_PERFMON")]
    LocksMayTrace,
}

/// What the checks found the options to mean.
#[derive(Debug)]
pub struct Checked {
    /// The sweep's values: the ones asked for, or the default for this machine.
    pub values: Vec<u64>,
    pub ops_regex: Regex,
    /// The run's label: the one asked for, or the command shortened
    /// ([`crate::label::default_label`]).
    pub label: String,
    /// The processes attached to now (empty without `attach`).
    pub attached: Vec<i32>,
    /// Other users' processes that matched and are left alone, in words (`None`: none).
    pub attach_skipped: Option<String>,
}

/// Puts the workloads in the cgroups given for them (before their limits are read).
pub fn place_workloads(opts: &RunOptions) -> Result<(), Refusal> {
    if opts.cgroups.is_empty() {
        return Ok(());
    }
    scalprof_collect::given_cgroups::place_workloads_in(&opts.cgroups).map_err(Refusal::Cgroup)
}

/// Checks a sweep's options before a run exists, against the CPUs the workload may use
/// here: the online ones, less what a CPU quota, CPU set or affinity mask takes away.
pub fn check(opts: &RunOptions) -> Result<Checked, Refusal> {
    place_workloads(opts)?;
    let online = scalprof_collect::host::online_cpus();
    check_for(opts, scalprof_collect::limits::probe(online).usable_cpus)
}

/// [`check`] for a workload that may use `cpus` CPUs (the default sweep goes up to them). In order:
/// the sweep has repeats and values, the program can be found, the ops regex compiles
/// with a capture group, and what is attached to is there and may be observed.
pub fn check_for(opts: &RunOptions, cpus: u32) -> Result<Checked, Refusal> {
    if opts.repeat == 0 {
        return Err(Refusal::NoRepeats);
    }
    let values = match &opts.values {
        Some(v) => v.clone(),
        None => default_values(cpus),
    };
    if values.is_empty() {
        return Err(Refusal::NoValues);
    }
    if opts.parameter == SweepParameter::Size && values.len() < 3 {
        return Err(Refusal::TooFewSizes);
    }
    let first = substitute(&opts.command, opts.parameter.as_str(), values[0]);
    scalprof_collect::resolve_program(&first[0]).map_err(Refusal::Program)?;
    let ops_regex = Regex::new(&opts.ops_regex).map_err(|error| Refusal::OpsRegex {
        regex: opts.ops_regex.clone(),
        error,
    })?;
    if ops_regex.captures_len() < 2 {
        return Err(Refusal::OpsRegexNoGroup {
            regex: opts.ops_regex.clone(),
        });
    }
    let label = opts
        .label
        .clone()
        .unwrap_or_else(|| crate::label::default_label(&opts.command));
    let found = attachable(opts)?;
    Ok(Checked {
        values,
        ops_regex,
        label,
        attached: found.pids,
        attach_skipped: found.skipped,
    })
}

/// The processes to attach to, found now, where the sweep may observe them: refused
/// before anything runs, rather than a run without the profiles it was for.
fn attachable(opts: &RunOptions) -> Result<scalprof_collect::attach::Resolved, Refusal> {
    if opts.attach.is_empty() {
        return Ok(scalprof_collect::attach::Resolved::default());
    }
    if opts.diagnose == 0 || (opts.sampling.is_none() && opts.locks.is_none()) {
        return Err(Refusal::AttachUntraced);
    }
    if opts.sampling.is_some() && !caps::may_sample_every_cpu() {
        return Err(Refusal::AttachMaySample {
            paranoid: caps::paranoid(),
        });
    }
    if opts.locks.is_some() && !caps::may_load_bpf() {
        return Err(Refusal::AttachMayTrace);
    }
    // After the capabilities: a user who may not attach at all hears that first, not
    // which of the processes are theirs.
    opts.attach.resolve_found().map_err(Refusal::Attach)
}

/// Whether locks can be traced at all: for a command whose point is the lock tables
/// (`locks`), which says so before running rather than sweeping without them.
pub fn lock_tracing() -> Result<(), Refusal> {
    if !cfg!(feature = "bpf") {
        return Err(Refusal::LocksNotBuilt(LockTracerError::NotBuilt));
    }
    if !caps::may_load_bpf() {
        return Err(Refusal::LocksMayTrace);
    }
    Ok(())
}
