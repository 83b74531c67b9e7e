//! Waiting for a CPU: the scheduler's run-queue waits of the traced threads, by who had
//! the CPU, and the rows and budget causes they make.

use super::Scope;

/// Waiting for a CPU: from a wakeup or a preemption until the thread ran, summed over
/// one process's threads and by who took the CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct RunQueueRaw {
    pub tgid: u32,
    pub behind: RunQueueBehind,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// The rows of time spent waiting for a CPU, by who had it.
pub const CPU_WAIT: &str = "waiting for a CPU";
pub const CPU_WAIT_OTHER: &str = "waiting for a CPU behind other processes";
pub const CPU_WAIT_OBSERVER: &str = "waiting for a CPU behind scalprof";
/// Wakeups onto an idle CPU: the part of the waits they ended spent waking the CPU.
pub const IDLE_WAKEUP: &str = "waking an idle CPU";

/// Who had the CPU a traced thread waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunQueueBehind {
    /// The traced threads themselves, or not known (a woken thread waits behind whoever
    /// runs there).
    Own,
    /// Another process preempted it: other work on the machine.
    Other,
    /// scalprof itself preempted it: the observer's cost, absent from the clean repeats.
    Observer,
    /// Not a wait for a CPU: woken onto an idle CPU, the time until it ran (the idle
    /// CPU's exit latency), already part of the wait the wakeup ended.
    IdleWakeup,
}

impl RunQueueBehind {
    /// Every kind, in the order the lock table lists their rows.
    pub const ALL: [RunQueueBehind; 4] = [
        RunQueueBehind::Own,
        RunQueueBehind::Other,
        RunQueueBehind::Observer,
        RunQueueBehind::IdleWakeup,
    ];

    /// The name of its row in the lock table, and of its cause in a budget.
    pub fn row_name(self) -> &'static str {
        match self {
            RunQueueBehind::Own => CPU_WAIT,
            RunQueueBehind::Other => CPU_WAIT_OTHER,
            RunQueueBehind::Observer => CPU_WAIT_OBSERVER,
            RunQueueBehind::IdleWakeup => IDLE_WAKEUP,
        }
    }

    /// Its row's address label (`runqueue`, `runqueue:other`, …).
    pub fn address(self) -> &'static str {
        match self {
            RunQueueBehind::Own => "runqueue",
            RunQueueBehind::Other => "runqueue:other",
            RunQueueBehind::Observer => "runqueue:scalprof",
            RunQueueBehind::IdleWakeup => "wakeup:idle",
        }
    }

    /// The kind a budget cause of a run document read back names (`name` in the kernel
    /// scope), if it is one of these: what makes a stored cause's typed identity
    /// (`finding.rs`'s `StoredCause`), and nothing else.
    pub(crate) fn named(scope: Option<Scope>, name: &str) -> Option<RunQueueBehind> {
        if scope != Some(Scope::Kernel) {
            return None;
        }
        Self::ALL.into_iter().find(|k| k.row_name() == name)
    }
}
