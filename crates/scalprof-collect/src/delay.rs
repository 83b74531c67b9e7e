//! The delay injector: lengthens one cause of the workload's process tree by a known time
//! per occurrence, around one execution, and counts the occurrences, so that an experiment
//! can measure how the throughput answers a longer cause.
//!
//! - A system call, with BPF (src/bpf/delay.bpf.c): like the lock tracer, the BPF object
//!   lives on a thread of its own for one execution, loaded and attached before the
//!   workload execs, read and dropped once it has exited.
//! - A function of the workload's executable, with a BPF uprobe at its entry.
//! - A user lock, with an interposer preloaded into the workload (src/delay/interpose.c,
//!   see there why not a uprobe). The same interposer times the user locks' holds in a
//!   sweep's traced repeats ([`HoldTimer`], src/delay/holds.c).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::exec::{Attach, ExecSpec};
use crate::{CollectError, DelayError};

/// The longest delay per occurrence an experiment may inject: a spin this long is already
/// far beyond any system call it lengthens.
pub const MAX_DELAY_NS: u64 = 10_000_000;

/// What to lengthen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DelayTarget {
    /// A system call (its x86-64 number), lengthened where it returns.
    Syscall(u32),
    /// A user lock (pthread mutex, rwlock or spinlock) that is a global of the executable
    /// `exe`, at its link-time `address`: its hold lengthened at each release.
    UserLock { exe: PathBuf, address: u64 },
    /// A kernel lock, held longer where a waiter gets it after contention
    /// (`lock:contention_end`); the delay capped at [`MAX_KERNEL_LOCK_DELAY_NS`].
    KernelLock(KernelLock),
    /// A function of the executable `exe`, at this file `offset`: lengthened at its entry
    /// by a uprobe.
    Function { exe: PathBuf, offset: u64 },
    /// The sleep calls (nanosleep, clock_nanosleep, usleep) of the workload's tree,
    /// lengthened by sleeping after each returns (the interposer): no CPU taken.
    Sleeps,
}

/// Which kernel lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelLock {
    /// A lock with a kernel symbol (a static lock), at this address.
    Address(u64),
    /// The workload's own `mm->mmap_lock`.
    MmapLock,
    /// The workload's own fd table lock, `files->file_lock`.
    FdTable,
}

/// The longest delay a kernel lock gets: a spinlock is held with preemption off, and a
/// spin that long already lengthens any kernel critical section many times over.
pub const MAX_KERNEL_LOCK_DELAY_NS: u64 = 200_000;

impl DelayTarget {
    /// The shortest delay the primitive adds faithfully: a BPF spin at a system call's exit
    /// is timed in microseconds; the interposer's spin reads the vDSO clock, some 20 ns a
    /// read.
    pub fn min_delay_ns(&self) -> u64 {
        match self {
            DelayTarget::Syscall(_) | DelayTarget::KernelLock(_) | DelayTarget::Function { .. } => {
                1_000
            }
            DelayTarget::UserLock { .. } => 50,
            // A sleep wakes some tens of µs late (the timer's slack, the wake-up).
            DelayTarget::Sleeps => 200_000,
        }
    }
}

impl DelayTarget {
    /// The longest delay the primitive adds.
    pub fn max_delay_ns(&self) -> u64 {
        match self {
            DelayTarget::KernelLock(_) => MAX_KERNEL_LOCK_DELAY_NS,
            _ => MAX_DELAY_NS,
        }
    }
}

/// What to lengthen, and by how much.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelaySpec {
    pub target: DelayTarget,
    /// Nanoseconds added to each occurrence (0: the control, with the hook attached).
    pub delay_ns: u64,
}

/// What the injector did in one execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelayCounts {
    /// Occurrences in the workload's tree (delayed or, at 0, only counted): calls of the
    /// system call, releases of the lock.
    pub calls: u64,
    /// Nanoseconds spun in all.
    pub spun_ns: u64,
}

/// Injects one [`DelaySpec`] into each execution it is attached to.
pub struct Delayer {
    spec: DelaySpec,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<DelayCounts>>,
    /// The interposer's shared counters, for a user lock.
    preloaded: Option<interpose::Counters>,
    counts: Option<DelayCounts>,
}

impl Delayer {
    pub fn new(spec: DelaySpec) -> Delayer {
        let cap = spec.target.max_delay_ns();
        Delayer {
            spec: DelaySpec {
                delay_ns: spec.delay_ns.min(cap),
                ..spec
            },
            stop: None,
            thread: None,
            preloaded: None,
            counts: None,
        }
    }

