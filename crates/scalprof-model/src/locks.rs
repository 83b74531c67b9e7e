//! Lock contention: what the lock tracer records (raw, per execution) and the named,
//! aggregated lock tables of the run document.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

mod address;
mod call_wait;
mod cost;
mod holder_wait;
mod holds;
mod kind;
mod place;
mod rows;
mod run_queue;
mod tracer;
pub use address::LockAddress;
pub use call_wait::CallWait;
pub use holder_wait::{sort_holder_waits, HeldWait, HolderState, HolderWait, HOLDER_WAIT_SHARE};
pub use holds::{HoldTimes, KernelHoldRaw, UserHoldRaw};
pub use kind::{ChanSide, LockKind, Side};
pub use place::{kernel_lock_taken_by, CallerNamed, LockPlace, Region};
pub use rows::{sort_rows, top_callers, TOP_CALLERS};
pub use run_queue::{
    RunQueueBehind, RunQueueRaw, CPU_WAIT, CPU_WAIT_OBSERVER, CPU_WAIT_OTHER, IDLE_WAKEUP,
};
pub use tracer::{FamilyCost, ProbeFamily, TracerCost};

/// One kernel lock, one caller stack, one lock type.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelLockRaw {
    pub lock: u64,
    /// The waiting process.
    pub tgid: u32,
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

/// Which Go runtime semaphore a goroutine parked on: the wrapper of the runtime's
/// acquire that sync called (the cookie of the probe that saw it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GoSema {
    /// `sync.Mutex`, also the writers' inner Mutex of a `sync.RWMutex`.
    Mutex,
    /// A reader of a `sync.RWMutex` waits for a writer.
    RwMutexRead,
    /// A writer of a `sync.RWMutex` waits for the readers.
    RwMutexWrite,
    /// `sync.WaitGroup.Wait`.
    WaitGroup,
    /// Another runtime semaphore.
    Other,
    /// A receive (or a select's receive) that waited for a sender.
    ChanRecv,
    /// A send (or a select's send) that waited for a receiver, or for room.
    ChanSend,
    /// A select no hand-off ended (a timer's, a context's).
    Select,
    /// `sync.Cond.Wait`.
    Cond,
}

impl GoSema {
    /// The probe cookie of each kind (`enum go_sema_kind` of the BPF program).
    pub fn from_cookie(c: u32) -> GoSema {
        match c {
            1 => GoSema::Mutex,
            2 => GoSema::RwMutexRead,
            3 => GoSema::RwMutexWrite,
            4 => GoSema::WaitGroup,
            6 => GoSema::ChanRecv,
            7 => GoSema::ChanSend,
            8 => GoSema::Select,
            9 => GoSema::Cond,
            _ => GoSema::Other,
        }
    }
}

