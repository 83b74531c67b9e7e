//! Welch's unequal-variances t-test: the comparison of two runs' repeats and an
//! experiment's levels both stand on it.

use scalprof_model::compare::Welch;
use scalprof_model::stability::Interval;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence of every interval and test of a comparison.
pub const CONFIDENCE: f64 = 0.95;

/// The mean and the sample variance (n − 1).
pub(crate) fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, v)
}

/// The mean of `x` and the half-width of its Student's t interval at `confidence`
/// (`None` with fewer than two values: no spread to tell).
pub(crate) fn mean_interval(x: &[f64], confidence: f64) -> Option<(f64, f64)> {
    if x.len() < 2 {
        return None;
    }
    let (m, var) = mean_var(x);
    let q = StudentsT::new(0.0, 1.0, (x.len() - 1) as f64)
        .map(|t| t.inverse_cdf(0.5 + confidence / 2.0))
        .unwrap_or(f64::NAN);
    Some((m, q * (var / x.len() as f64).sqrt()))
}

/// Student's t quantile 0.90 for `df` degrees of freedom (80% two-sided), from the
/// standard table (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2). The shares' intervals
/// were made with these rounded values from the first stored run on; statrs' exact
/// quantiles would move 315 of 765 stored documents' figures in their fourth digit.
pub(crate) fn t80(df: usize) -> f64 {
    const T: [f64; 10] = [
        3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383, 1.372,
    ];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        11..=30 => 1.35,
        _ => 1.282,
    }
}

/// The 80% interval ([`Interval`]) of a share around `center` from its per-repeat
/// `values` (at least two; otherwise the point `[center, center]`): `center` ± t80 × s/√n,
/// clamped to `[0, 1]`. It is at least as wide as the distance from `center` (the merged
/// repeats' share) to the repeats' mean: where the repeats alone miss what the merged ones
/// name, they do not make the share look certain.
pub fn share_interval(center: f64, values: &[f64]) -> Interval {
    let n = values.len();
    if n < 2 {
        return [center, center];
    }
    let (mean, var) = mean_var(values);
    let half = (t80(n - 1) * (var / n as f64).sqrt()).max((mean - center).abs());
    [
        (center - half).clamp(0.0, 1.0),
        (center + half).clamp(0.0, 1.0),
    ]
}

/// Welch's unequal-variances t-test (B. L. Welch, "The generalization of 'Student's'
/// problem when several different population variances are involved", Biometrika 34,
/// 1947), with the Welch–Satterthwaite degrees of freedom. `None` with fewer than two
/// observations on either side.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    let Parts {
        difference,
        se,
        dof,
    } = parts(a, b)?;
    if se == 0.0 {
        // Identical, noise-free samples: a difference is either certain or absent.
        let p = if difference == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch {
            difference,
            ci95: [difference, difference],
            t: if difference == 0.0 {
                0.0
            } else {
                f64::INFINITY * difference.signum()
            },
            dof: (a.len() + b.len() - 2) as f64,
            p_value: p,
        });
    }
    let t = difference / se;
    let dist = StudentsT::new(0.0, 1.0, dof).ok()?;
    let p_value = 2.0 * (1.0 - dist.cdf(t.abs()));
    let q = dist.inverse_cdf(0.5 + CONFIDENCE / 2.0);
    Some(Welch {
        difference,
        ci95: [difference - q * se, difference + q * se],
        t,
        dof,
        p_value,
    })
}

/// The interval of the mean difference `b − a` at `confidence` (Welch–Satterthwaite),
/// with the difference. `None` with fewer than two observations on either side.
pub(crate) fn interval(a: &[f64], b: &[f64], confidence: f64) -> Option<(f64, [f64; 2])> {
    let Parts {
        difference: d,
        se,
        dof,
    } = parts(a, b)?;
    if se == 0.0 {
        return Some((d, [d, d]));
    }
    let q = StudentsT::new(0.0, 1.0, dof)
        .ok()?
        .inverse_cdf(0.5 + confidence / 2.0);
    Some((d, [d - q * se, d + q * se]))
}

/// The mean difference `b − a`, its standard error and the Welch–Satterthwaite degrees of
/// freedom (NaN where the standard error is 0).
struct Parts {
    difference: f64,
    se: f64,
    dof: f64,
}

fn parts(a: &[f64], b: &[f64]) -> Option<Parts> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    let dof = (sa + sb).powi(2)
        / (sa.powi(2) / (a.len() as f64 - 1.0) + sb.powi(2) / (b.len() as f64 - 1.0));
    Some(Parts {
        difference: mb - ma,
        se: (sa + sb).sqrt(),
        dof,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_s_interval_narrows_as_repeats_agree_and_is_a_point_with_one() {
        assert_eq!(share_interval(0.3, &[0.3]), [0.3, 0.3]);
        let two = share_interval(0.3, &[0.25, 0.35]);
        // s = 0.0707, s/√2 = 0.05, t(1) = 3.078.
        assert!((two[0] - (0.3 - 0.1539)).abs() < 1e-3, "{two:?}");
        let six = share_interval(0.3, &[0.25, 0.35, 0.25, 0.35, 0.25, 0.35]);
        assert!(
            six[1] - six[0] < two[1] - two[0] && six[0] > 0.25,
            "{six:?}"
        );
        assert_eq!(share_interval(0.02, &[0.0, 0.1])[0], 0.0);
        // No narrower than the gap between the merged share and the repeats' mean.
        let [lo, hi] = share_interval(0.3, &[0.1, 0.1]);
        assert!(
            (lo - 0.1).abs() < 1e-12 && (hi - 0.5).abs() < 1e-12,
            "{lo} {hi}"
        );
    }
}
