//! What one sample costs the thread it interrupts, measured on this machine.
//!
//! The sampler's timer interrupt, the kernel's callchain walk and the stack copy run with
//! interrupts off, in the sampled thread's time: no sample can see them. On a virtual
//! machine the timer is emulated, and a sample can cost ten times what it costs on bare
//! metal. So it is measured: one thread spins on a fixed loop in short windows, with the
//! sampler's own event on it in every other window, and the loop's rate with and without
//! it gives the cost. Written by hand: no library measures its own sampling interrupt.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perf_event_open_sys as sys;

use scalprof_model::SwitchCost;

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

/// What the sampler's events cost a thread each time it blocks and runs again, measured
/// once a boot like [`cached_sample_cost_ns`] at the lowest adaptive rate and at the
/// sampler's (`config.frequency`). A thread's sampling events go out and in with it:
/// their timer is cancelled and started again, which on a virtual machine reprograms an
/// emulated timer (10–13 µs a block on the 2-CPU VM at 645–717 Hz, 1–8 µs at 49 Hz). No
/// sample shows it, so a program that blocks often pays what the sampler's interrupts do
/// not explain.
pub fn cached_switch_cost(config: &SamplingConfig) -> Option<SwitchCost> {
    let at = |hz: u64| {
        let key = format!("{} pmu={} hz={hz}", boot_key(), config.use_pmu);
        let measure = || switch_cost_ns(config, hz);
        match runtime_dir() {
            Some(dir) => kept_or_measured(&dir, &format!("switch-cost-{hz}"), &key, measure),
            None => measure(),
        }
    };
    let low = super::MIN_ADAPTIVE_HZ.min(config.frequency);
    let high_ns = at(config.frequency)?;
    // Nothing measurable at the low rate, twice (the host's noise): taken as the high
    // rate's, so that no rate is thought to save any of it.
    let low_ns = if low < config.frequency {
        at(low).or_else(|| at(low)).unwrap_or(high_ns)
    } else {
        high_ns
    };
    Some(SwitchCost::through(
        (low, low_ns),
        (config.frequency, high_ns),
    ))
}

/// Sleeps per window (about 55 ms of them here), how long each asks for, and the pairs of
/// windows. Shorter windows miss most of the cost: 300 sleeps (8 ms) read 0.4–1.3 µs a
/// block at 49 Hz where a whole run of them, and 2000-sleep windows, paid 4–10 µs; what
/// builds up over the first milliseconds of the events being on is not known.
const SLEEPS: u32 = 2000;
const SLEEP: Duration = Duration::from_micros(10);
const SWITCH_ROUNDS: usize = 7;

/// What a block costs a thread with the sampler's events on it at `hz`, measured now: a
/// thread of its own, with the events the sampler puts on a workload (a sampling event
/// and a command-name event per CPU), sleeps [`SLEEPS`] times a window, with the events
/// on in every other window; the median of the [`SWITCH_ROUNDS`] windows' differences per
/// sleep (about 0.8 s). `None` where the events cannot be opened or no cost shows.
fn switch_cost_ns(config: &SamplingConfig, hz: u64) -> Option<f64> {
    let config = SamplingConfig {
        frequency: hz,
        ..config.clone()
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            // Sleeps as short as asked (this thread's own slack): the 50 µs default
            // would stretch each sleep and hide the cost in its jitter.
            // SAFETY: prctl with PR_SET_TIMERSLACK takes a value and no pointers.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            let rings = open_set_on_self(&config)?;
            sleeps(SLEEPS / 4); // the first sleeps wake a colder path
            measure_switches(&rings)
        })
        .join()
        .ok()
        .flatten()
    })
}

/// The sampler's events on this thread, one of each per online CPU, disabled: what it
/// opens on a workload's threads.
fn open_set_on_self(config: &SamplingConfig) -> Option<Vec<Ring>> {
    // The attributes the kernel took on this thread, opened on each CPU below.
    let (mut sampling, _) = on_self(config)?;
    let mut names = sampling;
    names.type_ = sys::bindings::PERF_TYPE_SOFTWARE;
    names.config = sys::bindings::PERF_COUNT_SW_DUMMY as u64;
    names.set_comm(1);
    names.set_comm_exec(1);
    names.__bindgen_anon_2.wakeup_watermark = 1;
    let mut rings = Vec::new();
    for cpu in super::online_cpu_list() {
        for (attr, pages) in [(&mut sampling, 16), (&mut names, 1)] {
            let fd = super::open_event(attr, 0, cpu).ok()?;
            rings.push(Ring::map(fd, pages).ok()?);
        }
    }
    Some(rings)
}

