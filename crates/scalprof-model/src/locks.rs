//! Lock contention: what the lock tracer records (raw, per execution) and the named,
//! aggregated lock tables of the run document.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// One kernel lock, one caller stack, one lock type.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelLockRaw {
    pub lock: u64,
    /// `contention_begin` flags (LCB_F_*: spin, read, write, rt, percpu, mutex).
    pub flags: u32,
    /// Kernel return addresses, innermost first (BPF trampoline frames included).
    pub stack: Vec<u64>,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// One user futex address of one process.
#[derive(Clone, Debug, PartialEq)]
pub struct UserLockRaw {
    pub uaddr: u64,
    pub tgid: u32,
    /// The futex operation (FUTEX_WAIT, FUTEX_LOCK_PI, …).
    pub op: u32,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// A copy of a waiting thread's user stack, taken as it blocked on the futex; `wait_ns`
/// is how long it then waited (0 if it had not run again when tracing stopped).
#[derive(Clone, Debug, PartialEq)]
pub struct StackSnapshot {
    pub uaddr: u64,
    pub tgid: u32,
    pub wait_ns: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub stack: Vec<u8>,
}

/// A line of /proc/PID/maps.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcMap {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub executable: bool,
    pub path: String,
}

/// What the BPF side could not record; shown with the lock tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFailures {
    pub task_map_full: u64,
    pub stack_failures: u64,
    pub aggregation_map_full: u64,
    pub nested: u64,
    pub lost_snapshots: u64,
}

#[derive(Clone, Debug, Default)]
pub struct RawLocks {
    pub kernel: Vec<KernelLockRaw>,
    pub user: Vec<UserLockRaw>,
    pub snapshots: Vec<StackSnapshot>,
    /// Memory maps of the traced processes, read while they ran.
    pub maps: HashMap<u32, Vec<ProcMap>>,
    pub failures: LockFailures,
    /// What the tracer's own BPF programs cost during the execution.
    pub tracer: TracerCost,
}

/// The BPF tracer's own run time, measured by the kernel (`BPF_ENABLE_STATS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TracerCost {
    /// Time spent in scalprof's BPF programs, over all CPUs.
    pub bpf_run_ns: u64,
    /// How many times they ran.
    pub bpf_runs: u64,
}

/// A caller of a lock and its share of the lock's wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockCaller {
    pub function: String,
    pub share: f64,
}

/// One named lock at one sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockRow {
    /// `kernel` or `user`.
    pub scope: String,
    /// The symbol (`table_lock`, `kmap_lock`), the conventional name (`mmap_lock`), or
    /// `TYPE@caller` / `heap 0x…`.
    pub name: String,
    /// spinlock, rwsem:W, mutex, … (kernel); mutex, condvar, join, futex … (user).
    pub lock_type: String,
    pub address: String,
    pub count: u64,
    pub total_wait_ns: u64,
    pub max_wait_ns: u64,
    pub callers: Vec<LockCaller>,
    /// Kernel contention that is really a user lock's (the futex hash bucket lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributed_to: Option<String>,
    /// Wait per operation of the point's work (set when the run document is built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ns_per_op: Option<f64>,
    /// On-CPU time the profile sampled on this lock's behalf, invisible to the contention
    /// tracepoints: a kernel lock's spin paths (optimistic spinning, queued spinlock slow
    /// path); a user lock's time inside the futex system call. Set with the run document.
    /// (The field keeps its first name for the stored documents' sake.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_ns: Option<u64>,
}

impl LockRow {
    pub fn avg_wait_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_wait_ns as f64 / self.count as f64
        }
    }

    /// Waits on condition variables and thread joins are not lock contention.
    pub fn is_lock(&self) -> bool {
        !matches!(
            self.lock_type.as_str(),
            "condvar" | "join" | "barrier" | "semaphore"
        )
    }
}

/// The lock table of one sweep point (its repeats merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockProfile {
    pub rows: Vec<LockRow>,
    pub failures: LockFailures,
    /// User stack copies taken, and how many of them named a caller.
    pub snapshots: u64,
    pub snapshots_resolved: u64,
    pub repeats: u32,
    /// The tracer's own cost over the merged repeats (zero when unmeasured).
    #[serde(default)]
    pub tracer: TracerCost,
}
