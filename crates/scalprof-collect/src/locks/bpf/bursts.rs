//! The Go runtime's probes in bursts. Each probe hit is a trap into the kernel that costs
//! the goroutine microseconds, and a program that hands values between goroutines millions
//! of times a second ran 20–46 times slower with the probes on all the time. So the probes
//! are attached in bursts of [`BURST`]: after each, the hits it saw say what they cost the
//! program, and where that is more than [`BUDGET`] of the machine's CPUs the probes are
//! taken off for as long as keeps the average there (at most [`MAX_PAUSE`]). A program
//! whose goroutines seldom park keeps them on throughout and loses nothing.
//!
//! While the probes are off the program runs as it does untraced. The waits seen in the
//! bursts stand for the whole execution: the rows made of them are scaled by the
//! execution's time over the probed time (`TracerCost::go_scale`), and the run document
//! keeps both times (`TracerCost::go_probed_ns`, `go_span_ns`).

use std::fs::File;
use std::time::{Duration, Instant};

use libbpf_rs::{Link, MapCore};

use crate::locks::GoProbe;

use super::skel::types::bss as Bss;
use super::skel::LocksSkel;

/// How long each burst of probes lasts before its cost is judged.
pub(super) const BURST: Duration = Duration::from_millis(20);
/// The share of the machine's CPUs the probes may take, on average.
pub(super) const BUDGET: f64 = 0.01;
/// The longest pause between bursts: a long execution is probed at least once a second.
pub(super) const MAX_PAUSE: Duration = Duration::from_secs(1);
/// The shortest pause: taking the probes off and on takes the program's memory map lock
/// and tens of milliseconds of grace periods, not to be done more than a few times a
/// second.
pub(super) const MIN_PAUSE: Duration = Duration::from_millis(100);
/// What one probe hit costs the program where it could not be measured
/// ([`super::hit_cost`]): a uprobe's trap, its BPF program and the return (1–3 µs on the
/// virtual machines measured; 0.3–1.4 µs on bare metal).
pub(super) const HIT_COST_NS: f64 = 2000.0;

/// How long to take the probes off after a burst of `on` in which they were hit `hits`
/// times, `hit_ns` each, on a machine of `cpus` CPUs: none while they cost at most
/// [`BUDGET`].
pub(super) fn pause_after(hits: u64, on: Duration, cpus: usize, hit_ns: f64) -> Option<Duration> {
    let on_ns = on.as_nanos() as f64;
    if on_ns <= 0.0 {
        return None;
    }
    let share = hits as f64 * hit_ns / (on_ns * cpus.max(1) as f64);
    if share <= BUDGET {
        return None;
    }
    // On for `on`, off for `pause`: the average share is share·on/(on+pause) = BUDGET.
    let pause = on.mul_f64(share / BUDGET - 1.0);
    Some(pause.clamp(MIN_PAUSE, MAX_PAUSE))
}

/// One executable's probes, with the descriptor their path (`/proc/self/fd/N`) names when
/// the file was opened through one: it stays open so that each burst probes that file.
struct ProbeSet {
    probes: Vec<GoProbe>,
    _file: Option<File>,
}

/// The probes of every Go executable the workload runs, on and off in bursts.
pub(super) struct Bursts {
    sets: Vec<ProbeSet>,
    /// Attached now; empty while the probes are off.
    links: Vec<Link>,
    on: bool,
    /// When the current burst (or pause) began.
    since: Instant,
    /// The BPF side's hit counter when the current burst began.
    hits_at: u64,
    pause: Duration,
    /// The time the probes were on, bursts that ended.
    probed: Duration,
    /// When the first probes were attached.
    first: Option<Instant>,
    cpus: usize,
    /// What a hit costs, measured when the first probes are attached: `Some(None)` where
    /// it could not be (the budget then assumes [`HIT_COST_NS`]).
    hit_ns: Option<Option<f64>>,
}

/// What the probes did over one execution.
pub(super) struct BurstsSeen {
    /// The time they were on.
    pub probed: Duration,
    /// The time since the first were attached.
    pub span: Duration,
    /// Their hits in traced processes.
    pub hits: u64,
    /// What one hit costs, measured (zero where nothing was probed or it could not be).
    pub hit_ns: f64,
}

impl Bursts {
    /// Starts with the probes attached at load (`links`, for `probes`).
    pub fn new(skel: &LocksSkel<'_>, probes: Vec<GoProbe>, links: Vec<Link>) -> Bursts {
        let now = Instant::now();
        let mut bursts = Bursts {
            sets: Vec::new(),
            links,
            on: true,
            since: now,
            hits_at: 0,
            pause: Duration::ZERO,
            probed: Duration::ZERO,
            first: None,
            cpus: crate::host::online_cpus() as usize,
            hit_ns: None,
        };
        if !probes.is_empty() {
            bursts.measure(skel);
            bursts.first = Some(Instant::now());
            bursts.since = Instant::now();
            bursts.sets.push(ProbeSet {
                probes,
                _file: None,
            });
        }
        bursts
    }

    /// Adds an executable's probes (its file held open by `file`), attached now if the
    /// probes are on, else at the next burst.
    pub fn add(&mut self, skel: &LocksSkel<'_>, probes: Vec<GoProbe>, file: File) {
        if probes.is_empty() {
            return;
        }
        self.measure(skel);
        if self.on {
            if let Ok(links) = super::attach_go_probes(skel, &probes) {
                self.links.extend(links);
            }
            if self.first.is_none() {
                self.first = Some(Instant::now());
                self.since = Instant::now();
                self.hits_at = hits(skel);
            }
        }
        self.sets.push(ProbeSet {
            probes,
            _file: Some(file),
        });
    }

