//! Ctrl-C and SIGTERM during a sweep.
//!
//! The workload runs in its own process group, so the terminal's SIGINT reaches only
//! scalprof. A handler thread records the interruption and forwards SIGTERM to the
//! workload's group and to every process of its tree (one that left the group too); if the group is still alive after a grace period (or a second
//! signal arrives) it gets SIGKILL. The sweep loop then stops, keeping every finished
//! repeat.
//!
//! Ctrl-Z (SIGTSTP) too reaches only scalprof: stopped alone, it would go on timing a
//! workload that runs on, and count the pause as the repeat's wall time. So the handler
//! stops the workload's group and tree first, then scalprof itself; on SIGCONT it
//! continues what it stopped. Either way the repeat in flight spans a pause (see
//! [`Interrupt::suspensions`]) and the sweep measures it again.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use signal_hook::consts::{SIGCONT, SIGINT, SIGTERM, SIGTSTP};
use signal_hook::iterator::Signals;

use crate::CollectError;

/// How long the workload gets to exit after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

#[derive(Clone, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    requested: AtomicBool,
    /// Which signal asked us to stop (0 = none).
    signal: AtomicI32,
    /// Process group of the workload running now (0 = none).
    child_pgid: AtomicI32,
    /// How many times scalprof was stopped and continued (see [`Interrupt::suspensions`]).
    suspensions: AtomicU32,
}

impl Inner {
    /// SIGINT or SIGTERM: stop the sweep, and the workload (SIGTERM, then SIGKILL after
    /// [`GRACE`], or at once on a second signal).
    fn stop_requested(self: &Arc<Inner>, sig: i32) {
        let again = self.requested.swap(true, Ordering::SeqCst);
        self.signal.store(sig, Ordering::SeqCst);
        let pgid = self.child_pgid.load(Ordering::SeqCst);
        if pgid <= 0 {
            return;
        }
        if again {
            kill_group(pgid, libc::SIGKILL);
            return;
        }
        kill_group(pgid, libc::SIGTERM);
        let inner = self.clone();
        std::thread::spawn(move || {
            std::thread::sleep(GRACE);
            if inner.child_pgid.load(Ordering::SeqCst) == pgid {
                kill_group(pgid, libc::SIGKILL);
            }
        });
    }
}

impl Interrupt {
    /// A handle that is never triggered by signals (tests, library use).
    pub fn manual() -> Interrupt {
        Interrupt::default()
    }

    /// Installs the handler thread for SIGINT/SIGTERM, and SIGTSTP/SIGCONT.
    pub fn install() -> Result<Interrupt, CollectError> {
        let this = Interrupt::default();
        let mut signals =
            Signals::new([SIGINT, SIGTERM, SIGTSTP, SIGCONT]).map_err(CollectError::Signals)?;
        let inner = this.inner.clone();
        std::thread::Builder::new()
            .name("scalprof-signals".into())
            .spawn(move || {
                // The workload's group that SIGTSTP stopped, to continue with us.
                let mut stopped = 0;
                loop {
                    // Pending signals come in a batch, not in the order they were sent: a
                    // SIGCONT in the same batch as a SIGTSTP came after it or with it, and
                    // stopping then would leave us stopped for good.
                    let batch: Vec<i32> = signals.wait().collect();
                    let continued = batch.contains(&SIGCONT);
                    for sig in batch {
                        match sig {
                            SIGTSTP => {
                                inner.suspensions.fetch_add(1, Ordering::SeqCst);
                                if !continued {
                                    stopped = inner.child_pgid.load(Ordering::SeqCst);
                                    kill_group(stopped, libc::SIGSTOP);
                                    // SAFETY: kill and getpid have no memory-safety
                                    // preconditions; this stops the whole process, as
                                    // SIGTSTP's default action would have.
                                    unsafe {
                                        libc::kill(libc::getpid(), libc::SIGSTOP);
                                    }
                                }
                            }
                            SIGCONT => {
                                // Also after a SIGSTOP, which no handler sees: the
                                // workload ran on meanwhile, unwatched.
                                inner.suspensions.fetch_add(1, Ordering::SeqCst);
                                kill_group(std::mem::take(&mut stopped), libc::SIGCONT);
                            }
                            _ => inner.stop_requested(sig),
                        }
                    }
                }
            })
            .map_err(CollectError::Signals)?;
        Ok(this)
    }

    /// How many times scalprof has been stopped (SIGTSTP) or continued (SIGCONT) so far:
    /// a repeat during which this changed was paused, and its wall time counts the pause
    /// (a workload's own timers run on while it is stopped, so the pause cannot be
    /// subtracted either).
    pub fn suspensions(&self) -> u32 {
        self.inner.suspensions.load(Ordering::SeqCst)
    }

    /// Whether the user asked to stop.
    pub fn requested(&self) -> bool {
        self.inner.requested.load(Ordering::SeqCst)
    }

    /// The signal that asked us to stop, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.inner.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Asks the sweep to stop as if a signal had arrived (and stops the workload).
    pub fn trigger(&self) {
        self.inner.requested.store(true, Ordering::SeqCst);
        let pgid = self.inner.child_pgid.load(Ordering::SeqCst);
        if pgid > 0 {
            kill_group(pgid, libc::SIGKILL);
        }
    }

    pub(crate) fn set_child(&self, pgid: i32) {
        self.inner.child_pgid.store(pgid, Ordering::SeqCst);
        // A signal that arrived between the check and the spawn must still stop it.
        if self.requested() {
            kill_group(pgid, libc::SIGTERM);
        }
    }

    pub(crate) fn clear_child(&self) {
        self.inner.child_pgid.store(0, Ordering::SeqCst);
    }
}

/// Signals the workload: its process group (which `pgid`, the workload's pid, leads) and
/// every process descended from the workload, wherever it moved (a workload may leave the
/// group with setpgid or setsid: only the tree reaches it then).
pub(crate) fn kill_group(pgid: i32, sig: i32) {
    if pgid <= 0 {
        return;
    }
    // The tree is read before anything is signalled: a killed parent's children are
    // reparented at once and would no longer be found under it.
    let tree = descendants(pgid);
    // SAFETY: kill has no memory-safety preconditions; a negative pid addresses the
    // process group we created for the workload.
    unsafe {
        libc::kill(-pgid, sig);
    }
    for pid in tree {
        // SAFETY: as above, for one process of the workload's tree.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// `pid` and every process descended from it, from /proc's children lists.
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < 100_000 {
        let p = out[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                for c in text
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok())
                {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
        }
    }
    out
}
