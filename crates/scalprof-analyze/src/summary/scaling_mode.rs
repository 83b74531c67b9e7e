//! What throughput means for a run: ops printed by the workload, or weak or strong scaling
//! as the user said or as the CPU time across the points shows.

use scalprof_model::stability::DISTURBED_SHARE;
use scalprof_model::{PointRepeat, RunHeader, ThroughputSource};

/// Ops when every successful repeat reported them; otherwise the scaling the user gave,
/// or the one the CPU time shows (with the reason).
pub(super) fn throughput_source(
    header: &RunHeader,
    repeats: &[PointRepeat],
) -> (ThroughputSource, Option<String>) {
    let mut ok = repeats.iter().filter(|r| r.repeat.succeeded()).peekable();
    if ok.peek().is_some() && ok.all(|r| r.repeat.ops.is_some()) {
        return (ThroughputSource::Ops, None);
    }
    match header.scaling {
        Some(s) => (s, None),
        None => {
            let (s, why) = infer_scaling(header, repeats);
            (s, Some(why))
        }
    }
}

/// Weak or strong scaling from the CPU time of the clean repeats: a command whose total
/// work is fixed uses about the same CPU time at every point (plus what contention and
/// splitting the input add), one whose threads each add work uses more in proportion to
/// the parameter, diluted by the start-up every run pays once (an interpreter's 50 ms
/// against 100 ms of work per thread grows 1.33× from 1 to 2 threads, not 2×).
///
/// Fixed work is the default: wrongly read as weak, a fixed-work command's speedup is
/// inflated by the thread count and can say "1.74×" while its wall time grew (xz -T2 on a
/// busy machine: its CPU time grew 1.22× from splitting the input). Weak scaling needs
/// evidence that holds in every pairing of repeats: the fewest CPU seconds at the last
/// point over the most at the first, at least `ratio^(1/3)` (1.26× from 1 to 2 threads).
/// Where other processes shared the CPUs during the clean repeats of either point, each
/// preemption costs the workload cache refills it pays in CPU time (xz -T2 on a machine
/// with a busy loop: 1.33–1.40× in every repeat, for the same file), so the evidence must
/// be stronger, `ratio^(2/3)` (1.59×): each thread adding its own work still doubles the
/// CPU time whatever the machine's load; only the wall time stretches.
pub(super) fn infer_scaling(
    header: &RunHeader,
    repeats: &[PointRepeat],
) -> (ThroughputSource, String) {
    let p = header.sweep.parameter;
    let median_at = |value: u64, of: &dyn Fn(&PointRepeat) -> f64| -> Option<f64> {
        let mut v: Vec<f64> = repeats
            .iter()
            .filter(|r| r.value == value && !r.repeat.traced && r.repeat.succeeded())
            .map(of)
            .collect();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    let cpu = |r: &PointRepeat| r.repeat.user_s + r.repeat.sys_s;
    let cpu_at = |value: u64| median_at(value, &cpu);
    // The CPU seconds of one point's clean repeats, fewest or most.
    let cpu_bound = |value: u64, most: bool| {
        repeats
            .iter()
            .filter(|r| r.value == value && !r.repeat.traced && r.repeat.succeeded())
            .map(cpu)
            .reduce(if most { f64::max } else { f64::min })
    };
    let wall_at = |value: u64| median_at(value, &|r| r.repeat.wall_s);
    let shared_at = |value: u64| {
        median_at(value, &|r| {
            r.repeat.interference.as_ref().map_or(0.0, |i| i.share)
        })
    };
    let mut values: Vec<u64> = repeats.iter().map(|r| r.value).collect();
    values.sort_unstable();
    values.dedup();
    let measured: Vec<(u64, f64)> = values
        .into_iter()
        .filter_map(|v| cpu_at(v).map(|c| (v, c)))
        .collect();
    let (Some(&(v0, c0)), Some(&(v1, c1))) = (measured.first(), measured.last()) else {
        return (
            ThroughputSource::Strong,
            "fixed work assumed: no point finished to infer the scaling from (--scaling weak if each thread adds work)".into(),
        );
    };
    let ratio = v1 as f64 / v0 as f64;
    if v1 != v0 && c1.max(c0) < 0.01 {
        return (
            ThroughputSource::Strong,
            format!("fixed work assumed: the command used almost no CPU time ({c0:.3} → {c1:.3} s), nothing to infer the scaling from (--scaling weak if each thread adds work)"),
        );
    }
    if v1 == v0 || c0 <= 0.0 {
        return (
            ThroughputSource::Strong,
            format!("fixed work assumed: one {p} value, nothing to infer the scaling from (--scaling weak if each thread adds work)"),
        );
    }
    let growth = c1 / c0;
    // The same command finishing sooner with more threads: were each thread adding work,
    // it would be doing more work in less time per thread than alone (an efficiency above
    // 110%), which a program does not; the total work is fixed (zstd -T2 -9 on 40 MB: the
    // CPU time grew 1.3× from splitting the input, the wall time fell 13%).
    let (w0, w1) = (wall_at(v0).unwrap_or(0.0), wall_at(v1).unwrap_or(0.0));
    if w0 > 0.0 && w1 > 0.0 && w0 / w1 > 1.10 {
        return (
            ThroughputSource::Strong,
            format!("strong scaling, inferred: the wall time fell {w0:.2} → {w1:.2} s from {v0} to {v1} {p}, so the same work finished sooner (--scaling weak if each thread adds work)"),
        );
    }
    let least = match (cpu_bound(v1, false), cpu_bound(v0, true)) {
        (Some(low), Some(high)) if high > 0.0 => low / high,
        _ => growth,
    };
    let shared = shared_at(v0)
        .into_iter()
        .chain(shared_at(v1))
        .fold(0.0, f64::max);
    let crowded = shared > DISTURBED_SHARE;
    let quiet_needed = ratio.powf(1.0 / 3.0);
    let needed = if crowded {
        quiet_needed.powi(2)
    } else {
        quiet_needed
    };
    if least >= needed {
        (
            ThroughputSource::Weak,
            format!("weak scaling, inferred: the CPU time grew {c0:.2} → {c1:.2} s from {v0} to {v1} {p} ({growth:.1}×, at least {least:.2}× in every repeat), so each thread adds work (--scaling strong if the total work is fixed)"),
        )
    } else if crowded && least >= quiet_needed {
        (
            ThroughputSource::Strong,
            format!("strong scaling, inferred: the CPU time grew {c0:.2} → {c1:.2} s from {v0} to {v1} {p} ({growth:.2}×), but other processes took {:.0}% of the CPUs its threads needed, and sharing them costs CPU time; each thread adding work would have grown it {needed:.2}× or more, so the total work is taken as fixed (--scaling weak if each thread adds work)", shared * 100.0),
        )
    } else {
        (
            ThroughputSource::Strong,
            format!("strong scaling, inferred: the CPU time grew only {c0:.2} → {c1:.2} s from {v0} to {v1} {p} ({growth:.2}×), so the total work is taken as fixed (--scaling weak if each thread adds work)"),
        )
    }
}
