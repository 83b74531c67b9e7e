//! Whether a point's clean repeats know its throughput closely enough (adaptive repeats).

/// The 80% interval's half-width of the mean of `x`, relative to the mean; `None` with
/// fewer than two values or a mean of zero. The interval is the one the shares use
/// ([`scalprof_analyze::share_interval`]), of the values over their mean (its low
/// end: the high one is clamped at 1).
pub(super) fn relative_half_width(x: &[f64]) -> Option<f64> {
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    if x.len() < 2 || mean <= 0.0 {
        return None;
    }
    let relative: Vec<f64> = x.iter().map(|v| v / mean).collect();
    Some(1.0 - scalprof_analyze::share_interval(1.0, &relative)[0])
}

#[cfg(test)]
mod tests {
    use super::relative_half_width;

    #[test]
    fn a_throughput_is_steady_once_its_mean_is_known_within_five_percent() {
        assert_eq!(relative_half_width(&[10.0]), None);
        assert_eq!(relative_half_width(&[0.0, 0.0]), None);
        // 100 ± 1: t80(2) 1.886 × 1/√3 = 1.09% of the mean.
        let s = relative_half_width(&[99.0, 100.0, 101.0]).unwrap();
        assert!((s - 1.886 / 3f64.sqrt() / 100.0).abs() < 1e-12, "{s}");
        assert!(s < crate::options::STEADY);
        // Two runs 30% apart are not.
        assert!(relative_half_width(&[100.0, 130.0]).unwrap() > crate::options::STEADY);
    }
}
