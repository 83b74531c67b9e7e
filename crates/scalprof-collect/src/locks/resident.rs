//! The lock tracer loaded once and attached for each traced window: a watch's windows of a
//! server that keeps running, a sweep's traced repeats. The kernel's verifier took 0.05 to
//! 0.24 s of a CPU at each load (the 2-CPU VM measured, by boot), on the machine the
//! workload runs on; and a traced repeat that waited for it began after the workload's
//! disk had idled that long, where a clean one follows the last repeat at once (a journal
//! with fdatasync ran 14% slower after a 0.3 s pause on that VM).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::exec::Attach;
use crate::sweep::LockCollector;
use crate::{CollectError, LockTracerError};

use super::{LockConfig, RawLocks};

/// The tracer's thread, between windows and in them.
struct Worker {
    /// Each window's processes and configuration: the thread attaches to them.
    windows: mpsc::Sender<(Vec<u32>, LockConfig)>,
    /// Whether it attached.
    ready: mpsc::Receiver<Result<(), LockTracerError>>,
    /// What each window saw, once `stop` detached it.
    done: mpsc::Receiver<RawLocks>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing `windows` ends the thread between windows; one in a window stops first.
        self.stop.store(true, Ordering::SeqCst);
        let (closed, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.windows, closed));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A lock tracer that keeps its programs loaded from one window to the next.
pub struct ResidentTracer {
    config: LockConfig,
    worker: Option<Worker>,
}

impl ResidentTracer {
    pub fn new(config: LockConfig) -> ResidentTracer {
        ResidentTracer {
            config,
            worker: None,
        }
    }

    /// Whether a window of `config` can use this tracer's programs: they were loaded for
    /// the same processes' kind (the machine's, or a tree's) and the same Go programs.
    pub fn serves(&self, config: &LockConfig) -> bool {
        self.config.system_wide == config.system_wide
            && self.config.go_probes == config.go_probes
            && self.config.go_probes_of.is_some() == config.go_probes_of.is_some()
    }

    /// Attaches for one window of `config` (see [`ResidentTracer::serves`]) to `pid` and
    /// the processes attached to (loading the programs at the first). A tracer that fails
    /// is dropped: the next window loads anew.
    pub fn begin(
        &mut self,
        pid: i32,
        attached: &[i32],
        config: &LockConfig,
    ) -> Result<(), CollectError> {
        let tgids: Vec<u32> = std::iter::once(pid)
            .chain(attached.iter().copied())
            .map(|p| p as u32)
            .collect();
        let worker = match self.worker.take() {
            Some(w) => w,
            None => self.spawn()?,
        };
        worker.stop.store(false, Ordering::SeqCst);
        if worker.windows.send((tgids, config.clone())).is_err() {
            return Err(LockTracerError::Timeout.into());
        }
        match worker.ready.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {
                self.worker = Some(worker);
                Ok(())
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(LockTracerError::Timeout.into()),
        }
    }

    /// Detaches, and returns what the window saw; `None` if the tracer's thread died.
    pub fn end(&mut self) -> Option<RawLocks> {
        let worker = self.worker.take()?;
        worker.stop.store(true, Ordering::SeqCst);
        let raw = worker.done.recv().ok()?;
        self.worker = Some(worker);
        Some(raw)
    }

    fn spawn(&self) -> Result<Worker, CollectError> {
        let (windows, windows_rx) = mpsc::channel();
        let (ready_tx, ready) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let config = self.config.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("scalprof-locks".into())
            .spawn(move || run(&config, windows_rx, ready_tx, done_tx, &flag))
            .map_err(LockTracerError::Thread)?;
        Ok(Worker {
            windows,
            ready,
            done,
            stop,
            thread: Some(thread),
        })
    }
}

#[cfg(feature = "bpf")]
use super::bpf::resident as run;

/// Without the `bpf` feature there is no tracer: say so.
#[cfg(not(feature = "bpf"))]
fn run(
    _config: &LockConfig,
    windows: mpsc::Receiver<(Vec<u32>, LockConfig)>,
    ready: mpsc::Sender<Result<(), LockTracerError>>,
    _done: mpsc::Sender<RawLocks>,
    _stop: &AtomicBool,
) {
    if windows.recv().is_ok() {
        let _ = ready.send(Err(LockTracerError::NotBuilt));
    }
}

/// One traced window of a [`ResidentTracer`], with its configuration.
pub struct ResidentWindow {
    tracer: Rc<RefCell<ResidentTracer>>,
    config: LockConfig,
    result: Option<RawLocks>,
    lost: bool,
}

impl ResidentWindow {
    pub fn new(tracer: Rc<RefCell<ResidentTracer>>, config: LockConfig) -> ResidentWindow {
        ResidentWindow {
            tracer,
            config,
            result: None,
            lost: false,
        }
    }
}

impl Attach for ResidentWindow {
    fn attach(&mut self, pid: i32, attached: &[i32]) -> Result<(), CollectError> {
        self.tracer.borrow_mut().begin(pid, attached, &self.config)
    }

    fn finish(&mut self) {
        self.result = self.tracer.borrow_mut().end();
        self.lost = self.result.is_none();
    }
}

impl LockCollector for ResidentWindow {
    fn take(&mut self) -> Option<RawLocks> {
        self.result.take()
    }

    fn lost(&self) -> Option<String> {
        self.lost
            .then(|| "the lock tracer's thread ended: this window has no lock table".into())
    }
}
