//! What an experiment proves. A cause is lengthened by known delays (and a zero-delay
//! control), the executions interleaved; this compares the throughput's answer with what
//! the cause would give on the critical path, and with what the delay's own CPU would cost
//! off it.
//!
//! The model, per unit of work (an operation): the control takes `t0` of wall time and
//! `w` of CPU time, and the cause occurs `c` times. Lengthening each occurrence by `D`
//! injects `x = c·D` per operation.
//! - On the critical path (a bottleneck: a call under a global lock, a serial phase), the
//!   whole injection lands on the time per operation: `t = t0 + x`, a slowdown of
//!   `x / (t0 + x)`.
//! - Off it, the delay costs only the CPU it spins on: once the workload's CPU demand
//!   `w + x` per operation exceeds what the machine's CPUs give in `t0`, the time per
//!   operation becomes `(w + x) / cpus`.
//!
//! The measured response is the difference of the mean time per operation between the
//! longest delay and the control, with Welch's interval ([`crate::compare::welch`]); its
//! ratio to `x` is the slope (1 on a bottleneck, 0 off the path), which calibrates the
//! what-if: removing the cause's own time per operation `W` saves `slope·W`.

use scalprof_model::experiment::{
    CalibratedWhatIf, Experiment, ExperimentKind, LevelThroughput, Verdict,
};
use scalprof_model::locks::{CallWait, HoldTimes};
use scalprof_model::{FindingDetails, RunDocument};

use crate::welch::{mean_interval, welch, CONFIDENCE};

/// One execution of the workload in an experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Execution {
    pub delay_ns: u64,
    /// Units of work it did (operations, or the run's work measure).
    pub work: f64,
    pub wall_s: f64,
    /// CPU time of the workload's tree (user + system).
    pub cpu_s: f64,
    /// Occurrences of the cause the delay primitive counted.
    pub occurrences: u64,
    /// CPU time the delay itself burned: all of it for a spin, the tail of a long delay
    /// that sleeps first.
    pub spun_s: f64,
}

/// What an experiment was, besides its executions.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub subject: String,
    pub kind: ExperimentKind,
    pub point: u64,
    pub primitive: String,
    /// CPUs the workload may use.
    pub cpus: u32,
    /// The cause's own time per operation at the point (its wait in the run's lock table),
    /// for the calibrated what-if; `None` when the run does not say.
    pub own_ns_per_op: Option<f64>,
    /// The finding's computed bound on the speedup without the cause (from the budget),
    /// which a measured what-if never passes; `None` for a cause with no finding.
    pub bound: Option<f64>,
    /// A user lock's hold times in the run at the point, where they were timed.
    pub hold: Option<HoldTimes>,
}

/// A measured slowdown this close to the bottleneck's prediction counts as one: within a
/// factor of 2 either way (the acceptance of `verify`), wide for a two-CPU machine's noise.
const WITHIN: f64 = 2.0;

/// CPUs this busy (the workload's CPU time over the wall time of all the CPUs it may use)
/// leave a spin no idle CPU to take.
const SATURATED: f64 = 0.9;

