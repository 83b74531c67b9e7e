//! The kernel-lock contention programs in bursts. The `lock:contention_begin/end`
//! tracepoints fire at every contention of every lock on the machine, spinlocks included,
//! and no filter runs before the program: a mutex handed between two threads contends for
//! the futex hash bucket's spinlock about a million times a second, and the programs' runs
//! alone (60 ns each on the 2-CPU VM measured, at the tracepoint's dispatch) cost it 4% of
//! its CPU. Where the runs of a burst ([`super::bursts::BURST`]) cost more than the budget
//! ([`super::bursts::BUDGET`] of the machine's CPUs) and no traced task contended for a
//! sleeping lock in it, the programs are taken off for as long as keeps the average there;
//! a burst that sees a traced task contend for a sleeping lock keeps them on for the next.
//!
//! The rows are not scaled: the programs go off only after bursts in which the workload's
//! tasks contended for no sleeping lock, so the waits the pauses miss are the few a steady
//! program has there. The run document keeps the time they were on
//! (`TracerCost::klock_probed_ns`, of `klock_span_ns`).

use std::time::{Duration, Instant};

use libbpf_rs::{Link, MapCore, MapFlags};

use super::bursts::{bss_counter, detach, pause_after, BURST};
use super::skel::LocksSkel;

/// What one run of a contention program costs the CPU it runs on, for the budget: the
/// dispatch and the program's return for a spinlock (60 ns kernel-timed on the VM
/// measured, with the tracepoint's own call around it). Not measured per machine: a
/// program's kernel timing is on only in windows ([`super::timing`]).
pub(super) const RUN_NS: f64 = 100.0;

/// The contention programs, on and off in bursts.
pub(super) struct KernelBursts {
    /// Attached now; empty while off (or where the tracer never attached them).
    links: Vec<Link>,
    on: bool,
    since: Instant,
    runs_at: u64,
    /// The counter when this execution began: a resident tracer's counter keeps the
    /// earlier windows' runs.
    runs_from: u64,
    seen_at: u64,
    pause: Duration,
    probed: Duration,
    first: Instant,
    cpus: usize,
}

/// What the contention programs did over one execution.
pub(super) struct KernelBurstsSeen {
    /// The time they were on, and the time since the attach.
    pub probed: Duration,
    pub span: Duration,
    /// Their runs (both programs), exactly.
    pub runs: u64,
}

impl KernelBursts {
    /// Starts with the programs attached at load (`links`; none: nothing to switch).
    pub fn new(skel: &LocksSkel<'_>, links: Vec<Link>) -> KernelBursts {
        let now = Instant::now();
        KernelBursts {
            on: !links.is_empty(),
            links,
            since: now,
            runs_at: runs(skel),
            runs_from: runs(skel),
            seen_at: seen(skel),
            pause: Duration::ZERO,
            probed: Duration::ZERO,
            first: now,
            cpus: crate::host::online_cpus() as usize,
        }
    }

    /// One round of the drain: ends a burst whose runs cost too much, or starts the next.
    pub fn round(&mut self, skel: &LocksSkel<'_>) {
        if self.on && self.links.is_empty() {
            return;
        }
        let now = Instant::now();
        let elapsed = now - self.since;
        if self.on {
            if elapsed < BURST {
                return;
            }
            let (ran, contended) = (runs(skel), seen(skel));
            let burst = ran.saturating_sub(self.runs_at);
            let sleeping = contended.saturating_sub(self.seen_at);
            self.probed += elapsed;
            self.since = now;
            self.runs_at = ran;
            self.seen_at = contended;
            // A traced task waited for a sleeping kernel lock: on for another burst.
            if sleeping > 0 {
                return;
            }
            if let Some(pause) = pause_after(burst, elapsed, self.cpus, RUN_NS) {
                // Stale first: a contention begun from here on ends unseen.
                set_from(skel, u64::MAX);
                detach(&mut self.links);
                self.on = false;
                self.pause = pause;
            }
        } else if elapsed >= self.pause {
            set_from(skel, crate::perf::clock_ns(libc::CLOCK_MONOTONIC));
            let p = &skel.progs;
            for prog in [&p.on_contention_begin, &p.on_contention_end] {
                if let Ok(link) = prog.attach() {
                    self.links.push(link);
                }
            }
            self.on = true;
            self.since = Instant::now();
            self.runs_at = runs(skel);
            self.seen_at = seen(skel);
        }
    }

    /// Takes the programs off, and says what they did.
    pub fn finish(&mut self, skel: &LocksSkel<'_>) -> KernelBurstsSeen {
        if self.on {
            self.probed += self.since.elapsed();
        }
        let seen = KernelBurstsSeen {
            probed: self.probed,
            span: self.first.elapsed(),
            runs: 2 * runs(skel).saturating_sub(self.runs_from),
        };
        detach(&mut self.links);
        self.on = false;
        seen
    }
}

/// The contention programs' runs so far (the begin program's, over every CPU).
fn runs(skel: &LocksSkel<'_>) -> u64 {
    skel.maps
        .klock_runs
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .ok()
        .flatten()
        .map_or(0, |cpus| {
            cpus.iter().filter_map(|b| crate::locks::u64_at(b, 0)).sum()
        })
}

/// The sleeping-lock contentions of traced tasks so far.
fn seen(skel: &LocksSkel<'_>) -> u64 {
    bss_counter(skel, |bss| &bss.klock_seen)
}

/// Sets the time before which a contention's start is stale (`klocks_from`).
fn set_from(skel: &LocksSkel<'_>, ns: u64) {
    let _ = skel
        .maps
        .klocks_from
        .update(&0u32.to_ne_bytes(), &ns.to_ne_bytes(), MapFlags::ANY);
}