/// Goroutines of a Go program parked on one semaphore of one process, with one user stack
/// (for a wait, the parked goroutine's; for a release, the releasing goroutine's).
#[derive(Clone, Debug, PartialEq)]
pub struct GoWaitRaw {
    /// The semaphore's address (inside the Mutex, RWMutex or WaitGroup).
    pub addr: u64,
    pub tgid: u32,
    pub kind: GoSema,
    /// Whether this entry is a sample with a stack; the others are the semaphore's exact
    /// totals (every wait), the samples a part of them again.
    pub sampled: bool,
    /// User return addresses, innermost first (a frame-pointer walk from the probe: the
    /// runtime's wrapper, then the caller of the sync method's slow path). Empty for the
    /// totals, and where the stack could not be read.
    pub stack: Vec<u64>,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// Sampled waits of one blocking system call (as in `UserLockRaw`) in one kernel stack.
#[derive(Clone, Debug, PartialEq)]
pub struct SyscallStackRaw {
    pub uaddr: u64,
    pub tgid: u32,
    pub op: u32,
    /// Kernel return addresses, innermost first.
    pub stack: Vec<u64>,
    pub count: u64,
    pub total_ns: u64,
}

/// Sampled waits of one blocking system call (as in `UserLockRaw`) ended by a task of
/// process `waker`.
#[derive(Clone, Debug, PartialEq)]
pub struct WakerRaw {
    pub uaddr: u64,
    pub tgid: u32,
    pub op: u32,
    pub waker: u32,
    pub count: u64,
    pub total_ns: u64,
}

/// A copy of a waiting thread's user stack, taken as it blocked on a futex or in another
/// system call; `wait_ns` is how long it then waited (0 if it had not been woken when
/// tracing stopped).
#[derive(Clone, Debug, PartialEq)]
pub struct StackSnapshot {
    /// The futex, or the system call's first argument.
    pub uaddr: u64,
    pub tgid: u32,
    /// The futex operation, or the system call number.
    pub op: u32,
    /// A system-call wait (one of `RawLocks::syscalls`), not a futex wait.
    pub syscall: bool,
    /// Not the waiter's stack but its waker's (this thread id), copied as it woke the
    /// waiter from inside futex(): an unlock, the end of the holder's critical section.
    /// `tgid` is then the waker's process.
    pub waker: Option<u32>,
    /// The waiting thread, and its process (the lock's, where a futex in shared memory is
    /// woken from another process; `tgid` is then the waker's).
    pub tid: u32,
    pub waiter_tgid: u32,
    /// When the waiter blocked (CLOCK_MONOTONIC ns, the profile samples' clock).
    pub start: u64,
    /// A waker's copy: the waker's own wait that overlapped the waiter's, if any.
    pub holder_blocked: Option<HolderBlocked>,
    pub wait_ns: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub stack: Vec<u8>,
    /// The copied thread's name (`comm`): a runtime's service threads are told by it.
    pub comm: String,
}

/// A holder's own wait during its waiter's: how long the two overlapped, and what the
/// holder waited on (a futex, or a system call and its first argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HolderBlocked {
    pub ns: u64,
    pub syscall: bool,
    pub op: u32,
    pub uaddr: u64,
}

/// A line of /proc/PID/maps.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcMap {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub executable: bool,
    pub path: String,
    /// The mapped file's device, (major, minor), and inode; (0, 0) and 0 for memory
    /// without a file. What a file opened by `path` must be to be this mapping's.
    pub dev: (u32, u32),
    pub inode: u64,
}

/// What the BPF side could not record; shown with the lock tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFailures {
    pub task_map_full: u64,
    pub stack_failures: u64,
    pub aggregation_map_full: u64,
    pub nested: u64,
    pub lost_snapshots: u64,
    /// Map entries user space could not read or decode.
    #[serde(default)]
    pub undecoded: u64,
}

#[derive(Clone, Debug, Default)]
pub struct RawLocks {
    pub kernel: Vec<KernelLockRaw>,
    /// Who released sleeping kernel locks to sampled waiters: `stack` is the waker's
    /// kernel stack, the totals the waits those releases ended.
    pub kernel_wakers: Vec<KernelLockRaw>,
    pub user: Vec<UserLockRaw>,
    /// Goroutines parked on the Go runtime's semaphores (sync.Mutex and its kin).
    pub go_waits: Vec<GoWaitRaw>,
    /// Who released them: the same waits, by the releasing goroutine's stack.
    pub go_wakers: Vec<GoWaitRaw>,
    /// The user locks' holds, where the interposer timed them.
    pub holds: Vec<UserHoldRaw>,
    /// The interposer was preloaded into this execution (whether or not a lock was taken).
    pub holds_timed: bool,
    /// The mmap_lock's holds, where the kernel's events timed them.
    pub kernel_holds: Vec<KernelHoldRaw>,
    pub snapshots: Vec<StackSnapshot>,
    /// Waits in blocking system calls other than futex: `op` is the system call number,
    /// `uaddr` its first argument (the file descriptor of fd-based calls).
    pub syscalls: Vec<UserLockRaw>,
    /// The sampled system-call waits with the kernel stack they blocked in.
    pub syscall_stacks: Vec<SyscallStackRaw>,
    /// Time the traced processes' threads were runnable but not running, per process.
    pub runqueue: Vec<RunQueueRaw>,
    /// Who woke the sampled system-call waits.
    pub wakers: Vec<WakerRaw>,
    /// Command names of the traced processes (waiting and waking), by tgid.
    pub waker_comms: HashMap<u32, String>,
    /// Command names of the processes attached to (`--attach`), when they were attached.
    pub attached_comms: Vec<String>,
    /// What the file descriptors of those waits named (`/proc/PID/fd`), read while the
    /// processes ran: (tgid, fd) → path, `pipe:[…]`, `socket:[…]`.
    pub fd_paths: HashMap<(u32, u64), String>,
    /// Memory maps of the traced processes, read while they ran.
    pub maps: HashMap<u32, Vec<ProcMap>>,
    pub failures: LockFailures,
    /// What the tracer's own BPF programs cost during the execution.
    pub tracer: TracerCost,
}

