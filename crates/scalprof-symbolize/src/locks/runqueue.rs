//! Waiting for a CPU: the run-queue rows, split by who held the CPU (the workload's own
//! threads, other processes, scalprof).

use scalprof_model::locks::{LockAddress, LockKind, Scope};
use scalprof_model::locks::{LockRow, RawLocks, RunQueueBehind, RunQueueRaw};

/// Time the traced threads were runnable but not running: one row for the whole tree per
/// kind of thread that had the CPU. Behind scalprof itself, the wait is the observer's
/// (the clean repeats do not have it): attributed to it, never a cause.
pub(super) fn add_runqueue_row(raw: &RawLocks, rows: &mut Vec<LockRow>) {
    for behind in RunQueueBehind::ALL {
        let attributed_to = match behind {
            RunQueueBehind::Own | RunQueueBehind::Other => None,
            RunQueueBehind::Observer => Some(scalprof_model::locks::THE_OBSERVER),
            // Part of the waits the wakeups ended (a lock's hand-off, a server's answer):
            // listed to say how much of them is waking a CPU, never a cause of its own.
            RunQueueBehind::IdleWakeup => Some("the waits it ended"),
        };
        let of: Vec<&RunQueueRaw> = raw.runqueue.iter().filter(|r| r.behind == behind).collect();
        if of.is_empty() {
            continue;
        }
        rows.push(LockRow {
            address: LockAddress::RunQueue(behind),
            count: of.iter().map(|r| r.count).sum(),
            total_wait_ns: of.iter().map(|r| r.total_ns).sum(),
            max_wait_ns: of.iter().map(|r| r.max_ns).max().unwrap_or(0),
            attributed_to: attributed_to.map(Into::into),
            ..LockRow::new(Scope::Kernel, behind.row_name(), LockKind::CpuWait)
        });
    }
}
