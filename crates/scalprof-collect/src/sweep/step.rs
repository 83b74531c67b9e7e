//! One execution of the sweep: run the workload with the collectors that are on, measure
//! what other processes took meanwhile, read its ops, hand it to the sink.

use scalprof_model::Repeat;

pub(super) use super::execution::Step;
use super::hooks::{self, Hook};
use super::{
    match_ops, parameter_env, read_tail, run_collected, substitute, Collected, Collectors, Enabled,
    RepeatKind, SweepEnd, SweepEvent, SweepPlan, SweepSink,
};
use crate::counters::EventCounter;
use crate::exec::{ExecResult, ExecSpec, Keep};
use crate::interference::Snapshot;
use crate::interrupt::Interrupt;
use crate::limits::QuotaMeter;
use crate::CollectError;

/// What carries over from one execution of the sweep to the next.
pub(super) struct SweepState {
    /// The collectors still on.
    pub(super) on: Enabled,
    /// The PMU's counters are tried until the first refusal (no PMU: a VM).
    pub(super) count_pmu: bool,
    /// Online CPUs: what interference is judged against.
    pub(super) cpus: u32,
    /// The cgroups whose CPU quota applies to the workload (`None`: no quota).
    pub(super) quota: Option<QuotaMeter>,
    /// The sampling rate chosen per point is at most this (the rate the sweep began with).
    pub(super) ceiling_hz: Option<u64>,
    /// The CPU seconds of the clean repeats so far, by point: what sets its rate.
    pub(super) clean_cpu_s: Vec<(u64, f64)>,
}

/// How one execution went.
pub(super) enum Stepped {
    /// Measured (or a warm-up): counts towards its kind.
    Measured,
    /// Measured, but other processes took more than
    /// [`scalprof_model::stability::DISTURBED_SHARE`] of its CPUs.
    Disturbed(Box<Repeat>),
    /// scalprof was stopped while it ran: not stored, to be run again.
    Suspended,
    /// The sweep ends here.
    End(SweepEnd),
}

/// Runs one execution, between the plan's prepare and cleanup commands, and hands it to
/// the sink.
pub(super) fn run_step(
    plan: &SweepPlan,
    step: &Step,
    collectors: &mut dyn Collectors,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
    state: &mut SweepState,
) -> Result<Stepped, CollectError> {
    if interrupt.requested() {
        return Ok(Stepped::End(SweepEnd::Interrupted(interrupt.signal())));
    }
    announce(plan, step, sink)?;
    let (spec, dropped) = exec_spec(plan, step)?;
    // Outside the timed window, before and after, whatever the repeat's outcome.
    hooks::run_hook(plan, Hook::Prepare, step, &spec, interrupt)?;
    if interrupt.requested() {
        return Ok(Stepped::End(SweepEnd::Interrupted(interrupt.signal())));
    }
    let stepped = execute(
        plan, step, &spec, dropped, collectors, sink, interrupt, state,
    )?;
    if !interrupt.requested() {
        hooks::run_hook(plan, Hook::Cleanup, step, &spec, interrupt)?;
    }
    Ok(stepped)
}