/// Judges an experiment from its executions.
pub fn judge(setting: &Setting, executions: &[Execution]) -> Experiment {
    let mut delays: Vec<u64> = executions.iter().map(|e| e.delay_ns).collect();
    delays.sort_unstable();
    delays.dedup();
    let at = |d: u64| -> Vec<&Execution> {
        executions
            .iter()
            .filter(|e| e.delay_ns == d && e.work > 0.0 && e.wall_s > 0.0)
            .collect()
    };
    let throughput = delays.iter().map(|&d| level(d, &at(d))).collect();
    let mut out = unjudged(setting, &delays, throughput);
    let control = at(0);
    let top = delays.last().copied().unwrap_or(0);
    if control.len() < 2 || top == 0 || at(top).len() < 2 {
        out.reason = "fewer than two executions at the control or the longest delay: \
                      nothing to compare (run more rounds)"
            .into();
        return out;
    }
    let per_op = |e: &&Execution| e.wall_s / e.work;
    let t0 = mean(control.iter().map(per_op));
    let w = mean(control.iter().map(|e| e.cpu_s / e.work));
    let c = mean(control.iter().map(|e| e.occurrences as f64 / e.work));
    out.occurrences_per_op = c;
    if c == 0.0 {
        out.verdict = Verdict::OffCriticalPath;
        out.reason = "the cause did not occur at this point: lengthening it changes nothing".into();
        return out;
    }
    let x = c * top as f64 * 1e-9;
    let response = welch(
        &control.iter().map(per_op).collect::<Vec<_>>(),
        &at(top).iter().map(per_op).collect::<Vec<_>>(),
    );
    let Some(response) = response else {
        out.reason = "the executions could not be compared".into();
        return out;
    };
    // The slowdown of a change `dt` of the time per operation; a change that would leave
    // less than half of it (an interval's far end, on noisy runs) reads as -100%: past
    // -t0 the ratio turns positive again, and an interval then ran high to low.
    let slowdown = |dt: f64| {
        if t0 + dt <= t0 / 2.0 {
            -1.0
        } else {
            dt / (t0 + dt)
        }
    };
    out.measured_slowdown = response.ci95.map(slowdown);
    out.predicted_slowdown = slowdown(x);
    if let Some(h) = &setting.hold {
        held_share_and_saturation(&mut out, h, c, t0, x);
    }
    // What the delay burned, as measured: less than the delay where it slept.
    let spun = mean(at(top).iter().map(|e| e.spun_s / e.work));
    out.burn_slowdown = burn_slowdown(t0, w, spun.min(x), setting.cpus);
    out.slope = Some([
        response.difference / x,
        response.ci95[0] / x,
        response.ci95[1] / x,
    ]);
    let (verdict, reason) = verdict(&out, slowdown(response.difference));
    let (verdict, reason) = unless_the_spin_explains_it(
        verdict,
        reason,
        &out,
        &at(top),
        Spin {
            cpus: setting.cpus,
            spun,
            x,
            t0,
        },
    );
    out.verdict = verdict;
    out.reason = reason + &held_text(&out);
    out.calibrated_what_if = what_if(&out, t0, c, setting);
    out
}

/// The experiment before it is judged: its setting and each delay's throughput.
fn unjudged(setting: &Setting, delays: &[u64], throughput: Vec<LevelThroughput>) -> Experiment {
    Experiment {
        subject: setting.subject.clone(),
        kind: setting.kind.clone(),
        point: setting.point,
        primitive: setting.primitive.clone(),
        delays_ns: delays.to_vec(),
        throughput,
        occurrences_per_op: 0.0,
        predicted_slowdown: 0.0,
        burn_slowdown: 0.0,
        measured_slowdown: [0.0, 0.0],
        slope: None,
        verdict: Verdict::Inconclusive,
        reason: String::new(),
        calibrated_what_if: None,
        hold: setting.hold.clone(),
        held_share: None,
        saturation_slowdown: None,
    }
}

/// The lock's busy time per operation, before and after the delay: the share of `t0` it
/// is held (`c` holds per operation), and the slowdown once the delay `x` per operation
/// keeps it held all the time.
fn held_share_and_saturation(e: &mut Experiment, h: &HoldTimes, c: f64, t0: f64, x: f64) {
    // A lock is held at most all the time; the holds were timed in the traced
    // repeats, slower than the control, so the ratio can pass 1.
    let busy = (c * h.mean_ns * 1e-9).min(t0);
    e.held_share = Some(busy / t0);
    let lengthened = busy + x;
    e.saturation_slowdown = Some(if lengthened > t0 {
        1.0 - t0 / lengthened
    } else {
        0.0
    });
}

/// What the longest delay spun, per operation (seconds), of the `x` it injected, on how
/// many CPUs, at the control's time per operation `t0`.
struct Spin {
    cpus: u32,
    spun: f64,
    x: f64,
    t0: f64,
}

