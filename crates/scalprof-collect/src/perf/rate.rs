//! The sampler's rate at each point of a sweep, where the user did not choose it.

/// Samples a point's traced repeat should hold, in all its threads: enough for a cause's
/// share to be known within about half a percentage point (a 5% share from 4000 samples
/// has a binomial standard error of 0.34 points), few enough that a long run pays little.
pub const TARGET_SAMPLES: f64 = 4000.0;

/// The lowest rate chosen by itself: continuous profilers sample at 19–100 Hz.
pub const MIN_ADAPTIVE_HZ: u64 = 49;

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
