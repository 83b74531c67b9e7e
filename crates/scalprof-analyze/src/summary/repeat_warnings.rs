//! The warnings about a point's repeats: their wall times spread, the traced ones ran
//! slower or faster than the clean ones, one lay far from the others or ran in another mode,
//! some failed.

use scalprof_model::stability;
use scalprof_model::{Point, Repeat, RunHeader, Spread, Warning, WarningKind};

use super::{NOISY_SPREAD, PERTURBATION_LIMIT};

/// Other processes' share of one repeat above which they are named, though under the bar
/// that measures the repeat again: a burst of a few seconds in one repeat.
pub(super) const NOTED_SHARE: f64 = 0.05;

/// " (the clean repeats themselves spread N%)" when they spread at all.
fn spread_note(p: &Point) -> String {
    p.throughput_spread
        .filter(|s| s.median > 0.0 && s.max > s.min)
        .map(|s| {
            format!(
                " (the clean repeats themselves spread {:.0}%)",
                100.0 * (s.max - s.min) / s.median
            )
        })
        .unwrap_or_default()
}

/// The wall time of a point's successful repeats spreads beyond the noise.
pub(super) fn noisy_repeats(header: &RunHeader, p: &Point) -> Option<Warning> {
    let w = p.wall_s?;
    let ok = p.repeats.iter().filter(|r| r.succeeded()).count();
    if !(ok >= 2 && w.median > 0.0 && (w.max - w.min) / w.median > NOISY_SPREAD) {
        return None;
    }
    let hint = if ok < 5 {
        "run more repeats (--repeat 5) on a quieter machine"
    } else {
        "other work on the machine is interfering; quiet it and rerun"
    };
    Some(Warning {
        kind: WarningKind::NoisyRepeats,
        point: Some(p.value),
        message: format!(
            "{} {}: wall time of {ok} repeats spreads {:.0}% ({:.3}–{:.3} s); {hint}",
            header.sweep.parameter,
            p.value,
            100.0 * (w.max - w.min) / w.median,
            w.min,
            w.max
        ),
    })
}

/// The traced repeats ran beyond the tracing budget from the clean ones, and outside the
/// noise: even the most favourable pairing of a traced repeat with a clean one shows it,
/// and the difference is larger than the clean repeats differ among themselves (at 16
/// threads a machine's own spread is several percent: a traced run inside it is noise).
pub(super) fn perturbed_diagnosis(header: &RunHeader, p: &Point) -> Option<Warning> {
    let outside_noise = p
        .perturbation_interval
        .is_none_or(|[lo, hi]| lo > 0.0 || hi < 0.0);
    let clean_spread = p
        .throughput_spread
        .filter(|s| s.median > 0.0)
        .map_or(0.0, |s| (s.max - s.min) / s.median);
    let x = p
        .perturbation
        .filter(|x| x.abs() > PERTURBATION_LIMIT.max(clean_spread) && outside_noise)?;
    Some(Warning {
        kind: WarningKind::PerturbedDiagnosis,
        point: Some(p.value),
        message: format!(
            "{} {}: traced repeats ran {:.0}% {} than clean ones{}{}; the findings describe a perturbed run (the reported throughput is the clean one)",
            header.sweep.parameter,
            p.value,
            100.0 * x.abs(),
            if x < 0.0 { "slower" } else { "faster" },
            p.perturbation_interval
                .map(|[lo, hi]| format!(
                    " ({:+.0}% to {:+.0}% over the repeats' pairings)",
                    lo * 100.0,
                    hi * 100.0
                ))
                .unwrap_or_default(),
            spread_note(p) + &traced_interference_note(p),
        ),
    })
}

/// " (other processes took up to N% of a traced repeat's CPUs)": part of a traced run's
/// difference may be theirs, not the observer's.
fn traced_interference_note(p: &Point) -> String {
    let peak = p
        .traced_repeats
        .iter()
        .filter_map(|r| r.interference.as_ref().map(|i| i.share))
        .fold(0.0, f64::max);
    if peak < NOTED_SHARE {
        return String::new();
    }
    format!(
        " (other processes took up to {:.0}% of a traced repeat's CPUs: part of the difference is theirs)",
        peak * 100.0
    )
}

