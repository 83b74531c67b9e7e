//! The delay injector (src/bpf/delay.bpf.c): lengthens one cause of the workload's process
//! tree by a known time per occurrence, around one execution, and counts the occurrences,
//! so that an experiment can measure how the throughput answers a longer cause.
//!
//! Like the lock tracer, the BPF object lives on a thread of its own for one execution:
//! loaded and attached before the workload execs, read and dropped once it has exited.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::exec::Attach;
use crate::{CollectError, DelayError};

/// The longest delay per occurrence an experiment may inject: a spin this long is already
/// far beyond any system call it lengthens.
pub const MAX_DELAY_NS: u64 = 10_000_000;

/// What to lengthen, and by how much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelaySpec {
    /// The system call (its x86-64 number), lengthened where it returns.
    pub syscall_nr: u32,
    /// Nanoseconds added to each call (0: the control, with the hook attached).
    pub delay_ns: u64,
}

/// What the injector did in one execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelayCounts {
    /// Calls of the system call by the workload's tree (delayed or, at 0, only counted).
    pub calls: u64,
    /// Nanoseconds spun in all.
    pub spun_ns: u64,
}

/// Injects one [`DelaySpec`] into each execution it is attached to.
pub struct Delayer {
    spec: DelaySpec,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<DelayCounts>>,
    counts: Option<DelayCounts>,
}

impl Delayer {
    pub fn new(spec: DelaySpec) -> Delayer {
        Delayer {
            spec: DelaySpec {
                delay_ns: spec.delay_ns.min(MAX_DELAY_NS),
                ..spec
            },
            stop: None,
            thread: None,
            counts: None,
        }
    }

    /// What the last execution's injector counted (`None` if its thread was lost).
    pub fn take(&mut self) -> Option<DelayCounts> {
        self.counts.take()
    }
}

impl Attach for Delayer {
    fn attach(&mut self, pid: i32, attached: &[i32]) -> Result<(), CollectError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel();
        let spec = self.spec;
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
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            self.counts = t.join().ok();
        }
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
