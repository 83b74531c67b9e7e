//! The tracing line: per point, how much slower the traced repeats ran than the clean
//! ones, and what of it each of scalprof's parts accounts for, each measured on this run
//! or this host: the sampler's interrupts, the kernel's records for the sampler, the
//! probes' traps, the tracer's BPF programs by the events they hook, and the hold-timing
//! interposer.

use scalprof_model::locks::{HeldWait, LockKind, ProbeFamily, RunQueueBehind, THE_OBSERVER};
use scalprof_model::{Point, RunDocument, SweepParameter};

use crate::format::ns;
use crate::view::PointView;

/// Per point: how much slower (or faster) the traced repeats ran than the clean ones,
/// scalprof's own cost in them, and what of the difference that cost accounts for.
pub(crate) fn tracing_line(doc: &RunDocument) -> Option<String> {
    let parts: Vec<String> = doc
        .points
        .iter()
        .filter(|p| !p.traced_repeats.is_empty())
        .map(|p| {
            let mut bits = Vec::new();
            match p.perturbation {
                Some(x) => bits.push(format!("traced {:+.1}% vs clean", 100.0 * x)),
                None => bits.push("traced throughput unknown".into()),
            }
            if let Some(overhead) = PointView::of(p).overhead_pct {
                bits.push(format!(
                    "overhead (scalprof) {overhead:.1}% of samples{}",
                    overhead_parts(p)
                ));
            }
            if let (Some(share), Some(l)) = (go_probe_share(p), p.locks.as_ref()) {
                bits.push(format!(
                    "Go probes' hits {share:.1}% of CPU time ({} × {})",
                    l.tracer.go_hits,
                    ns(l.tracer.go_hit_ns as f64)
                ));
            }
            if let Some(programs) = programs(p) {
                bits.push(programs);
            }
            if let Some(holds) = hold_timing(p) {
                bits.push(holds);
            }
            if let Some(left) = unaccounted(doc, p) {
                bits.push(left);
            }
            if let Some(blocks) = blocks_bound(doc, p) {
                bits.push(blocks);
            }
            // The waits scalprof itself caused: the program's threads runnable while its
            // own threads held the CPU, and kernel locks waited for inside its probes' traps.
            let (behind, in_traps) = observer_waits(p);
            if behind > 0 {
                bits.push(format!(
                    "{} waiting for a CPU behind scalprof",
                    ns(behind as f64)
                ));
            }
            if in_traps > 0 {
                bits.push(format!(
                    "{} waiting on kernel locks in its probes' traps",
                    ns(in_traps as f64)
                ));
            }
            format!("{} {}: {}", doc.sweep.parameter, p.value, bits.join(", "))
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(match sampler_cost(doc) {
        Some(cost) => format!("{cost}; {}", parts.join("; ")),
        None => parts.join("; "),
    })
}

/// The wait a point's rows attribute to the observer, in ns: for a CPU behind scalprof's
/// threads, and on kernel locks inside its probes' traps.
fn observer_waits(p: &Point) -> (u64, u64) {
    let mut waits = (0, 0);
    for r in p.locks.iter().flat_map(|l| &l.rows) {
        match r.run_queue() {
            Some(RunQueueBehind::Observer) => waits.0 += r.total_wait_ns,
            None if r.attributed_to.as_deref() == Some(THE_OBSERVER) => waits.1 += r.total_wait_ns,
            _ => {}
        }
    }
    waits
}

/// The parts of scalprof's sampled cost that are not its tracers' programs: the probes'
/// traps and the kernel's records for the sampler, as shares of all samples.
fn overhead_parts(p: &Point) -> String {
    let Some(stats) = p.profile.as_ref().map(|pr| &pr.stats) else {
        return String::new();
    };
    let pct = |n: u64| 100.0 * n as f64 / stats.samples.max(1) as f64;
    let parts: Vec<String> = [
        (stats.probe_samples, "probe traps"),
        (
            stats.side_band_samples,
            "the kernel's mapping and task records",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| pct(*n) >= 0.1)
    .map(|(n, what)| format!("{what} {:.1}%", pct(n)))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// The tracer's BPF programs as the kernel timed them: their time, runs and share of the
/// traced repeats' CPU time, by the events they hook, and how much of the run was timed.
fn programs(p: &Point) -> Option<String> {
    let t = &p.locks.as_ref()?.tracer;
    if t.bpf_runs == 0 {
        return None;
    }
    let cpu_ns = traced_cpu_ns(p);
    let pct = |run_ns: u64| 100.0 * run_ns as f64 / cpu_ns;
    let mut out = format!(
        "BPF {:.1} ms in {} runs",
        t.bpf_run_ns as f64 / 1e6,
        t.bpf_runs
    );
    if cpu_ns > 0.0 {
        out += &format!(" ({:.2}% of CPU time", pct(t.bpf_run_ns));
        let families: Vec<String> = t
            .bpf_families
            .iter()
            .map(|f| {
                let mut part = format!("{} {:.2}%", f.family.label(), pct(f.run_ns));
                // On for all but 0.5% of the span (the detach at its end, the
                // attach's moments): on throughout, not in bursts.
                if f.family == ProbeFamily::KernelLocks
                    && t.klock_probed_ns > 0
                    && (t.klock_probed_ns as f64) < 0.995 * t.klock_span_ns as f64
                {
                    part += &format!(
                        " on {:.0}% of the run, in bursts",
                        100.0 * t.klock_probed_ns as f64 / t.klock_span_ns as f64
                    );
                }
                part
            })
            .collect();
        if !families.is_empty() {
            out += &format!(": {}", families.join(", "));
        }
        out += ")";
    }
    if t.bpf_timed_ns > 0 && t.bpf_timed_ns < t.bpf_span_ns {
        out += &format!(
            ", timed in windows over {:.0}% of the run",
            100.0 * t.bpf_timed_ns as f64 / t.bpf_span_ns as f64
        );
    }
    Some(out)
}

/// The hold-timing interposer's cost, measured: its traced repeats against those without
/// it (`hold timing -8.1% (1 traced repeat with it, 1 without)`).
fn hold_timing(p: &Point) -> Option<String> {
    let l = p.locks.as_ref()?;
    let cost = l.hold_timing_cost?;
    let with = l.hold_timed_repeats.len();
    let without = p.traced_repeats.len().saturating_sub(with);
    Some(format!(
        "hold timing {:+.1}% ({with} traced repeat{} with it, {without} without)",
        100.0 * cost,
        if with == 1 { "" } else { "s" }
    ))
}

/// The hold-timing interposer's part of the traced repeats' slowdown, in %: its measured
/// cost, in the share of the traced repeats it was loaded in; nothing where it made them
/// faster (noise).
fn hold_timing_share(p: &Point) -> f64 {
    let Some(l) = p.locks.as_ref() else {
        return 0.0;
    };
    let traced = p.traced_repeats.len();
    match l.hold_timing_cost {
        Some(cost) if cost < 0.0 && traced > 0 => {
            -100.0 * cost * l.hold_timed_repeats.len().min(traced) as f64 / traced as f64
        }
        _ => 0.0,
    }
}

/// What each of scalprof's parts cost a point's traced repeats, in % of their thread-time
/// (wall × threads), the basis of the slowdown they account for. A cost paid in CPU time
/// (the sampler's interrupts, the records, the traps, the programs) lengthens the run
/// only as the threads pay it: such a part is its share of the CPU time times the share
/// of the thread-time in which the threads ran or waited for a lock whose holder ran
/// ([`busy_share`]). A thread blocked on the disk runs part of its time: journal_sync's
/// thread runs 52% of its time, and its programs' 4.1% of its CPU time is 2.1% of the run.
#[derive(Debug, Default, PartialEq)]
struct Costs {
    /// The sampler's interrupts at the point's rate (measured before the sweep): no
    /// sample shows them.
    sampler: f64,
    /// The samples in the kernel's records for the sampler.
    records: f64,
    /// The uprobes' traps: the Go probes' hits times the measured cost of one, or the
    /// samples in the traps where more.
    traps: f64,
    /// The tracer's programs: their run time as the kernel timed it, or the samples in
    /// them where more. The scheduler's tracepoints run with interrupts off, where the
    /// sampler's timer cannot land: only the kernel's timing sees their programs.
    programs: f64,
    /// The hold-timing interposer: its traced repeats' slowdown against those without it,
    /// in the share of the traced repeats it was loaded in ([`hold_timing_share`]).
    holds: f64,
    /// The workload's threads waiting for a CPU behind scalprof's own threads, in % of the
    /// traced repeats' thread-time ([`observer_share`]).
    observer: f64,
}

impl Costs {
    fn of(doc: &RunDocument, p: &Point) -> Option<Costs> {
        let profile = p.profile.as_ref()?;
        let stats = &profile.stats;
        let pct = |n: u64| 100.0 * n as f64 / stats.samples.max(1) as f64;
        let in_programs = stats
            .overhead_samples
            .saturating_sub(stats.probe_samples + stats.side_band_samples);
        let cpu_ns = traced_cpu_ns(p);
        let timed = p
            .locks
            .as_ref()
            .filter(|_| cpu_ns > 0.0)
            .map_or(0.0, |l| 100.0 * l.tracer.bpf_run_ns as f64 / cpu_ns);
        let sample_ns = match tick_sample_ns(profile) {
            Some(ns) => Some(ns),
            None => doc.host.sample_cost_ns,
        };
        let busy = busy_share(doc, p);
        Some(Costs {
            sampler: busy * sample_ns.map_or(0.0, |ns| sampler_share(ns, profile.frequency)),
            records: busy * pct(stats.side_band_samples),
            traps: busy * pct(stats.probe_samples).max(go_probe_share(p).unwrap_or(0.0)),
            programs: busy * pct(in_programs).max(timed),
            holds: hold_timing_share(p),
            observer: observer_share(doc, p),
        })
    }

    fn total(&self) -> f64 {
        self.sampler + self.records + self.traps + self.programs + self.holds + self.observer
    }

    /// `sampler 0.7, BPF programs 0.3`: the parts of 0.05 points or more.
    fn parts(&self) -> String {
        [
            (self.sampler, "sampler"),
            (self.records, "kernel records"),
            (self.traps, "probe traps"),
            (self.programs, "BPF programs"),
            (self.holds, "hold timing"),
            (self.observer, "CPU waits behind scalprof"),
        ]
        .into_iter()
        .filter(|(v, _)| *v >= 0.05)
        .map(|(v, what)| format!("{what} {v:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// What of a point's measured slowdown scalprof's parts account for ([`Costs`]), and what
/// they do not. Said where the traced repeats ran more than 1% slower; the rest is what
/// no part measures (cache and timing effects of the probes) or noise.
fn unaccounted(doc: &RunDocument, p: &Point) -> Option<String> {
    let slowdown = -100.0 * p.perturbation?;
    if slowdown < 1.0 {
        return None;
    }
    let costs = Costs::of(doc, p)?;
    let seen = costs.total();
    let parts = costs.parts();
    Some(if seen >= slowdown {
        let parts = if parts.is_empty() {
            String::new()
        } else {
            format!(": {parts}")
        };
        format!("all of it accounted for ({seen:.1}% seen{parts})")
    } else {
        let parts = if parts.is_empty() {
            String::new()
        } else {
            format!(" ({parts})")
        };
        format!(
            "{seen:.1} of its {slowdown:.1} points accounted for{parts}, {:.1} not",
            slowdown - seen
        )
    })
}

/// The share of the traced repeats' CPU time, in %, that the Go runtime's probe hits took
/// (their count times the cost of one, measured on the host), where there were any.
fn go_probe_share(p: &Point) -> Option<f64> {
    let t = &p.locks.as_ref()?.tracer;
    if t.go_hits == 0 || t.go_hit_ns == 0 {
        return None;
    }
    let cpu_ns = traced_cpu_ns(p);
    (cpu_ns > 0.0).then(|| 100.0 * t.go_hits as f64 * t.go_hit_ns as f64 / cpu_ns)
}

/// What the sampler's events may have cost a point's traced repeats at their threads'
/// blocks: their context switches times what one costs at the point's rate, measured
/// before the sweep on 10 µs sleeps (`Host::switch_cost`). A bound, not a part of the
/// accounted slowdown: longer blocks cost less (journal_sync's fdatasync waits: up to
/// 11.6 ms a run by it, 1.7 ms slower in all), so it is said beside the parts.
fn blocks_bound(doc: &RunDocument, p: &Point) -> Option<String> {
    let cost = doc.host.switch_cost?;
    let profile = p.profile.as_ref()?;
    if profile.stats.tick_hz > 0 {
        return None; // sampled at the tick: no event of its own to switch
    }
    let hz = profile.frequency;
    let traced = p.traced_repeats.iter().filter(|r| r.succeeded());
    let (runs, switches) = traced.fold((0u64, 0u64), |(n, s), r| {
        (n + 1, s + r.voluntary_csw + r.involuntary_csw)
    });
    if runs == 0 || switches == 0 {
        return None;
    }
    let per_run = switches as f64 / runs as f64;
    Some(format!(
        "its threads blocked {per_run:.0} times a traced run: up to {} of the sampler's events \
         at {:.1} µs a block",
        ns(per_run * cost.at(hz)),
        cost.at(hz) / 1e3
    ))
}

/// The waits for a CPU behind scalprof's own threads (the tracer sees them at the
/// scheduler; a clean repeat has none), in % of the traced repeats' thread-time: their mean
/// wall time × the threads × the repeats the lock table merged. A wait is thread-time, not
/// CPU time: over the CPU time it would count twice for a program that blocks half the run.
fn observer_share(doc: &RunDocument, p: &Point) -> f64 {
    let thread_ns = merged_thread_ns(doc, p);
    let (behind, _) = observer_waits(p);
    if thread_ns > 0.0 {
        100.0 * behind as f64 / thread_ns
    } else {
        0.0
    }
}

/// The thread-time of the traced repeats the point's lock table merged, in ns: their mean
/// wall time × the threads × the repeats merged; 0 without a lock table.
fn merged_thread_ns(doc: &RunDocument, p: &Point) -> f64 {
    let Some(l) = p.locks.as_ref() else {
        return 0.0;
    };
    let walls: Vec<f64> = p
        .traced_repeats
        .iter()
        .filter(|r| r.succeeded())
        .map(|r| r.wall_s)
        .collect();
    walls.iter().sum::<f64>() / walls.len().max(1) as f64
        * 1e9
        * sweep_threads(doc, p)
        * f64::from(l.repeats)
}

/// A size sweep's value is the input's size; a thread or concurrency sweep's, threads.
fn sweep_threads(doc: &RunDocument, p: &Point) -> f64 {
    if doc.sweep.parameter == SweepParameter::Size {
        1.0
    } else {
        p.value.max(1) as f64
    }
}

/// The share of the traced repeats' thread-time (wall × threads) in which a thread ran or
/// waited for a lock: at most 1 (a program whose helper threads or processes add CPUs
/// beyond the sweep's threads keeps the CPU basis); 1 where the times are unknown. A
/// thread waiting on a lock waits for its holder, which runs: a cost the holder pays
/// lengthens the wait as much (mmap_churn at 2 threads runs 63% of its thread-time and
/// waits 33% on its mmap_lock, a convoy that one thread or the other runs all along). A
/// wait for the disk, a sleep or a peer's answer is not lengthened: journal_sync's thread
/// runs 52% of its time.
fn busy_share(doc: &RunDocument, p: &Point) -> f64 {
    let threads = sweep_threads(doc, p);
    let thread_ns: f64 = p
        .traced_repeats
        .iter()
        .filter(|r| r.succeeded())
        .map(|r| r.wall_s * 1e9 * threads)
        .sum();
    let cpu_ns = traced_cpu_ns(p);
    if thread_ns > 0.0 && cpu_ns > 0.0 {
        (cpu_ns / thread_ns + lock_wait_share(doc, p)).min(1.0)
    } else {
        1.0
    }
}

/// The share of the traced repeats' thread-time the threads waited for locks whose holders
/// ran, off the CPU (a spinlock's spin is CPU time already). Left out: a parked goroutine's
/// wait (not its thread's: the thread runs another goroutine or idles), a Java park (a
/// queue's idle worker as often as a lock's waiter), a row listed but never a cause (the
/// Go scheduler's idle threads, scalprof's own traps, threads off the work's path); and of
/// each lock, the share of its waits its holders spent blocked in a system call (a lock
/// held across `fdatasync`: its waiters wait for the disk).
fn lock_wait_share(doc: &RunDocument, p: &Point) -> f64 {
    let thread_ns = merged_thread_ns(doc, p);
    let Some(l) = p.locks.as_ref().filter(|_| thread_ns > 0.0) else {
        return 0.0;
    };
    let waited: f64 = l
        .rows
        .iter()
        .filter(|r| r.lock_type.is_lock() && r.attributed_to.is_none())
        .filter(|r| !r.lock_type.is_goroutine_lock() && r.lock_type != LockKind::JavaPark)
        .map(|r| {
            let blocked: f64 = r
                .holder_waits
                .iter()
                .filter(|w| matches!(w.on, HeldWait::Syscall(_)))
                .map(|w| w.share)
                .sum();
            r.total_wait_ns as f64 * (1.0 - blocked).clamp(0.0, 1.0)
        })
        .sum();
    waited / thread_ns
}

/// The CPU time of a point's traced repeats that succeeded, in ns.
fn traced_cpu_ns(p: &Point) -> f64 {
    p.traced_repeats
        .iter()
        .filter(|r| r.succeeded())
        .map(|r| (r.user_s + r.sys_s) * 1e9)
        .sum()
}

/// The share of each running thread's time, in %, that `hz` samples a second of `cost_ns`
/// each take.
fn sampler_share(cost_ns: f64, hz: u64) -> f64 {
    100.0 * cost_ns * hz as f64 / 1e9
}

/// The sampler's interrupts, as a share of each running thread's time: what the samples
/// cannot show of their own cost (measured before the sweep, see `Host::sample_cost_ns`).
fn sampler_cost(doc: &RunDocument) -> Option<String> {
    let ticks = tick_cost(doc);
    let perf = perf_sampler_cost(doc);
    match (ticks, perf) {
        (Some(t), Some(p)) => Some(format!("{t}; at the other points {p}")),
        (t, p) => t.or(p),
    }
}

/// What one sample cost where the tick sampler took them, in ns: its program's time per
/// sample, measured in the program.
fn tick_sample_ns(profile: &scalprof_model::PointProfile) -> Option<f64> {
    let st = &profile.stats;
    (st.tick_hz > 0 && st.tick_samples > 0)
        .then(|| st.tick_sample_ns as f64 / st.tick_samples as f64)
}

/// The tick sampler's cost, where it sampled (perf/ticks.rs in scalprof-collect): its
/// program's time per sample, at the rates the points ran at.
fn tick_cost(doc: &RunDocument) -> Option<String> {
    let ticked: Vec<&scalprof_model::PointProfile> = doc
        .points
        .iter()
        .filter_map(|p| p.profile.as_ref())
        .filter(|pr| pr.stats.tick_hz > 0)
        .collect();
    let hz = ticked.iter().map(|pr| pr.stats.tick_hz).max()?;
    let samples: u64 = ticked.iter().map(|pr| pr.stats.tick_samples).sum();
    let spent: u64 = ticked.iter().map(|pr| pr.stats.tick_sample_ns).sum();
    let per = spent as f64 / samples.max(1) as f64;
    let lo = ticked.iter().map(|pr| pr.frequency).min()?;
    let hi = ticked.iter().map(|pr| pr.frequency).max()?;
    let rates = if lo == hi {
        format!("{hi} Hz")
    } else {
        format!("{lo}–{hi} Hz")
    };
    Some(format!(
        "the sampler takes {:.2}% of each running thread's time at the kernel's {hz} Hz tick \
         ({:.1} µs a sample at {rates}, timed in its program), and nothing when a thread \
         blocks (it has no event of its own to switch)",
        sampler_share(per, hi),
        per / 1e3
    ))
}

/// The perf event's cost where one sampled: its interrupts, measured before the sweep,
/// and what its events cost at each block.
fn perf_sampler_cost(doc: &RunDocument) -> Option<String> {
    let cost_ns = doc.host.sample_cost_ns?;
    // Each point's rate (chosen per point unless -F set it), else the run's.
    let profiles: Vec<&scalprof_model::PointProfile> = doc
        .points
        .iter()
        .filter_map(|p| p.profile.as_ref())
        .collect();
    if !profiles.is_empty() && profiles.iter().all(|pr| pr.stats.tick_hz > 0) {
        return None;
    }
    let rates: Vec<u64> = profiles
        .iter()
        .filter(|pr| pr.stats.tick_hz == 0)
        .map(|pr| pr.frequency)
        .filter(|&hz| hz > 0)
        .collect();
    let run_hz = doc.sampling.as_ref()?.frequency;
    let (lo, hz) = match (rates.iter().min(), rates.iter().max()) {
        (Some(&lo), Some(&hi)) => (lo, hi),
        _ => (run_hz, run_hz),
    };
    if lo != hz {
        let share = |hz: u64| sampler_share(cost_ns, hz);
        return Some(format!(
            "the sampler's interrupts take {:.2}–{:.1}% of each running thread's time ({:.1} µs a sample, measured here, at {lo}–{hz} Hz as each point's runs needed){}",
            share(lo),
            share(hz),
            cost_ns / 1e3,
            per_block(doc, hz)
        ));
    }
    let share = sampler_share(cost_ns, hz);
    let lower = if share >= 1.0 && hz > 99 {
        format!("; -F {} halves it", hz / 2)
    } else {
        String::new()
    };
    Some(format!(
        "the sampler's interrupts take {share:.1}% of each running thread's time ({:.1} µs a sample at {hz} Hz, measured here{lower}){}",
        cost_ns / 1e3,
        per_block(doc, hz)
    ))
}

/// `, and its events up to 4.6 µs each time a thread blocks`, where that was measured.
fn per_block(doc: &RunDocument, hz: u64) -> String {
    doc.host.switch_cost.map_or(String::new(), |c| {
        format!(
            ", and its events up to {:.1} µs each time a thread blocks (measured on 10 µs sleeps)",
            c.at(hz) / 1e3
        )
    })
}