/// A caller of a lock and its share of the lock's wait; for a holder (who made the
/// waiters wait), also what it was seen doing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockCaller {
    pub function: String,
    pub share: f64,
    /// Holders only: how the holder was seen (absent for callers and older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<HolderState>,
    /// Holders seen running: their heaviest folded stack inside the waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

impl LockCaller {
    pub fn new(function: impl Into<String>, share: f64) -> Self {
        LockCaller {
            function: function.into(),
            share,
            state: None,
            stack: None,
        }
    }
}

/// One named lock at one sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockRow {
    pub scope: Scope,
    /// The symbol (`table_lock`, `kmap_lock`), the conventional name (`mmap_lock`), or
    /// `TYPE@caller` / `heap 0x…`.
    pub name: String,
    /// spinlock, rwsem:W, mutex, … (kernel); mutex, condvar, join, futex … (user).
    pub lock_type: LockKind,
    pub address: LockAddress,
    pub count: u64,
    pub total_wait_ns: u64,
    pub max_wait_ns: u64,
    pub callers: Vec<LockCaller>,
    /// Kernel contention that is really a user lock's (the futex hash bucket lock), or a
    /// wait scalprof itself caused ("the observer"): listed, never a cause.
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
    /// For waits for data or room (a pipe, a socket): the command name of the task that
    /// ended most of them, the peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<String>,
    /// The command name of the process that did most of these waits, when it is not the
    /// swept command itself (a server observed with `--attach`, a child program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// The peer that ended these waits (`woken_by`) is an attached process: the waits are
    /// its response time, which its own rows break down; not a cause of their own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peer_attached: bool,
    /// Who held the lock while its waiters waited: the functions that released it to a
    /// waiter (the end of their critical section), by the wait they ended. From the
    /// wakers' stack copies of the sampled waits; empty when none was taken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<LockCaller>,
    /// Of the waits whose waker was seen, the share of their time the holders were
    /// sampled running (blame shifting: what the holder did meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_running: Option<f64>,
    /// Of the same time, the shares the holders spent blocked in waits of their own: a
    /// link of a wait chain (the disk, another lock), largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holder_waits: Vec<HolderWait>,
    /// What the holders ran inside the waits, the heaviest folded stacks (their flame
    /// graph), from the holder threads' own samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holder_stacks: Vec<crate::profile::FoldedStack>,
    /// How long the lock was held and how often taken: user locks the interposer timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldTimes>,
    /// The threads that waited, by where each began: the outermost function of the
    /// program in the waiters' sampled stacks (a worker's loop, a reporter's `main`, a
    /// housekeeper), with shares of the sampled wait. Told against the profile, it says
    /// whether the waiters do the workload's work at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiter_roots: Vec<LockCaller>,
    /// A channel row: how many channels its waits were on. About one wait per channel is
    /// a chain of one-shot hand-offs (each task waits for the result of the one before
    /// it), not one channel many items pass through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<u64>,
}

/// `LockRow::attributed_to` of a wait scalprof itself caused (its threads holding a CPU,
/// its probes' traps waiting on a lock they take): listed, never a cause.
pub const THE_OBSERVER: &str = "the observer";

/// x86-64 system calls whose first argument is a file descriptor, among those that block.
pub fn is_fd_syscall(nr: u32) -> bool {
    matches!(
        nr,
        0 | 1
            | 17
            | 18
            | 19
            | 20
            | 42
            | 43
            | 44
            | 45
            | 46
            | 47
            | 72
            | 73
            | 74
            | 75
            | 285
            | 288
            | 295
            | 296
    )
}

/// Whose lock, or whose code, a lock row or a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    User,
    Kernel,
    /// A file's POSIX record lock or flock.
    File,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Kernel => "kernel",
            Scope::File => "file",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sleep whose waits average this long or more is a timer's (a housekeeping thread's
/// period, a server's idle tick), not a retry loop's back-off.
pub const TIMER_SLEEP_NS: u64 = 10_000_000;