/// Executes one step's workload with the collectors that are on, and hands what it
/// measured to the sink; `dropped` says which attached processes it no longer observes.
// The step's parts, passed one by one: a struct for them would exist for this call alone.
#[allow(clippy::too_many_arguments)]
fn execute(
    plan: &SweepPlan,
    step: &Step,
    spec: &ExecSpec,
    dropped: Vec<String>,
    collectors: &mut dyn Collectors,
    sink: &mut dyn SweepSink,
    interrupt: &Interrupt,
    state: &mut SweepState,
) -> Result<Stepped, CollectError> {
    let Step { value, kind, .. } = *step;
    let warmup = kind == RepeatKind::Warmup;
    let traced = kind == RepeatKind::Traced;
    let mut counter = EventCounter::new(state.count_pmu);
    if traced {
        choose_rate(value, sink, state)?;
    }
    // Outside the timed window: what other processes used while the workload ran.
    let before = (!warmup).then(Snapshot::take);
    let quota_before = state
        .quota
        .as_ref()
        .filter(|_| !warmup)
        .map(QuotaMeter::read);
    let (r, mut collected) = run_collected(
        spec,
        &plan.output,
        interrupt,
        traced,
        // The first traced repeat of a point measures the waits and holders without the
        // hold-timing interposer, whose calls lengthen short critical sections; the sink
        // says from its lock table whether the later ones time the holds.
        traced && step.of >= 1 && sink.time_holds(value),
        collectors,
        &mut state.on,
        &mut counter,
        sink,
    )?;
    collected.lost.extend(dropped);
    let interference =
        before.map(|before| interference_since(&before, plan, value, spec, &r, state));
    let throttling = state
        .quota
        .as_ref()
        .zip(quota_before)
        .and_then(|(meter, before)| meter.since(&before));
    if counter.pmu_refused() {
        state.count_pmu = false;
    }
    // A repeat cut short by Ctrl-C is not a measurement: drop it.
    if interrupt.requested() && !r.timed_out && r.exit_code != Some(0) {
        return Ok(Stepped::End(SweepEnd::Interrupted(interrupt.signal())));
    }
    if !r.leftover.is_empty() {
        let processes = &r.leftover;
        tell(sink, SweepEvent::LeftoverProcesses { value, processes })?;
    }
    // A warm-up is not measured: its pause does not matter.
    if r.suspended && !warmup {
        tell(
            sink,
            SweepEvent::Suspended {
                value,
                wall_s: r.wall_s,
            },
        )?;
        return Ok(Stepped::Suspended);
    }
    let ops = read_ops(plan, spec, value, sink)?;
    tell_capped(plan, spec, &r, sink)?;
    let mut repeat = repeat_of(step, &r, ops, counter.take(), spec, interference);
    repeat.throttling = throttling;
    if kind == RepeatKind::Clean && r.exit_code == Some(0) {
        state.clean_cpu_s.push((value, r.user_s + r.sys_s));
    }
    hand_over(sink, step, &repeat, collected)?;
    if traced {
        grow_stack(value, sink, state)?;
    }
    Ok(outcome(plan, value, repeat))
}

/// Sets the sampler's rate for point `value` from its clean repeats where the user did
/// not choose it ([`crate::perf::point_frequency`]), once per point, and says so when it
/// changes.
pub(super) fn choose_rate(
    value: u64,
    sink: &mut dyn SweepSink,
    state: &mut SweepState,
) -> Result<(), CollectError> {
    let (Some(ceiling), Some(config)) = (
        state.ceiling_hz,
        state.on.sampling.as_mut().filter(|c| c.adaptive),
    ) else {
        return Ok(());
    };
    let mut cpu: Vec<f64> = state
        .clean_cpu_s
        .iter()
        .filter(|(v, _)| *v == value)
        .map(|(_, s)| *s)
        .collect();
    if cpu.is_empty() {
        return Ok(()); // no clean repeat succeeded: keep the rate
    }
    cpu.sort_by(f64::total_cmp);
    let cpu_s = cpu[cpu.len() / 2];
    let hz = crate::perf::point_frequency(cpu_s, ceiling);
    if hz == config.frequency {
        return Ok(());
    }
    config.frequency = hz;
    tell(
        sink,
        SweepEvent::RateChosen {
            value,
            hz,
            cpu_s,
            target: crate::perf::TARGET_SAMPLES as u64,
        },
    )
}

