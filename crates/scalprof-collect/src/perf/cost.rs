//! What one sample costs the thread it interrupts, measured on this machine.
//!
//! The sampler's timer interrupt, the kernel's callchain walk and the stack copy run with
//! interrupts off, in the sampled thread's time: no sample can see them. On a virtual
//! machine the timer is emulated, and a sample can cost ten times what it costs on bare
//! metal. So it is measured: one thread spins on a fixed loop in short windows, with the
//! sampler's own event on it in every other window, and the loop's rate with and without
//! it gives the cost. Written by hand: no library measures its own sampling interrupt.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perf_event_open_sys as sys;

use super::{Ring, Sampler, SamplingConfig};

/// The calibration samples this often (more samples per window than the sampler's
/// default: a cost of ~1% at 999 Hz reads ~5% here, above the loop's noise).
const CALIBRATION_HZ: u64 = 3_999;
/// Windows with and without the event; the median of their pairs is kept.
const ROUNDS: usize = 9;
const WINDOW: Duration = Duration::from_millis(15);

/// [`sample_cost_ns`], measured once a boot: kept in this user's runtime directory (root's
/// `/run/scalprof`, else `$XDG_RUNTIME_DIR/scalprof`, checked to be private), which the
/// boot empties, for the same kernel, event and stack copy. Measured again where there is
/// no such directory.
pub fn cached_sample_cost_ns(config: &SamplingConfig) -> Option<f64> {
    match runtime_dir() {
        Some(dir) => cached_in(&dir, config),
        None => sample_cost_ns(config),
    }
}

/// This user's private runtime directory for figures measured once a boot: root's
/// `/run/scalprof`, else `$XDG_RUNTIME_DIR/scalprof` (checked private), which the boot
/// empties; `None` where there is none.
pub(crate) fn runtime_dir() -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let base = if unsafe { libc::geteuid() } == 0 {
        Some(PathBuf::from("/run"))
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
    };
    base.and_then(|b| crate::private::private_dir(&b.join("scalprof")).ok())
}

/// A figure kept in `dir`'s `name` for `key`, else `measure`d now and kept (a figure not
/// kept is measured again next time).
pub(crate) fn kept_or_measured(
    dir: &Path,
    name: &str,
    key: &str,
    measure: impl FnOnce() -> Option<f64>,
) -> Option<f64> {
    let file = dir.join(name);
    let kept = std::fs::read_to_string(&file).ok();
    if let Some(cost) = kept.as_deref().and_then(|t| kept_cost(t, key)) {
        return Some(cost);
    }
    let cost = measure()?;
    let _ = crate::private::write_user_file(&file, format!("{key}\t{cost:.0}\n").as_bytes());
    Some(cost)
}

/// [`cached_sample_cost_ns`] with its file in `dir` (a private directory).
fn cached_in(dir: &Path, config: &SamplingConfig) -> Option<f64> {
    kept_or_measured(dir, "sample-cost", &cache_key(config), || {
        sample_cost_ns(config)
    })
}

/// What the measurement depends on: this boot, the kernel, the event and the stack copy.
fn cache_key(config: &SamplingConfig) -> String {
    format!(
        "{} pmu={} stack={}",
        boot_key(),
        config.use_pmu,
        config.stack_bytes
    )
}

/// This boot and the kernel, what every figure kept once a boot depends on.
pub(crate) fn boot_key() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
    format!(
        "boot={} kernel={}",
        read("/proc/sys/kernel/random/boot_id").unwrap_or_default(),
        read("/proc/sys/kernel/osrelease").unwrap_or_default()
    )
}

/// The cost kept for `key` in a cache file's text, if it is one a measurement could give.
fn kept_cost(text: &str, key: &str) -> Option<f64> {
    let (k, v) = text.lines().next()?.split_once('\t')?;
    let cost: f64 = v.parse().ok()?;
    (k == key && cost > 0.0 && cost < 1e6).then_some(cost)
}

/// Nanoseconds of the sampled thread's time one sample takes, with the sampler's event,
/// stack copy and callchain as `config` has them (`use_pmu`: the cycles event). `None`
/// where the event cannot be opened or the measurement is lost in noise (a loaded CPU).
fn sample_cost_ns(config: &SamplingConfig) -> Option<f64> {
    let config = SamplingConfig {
        frequency: CALIBRATION_HZ,
        ..config.clone()
    };
    let event = open_on_self(&config)?;
    let ring = Ring::map(event, 256).ok()?;
    spin_for(WINDOW); // warm the loop and the CPU's frequency
                      // Once more where other work on the CPUs hid it the first time.
    measure(&ring).or_else(|| measure(&ring))
}