impl LockRow {
    /// Whether this is a thread sleeping on a timer between rounds of its own (waits of
    /// [`TIMER_SLEEP_NS`] or more on average): waiting for nothing, as an idle wait does.
    /// A retry loop's back-off (`sleep_retry`: 100 µs) stays a cause.
    pub fn is_timer_sleep(&self) -> bool {
        self.lock_type == LockKind::Sleep
            && self.count > 0
            && self.total_wait_ns / self.count >= TIMER_SLEEP_NS
    }

    /// The same across a sweep: a timer's sleep that was a timer's at the sweep's first
    /// traced point too (`at_first`, that point's row of the same sleep), or in a sweep of
    /// one traced point. A sleep of 1 ms at 1 thread that lengthens to 15 ms with more is
    /// a back-off that grew, not a period. A long sleep that appears only with more threads is the contention's
    /// back-off, a cause: SQLite's busy handler sleeps 1–100 ms (15 ms on average) while
    /// another writer holds the database, and not at all with one writer.
    pub fn is_timer_sleep_in_sweep(&self, at_first: Option<&LockRow>, one_point: bool) -> bool {
        self.is_timer_sleep() && (one_point || at_first.is_some_and(LockRow::is_timer_sleep))
    }

    /// Which run-queue row this is (waiting for a CPU behind whom), if it is one.
    pub fn run_queue(&self) -> Option<RunQueueBehind> {
        self.address
            .run_queue()
            .filter(|_| self.scope == Scope::Kernel)
    }

    /// A row with no waits yet: counts zero, no callers, holders or attribution, address
    /// unknown. Fill in what is known with struct update syntax.
    pub fn new(scope: Scope, name: impl Into<String>, lock_type: LockKind) -> LockRow {
        LockRow {
            scope,
            name: name.into(),
            lock_type,
            address: LockAddress::Unknown,
            count: 0,
            total_wait_ns: 0,
            max_wait_ns: 0,
            callers: Vec::new(),
            attributed_to: None,
            wait_ns_per_op: None,
            spin_ns: None,
            woken_by: None,
            process: None,
            peer_attached: false,
            holders: Vec::new(),
            holder_running: None,
            holder_waits: Vec::new(),
            holder_stacks: Vec::new(),
            hold: None,
            waiter_roots: Vec::new(),
            channels: None,
        }
    }

    pub fn avg_wait_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_wait_ns as f64 / self.count as f64
        }
    }

    /// Waits on condition variables and thread joins are not lock contention.
    pub fn is_lock(&self) -> bool {
        self.lock_type.is_lock()
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
    /// Command names of the processes attached to (`--attach`): their samples are in the
    /// profile, their CPU time is not in the command's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<String>,
    /// The language runtimes of the traced processes, from what they mapped: a Go
    /// program, a HotSpot JVM, CPython, Node. Their waits are read as those runtimes' users
    /// know them (goroutines, monitors, the GIL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtimes: Vec<RuntimeSeen>,
    /// The traced repeats (`Repeat::index`) that ran with the hold-timing interposer
    /// preloaded; the point's first traced repeat runs without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hold_timed_repeats: Vec<u32>,
    /// What the interposer cost: the median throughput of the traced repeats that timed
    /// the holds over that of those that did not, − 1 (negative: slower). `None` unless
    /// the point has traced repeats of both kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_timing_cost: Option<f64>,
}

/// A language runtime and the process (command name) that ran it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RuntimeSeen {
    pub runtime: Runtime,
    pub process: String,
}

impl RuntimeSeen {
    /// The runtime as its users call it.
    pub fn title(&self) -> &str {
        self.runtime.title()
    }
}

/// A language runtime whose waits are read as its users know them. Written as one word
/// (`go`, `hotspot`, `cpython`, `node`), and ordered by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Runtime {
    Go,
    HotSpot,
    CPython,
    Node,
    /// One a newer build wrote, kept as written.
    Other(String),
}

impl Runtime {
    pub fn as_str(&self) -> &str {
        match self {
            Runtime::Go => "go",
            Runtime::HotSpot => "hotspot",
            Runtime::CPython => "cpython",
            Runtime::Node => "node",
            Runtime::Other(word) => word,
        }
    }

    pub fn parse(word: &str) -> Runtime {
        match word {
            "go" => Runtime::Go,
            "hotspot" => Runtime::HotSpot,
            "cpython" => Runtime::CPython,
            "node" => Runtime::Node,
            other => Runtime::Other(other.into()),
        }
    }