/// A spin on CPUs the workload already kept busy: its own CPU can cost as much as a
/// bottleneck would (the spin model is a mean; CFS shares are not), so a cost near the
/// bottleneck's proves nothing there, and an on-critical-path verdict becomes
/// inconclusive, unless the cost stays a bottleneck's once the spin's CPU is taken off at
/// its worst: every nanosecond spun taken from the workload's busy CPUs, `spun / cpus` of
/// wall time per operation, off the measured interval's lower end. A cost beyond twice the
/// bottleneck's still counts. `top` are the executions at the longest delay.
fn unless_the_spin_explains_it(
    verdict: Verdict,
    reason: String,
    e: &Experiment,
    top: &[&Execution],
    spin: Spin,
) -> (Verdict, String) {
    let cpus = f64::from(spin.cpus.max(1));
    let busy = mean(top.iter().map(|run| run.cpu_s / (run.wall_s * cpus)));
    let knock_on = e.measured_slowdown[0] > e.predicted_slowdown * WITHIN;
    if verdict != Verdict::OnCriticalPath
        || busy < SATURATED
        || spin.spun < 0.25 * spin.x
        || knock_on
    {
        return (verdict, reason);
    }
    let lo = e.measured_slowdown[0];
    let t0 = spin.t0;
    let dt_lo = if lo < 1.0 {
        lo * t0 / (1.0 - lo)
    } else {
        f64::INFINITY
    };
    let on_path = dt_lo - spin.spun / cpus;
    let without_spin = if on_path > 0.0 {
        on_path / (t0 + on_path)
    } else {
        0.0
    };
    if without_spin >= e.predicted_slowdown / WITHIN {
        let reason = format!(
            "{}; the CPUs were {:.0}% busy while the delay spun, and with the spin's own CPU \
             taken off at its worst it still costs {:.0}%",
            reason,
            busy * 100.0,
            without_spin * 100.0
        );
        return (verdict, reason);
    }
    let reason = format!(
        "{}, but the CPUs were {:.0}% busy while the delay spun, so the spin's own CPU may \
         explain it (taken off at its worst, {:.0}% is left): a cause the workload sleeps \
         in, or a machine with idle CPUs, would settle it",
        reason.replacen(": on the critical path", "", 1),
        busy * 100.0,
        without_spin * 100.0
    );
    (Verdict::Inconclusive, reason)
}

/// "; held 80 ns at the median (p99 331 ns), 93% of the time: lengthened, it saturates
/// (at least 38%)": what the hold times say, beside the bottleneck's prediction.
fn held_text(e: &Experiment) -> String {
    let (Some(h), Some(share)) = (&e.hold, e.held_share) else {
        return String::new();
    };
    let held = format!(
        "; held {} at the median (p99 {}), {:.0}% of the time",
        scalprof_model::units::human_ns(h.p50_ns as f64),
        scalprof_model::units::human_ns(h.p99_ns as f64),
        share * 100.0
    );
    match e.saturation_slowdown {
        Some(s) if s > 0.0 => format!(
            "{held}: lengthened, it is held all the time (at least {:.0}% slower)",
            s * 100.0
        ),
        _ => held,
    }
}

/// A level's mean throughput, with Student's t interval over its executions.
fn level(delay_ns: u64, runs: &[&Execution]) -> LevelThroughput {
    let x: Vec<f64> = runs.iter().map(|e| e.work / e.wall_s).collect();
    // One execution: no spread to tell (and a NaN would not survive the JSON).
    let (m, half) = mean_interval(&x, CONFIDENCE).unwrap_or_else(|| (mean(x.iter().copied()), 0.0));
    LevelThroughput {
        delay_ns,
        throughput: m,
        ci95: [m - half, m + half],
        executions: x.len() as u32,
    }
}