    /// What the workload needs for this delay, before each execution: for a user lock,
    /// the interposer (written to `dir`) and its counters (a memfd), the environment that
    /// names them and the descriptors it names, which the workload must inherit
    /// ([`ExecSpec`]'s `inherit`); nothing for the others.
    #[allow(clippy::type_complexity)] // the two parts of an ExecSpec, named there
    pub fn environment(
        &mut self,
        dir: &Path,
    ) -> Result<(Vec<(String, String)>, Vec<Arc<OwnedFd>>), DelayError> {
        match &self.spec.target {
            DelayTarget::Syscall(_) | DelayTarget::KernelLock(_) | DelayTarget::Function { .. } => {
                Ok((Vec::new(), Vec::new()))
            }
            DelayTarget::UserLock { exe, address } => {
                let (counters, env, fds) = interpose::prepare(
                    dir,
                    interpose::Lengthened::Lock {
                        exe,
                        address: *address,
                    },
                    self.spec.delay_ns,
                )?;
                self.preloaded = Some(counters);
                Ok((env, fds))
            }
            DelayTarget::Sleeps => {
                let (counters, env, fds) =
                    interpose::prepare(dir, interpose::Lengthened::Sleeps, self.spec.delay_ns)?;
                self.preloaded = Some(counters);
                Ok((env, fds))
            }
        }
    }

    /// What the last execution's injector counted (`None` if its thread was lost).
    pub fn take(&mut self) -> Option<DelayCounts> {
        self.counts.take()
    }
}

impl Attach for Delayer {
    fn attach(&mut self, pid: i32, attached: &[i32]) -> Result<(), CollectError> {
        if let DelayTarget::UserLock { .. } | DelayTarget::Sleeps = self.spec.target {
            return match self.preloaded {
                Some(_) => Ok(()),
                None => Err(DelayError::NotPrepared.into()),
            };
        }
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel();
        let spec = self.spec.clone();
        let tgids: Vec<u32> = std::iter::once(pid)
            .chain(attached.iter().copied())
            .map(|p| p as u32)
            .collect();
        let thread = std::thread::Builder::new()
            .name("scalprof-delay".into())
            .spawn(move || inject(&tgids, spec, ready_tx, stop_rx))
            .map_err(DelayError::Thread)?;
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {
                self.stop = Some(stop_tx);
                self.thread = Some(thread);
                Ok(())
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e.into())
            }
            Err(_) => Err(DelayError::Timeout.into()),
        }
    }

    fn finish(&mut self) {
        if let Some(c) = self.preloaded.take() {
            self.counts = Some(c.read());
            return;
        }
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            self.counts = t.join().ok();
        }
    }
}

mod interpose;

pub use interpose::HoldRecords;

/// The hold times of one execution's user locks, timed by the interposer
/// (src/delay/holds.c) preloaded into the workload's tree, which writes them to memory
/// that scalprof made: no file grows, so no file-size limit stands in the way, and the
/// workload reaches it by a descriptor, whatever its uid.
pub struct HoldTimer(interpose::HoldArea);

impl HoldTimer {
    /// Readies one execution: the interposer, written to `dir` (the execution's outputs'
    /// folder), and a fresh records area in memory.
    pub fn prepare(dir: &Path) -> Result<HoldTimer, DelayError> {
        interpose::prepare_holds(dir).map(HoldTimer)
    }

    /// `spec` with the timing on: the interposer preloaded, and the descriptors of it and
    /// of the records area inherited by the workload.
    pub fn timed(&self, spec: &ExecSpec) -> ExecSpec {
        let given = spec.env.iter().rev().find(|(k, _)| k == "LD_PRELOAD");
        let theirs = given
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("LD_PRELOAD").ok());
        let (env, fds) = self.0.workload(theirs.as_deref());
        let mut timed = spec.clone();
        timed.env.retain(|(k, _)| !env.iter().any(|(e, _)| e == k));
        timed.env.extend(env);
        timed.inherit.extend(fds);
        timed
    }

    /// The execution's holds, per process and lock, with what was lost; `stderr` is the
    /// execution's (where processes that could not record say so).
    pub fn read(self, stderr: &Path) -> HoldRecords {
        self.0.read(stderr)
    }
}

#[cfg(feature = "bpf")]
mod bpf;
#[cfg(feature = "bpf")]
use bpf::inject;

/// Without the `bpf` feature there is no injector: say so.
#[cfg(not(feature = "bpf"))]
fn inject(
    _tgids: &[u32],
    _spec: DelaySpec,
    ready: mpsc::Sender<Result<(), DelayError>>,
    _stop: mpsc::Receiver<()>,
) -> DelayCounts {
    let _ = ready.send(Err(DelayError::NotBuilt));
    DelayCounts::default()
}
