//! The sampler's rate at each point of a sweep, where the user did not choose it.

/// Samples a point's traced repeat should hold, in all its threads: enough for a cause's
/// share to be known within about half a percentage point (a 5% share from 4000 samples
/// has a binomial standard error of 0.34 points), few enough that a long run pays little.
pub const TARGET_SAMPLES: f64 = 4000.0;

/// The lowest rate chosen by itself: continuous profilers sample at 19–100 Hz.
pub const MIN_ADAPTIVE_HZ: u64 = 49;

/// The share of a sampled thread's time the sampler may take where the rate is not chosen
/// by the user: continuous profilers keep to about 1% of the CPU.
pub const SAMPLER_SHARE: f64 = 0.01;

/// The highest rate that keeps a sampler whose samples cost `cost_ns` each of the sampled
/// thread's time within [`SAMPLER_SHARE`] of it, odd, never under [`MIN_ADAPTIVE_HZ`]: at
/// 2 µs a sample (bare metal) 4999 Hz, at 35 µs (a virtual machine's emulated timer) 285.
pub fn cost_ceiling(cost_ns: f64) -> Option<u64> {
    if !(cost_ns.is_finite() && cost_ns > 0.0) {
        return None;
    }
    let hz = (SAMPLER_SHARE / (cost_ns * 1e-9)).floor() as u64;
    let hz = hz.max(MIN_ADAPTIVE_HZ);
    Some(if hz % 2 == 1 { hz } else { hz - 1 })
}

/// The rate for a point whose clean repeats took `cpu_s` CPU seconds each (user and
/// system, all threads; the median): what gives about [`TARGET_SAMPLES`] samples, between
/// [`MIN_ADAPTIVE_HZ`] and `ceiling` (the default or the data-rate limit). A one-second
/// run at one thread keeps the ceiling; a 16-thread run of 10 s samples at 49 Hz. The
/// sampler's cost falls with the rate: at 14 µs a sample, 1.4% of a thread at 999 Hz,
/// 0.07% at 49 Hz.
pub fn point_frequency(cpu_s: f64, ceiling: u64) -> u64 {
    if !(cpu_s.is_finite() && cpu_s > 0.0) {
        return ceiling;
    }
    let hz = (TARGET_SAMPLES / cpu_s).round() as u64;
    // Odd rates, as 999 is, so that sampling does not run in lockstep with timers.
    let hz = hz.clamp(MIN_ADAPTIVE_HZ, ceiling.max(MIN_ADAPTIVE_HZ));
    if hz == ceiling || hz % 2 == 1 {
        hz
    } else {
        hz - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_ceiling_keeps_the_sampler_to_its_share_of_a_thread() {
        // 35 µs a sample: 285 samples a second take 0.9975% of a thread.
        let hz = cost_ceiling(35_000.0).unwrap();
        assert_eq!(hz, 285);
        assert!(hz as f64 * 35_000e-9 <= SAMPLER_SHARE);
        // Bare metal's 2 µs leaves the default's 999 well under it.
        assert_eq!(cost_ceiling(2_000.0), Some(4999));
        // A sample costing a millisecond still gets the lowest adaptive rate.
        assert_eq!(cost_ceiling(1e6), Some(MIN_ADAPTIVE_HZ));
        assert_eq!(cost_ceiling(0.0), None);
        assert_eq!(cost_ceiling(f64::NAN), None);
    }
}