/// Doubles the sampler's stack copy for the rest of the sweep where the traced repeat just
/// handed over had too many user stacks cut short, and says so.
fn grow_stack(
    value: u64,
    sink: &mut dyn SweepSink,
    state: &mut SweepState,
) -> Result<(), CollectError> {
    let Some(config) = state.on.sampling.as_mut().filter(|c| c.grow_stack) else {
        return Ok(());
    };
    let from = config.stack_bytes;
    if from >= crate::perf::GROWN_STACK_BYTES {
        return Ok(());
    }
    match sink.stacks_cut() {
        Some(cut) if cut > crate::perf::CUT_STACKS_TO_GROW => {
            let to = (from * 2).min(crate::perf::GROWN_STACK_BYTES);
            config.stack_bytes = to;
            tell(
                sink,
                SweepEvent::StackGrown {
                    value,
                    cut,
                    from,
                    to,
                },
            )
        }
        _ => Ok(()),
    }
}

/// Tells the sink the repeat is done: a warm-up's alone, a measured one's with what the
/// collectors recorded (the sink stores it now).
fn hand_over(
    sink: &mut dyn SweepSink,
    step: &Step,
    repeat: &Repeat,
    collected: Collected,
) -> Result<(), CollectError> {
    let value = step.value;
    let done = if step.kind == RepeatKind::Warmup {
        SweepEvent::WarmupDone { value, repeat }
    } else {
        SweepEvent::RepeatDone {
            value,
            repeat,
            collected: Box::new(collected),
        }
    };
    tell(sink, done)
}

/// Tells the sink a step starts: which of how many of its kind the point plans (traced
/// repeats beyond `diagnose` run while the verdict is unsettled).
fn announce(plan: &SweepPlan, step: &Step, sink: &mut dyn SweepSink) -> Result<(), CollectError> {
    let planned = match step.kind {
        RepeatKind::Warmup => plan.warmup,
        RepeatKind::Clean => plan.repeat,
        RepeatKind::Traced => plan.diagnose.max(step.of + 1),
    };
    tell(
        sink,
        SweepEvent::Starting {
            value: step.value,
            kind: step.kind,
            index: step.of,
            of: planned,
        },
    )
}