/// One measurement of the switch cost: the median over [`SWITCH_ROUNDS`] pairs of windows.
fn measure_switches(rings: &[Ring]) -> Option<f64> {
    let added = paired_windows(rings, SWITCH_ROUNDS, || sleeps(SLEEPS))
        .into_iter()
        .map(|(clean, traced)| traced - clean)
        .collect();
    median(added).filter(|m| m.is_finite() && *m > 0.0)
}

/// `rounds` pairs of windows, each `(without, with)` the events in `rings` on: a window
/// without them, then one with them, which are then switched off and their records
/// dropped. What `window` returns is the window's figure (a rate, a time per call).
fn paired_windows(
    rings: &[Ring],
    rounds: usize,
    mut window: impl FnMut() -> f64,
) -> Vec<(f64, f64)> {
    (0..rounds)
        .map(|_| {
            let without = window();
            rings.iter().for_each(|r| set_enabled(r, true));
            let with = window();
            rings.iter().for_each(|r| {
                set_enabled(r, false);
                r.discard();
            });
            (without, with)
        })
        .collect()
}

/// The median of some figures (the upper one of an even count); `None` of none.
pub(crate) fn median(mut figures: Vec<f64>) -> Option<f64> {
    figures.sort_by(f64::total_cmp);
    figures.get(figures.len() / 2).copied()
}

/// Sleeps `n` times; returns the nanoseconds one sleep took.
fn sleeps(n: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        std::thread::sleep(SLEEP);
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
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
    let ratios = paired_windows(std::slice::from_ref(ring), ROUNDS, || spin_for(WINDOW))
        .into_iter()
        .filter(|(clean, _)| *clean > 0.0)
        .map(|(clean, sampled)| sampled / clean)
        .collect();
    let median = median(ratios)?;
    // The share of a second the samples took, over the samples in that second.
    let cost = (1.0 - median) / CALIBRATION_HZ as f64 * 1e9;
    (cost.is_finite() && cost > 0.0).then_some(cost)
}

/// `open_event`'s CPU for "wherever the thread runs" (-1 as perf_event_open's int).
const ANY_CPU: u32 = u32::MAX;

/// The sampler's event on this thread alone, disabled, without side-band records.
fn open_on_self(config: &SamplingConfig) -> Option<OwnedFd> {
    on_self(config).map(|(_, fd)| fd)
}

/// The sampler's event as it opens on this thread, and the event: the first of the
/// hardware cycles (where `config` asks for them), cpu-clock and cpu-clock of user space
/// alone that the kernel accepts; disabled, without side-band records.
fn on_self(config: &SamplingConfig) -> Option<(sys::bindings::perf_event_attr, OwnedFd)> {
    for (cycles, kernel) in [(config.use_pmu, true), (false, true), (false, false)] {
        let mut attr = Sampler::new(config.clone()).attr(cycles, kernel, true);
        attr.set_disabled(1);
        attr.set_mmap(0);
        attr.set_mmap2(0);
        attr.set_comm(0);
        attr.set_comm_exec(0);
        attr.set_task(0);
        if let Ok(fd) = super::open_event(&mut attr, 0, ANY_CPU) {
            return Some((attr, fd));
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

    /// The switch cost is measured on its own thread: positive and below a millisecond
    /// (10–13 µs at 645 Hz on the CI machine, a VM, where it must show; a bare-metal
    /// kernel's timers may cost too little to show against the sleeps' jitter).
    #[test]
    fn the_median_of_figures_is_their_middle_one() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(3.0));
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn a_block_with_the_sampler_s_event_costs_a_measurable_time() {
        let Some(cost) = (0..3).find_map(|_| switch_cost_ns(&SamplingConfig::default(), 645))
        else {
            assert!(
                std::env::var_os("CI").is_none()
                    || open_on_self(&SamplingConfig::default()).is_none(),
                "the event opened, and no switch cost showed"
            );
            eprintln!("skipped: perf events cannot be opened here, or no cost showed");
            return;
        };
        eprintln!("{cost:.0} ns a block");
        assert!(cost > 0.0 && cost < 1e6, "{cost} ns a block");
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