    /// The runtime as its users call it.
    pub fn title(&self) -> &str {
        match self {
            Runtime::Go => "Go",
            Runtime::HotSpot => "HotSpot JVM",
            Runtime::CPython => "CPython",
            Runtime::Node => "Node.js",
            Runtime::Other(word) => word,
        }
    }
}

impl PartialOrd for Runtime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Runtime {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Serialize for Runtime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Runtime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Runtime::parse(&String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_waits_and_unreadable_files_read_back_as_the_document_wrote_them() {
        let doc = r#"[{"wait":"table_lock","lock":true,"share":0.5},{"wait":"futex 0x7f00a0","lock":true,"share":0.25},{"wait":"fdatasync","lock":false,"share":0.125}]"#;
        let waits: Vec<HolderWait> = serde_json::from_str(doc).unwrap();
        let on: Vec<&HeldWait> = waits.iter().map(|w| &w.on).collect();
        assert_eq!(
            on,
            [
                &HeldWait::Lock("table_lock".into()),
                &HeldWait::Futex(0x7f00a0),
                &HeldWait::Syscall("fdatasync".into()),
            ]
        );
        assert_eq!(serde_json::to_string(&waits).unwrap(), doc);
        let files = r#"["/opt/app: not an ELF file","/usr/bin/z: its DWARF: inflates too far"]"#;
        let read: Vec<crate::Unreadable> = serde_json::from_str(files).unwrap();
        assert_eq!(
            read[1],
            crate::Unreadable::Dwarf {
                path: "/usr/bin/z".into(),
                why: "inflates too far".into()
            }
        );
        assert!(matches!(read[0], crate::Unreadable::File(_)));
        assert_eq!(serde_json::to_string(&read).unwrap(), files);
    }

    #[test]
    fn runtimes_and_experiment_kinds_write_back_as_the_document_had_them() {
        use crate::experiment::ExperimentKind;
        for word in ["go", "hotspot", "cpython", "node", "erlang"] {
            let read: Runtime = serde_json::from_value(serde_json::json!(word)).unwrap();
            assert_eq!(
                serde_json::to_value(&read).unwrap(),
                serde_json::json!(word)
            );
        }
        // Sorted by the word, as the strings were.
        let mut seen = [
            Runtime::Node,
            Runtime::Go,
            Runtime::CPython,
            Runtime::HotSpot,
        ];
        seen.sort();
        let words: Vec<&str> = seen.iter().map(Runtime::as_str).collect();
        assert_eq!(words, ["cpython", "go", "hotspot", "node"]);
        for word in [
            "lock",
            "kernel_lock",
            "syscall",
            "function",
            "false_sharing",
        ] {
            let read: ExperimentKind = serde_json::from_value(serde_json::json!(word)).unwrap();
            assert_eq!(
                serde_json::to_value(&read).unwrap(),
                serde_json::json!(word)
            );
        }
        assert_eq!(ExperimentKind::parse("syscall"), ExperimentKind::Syscall);
    }

    #[test]
    fn lock_kinds_read_back_as_written() {
        for text in [
            "spinlock",
            "rwlock",
            "rwlock:R",
            "rwsem:W",
            "percpu-rwsem:R",
            "mutex",
            "rtmutex",
            "lock",
            "pi-mutex",
            "condvar",
            "join",
            "barrier",
            "semaphore",
            "futex",
            "posix-lock",
            "flock",
            "sleep",
            "idle",
            "io",
            "syscall",
            "disk-io",
            "cpu-wait",
            "seqlock",
            "mutex:W",
        ] {
            assert_eq!(LockKind::from(text).to_string(), text);
        }
        assert_eq!(
            LockKind::from("rwsem:W"),
            LockKind::Rwsem(Some(Side::Write))
        );
        assert_eq!(LockKind::from("mutex:W"), LockKind::Other("mutex:W".into()));
        assert_eq!(LockKind::from("cpu-wait"), LockKind::CpuWait);
        let json = serde_json::to_string(&LockKind::PercpuRwsem(Some(Side::Read))).unwrap();
        assert_eq!(json, "\"percpu-rwsem:R\"");
        assert!(!LockKind::Condvar.is_lock() && LockKind::PiMutex.is_lock());
    }
}