/// Tells the sink which output files were cut to their head and tail.
fn tell_capped(
    plan: &SweepPlan,
    spec: &ExecSpec,
    r: &ExecResult,
    sink: &mut dyn SweepSink,
) -> Result<(), CollectError> {
    for (path, bytes, keep) in [
        (&spec.stdout, r.stdout_bytes, &plan.output.stdout),
        (&spec.stderr, r.stderr_bytes, &plan.output.stderr),
    ] {
        // Only a cut that loses what the user asked to keep is told: the default policy
        // drops stdout's other lines on purpose.
        if let Keep::HeadTail(limit) = *keep {
            if bytes > limit && limit >= crate::exec::OUTPUT_LIMIT {
                tell(
                    sink,
                    SweepEvent::OutputCapped {
                        path,
                        bytes,
                        kept_bytes: limit,
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// How to execute a step: its command and environment for the point, its output files
/// (named after the point, kind and index), and the processes a traced repeat attaches to,
/// with a line for each attached process it drops (one whose uids changed).
fn exec_spec(plan: &SweepPlan, step: &Step) -> Result<(ExecSpec, Vec<String>), CollectError> {
    let Step {
        value, kind, index, ..
    } = *step;
    let stem = match kind {
        RepeatKind::Warmup => format!("p{value}-warmup{index}"),
        RepeatKind::Clean => format!("p{value}-r{index}"),
        RepeatKind::Traced => format!("p{value}-r{index}-traced"),
    };
    // Found again for every traced repeat: a server's processes come and go.
    let (attached, dropped) = if kind == RepeatKind::Traced && !plan.attach.is_empty() {
        let found = plan.attach.resolve_noting()?;
        (found.pids, found.dropped)
    } else {
        (Vec::new(), Vec::new())
    };
    let spec = ExecSpec {
        argv: substitute(&plan.command, plan.parameter.as_str(), value),
        env: std::iter::once((parameter_env(plan.parameter.as_str()), value.to_string()))
            .chain(
                (kind == RepeatKind::Traced)
                    .then(|| plan.traced_env.iter().cloned())
                    .into_iter()
                    .flatten(),
            )
            .collect(),
        stdout: plan.output_dir.join(format!("{stem}.stdout")),
        stderr: plan.output_dir.join(format!("{stem}.stderr")),
        timeout: plan.timeout,
        attached,
        inherit: Vec::new(),
    };
    Ok((spec, dropped))
}

/// What other processes took of the CPUs the workload wanted since `before`: a thread
/// sweep wants a CPU per thread, a size sweep what it used. scalprof and the attached
/// processes are part of the workload.
fn interference_since(
    before: &Snapshot,
    plan: &SweepPlan,
    value: u64,
    spec: &ExecSpec,
    r: &ExecResult,
    state: &SweepState,
) -> scalprof_model::Interference {
    let mut exclude = spec.attached.clone();
    exclude.push(std::process::id() as i32);
    if !plan.attach.is_empty() {
        // A server observed in the traced repeats is part of the workload in all.
        exclude.extend(plan.attach.resolve().unwrap_or_default());
    }
    let demand = if plan.parameter == scalprof_model::SweepParameter::Threads {
        value as f64
    } else if r.wall_s > 0.0 {
        ((r.user_s + r.sys_s) / r.wall_s).ceil()
    } else {
        1.0
    };
    Snapshot::take().since(before, &exclude, state.cpus, demand)
}

/// The operations the workload printed (the ops regex over its stdout's tail); a match
/// whose capture is not a number is told to the sink and counts as none.
fn read_ops(
    plan: &SweepPlan,
    spec: &ExecSpec,
    value: u64,
    sink: &mut dyn SweepSink,
) -> Result<Option<u64>, CollectError> {
    match match_ops(&read_tail(&spec.stdout, 4 << 20), &plan.ops_regex) {
        Ok(ops) => Ok(ops),
        Err(matched) => {
            tell(
                sink,
                SweepEvent::OpsNotANumber {
                    value,
                    matched: &matched,
                },
            )?;
            Ok(None)
        }
    }
}

/// Tells the sink an event; its error stops the sweep.
fn tell(sink: &mut dyn SweepSink, event: SweepEvent<'_>) -> Result<(), CollectError> {
    sink.event(event).map_err(CollectError::Sink)
}

/// The repeat as it is stored: what the execution measured, with its ops, counts and
/// output files.
fn repeat_of(
    step: &Step,
    r: &ExecResult,
    ops: Option<u64>,
    counts: Option<scalprof_model::EventCounts>,
    spec: &ExecSpec,
    interference: Option<scalprof_model::Interference>,
) -> Repeat {
    Repeat {
        index: step.index,
        wall_s: r.wall_s,
        user_s: r.user_s,
        sys_s: r.sys_s,
        ops,
        exit_code: r.exit_code,
        signal: r.signal,
        timed_out: r.timed_out,
        voluntary_csw: r.voluntary_csw,
        involuntary_csw: r.involuntary_csw,
        minor_faults: r.minor_faults,
        major_faults: r.major_faults,
        counts,
        stdout_path: Some(spec.stdout.display().to_string()),
        stderr_path: Some(spec.stderr.display().to_string()),
        traced: step.kind == RepeatKind::Traced,
        interference,
        throttling: None,
    }
}

/// How a stored repeat leaves the sweep: ended by a failure (without `keep_going`),
/// disturbed by other processes (to measure again), or measured.
fn outcome(plan: &SweepPlan, value: u64, repeat: Repeat) -> Stepped {
    if !repeat.succeeded() && !plan.keep_going {
        return Stepped::End(SweepEnd::Failed {
            value,
            repeat: Box::new(repeat),
        });
    }
    let disturbed = repeat.succeeded()
        && repeat
            .interference
            .as_ref()
            .is_some_and(|i| i.is_disturbed());
    if disturbed {
        Stepped::Disturbed(Box::new(repeat))
    } else {
        Stepped::Measured
    }
}