    /// One round of the drain: ends a burst whose probes cost too much, or starts the next.
    pub fn round(&mut self, skel: &LocksSkel<'_>) {
        if self.sets.is_empty() {
            return;
        }
        let now = Instant::now();
        let elapsed = now - self.since;
        if self.on {
            if elapsed < BURST {
                return;
            }
            let seen = hits(skel);
            let burst = seen.saturating_sub(self.hits_at);
            self.probed += elapsed;
            self.since = now;
            self.hits_at = seen;
            let hit_ns = self.hit_ns.flatten().unwrap_or(HIT_COST_NS);
            if let Some(pause) = pause_after(burst, elapsed, self.cpus, hit_ns) {
                detach(&mut self.links);
                self.on = false;
                self.pause = pause;
            }
        } else if elapsed >= self.pause {
            // Waits begun in the last burst and never seen to end are not this burst's.
            clear(&skel.maps.go_parked);
            clear(&skel.maps.go_releasing);
            for set in &self.sets {
                if let Ok(links) = super::attach_go_probes(skel, &set.probes) {
                    self.links.extend(links);
                }
            }
            self.on = true;
            self.since = Instant::now();
            self.hits_at = hits(skel);
        }
    }

    /// What a probe hit costs, measured once (once a boot, kept) before the first probes.
    fn measure(&mut self, skel: &LocksSkel<'_>) {
        if self.hit_ns.is_none() {
            self.hit_ns = Some(super::hit_cost::cached_hit_cost_ns(skel));
        }
    }

    /// Takes the probes off, and says what they did.
    pub fn finish(&mut self, skel: &LocksSkel<'_>) -> BurstsSeen {
        detach(&mut self.links);
        let Some(first) = self.first else {
            return BurstsSeen {
                probed: Duration::ZERO,
                span: Duration::ZERO,
                hits: 0,
                hit_ns: 0.0,
            };
        };
        let now = Instant::now();
        if self.on {
            self.probed += now - self.since;
            self.on = false;
        }
        BurstsSeen {
            probed: self.probed,
            span: now - first,
            hits: hits(skel),
            hit_ns: self.hit_ns.flatten().unwrap_or(0.0),
        }
    }
}

/// Takes the probes off, all at once. Each uprobe's removal takes its breakpoint out, then
/// waits for a grace period (tens of milliseconds) before it returns: one after another,
/// 20 probes took 1.5 s here, during which the breakpoints still in place kept trapping.
/// Side by side, their grace periods overlap.
pub(super) fn detach(links: &mut Vec<Link>) {
    std::thread::scope(|s| {
        for link in links.drain(..) {
            if std::thread::Builder::new()
                .name("scalprof-unprobe".into())
                .spawn_scoped(s, move || drop(link))
                .is_err()
            {
                // No thread to be had: it was dropped here, in turn.
            }
        }
    });
}

/// The BPF side's count of probe hits in traced processes.
fn hits(skel: &LocksSkel<'_>) -> u64 {
    bss_counter(skel, |bss| &bss.go_hits)
}

/// A counter the programs keep in their .bss (`field` picks it), read while they run; 0
/// where the .bss is not mapped.
pub(super) fn bss_counter(skel: &LocksSkel<'_>, field: impl Fn(&Bss) -> &u64) -> u64 {
    skel.maps
        .bss_data
        .as_deref()
        // SAFETY: the .bss is memory the kernel maps and BPF programs write while this
        // reads; a volatile read of an aligned u64 sees one whole value.
        .map(|bss| unsafe { std::ptr::read_volatile(field(bss)) })
        .unwrap_or(0)
}

/// Empties a hash map (its programs detached, nothing writes it meanwhile).
pub(super) fn clear(map: &dyn MapCore) {
    let keys: Vec<Vec<u8>> = map.keys().collect();
    for k in keys {
        let _ = map.delete(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cheap_probes_stay_on() {
        // 100 hits in 20 ms on 2 CPUs: 0.5% of the machine.
        assert_eq!(pause_after(100, BURST, 2, HIT_COST_NS), None);
        assert_eq!(pause_after(0, BURST, 2, HIT_COST_NS), None);
    }

    #[test]
    fn costly_probes_pause_to_keep_the_average_at_the_budget() {
        // 2,000 hits in 20 ms on 2 CPUs: 10% of the machine, ten times the budget: off
        // nine times as long as on.
        let pause = pause_after(2000, BURST, 2, HIT_COST_NS).unwrap();
        assert!(
            (pause.as_secs_f64() - 9.0 * BURST.as_secs_f64()).abs() < 1e-6,
            "{pause:?}"
        );
        // Just over the budget: off for the shortest pause, not on and off at every round.
        assert_eq!(pause_after(400, BURST, 2, HIT_COST_NS), Some(MIN_PAUSE));
        // A hand-off-heavy program's 20,000 hits: the longest pause.
        assert_eq!(pause_after(20_000, BURST, 2, HIT_COST_NS), Some(MAX_PAUSE));
        // The same hits cost less of a bigger machine, and where a hit is cheaper.
        assert!(pause_after(400, BURST, 16, HIT_COST_NS).is_none());
        assert!(pause_after(400, BURST, 2, 500.0).is_none());
    }
}