/// Repeats left out of the point's throughput for lying far from the others.
pub(super) fn outlier_repeats(header: &RunHeader, p: &Point) -> Option<Warning> {
    if p.outliers.is_empty() {
        return None;
    }
    let walls: Vec<String> = p
        .repeats
        .iter()
        .filter(|r| p.outliers.contains(&r.index))
        .map(|r| format!("repeat {} ({:.3} s)", r.index + 1, r.wall_s))
        .collect();
    Some(Warning {
        kind: WarningKind::OutlierRepeat,
        point: Some(p.value),
        message: format!(
            "{} {}: {} ran far from the point's other repeats (median {:.3} s) and is left out of its throughput; if the program has two regimes, run more repeats (--repeat 10)",
            header.sweep.parameter,
            p.value,
            walls.join(", "),
            p.wall_s.map_or(0.0, |w| w.median),
        ),
    })
}

/// Traced repeats that ran in another mode than the clean ones (`Point::other_mode`):
/// left out of the traced-against-clean comparison where others are left, else the
/// comparison is between modes, and the tracer may have tipped the program.
pub(super) fn other_mode_repeats(header: &RunHeader, p: &Point) -> Option<Warning> {
    if p.other_mode.is_empty() {
        return None;
    }
    let others: Vec<&Repeat> = p
        .traced_repeats
        .iter()
        .filter(|r| p.other_mode.contains(&r.index))
        .collect();
    let clean: Vec<&Repeat> = stability::kept(&p.repeats)
        .into_iter()
        .filter(|r| !p.outliers.contains(&r.index))
        .collect();
    let median = |v: Vec<f64>| Spread::of(v.into_iter()).map_or(0.0, |s| s.median);
    let clean_switches = median(clean.iter().map(|r| r.voluntary_csw as f64).collect());
    let said: Vec<String> = others
        .iter()
        .map(|r| {
            format!(
                "traced repeat {} ({:.3} s, {} voluntary context switches)",
                r.index + 1,
                r.wall_s,
                r.voluntary_csw
            )
        })
        .collect();
    let all = others.len() == stability::kept(&p.traced_repeats).len();
    let mut outcome = if all {
        "the traced repeats are compared with the clean ones across modes: the tracer may have tipped the program from one to the other".to_string()
    } else {
        "left out of the traced-against-clean comparison (the lock table and the profile keep them)"
            .to_string()
    };
    let timed = p
        .locks
        .as_ref()
        .map_or(&[][..], |l| &l.hold_timed_repeats[..]);
    if others.iter().any(|r| timed.contains(&r.index)) {
        outcome += "; the hold-timing interposer was loaded in them, and may have tipped it";
    }
    Some(Warning {
        kind: WarningKind::OutlierRepeat,
        point: Some(p.value),
        message: format!(
            "{} {}: {} ran in another mode than the clean repeats ({:.0} switches, {:.3} s, medians): {outcome}; a program whose threads hand a lock over through the scheduler can run as a convoy or not from run to run (run more repeats to see how often: --repeat 10)",
            header.sweep.parameter,
            p.value,
            said.join(", "),
            clean_switches,
            p.wall_s.map_or(0.0, |w| w.median),
        ),
    })
}

/// Repeats that failed, and how: kept, but not counted in throughput.
pub(super) fn failed_repeats(header: &RunHeader, p: &Point) -> Option<Warning> {
    let failed = p.repeats.iter().filter(|r| !r.succeeded()).count();
    if failed == 0 {
        return None;
    }
    let how: Vec<String> = p
        .repeats
        .iter()
        .filter(|r| !r.succeeded())
        .map(|r| r.outcome())
        .collect();
    Some(Warning {
        kind: WarningKind::FailedRepeats,
        point: Some(p.value),
        message: format!(
            "{} {}: {failed} of {} repeats failed ({}); they are kept but not counted in throughput",
            header.sweep.parameter,
            p.value,
            p.repeats.len(),
            how.join(", ")
        ),
    })
}