/// One measurement: the median over [`ROUNDS`] pairs of windows.
fn measure(ring: &Ring) -> Option<f64> {
    let mut ratios = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let clean = spin_for(WINDOW);
        set_enabled(ring, true);
        let sampled = spin_for(WINDOW);
        set_enabled(ring, false);
        ring.discard();
        if clean > 0.0 {
            ratios.push(sampled / clean);
        }
    }
    ratios.sort_by(f64::total_cmp);
    let median = *ratios.get(ratios.len() / 2)?;
    // The share of a second the samples took, over the samples in that second.
    let cost = (1.0 - median) / CALIBRATION_HZ as f64 * 1e9;
    (cost.is_finite() && cost > 0.0).then_some(cost)
}

/// The sampler's event on this thread alone, disabled, without side-band records.
fn open_on_self(config: &SamplingConfig) -> Option<OwnedFd> {
    for (cycles, kernel) in [(config.use_pmu, true), (false, true), (false, false)] {
        let mut attr = Sampler::new(config.clone()).attr(cycles, kernel, true);
        attr.set_disabled(1);
        attr.set_mmap(0);
        attr.set_mmap2(0);
        attr.set_comm(0);
        attr.set_comm_exec(0);
        attr.set_task(0);
        // SAFETY: attr is a fully initialized perf_event_attr; pid 0 is this thread.
        let fd = unsafe {
            sys::perf_event_open(
                &mut attr,
                0,
                -1,
                -1,
                sys::bindings::PERF_FLAG_FD_CLOEXEC as _,
            )
        };
        if fd >= 0 {
            // SAFETY: a fresh descriptor we own.
            return Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    None
}

fn set_enabled(ring: &Ring, on: bool) {
    let fd = ring.fd.as_raw_fd();
    // SAFETY: ioctls on our own perf event descriptor.
    unsafe {
        if on {
            sys::ioctls::ENABLE(fd, 0);
        } else {
            sys::ioctls::DISABLE(fd, 0);
        }
    }
}

/// Spins on a fixed loop for about `window`; returns its iterations per second.
fn spin_for(window: Duration) -> f64 {
    let start = Instant::now();
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut rounds = 0u64;
    loop {
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x = std::hint::black_box(x);
        rounds += 1;
        if rounds.is_multiple_of(16) && start.elapsed() >= window {
            break;
        }
    }
    rounds as f64 / start.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_cost_is_read_for_its_own_key_only() {
        let key = cache_key(&SamplingConfig::default());
        assert!(
            key.starts_with("boot=") && key.contains(" stack=8192"),
            "{key}"
        );
        assert_eq!(kept_cost(&format!("{key}\t13800\n"), &key), Some(13_800.0));
        assert_eq!(kept_cost(&format!("{key}\t13800\n"), "boot=other"), None);
        for text in [
            "",
            "garbage",
            &format!("{key}\t-5\n"),
            &format!("{key}\tNaN\n"),
        ] {
            assert_eq!(kept_cost(text, &key), None, "{text:?}");
        }
        let other = SamplingConfig {
            stack_bytes: 32 * 1024,
            ..SamplingConfig::default()
        };
        assert_ne!(cache_key(&other), key);
    }

    /// A kept cost for this boot is read, not measured again; a new measurement is kept.
    #[test]
    fn a_measured_cost_is_kept_for_the_next_run() {
        let config = SamplingConfig::default();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sample-cost");
        std::fs::write(&file, format!("{}\t12345\n", cache_key(&config))).unwrap();
        assert_eq!(cached_in(dir.path(), &config), Some(12_345.0));
        // Another kernel's (or boot's) figure is measured again, and replaced.
        std::fs::write(&file, "boot=old kernel=old pmu=false stack=8192\t12345\n").unwrap();
        let Some(cost) = (0..3).find_map(|_| cached_in(dir.path(), &config)) else {
            eprintln!("skipped: perf events cannot be opened here, or the cost was noise");
            return;
        };
        let kept = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            kept_cost(&kept, &cache_key(&config)),
            Some(cost.round()),
            "{kept}"
        );
    }

    /// Runs wherever perf events may be opened on one's own thread (user space only is
    /// enough: perf_event_paranoid up to 2): the cost is positive and below a
    /// millisecond (a sample costs 1–20 µs on the machines measured). Three tries: the
    /// tests beside it share the CPUs.
    #[test]
    fn a_sample_costs_a_measurable_positive_time() {
        let measured = (0..3).find_map(|_| sample_cost_ns(&SamplingConfig::default()));
        let Some(cost) = measured else {
            assert!(
                std::env::var_os("CI").is_none()
                    || open_on_self(&SamplingConfig::default()).is_none(),
                "the event opened, and the cost was lost in noise"
            );
            eprintln!("skipped: perf events cannot be opened here");
            return;
        };
        eprintln!("{cost:.0} ns a sample");
        assert!(cost > 0.0 && cost < 1e6, "{cost} ns a sample");
    }
}
