//! How often to sample: the default frequency, lowered where the CPUs a sweep keeps busy
//! would copy more user stack than the sampler can take, and what to say about it.

/// The CPUs busy at a sweep's largest point: its threads, at most the machine's CPUs; every
/// CPU where processes beyond the command (attached ones, the whole machine) are sampled.
pub fn busy_cpus(values: Option<&[u64]>, whole_machine: bool) -> u64 {
    let cpus = u64::from(crate::facade::online_cpus());
    let widest = values.and_then(|v| v.iter().max().copied()).unwrap_or(cpus);
    if whole_machine {
        cpus
    } else {
        widest.min(cpus)
    }
}

/// The sampler's data rate that the default frequency keeps under: user stack copies of
/// every busy CPU, per second.
const SAMPLE_DATA_LIMIT: u64 = 512 << 20;

/// The default sampling frequency.
const DEFAULT_FREQ: u64 = 999;

/// The sampling frequency for `busy` CPUs copying `stack` bytes per sample: the one asked
/// for, or the default lowered (to no less than 99 Hz) to keep the data rate under
/// [`SAMPLE_DATA_LIMIT`]; and what to say about it.
pub fn frequency(busy: u64, asked: Option<u64>, stack: u32) -> (u64, Option<String>) {
    let rate = |freq: u64| busy.max(1) * freq * u64::from(stack);
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    match asked {
        Some(freq) if rate(freq) > SAMPLE_DATA_LIMIT => (
            freq,
            Some(format!(
                "{busy} CPUs × {freq} Hz × {} KiB stack copies = {:.0} MiB/s of samples: expect lost samples and a long symbolizing step; lower --freq or --stack-size",
                stack / 1024,
                mib(rate(freq))
            )),
        ),
        Some(freq) => (freq, None),
        None if rate(DEFAULT_FREQ) > SAMPLE_DATA_LIMIT => {
            let freq = (SAMPLE_DATA_LIMIT / (busy.max(1) * u64::from(stack))).max(99);
            (
                freq,
                Some(format!(
                    "sampling at {freq} Hz, not {DEFAULT_FREQ}: {busy} CPUs × {} KiB stack copies would be {:.0} MiB/s of samples (--freq sets it)",
                    stack / 1024,
                    mib(rate(DEFAULT_FREQ))
                )),
            )
        }
        None => (DEFAULT_FREQ, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_frequency_keeps_the_sample_data_rate_bounded() {
        // Up to 64 busy CPUs, 999 Hz with 8 KiB copies fits.
        assert_eq!(frequency(64, None, 8192), (999, None));
        assert_eq!(frequency(2, None, 8192), (999, None));
        // 128 CPUs: half the frequency, said.
        let (f, said) = frequency(128, None, 8192);
        assert_eq!(f, 512);
        assert!(said.unwrap().contains("sampling at 512 Hz, not 999"));
        // Larger copies lower it further, never below 99 Hz.
        assert_eq!(frequency(256, None, 65536).0, 99);
        // Asked for: kept, with a warning when it is too much.
        assert_eq!(frequency(128, Some(999), 8192).0, 999);
        assert!(frequency(128, Some(999), 8192)
            .1
            .unwrap()
            .contains("lower --freq"));
        assert_eq!(frequency(4, Some(4999), 8192), (4999, None));
    }
}