fn mean(x: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = x.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// The slowdown the spin alone causes off the critical path: none while the CPUs have
/// room for the workload's CPU time and the spin; beyond, the time per operation is the
/// CPU demand shared by the CPUs.
fn burn_slowdown(t0: f64, w: f64, x: f64, cpus: u32) -> f64 {
    let t = (w + x) / f64::from(cpus.max(1));
    if t > t0 {
        1.0 - t0 / t
    } else {
        0.0
    }
}

/// Where an on-path cost is told from an off-path one: the geometric mean of the spin's
/// own cost (or a hundredth of the prediction) and the bottleneck's prediction.
fn boundary(e: &Experiment) -> f64 {
    let predicted = e.predicted_slowdown;
    (e.burn_slowdown.max(0.01 * predicted) * predicted).sqrt()
}

/// Whether more executions could not change the verdict: an on-path cost whose whole
/// interval lies past the boundary and at half the bottleneck's or more, or an off-path
/// cost whose whole interval lies short of it; else, a verdict whose interval is already
/// narrower than half the bottleneck's prediction.
pub fn settled(e: &Experiment) -> bool {
    let [lo, hi] = e.measured_slowdown;
    let narrow = hi - lo < e.predicted_slowdown / 2.0;
    match e.verdict {
        Verdict::OnCriticalPath => {
            narrow || (lo > boundary(e) && lo >= e.predicted_slowdown / WITHIN)
        }
        Verdict::OffCriticalPath => narrow || hi < boundary(e),
        _ => false,
    }
}

/// The verdict from the measured slowdown (`mid`, and its interval) against the
/// bottleneck's prediction and the spin's own cost. The two predictions are told apart at
/// their geometric mean: on a machine of few busy CPUs the spin alone costs a good part of
/// what a bottleneck would (half of it on two CPUs), so "slower" is not enough.
fn verdict(e: &Experiment, mid: f64) -> (Verdict, String) {
    let [lo, hi] = e.measured_slowdown;
    let (predicted, burn) = (e.predicted_slowdown, e.burn_slowdown);
    let between = boundary(e);
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let measured = format!("{} ({}–{})", pct(mid), pct(lo), pct(hi));
    if lo >= predicted / WITHIN && mid <= predicted * WITHIN && mid > between {
        return (
            Verdict::OnCriticalPath,
            format!(
                "cost {measured}, as a bottleneck would (predicted {}): on the critical path",
                pct(predicted)
            ),
        );
    }
    // Beyond what a bottleneck gives: only a cause on the path does that, with a knock-on
    // cost (a lock held longer is contended more often, and each waiter put to sleep and
    // woken adds its hand-off to the path). Past the bottleneck's range by its middle with
    // its low end still inside it counts too: both readings say "on the path".
    let beyond = lo > predicted * WITHIN || (mid > predicted * WITHIN && lo >= predicted / WITHIN);
    if beyond && lo > burn * WITHIN && mid > between {
        return (
            Verdict::OnCriticalPath,
            format!(
                "cost {measured}, more than a bottleneck would (predicted {}): on the critical \
                 path, with a knock-on cost (longer holds put more waiters to sleep, and each \
                 wake-up is on the path too)",
                pct(predicted)
            ),
        );
    }
    if hi < predicted / (2.0 * WITHIN) || (mid <= between && hi < predicted) {
        let spin = if burn > 0.005 {
            format!("; the delay's own CPU: {}", pct(burn))
        } else {
            String::new()
        };
        return (
            Verdict::OffCriticalPath,
            format!(
                "cost {measured}, where a bottleneck would cost {}{spin}: off the critical path",
                pct(predicted)
            ),
        );
    }
    if hi - lo > predicted / WITHIN {
        return (
            Verdict::Inconclusive,
            format!(
                "cost {measured} against a bottleneck's {}: too noisy to tell; more rounds \
                 (--rounds) or a quieter machine would settle it",
                pct(predicted)
            ),
        );
    }
    (
        Verdict::Inconclusive,
        format!(
            "cost {measured} against a bottleneck's {} and the delay's own CPU {}: on the \
             path in part (each thread's own, not serialized?)",
            pct(predicted),
            pct(burn)
        ),
    )
}

/// The speedup if the cause's own time per operation were gone, as the measured slope
/// says: only where the experiment found it on the path, and the run says how long it is.
fn what_if(e: &Experiment, t0: f64, c: f64, setting: &Setting) -> Option<CalibratedWhatIf> {
    let own = setting.own_ns_per_op? * 1e-9;
    let slope = e.slope?;
    if e.verdict != Verdict::OnCriticalPath || own <= 0.0 {
        return None;
    }
    // The saving is at most the whole time per operation's worth; a slope above 1 (noise)
    // is kept at 1: a cause cannot save more than its own time.
    // A bound under 1 bounds nothing (a finding's what-if is a speedup).
    let bound = setting.bound.filter(|b| *b >= 1.0).unwrap_or(f64::INFINITY);
    let speedup = |k: f64| {
        let saved = (k.clamp(0.0, 1.0) * own).min(0.95 * t0);
        (t0 / (t0 - saved)).min(bound)
    };
    // Halving the hold saves the slope's share of half the lock's time per operation;
    // never more than removing the cause's wait would (where the wait undercounts the
    // lock's cost, the hold's figure is kept to it, not the other way round).
    let halved_hold = setting.hold.as_ref().map(|h| {
        let half = c * h.mean_ns * 1e-9 / 2.0;
        let by = |k: f64| {
            let saved = (k.clamp(0.0, 1.0) * half).min(0.95 * t0);
            (t0 / (t0 - saved)).min(speedup(k))
        };
        [by(slope[0]), by(slope[1]), by(slope[2])]
    });
    Some(CalibratedWhatIf {
        speedup: speedup(slope[0]),
        interval: [speedup(slope[1]), speedup(slope[2])],
        halved_hold,
    })
}

/// Puts the experiments in the document and points each finding at the one that
/// lengthened its cause: the same subject, or the system call of a finding's row of waits
/// in one ("disk I/O (fdatasync …) in journal_append").
pub fn attach(doc: &mut RunDocument, experiments: &[Experiment]) {
    doc.experiments = experiments.to_vec();
    for f in &mut doc.findings {
        let call = match &f.details {
            FindingDetails::Lock(d) => CallWait::call_in(&d.lock_type, &f.subject),
            _ => None,
        };
        f.experiment = experiments.iter().position(|e| {
            e.subject == f.subject
                || (e.kind == ExperimentKind::Syscall && call == Some(e.subject.as_str()))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting() -> Setting {
        Setting {
            subject: "fdatasync".into(),
            kind: ExperimentKind::Syscall,
            point: 2,
            primitive: "sys_exit spin".into(),
            cpus: 2,
            own_ns_per_op: Some(2_000.0),
            bound: None,
            hold: None,
        }
    }

    /// Executions of a workload whose time per operation is `t0` plus `k` of the injected
    /// time, with a little noise; 1000 operations each, 0.02 calls per operation.
    fn runs(t0: f64, cpu_per_op: f64, k: f64, delays: &[u64]) -> Vec<Execution> {
        let mut out = Vec::new();
        for round in 0..5 {
            for &d in delays {
                let noise = 1.0 + 0.01 * ((round * 7 + d as usize % 5) % 3) as f64;
                let x = 0.02 * d as f64 * 1e-9;
                out.push(Execution {
                    delay_ns: d,
                    work: 1000.0,
                    wall_s: 1000.0 * (t0 + k * x) * noise,
                    cpu_s: 1000.0 * (cpu_per_op + x),
                    occurrences: 20,
                    spun_s: 1000.0 * x,
                });
            }
        }
        out
    }

    #[test]
    fn an_experiment_settles_once_its_interval_excludes_the_other_verdict() {
        let mut e = judge(&setting(), &runs(4e-6, 1e-6, 1.0, &[0, 100_000, 200_000]));
        assert_eq!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
        assert!(settled(&e));
        // Wide, but wholly past the boundary and at half a bottleneck's or more.
        e.measured_slowdown = [0.4, 0.9];
        assert!(settled(&e), "{e:?}");
        // Wide, and reaching down to where an off-path cost lies.
        e.measured_slowdown = [0.1, 0.9];
        assert!(!settled(&e), "{e:?}");
        e.verdict = Verdict::Inconclusive;
        e.measured_slowdown = [0.45, 0.5];
        assert!(!settled(&e));
    }

    #[test]
    fn a_bottleneck_answers_as_predicted_and_is_on_the_critical_path() {
        let e = judge(&setting(), &runs(4e-6, 4e-6, 1.0, &[0, 100_000, 200_000]));
        assert_eq!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
        // 0.02 × 200 µs = 4 µs on 4 µs: half the throughput.
        assert!((e.predicted_slowdown - 0.5).abs() < 0.01, "{e:?}");
        let w = e.calibrated_what_if.expect("a what-if");
        assert!(w.speedup > 1.8 && w.speedup < 2.2, "{w:?}");
        assert_eq!(e.throughput.len(), 3);
        assert!(e.throughput[2].throughput < e.throughput[0].throughput);
    }

    #[test]
    fn a_lock_held_all_the_time_saturates_and_halving_its_hold_is_measured() {
        // Taken 0.02 times per operation for 200 µs: held 4 µs of every 4 µs operation.
        let hold = HoldTimes {
            acquisitions_per_op: Some(0.02),
            ..HoldTimes::of(1000, vec![200_000; 100]).unwrap()
        };
        let locked = Setting {
            kind: ExperimentKind::Lock,
            own_ns_per_op: Some(4_000.0),
            hold: Some(hold),
            ..setting()
        };
        let e = judge(&locked, &runs(4e-6, 4e-6, 1.0, &[0, 100_000, 200_000]));
        assert_eq!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
        assert!((e.held_share.unwrap() - 1.0).abs() < 0.01, "{e:?}");
        // Held 4 µs + 4 µs injected per 4 µs operation: at least half the throughput.
        assert!((e.saturation_slowdown.unwrap() - 0.5).abs() < 0.01, "{e:?}");
        assert!(
            e.reason.contains("held 200.0 µs at the median"),
            "{}",
            e.reason
        );
        // Halving a 4 µs hold per 4 µs operation on the path: 2×.
        let [x, lo, hi] = e.calibrated_what_if.unwrap().halved_hold.unwrap();
        assert!(x > 1.8 && x < 2.2 && lo <= x && x <= hi, "{x} {lo} {hi}");
        // Without hold times, no such figures.
        let e = judge(&setting(), &runs(4e-6, 4e-6, 1.0, &[0, 100_000, 200_000]));
        assert!(e.held_share.is_none() && e.saturation_slowdown.is_none());
    }

    #[test]
    fn a_cause_that_costs_more_than_a_bottleneck_is_on_the_path_with_a_knock_on_cost() {
        // Each injected µs costs 3: a lock whose longer hold makes its hand-offs sleep.
        let e = judge(&setting(), &runs(4e-6, 4e-6, 3.0, &[0, 20_000, 40_000]));
        assert_eq!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
        assert!(e.reason.contains("knock-on"), "{}", e.reason);
        // The what-if never credits more than the cause's own time.
        let w = e.calibrated_what_if.expect("a what-if");
        assert!(w.speedup <= 4e-6 / (4e-6 - 2e-6) + 1e-9, "{w:?}");
        // Nor more than the finding's own bound.
        let bounded = Setting {
            bound: Some(1.5),
            ..setting()
        };
        let e = judge(&bounded, &runs(4e-6, 4e-6, 3.0, &[0, 20_000, 40_000]));
        let w = e.calibrated_what_if.expect("a what-if");
        assert!(w.speedup <= 1.5 && w.interval[1] <= 1.5, "{w:?}");
    }

    #[test]
    fn a_cost_straddling_twice_a_bottleneck_s_is_on_the_path() {
        // A lock held all the time, measured 75% (73%–77%) against a bottleneck's 37%: the
        // middle past twice the prediction, the low end just short of it.
        let mut e = judge(&setting(), &runs(4e-6, 1e-6, 1.0, &[0, 100_000, 200_000]));
        e.predicted_slowdown = 0.3673;
        e.burn_slowdown = 0.0;
        e.measured_slowdown = [0.733, 0.769];
        let (v, reason) = verdict(&e, 0.75);
        assert_eq!(v, Verdict::OnCriticalPath, "{reason}");
        assert!(reason.contains("knock-on"), "{reason}");
        // Its low end under half a bottleneck's: no longer on the path by either rule.
        e.measured_slowdown = [0.15, 1.3];
        let (v, reason) = verdict(&e, 0.75);
        assert_ne!(v, Verdict::OnCriticalPath, "{reason}");
    }

    #[test]
    fn a_noisy_interval_reads_low_to_high_and_is_not_settled_on_the_path() {
        // Alternate executions twice and half as long: an interval far wider than t0.
        let mut runs = runs(4e-6, 4e-6, 1.0, &[0, 100_000, 200_000]);
        for (i, e) in runs.iter_mut().enumerate() {
            e.wall_s *= if i % 2 == 0 { 2.5 } else { 0.4 };
        }
        let e = judge(&setting(), &runs);
        let [lo, hi] = e.measured_slowdown;
        assert!(lo <= hi, "{lo} {hi}");
        assert!(lo >= -1.0);
        assert_ne!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
    }

    #[test]
    fn a_cause_off_the_path_barely_moves_the_throughput() {
        // Plenty of idle CPU (1 µs of CPU per 4 µs on 2 CPUs): the spin costs nothing.
        let e = judge(&setting(), &runs(4e-6, 1e-6, 0.02, &[0, 100_000, 200_000]));
        assert_eq!(e.verdict, Verdict::OffCriticalPath, "{e:?}");
        assert!(e.calibrated_what_if.is_none());
    }

    #[test]
    fn a_slowdown_the_spin_s_cpu_explains_is_not_a_bottleneck() {
        // CPU-bound on 2 CPUs (8 µs of CPU per 4 µs): each injected µs of spin takes
        // half a µs from the workers, which the burn model predicts.
        let e = judge(&setting(), &runs(4e-6, 8e-6, 0.5, &[0, 100_000, 200_000]));
        assert!(e.burn_slowdown > 0.2, "{e:?}");
        assert_eq!(e.verdict, Verdict::OffCriticalPath, "{e:?}");
    }

    #[test]
    fn a_spin_on_saturated_cpus_near_a_bottleneck_s_cost_is_inconclusive() {
        // 2 CPUs kept busy (8 µs of CPU per 4 µs). The longest delay spins 4 µs per
        // operation: taken from the busy CPUs, at worst 2 µs of wall time per operation.
        let busy = |k: f64| {
            let mut r = runs(4e-6, 8e-6, k, &[0, 100_000, 200_000]);
            for e in &mut r {
                e.cpu_s = e.cpu_s.max(2.0 * e.wall_s);
            }
            judge(&setting(), &r)
        };
        // A response of 3 µs (43%, near a bottleneck's 50%): 1 µs is left once the spin's
        // worst is taken off, 20%, under half a bottleneck's. The spin may explain it.
        let e = busy(0.75);
        assert_eq!(e.verdict, Verdict::Inconclusive, "{e:?}");
        assert!(e.reason.contains("busy"), "{}", e.reason);
        // A response of 4 µs (50%): 2 µs are left, 33%, which no spin explains.
        let e = busy(1.0);
        assert_eq!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
        assert!(e.reason.contains("taken off at its worst"), "{}", e.reason);
        // With idle CPUs the same response is a bottleneck's.
        let e = judge(&setting(), &runs(4e-6, 1e-6, 1.0, &[0, 100_000, 200_000]));
        assert_eq!(e.verdict, Verdict::OnCriticalPath, "{e:?}");
    }

    #[test]
    fn a_cause_that_never_occurs_is_off_the_path_and_too_few_runs_say_so() {
        let mut r = runs(4e-6, 1e-6, 1.0, &[0, 100_000]);
        for e in &mut r {
            e.occurrences = 0;
        }
        assert_eq!(judge(&setting(), &r).verdict, Verdict::OffCriticalPath);
        let one = &runs(4e-6, 1e-6, 1.0, &[0, 100_000])[..2];
        let e = judge(&setting(), one);
        assert_eq!(e.verdict, Verdict::Inconclusive);
        assert!(e.reason.contains("fewer than two"), "{}", e.reason);
    }
}
