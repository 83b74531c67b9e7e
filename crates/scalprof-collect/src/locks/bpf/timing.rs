//! What the tracer's BPF programs cost, by the events they hook, timed by the kernel in
//! windows. `BPF_ENABLE_STATS` makes the kernel time every BPF program run (two clock
//! reads each): all along it cost a program with millions of lock contentions 10% of its
//! CPU time. So it is on for [`WINDOW`] of every [`PERIOD`] (5%, from the attach on), and
//! each family's run time and runs in the windows are scaled to the execution.
//!
//! The samples cannot stand in for this: the scheduler's tracepoints run with interrupts
//! off, where the sampler's timer cannot land, so their programs' time shows in no sample.

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use libbpf_rs::AsRawLibbpf;

use scalprof_model::locks::{FamilyCost, ProbeFamily};

use super::skel::LocksSkel;
use super::TracerCost;

/// How long each window of timing lasts.
pub(super) const WINDOW: Duration = Duration::from_millis(50);
/// A window starts this often.
pub(super) const PERIOD: Duration = Duration::from_secs(1);

/// The kernel's timing of the tracer's programs, on in windows.
pub(super) struct RunTiming {
    /// The programs' descriptors by family (those loaded).
    progs: Vec<(ProbeFamily, i32)>,
    /// Open while the kernel times: the window is on.
    stats: Option<OwnedFd>,
    /// Timed all along (`--bpf-stats`): the window never closes.
    always: bool,
    /// Each program's run time and runs when the current window began.
    at_start: Vec<(u64, u64)>,
    /// The windows' sums, per program.
    seen: Vec<(u64, u64)>,
    since: Instant,
    first: Instant,
    timed: Duration,
    /// The kernel refused to time (no privilege, an old kernel): nothing is said.
    refused: bool,
}

impl RunTiming {
    /// Starts the first window now, at the programs' attach.
    pub fn start(skel: &LocksSkel<'_>, always: bool) -> RunTiming {
        let p = &skel.progs;
        let fd = |prog: &dyn AsRawLibbpf<LibbpfType = libbpf_sys::bpf_program>| {
            // SAFETY: the program pointer is the skeleton's, valid while it is; the call
            // only reads its descriptor (negative where it was not loaded).
            unsafe { libbpf_sys::bpf_program__fd(prog.as_libbpf_object().as_ptr()) }
        };
        use ProbeFamily::*;
        let progs: Vec<(ProbeFamily, i32)> = [
            (Scheduler, fd(&p.on_switch)),
            (Scheduler, fd(&p.on_wakeup)),
            (Scheduler, fd(&p.on_wakeup_new)),
            (Scheduler, fd(&p.tree_fork)),
            (Scheduler, fd(&p.on_exec)),
            (KernelLocks, fd(&p.on_contention_begin)),
            (KernelLocks, fd(&p.on_contention_end)),
            (MmapLock, fd(&p.on_mmap_acquired)),
            (MmapLock, fd(&p.on_mmap_released)),
            (GoRuntime, fd(&p.go_acquire)),
            (GoRuntime, fd(&p.go_release)),
            (GoRuntime, fd(&p.go_ready)),
            (GoRuntime, fd(&p.go_execute)),
            (GoRuntime, fd(&p.go_park)),
            (GoRuntime, fd(&p.go_handoff)),
        ]
        .into_iter()
        .filter(|(_, fd)| *fd >= 0)
        .collect();
        let now = Instant::now();
        let mut t = RunTiming {
            seen: vec![(0, 0); progs.len()],
            at_start: Vec::new(),
            progs,
            stats: None,
            always,
            since: now,
            first: now,
            timed: Duration::ZERO,
            refused: false,
        };
        t.open();
        t
    }

    /// One round of the drain: closes a window that has lasted [`WINDOW`], or opens the
    /// next one a [`PERIOD`] after the last began.
    pub fn round(&mut self) {
        if self.refused || self.always {
            return;
        }
        let elapsed = self.since.elapsed();
        if self.stats.is_some() {
            if elapsed >= WINDOW {
                self.close();
            }
        } else if elapsed >= PERIOD {
            self.open();
        }
    }

