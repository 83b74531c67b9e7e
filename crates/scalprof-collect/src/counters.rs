//! Counting, not sampling: perf events opened on the workload before it execs, inherited by
//! every thread and child, read once the tree has exited. Nothing is recorded while it
//! runs, so the clean repeats carry them too. CPU migrations always; the PMU's cycles,
//! instructions and last-level cache misses where the machine has one.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use perf_event_open_sys as sys;
use scalprof_model::EventCounts;
use sys::bindings as b;

use crate::exec::Attach;
use crate::CollectError;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Event {
    Migrations,
    Cycles,
    Instructions,
    LlcMisses,
}

impl Event {
    fn type_config(self) -> (u32, u64) {
        match self {
            Event::Migrations => (
                b::PERF_TYPE_SOFTWARE,
                u64::from(b::PERF_COUNT_SW_CPU_MIGRATIONS),
            ),
            Event::Cycles => (
                b::PERF_TYPE_HARDWARE,
                u64::from(b::PERF_COUNT_HW_CPU_CYCLES),
            ),
            Event::Instructions => (
                b::PERF_TYPE_HARDWARE,
                u64::from(b::PERF_COUNT_HW_INSTRUCTIONS),
            ),
            Event::LlcMisses => (
                b::PERF_TYPE_HARDWARE,
                u64::from(b::PERF_COUNT_HW_CACHE_MISSES),
            ),
        }
    }
}

/// The counters of one execution. Best effort: an event that cannot be opened is left
/// out, never an error (the repeat's time is what matters).
pub struct EventCounter {
    use_pmu: bool,
    /// The PMU events could not be opened (no PMU, or not allowed): seen once per sweep.
    pmu_refused: bool,
    fds: Vec<(Event, OwnedFd)>,
    counts: Option<EventCounts>,
}

impl EventCounter {
    /// `use_pmu`: try the hardware events (false once they were refused in this sweep).
    pub fn new(use_pmu: bool) -> EventCounter {
        EventCounter {
            use_pmu,
            pmu_refused: false,
            fds: Vec::new(),
            counts: None,
        }
    }

    /// Whether the hardware events were tried and refused.
    pub fn pmu_refused(&self) -> bool {
        self.pmu_refused
    }

    /// The counts, once the workload has exited.
    pub fn take(&mut self) -> Option<EventCounts> {
        self.counts.take()
    }

    fn open(event: Event, pid: i32) -> std::io::Result<OwnedFd> {
        let (type_, config) = event.type_config();
        let mut kernel = true;
        loop {
            // SAFETY: perf_event_attr is plain data; all-zero is its documented default.
            let mut a: b::perf_event_attr = unsafe { std::mem::zeroed() };
            a.size = std::mem::size_of::<b::perf_event_attr>() as u32;
            a.type_ = type_;
            a.config = config;
            a.read_format =
                u64::from(b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING);
            a.set_disabled(1);
            a.set_enable_on_exec(1);
            a.set_inherit(1);
            a.set_exclude_hv(1);
            a.set_exclude_kernel(u64::from(!kernel));
            // SAFETY: `a` is a fully initialized perf_event_attr.
            let fd =
                unsafe { sys::perf_event_open(&mut a, pid, -1, -1, b::PERF_FLAG_FD_CLOEXEC as _) };
            if fd >= 0 {
                // SAFETY: a fresh descriptor we own.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
            let e = std::io::Error::last_os_error();
            // Unprivileged (perf_event_paranoid 2): the workload's user-space part only.
            if kernel && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
                kernel = false;
                continue;
            }
            return Err(e);
        }
    }

    /// A counter's value, scaled up if the PMU multiplexed it (ran part of the time).
    fn read(fd: &OwnedFd) -> Option<u64> {
        let mut buf = [0u64; 3];
        // SAFETY: reading at most 24 bytes into a 24-byte buffer from our descriptor.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 24) };
        if n != 24 {
            return None;
        }
        let [value, enabled, running] = buf;
        Some(if running == 0 || running >= enabled {
            value
        } else {
            (value as f64 * enabled as f64 / running as f64).round() as u64
        })
    }
}

impl Attach for EventCounter {
    /// Counts the command's tree; attached processes are not counted (their counts would
    /// mix work done for other clients into the point).
    fn attach(&mut self, pid: i32, _attached: &[i32]) -> Result<(), CollectError> {
        self.fds.clear();
        self.counts = None;
        if let Ok(fd) = Self::open(Event::Migrations, pid) {
            self.fds.push((Event::Migrations, fd));
        }
        if self.use_pmu {
            for event in [Event::Cycles, Event::Instructions, Event::LlcMisses] {
                match Self::open(event, pid) {
                    Ok(fd) => self.fds.push((event, fd)),
                    Err(_) => {
                        self.pmu_refused = true;
                        self.use_pmu = false;
                        self.fds.retain(|(e, _)| *e == Event::Migrations);
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) {
        let value = |which: Event| {
            self.fds
                .iter()
                .find(|(e, _)| *e == which)
                .and_then(|(_, fd)| Self::read(fd))
        };
        self.counts = value(Event::Migrations).map(|cpu_migrations| EventCounts {
            cpu_migrations,
            cycles: value(Event::Cycles),
            instructions: value(Event::Instructions),
            llc_misses: value(Event::LlcMisses),
        });
        self.fds.clear();
    }
}
