//! Welch's unequal-variances t-test: the comparison of two runs' repeats and an
//! experiment's levels both stand on it.

use scalprof_model::compare::Welch;
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