    /// Closes the last window and says what the programs cost, scaled to the time since
    /// the attach; the default (nothing) where the kernel would not time them.
    pub fn finish(&mut self) -> TracerCost {
        if self.stats.is_some() {
            self.close();
        }
        let span = self.first.elapsed();
        if self.refused || self.timed.is_zero() {
            return TracerCost::default();
        }
        let scale = span.as_secs_f64() / self.timed.as_secs_f64();
        let mut families: Vec<FamilyCost> = Vec::new();
        for (&(family, _), &(ns, runs)) in self.progs.iter().zip(&self.seen) {
            match families.iter_mut().find(|f| f.family == family) {
                Some(f) => {
                    f.run_ns += ns;
                    f.runs += runs;
                }
                None => families.push(FamilyCost {
                    family,
                    run_ns: ns,
                    runs,
                }),
            }
        }
        scaled(families, scale, self.timed, span)
    }

    fn open(&mut self) {
        // SAFETY: a plain syscall wrapper; it returns a new descriptor or a negative error.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            self.refused = true;
            return;
        }
        // Read after enabling: what ran before is not this window's.
        self.at_start = self.progs.iter().map(|&(_, fd)| run_stats(fd)).collect();
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        self.stats = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        self.since = Instant::now();
    }

    fn close(&mut self) {
        // Read before disabling: the window's runs are all in.
        let now: Vec<(u64, u64)> = self.progs.iter().map(|&(_, fd)| run_stats(fd)).collect();
        self.stats = None;
        self.timed += self.since.elapsed();
        for ((seen, start), end) in self.seen.iter_mut().zip(&self.at_start).zip(now) {
            seen.0 += end.0.saturating_sub(start.0);
            seen.1 += end.1.saturating_sub(start.1);
        }
    }
}

/// The windows' figures scaled to the span (rounded), with their sums as the totals.
fn scaled(
    mut families: Vec<FamilyCost>,
    scale: f64,
    timed: Duration,
    span: Duration,
) -> TracerCost {
    let scale = scale.max(1.0);
    for f in &mut families {
        f.run_ns = (f.run_ns as f64 * scale).round() as u64;
        f.runs = (f.runs as f64 * scale).round() as u64;
    }
    families.retain(|f| f.runs > 0);
    families.sort_by_key(|f| f.family);
    TracerCost {
        bpf_run_ns: families.iter().map(|f| f.run_ns).sum(),
        bpf_runs: families.iter().map(|f| f.runs).sum(),
        bpf_families: families,
        bpf_timed_ns: timed.as_nanos() as u64,
        bpf_span_ns: span.as_nanos() as u64,
        ..TracerCost::default()
    }
}

/// A program's run time and runs so far, as the kernel counted them while it timed.
fn run_stats(fd: i32) -> (u64, u64) {
    // SAFETY: bpf_prog_info is plain old data; zeroed is a valid value.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info is a valid, writable buffer of `len` bytes; fd is a loaded program's.
    let r = unsafe {
        libbpf_sys::bpf_prog_get_info_by_fd(
            fd,
            (&mut info as *mut libbpf_sys::bpf_prog_info).cast(),
            &mut len,
        )
    };
    if r == 0 {
        (info.run_time_ns, info.run_cnt)
    } else {
        (0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windows_figures_scale_to_the_span_by_family() {
        let f = |family, run_ns, runs| FamilyCost {
            family,
            run_ns,
            runs,
        };
        let cost = scaled(
            vec![
                f(ProbeFamily::KernelLocks, 300, 3),
                f(ProbeFamily::Scheduler, 1000, 10),
                f(ProbeFamily::MmapLock, 0, 0),
            ],
            20.0,
            Duration::from_millis(50),
            Duration::from_secs(1),
        );
        // Timed 50 ms of 1 s: twenty times what the windows saw; a family that never
        // ran is left out; the families in their order.
        assert_eq!(
            cost.bpf_families,
            vec![
                f(ProbeFamily::Scheduler, 20_000, 200),
                f(ProbeFamily::KernelLocks, 6000, 60)
            ]
        );
        assert_eq!((cost.bpf_run_ns, cost.bpf_runs), (26_000, 260));
        assert_eq!(cost.bpf_timed_ns, 50_000_000);
        assert_eq!(cost.bpf_span_ns, 1_000_000_000);
        // Timed all along: as seen.
        let all = scaled(
            vec![f(ProbeFamily::GoRuntime, 7, 1)],
            1.0,
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert_eq!((all.bpf_run_ns, all.bpf_runs), (7, 1));
    }
}
