//! What a sweep executes, made from the run's options once they are checked: the points,
//! repeats and hooks, and the sampler and tracer of the traced repeats.

use scalprof_collect::sweep::{self, SweepPlan};
use scalprof_model::SweepParameter;

use crate::options::RunOptions;

/// The most samples a second where the rate is not the user's: the kernel's tick where
/// the tick sampler takes them (nothing switched when a thread blocks, ~2 µs a sample:
/// fewer samples, a cheaper observer), else no more than keep the perf event to its
/// share of a thread at what a sample costs here.
pub(super) fn ceiling(
    c: &scalprof_collect::perf::SamplingConfig,
    sample_cost_ns: Option<f64>,
) -> u64 {
    if !c.adaptive {
        return c.frequency;
    }
    if let Some(hz) = scalprof_collect::perf::tick_ceiling(c) {
        return c.frequency.min(hz);
    }
    match sample_cost_ns.and_then(scalprof_collect::perf::cost_ceiling) {
        Some(most) => c.frequency.min(most),
        None => c.frequency,
    }
}

/// What the sampler costs the threads it samples on this host, measured once a boot: a
/// sample (`host.sample_cost_ns`), and a block at the rate the sweep may sample at
/// (`host.switch_cost`).
pub(super) fn measure_sampler(
    host: &mut scalprof_model::Host,
    sampling: &scalprof_collect::perf::SamplingConfig,
) {
    let mut c = scalprof_collect::perf::SamplingConfig {
        use_pmu: host.pmu,
        ..sampling.clone()
    };
    host.sample_cost_ns = scalprof_collect::perf::cached_sample_cost_ns(&c);
    c.frequency = ceiling(&c, host.sample_cost_ns);
    host.switch_cost = scalprof_collect::perf::cached_switch_cost(&c);
}

/// What the sweep executes: the points, repeats and hooks asked for, and the sampler and
/// tracer only where the traced repeats run (`host_pmu`: whether the sampler may use the
/// hardware counters).
pub(super) fn sweep_plan(
    opts: &RunOptions,
    checked: &crate::check::Checked,
    host_pmu: bool,
    sample_cost_ns: Option<f64>,
    output_dir: std::path::PathBuf,
) -> SweepPlan {
    let tracing = (opts.sampling.is_some() || opts.locks.is_some()) && opts.diagnose > 0;
    SweepPlan {
        command: opts.command.clone(),
        parameter: opts.parameter,
        values: checked.values.clone(),
        repeat: opts.repeat,
        repeat_max: opts
            .repeat_max
            .unwrap_or(if opts.predict.is_some() {
                3 * opts.repeat
            } else {
                opts.repeat
            })
            .max(opts.repeat),
        diagnose: opts.diagnose,
        // Only a thread sweep's budget has a verdict to settle.
        diagnose_max: if opts.parameter == SweepParameter::Threads {
            opts.diagnose_max.max(opts.diagnose)
        } else {
            opts.diagnose
        },
        max_reruns: scalprof_model::stability::MAX_RERUNS,
        warmup: opts.warmup,
        prepare: opts.prepare.clone(),
        cleanup: opts.cleanup.clone(),
        timeout: opts.timeout,
        keep_going: opts.keep_going,
        output_dir,
        ops_regex: checked.ops_regex.clone(),
        output: if opts.keep_output {
            sweep::OutputPolicy::keep_all()
        } else {
            sweep::OutputPolicy::ops_lines(&checked.ops_regex)
        },
        sampling: opts.sampling.clone().filter(|_| tracing).map(|mut c| {
            c.use_pmu = host_pmu;
            c.frequency = ceiling(&c, sample_cost_ns);
            c
        }),
        locks: opts.locks.clone().filter(|_| tracing).map(|mut c| {
            if let Some(&first) = checked.values.first() {
                c.go_probes =
                    crate::runtimes::go_probes(&opts.command, opts.parameter.as_str(), first);
            }
            c.go_probes_of = Some(scalprof_collect::locks::GoProbesOf(std::sync::Arc::new(
                crate::runtimes::go_probes_of_file,
            )));
            c
        }),
        attach: opts.attach.clone(),
        traced_env: if tracing {
            crate::runtimes::traced_env(&opts.command, opts.parameter.as_str(), &checked.values)
        } else {
            Vec::new()
        },
    }
}
