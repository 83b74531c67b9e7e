//! The lock tracer: kernel lock contention and user futex waits of the workload's process
//! tree, aggregated in BPF maps (src/bpf/locks.bpf.c), plus a sample of user stack copies
//! for futex waits so that user space can name the caller of a contended mutex.
//!
//! The BPF object lives on a thread of its own for the duration of one execution: it is
//! loaded and attached before the workload execs, drains the snapshot ring buffer while the
//! workload runs, and reads the maps once the workload has exited.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::exec::Attach;
use crate::{CollectError, LockTracerError};

/// The BPF side: loading, attaching and reading the programs of src/bpf/locks.bpf.c.
#[cfg(feature = "bpf")]
mod bpf;
mod resident;

pub use resident::{ResidentTracer, ResidentWindow};

#[derive(Clone, Debug)]
pub struct LockConfig {
    /// Trace every process, not only the workload's tree (`-a`).
    pub system_wide: bool,
    /// Have the kernel time every run of the tracer's BPF programs (`BPF_ENABLE_STATS`),
    /// not only in windows (`bpf::timing`).
    pub bpf_stats: bool,
    /// Time the user locks' holds with the interposer preloaded into the traced repeats.
    pub hold_times: bool,
    /// Entry probes on the Go runtime of the workload's Go executables: where goroutines
    /// park on and are woken from sync's semaphores. Empty: none (not a Go program).
    pub go_probes: Vec<GoProbe>,
    /// The probes of a Go program that a traced process executes (behind `sh -c`, a
    /// script): asked for each program executed in the tree whose file is not probed yet.
    /// None: only `go_probes`.
    pub go_probes_of: Option<GoProbesOf>,
}

/// What the probes of an executable are (none unless it is a Go program): the pipeline's
/// reading of its symbols, handed to the tracer.
#[derive(Clone)]
pub struct GoProbesOf(pub Arc<GoProbesFn>);

/// The function behind [`GoProbesOf`].
pub type GoProbesFn = dyn Fn(&std::path::Path) -> Vec<GoProbe> + Send + Sync;

impl std::fmt::Debug for GoProbesOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GoProbesOf")
    }
}

/// One uprobe on a Go executable's runtime, at a function's entry (file offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoProbe {
    pub exe: std::path::PathBuf,
    pub offset: u64,
    pub role: GoProbeRole,
}

/// What a Go runtime probe sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoProbeRole {
    /// A sync acquire's slow path parks the goroutine: the wrapper that sync calls, with
    /// the kind of primitive it serves (the cookie of `enum go_sema_kind`).
    Acquire(u32),
    /// `runtime.semrelease1`: a goroutine releases a semaphore (and readies a waiter).
    Release,
    /// `runtime.ready`: a goroutine is made runnable again.
    Ready,
    /// `runtime.execute`: a goroutine runs again.
    Execute,
    /// A call of gopark inside a channel operation or `sync.Cond.Wait` (the probe is on
    /// the call instruction), with the kind it parks for (`enum go_sema_kind`: 6 to 9).
    Park(u32),
    /// A hand-off that readies a goroutine parked on a channel or a `sync.Cond`, with its
    /// kind (`enum go_handoff_kind`).
    Handoff(u32),
}

/// The Go runtime's functions the probes go on, by symbol: the acquire wrappers (their
/// name in sync before Go 1.24 and in internal/sync after), with the cookie of the kind
/// each serves, the release and the wakeup.
pub const GO_PROBE_SYMBOLS: &[(&str, GoProbeRole)] = &[
    ("sync.runtime_SemacquireMutex", GoProbeRole::Acquire(1)),
    (
        "internal/sync.runtime_SemacquireMutex",
        GoProbeRole::Acquire(1),
    ),
    ("sync.runtime_SemacquireRWMutexR", GoProbeRole::Acquire(2)),
    ("sync.runtime_SemacquireRWMutex", GoProbeRole::Acquire(3)),
    ("sync.runtime_SemacquireWaitGroup", GoProbeRole::Acquire(4)),
    ("sync.runtime_Semacquire", GoProbeRole::Acquire(5)),
    ("runtime.semrelease1", GoProbeRole::Release),
    ("runtime.ready", GoProbeRole::Ready),
    ("runtime.execute", GoProbeRole::Execute),
    ("runtime.send", GoProbeRole::Handoff(1)),
    ("runtime.recv", GoProbeRole::Handoff(2)),
    ("runtime.closechan", GoProbeRole::Handoff(3)),
    ("sync.runtime_notifyListNotifyOne", GoProbeRole::Handoff(4)),
    ("sync.runtime_notifyListNotifyAll", GoProbeRole::Handoff(4)),
];

/// The Go runtime's functions that park a goroutine on a channel or a `sync.Cond`, with
/// the kind each parks for: their calls of gopark (or goparkunlock) get the probes.
pub const GO_PARK_SITES: &[(&str, u32)] = &[
    ("runtime.chanrecv", 6),
    ("runtime.chansend", 7),
    ("runtime.selectgo", 8),
    ("sync.runtime_notifyListWait", 9),
];

/// What the runtime's park functions call to park.
pub const GO_PARK_CALLEES: &[&str] = &["runtime.gopark", "runtime.goparkunlock"];

impl Default for LockConfig {
    /// The workload's tree, no BPF statistics, the holds timed.
    fn default() -> Self {
        LockConfig {
            system_wide: false,
            bpf_stats: false,
            hold_times: true,
            go_probes: Vec::new(),
            go_probes_of: None,
        }
    }
}

pub use scalprof_model::locks::{
    GoWaitRaw, KernelLockRaw, LockFailures, ProcMap, RawLocks, StackSnapshot, TracerCost,
    UserLockRaw,
};

pub struct LockTracer {
    config: LockConfig,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<RawLocks>>,
    result: Option<RawLocks>,
    /// Set when the tracer thread panicked: what it aggregated is gone.
    panicked: bool,
}

impl LockTracer {
    pub fn new(config: LockConfig) -> LockTracer {
        LockTracer {
            config,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            result: None,
            panicked: false,
        }
    }

    pub fn take(&mut self) -> Option<RawLocks> {
        self.result.take()
    }

    /// Why this repeat's lock data was lost, if it was.
    pub fn lost(&self) -> Option<String> {
        self.panicked
            .then(|| "the lock tracer's thread panicked: this repeat has no lock table".into())
    }
}

impl Attach for LockTracer {
    fn attach(&mut self, pid: i32, attached: &[i32]) -> Result<(), CollectError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = self.stop.clone();
        let config = self.config.clone();
        // The command's tree and the attached processes' trees are traced alike.
        let tgids: Vec<u32> = std::iter::once(pid)
            .chain(attached.iter().copied())
            .map(|p| p as u32)
            .collect();
        let thread = std::thread::Builder::new()
            .name("scalprof-locks".into())
            .spawn(move || trace(&tgids, &config, ready_tx, &stop))
            .map_err(LockTracerError::Thread)?;
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {
                self.thread = Some(thread);
                Ok(())
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e.into())
            }
            Err(_) => Err(LockTracerError::Timeout.into()),
        }
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let joined = t.join();
            self.panicked = joined.is_err();
            self.result = joined.ok();
        }
    }
}

#[cfg(feature = "bpf")]
use bpf::trace;

/// Without the `bpf` feature there is no tracer: say so, and how to get one.
#[cfg(not(feature = "bpf"))]
fn trace(
    _tgids: &[u32],
    _config: &LockConfig,
    ready: mpsc::Sender<Result<(), LockTracerError>>,
    _stop: &AtomicBool,
) -> RawLocks {
    let _ = ready.send(Err(LockTracerError::NotBuilt));
    RawLocks::default()
}

/// Why BPF would not load: from the error's kind (EPERM/EACCES), the kernel's BTF, and
/// libbpf naming the tracepoint it could not attach to.
pub fn bpf_cause(permission_denied: bool, message: &str) -> crate::BpfCause {
    use crate::BpfCause;
    if permission_denied {
        BpfCause::Permission
    } else if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        BpfCause::NoBtf
    } else if message.contains("contention_begin") || message.contains("contention_end") {
        BpfCause::NoTracepoint
    } else {
        BpfCause::Other
    }
}

/// Exact per-lock totals, split over the caller stacks sampled for that lock in
/// proportion to the sampled wait: counts and wait times sum to the exact totals, each
/// stack gets its share, the lock's maximum goes to the stack that saw the longest wait.
/// A lock with no usable sampled stack keeps one row with an empty stack.
pub fn spread_over_stacks(
    totals: &[KernelLockRaw],
    sampled: &[KernelLockRaw],
) -> Vec<KernelLockRaw> {
    let mut out = Vec::new();
    for t in totals {
        let mine: Vec<&KernelLockRaw> = sampled
            .iter()
            .filter(|s| {
                s.lock == t.lock && s.flags == t.flags && s.tgid == t.tgid && !s.stack.is_empty()
            })
            .collect();
        let weight: u128 = mine.iter().map(|s| u128::from(s.total_ns.max(1))).sum();
        if mine.is_empty() || weight == 0 {
            out.push(t.clone());
            continue;
        }
        let mut longest = mine
            .iter()
            .enumerate()
            .max_by_key(|(_, s)| s.max_ns)
            .map_or(0, |(i, _)| i);
        let (mut count_left, mut ns_left) = (t.count, t.total_ns);
        for (i, s) in mine.iter().enumerate() {
            let w = u128::from(s.total_ns.max(1));
            let (count, total_ns) = if i + 1 == mine.len() {
                (count_left, ns_left)
            } else {
                (
                    (u128::from(t.count) * w / weight) as u64,
                    (u128::from(t.total_ns) * w / weight) as u64,
                )
            };
            let (count, total_ns) = (count.min(count_left), total_ns.min(ns_left));
            // A stack whose share rounds to no wait gets none, and its time stays with
            // the rest (the last stack always gets at least one wait): a row of no wait
            // and some time would break max ≥ total / count wherever rows are summed.
            if count == 0 {
                if i == longest {
                    longest = mine.len() - 1;
                }
                continue;
            }
            count_left -= count;
            ns_left -= total_ns;
            out.push(KernelLockRaw {
                lock: t.lock,
                tgid: t.tgid,
                flags: t.flags,
                stack: s.stack.clone(),
                count,
                total_ns,
                // A stack's share of the totals is an estimate: the unsampled waits it
                // stands for may be longer than its sampled ones, so its maximum is at
                // least its average (the lock's own maximum caps neither).
                max_ns: if i == longest {
                    t.max_ns
                } else {
                    s.max_ns.min(t.max_ns)
                }
                .max(total_ns.checked_div(count).unwrap_or(0)),
            });
        }
    }
    out
}

#[cfg_attr(not(feature = "bpf"), allow(dead_code))]
pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// A process's mappings, read again: the new read wins where ranges overlap, and what
/// only the earlier read had is kept. A read while the process exits can list only part
/// of its mappings (the kernel tears them down as the file is read), and replacing the
/// map with it lost libc and the thread stacks, so no stack copy could be unwound. After
/// an exec (another main executable) the old mappings are dropped.
pub fn merge_maps(old: Vec<ProcMap>, new: Vec<ProcMap>) -> Vec<ProcMap> {
    let main = |maps: &[ProcMap]| {
        maps.iter()
            .find(|m| m.path.starts_with('/'))
            .map(|m| m.path.clone())
    };
    if old.is_empty() || main(&old) != main(&new) {
        return new;
    }
    let mut out = new;
    let kept: Vec<ProcMap> = old
        .into_iter()
        .filter(|o| !out.iter().any(|n| n.start < o.end && o.start < n.end))
        .collect();
    out.extend(kept);
    out.sort_by_key(|m| m.start);
    out
}

/// Parses /proc/PID/maps (empty if the process is gone).
pub fn read_proc_maps(pid: u32) -> Vec<ProcMap> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    parse_proc_maps(&text)
}

pub fn parse_proc_maps(text: &str) -> Vec<ProcMap> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let (range, perms, offset) = (it.next()?, it.next()?, it.next()?);
            // The device is major:minor in hex, as the kernel prints it.
            let (major, minor) = it.next()?.split_once(':')?;
            let inode = it.next()?.parse().ok()?;
            let path = it.collect::<Vec<_>>().join(" ");
            let (a, b) = range.split_once('-')?;
            Some(ProcMap {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                executable: perms.contains('x'),
                path,
                dev: (
                    u32::from_str_radix(major, 16).ok()?,
                    u32::from_str_radix(minor, 16).ok()?,
                ),
                inode,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_read_of_the_maps_keeps_what_the_earlier_read_saw() {
        let maps = |text: &str| parse_proc_maps(text);
        let full = maps(
            "55d0-55d1 r-xp 0 08:01 1 /usr/bin/app\n\
             7f00-7f10 r-xp 0 08:01 2 /usr/lib/libc.so.6\n\
             7f20-7f30 rw-p 0 00:00 0 \n",
        );
        // The device (hex major:minor) and inode: what the file opened must be.
        assert_eq!((full[1].dev, full[1].inode), ((8, 1), 2));
        assert_eq!(maps("1-2 r-xp 0 fe:1a 7 /x")[0].dev, (0xfe, 0x1a));
        // Mid-exit: libc already gone from the listing, the binary still there.
        let partial = maps("55d0-55d1 r-xp 0 08:01 1 /usr/bin/app\n");
        let merged = merge_maps(full.clone(), partial);
        assert_eq!(merged, full);
        // A new mapping over an old range replaces it.
        let remapped =
            maps("55d0-55d1 r-xp 0 08:01 1 /usr/bin/app\n7f20-7f28 r--p 0 08:01 3 /data/file\n");
        let merged = merge_maps(full.clone(), remapped);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged[2].path, "/data/file");
        // After an exec, the earlier program's mappings are gone.
        let exec = maps("5600-5601 r-xp 0 08:01 9 /usr/bin/other\n");
        assert_eq!(merge_maps(full, exec.clone()), exec);
    }

    fn raw(lock: u64, stack: &[u64], count: u64, total_ns: u64, max_ns: u64) -> KernelLockRaw {
        KernelLockRaw {
            lock,
            tgid: 1,
            flags: 0,
            stack: stack.to_vec(),
            count,
            total_ns,
            max_ns,
        }
    }

    #[test]
    fn sampled_stacks_share_the_exact_totals() {
        // 1000 contentions of lock 1, of which 30 sampled on stack A and 10 on stack B.
        let totals = [
            raw(1, &[], 1000, 4_000_000, 90_000),
            raw(2, &[], 5, 500, 200),
        ];
        let sampled = [
            raw(1, &[0xa], 30, 300_000, 50_000),
            raw(1, &[0xb], 10, 100_000, 20_000),
        ];
        let out = spread_over_stacks(&totals, &sampled);
        let lock1: Vec<&KernelLockRaw> = out.iter().filter(|k| k.lock == 1).collect();
        assert_eq!(lock1.len(), 2);
        assert_eq!(lock1.iter().map(|k| k.count).sum::<u64>(), 1000);
        assert_eq!(lock1.iter().map(|k| k.total_ns).sum::<u64>(), 4_000_000);
        assert_eq!(lock1[0].stack, vec![0xa]);
        assert_eq!(lock1[0].count, 750);
        assert_eq!(lock1[0].max_ns, 90_000, "the lock's maximum stays exact");
        // A lock without a sampled stack keeps its totals, stackless.
        let lock2: Vec<&KernelLockRaw> = out.iter().filter(|k| k.lock == 2).collect();
        assert_eq!(lock2.len(), 1);
        assert_eq!((lock2[0].count, lock2[0].total_ns), (5, 500));
        assert!(lock2[0].stack.is_empty());
    }

    #[test]
    fn a_stack_given_more_than_its_sampled_waits_has_its_maximum_above_its_average() {
        // 3 contentions of 11.5 µs in all; the only sampled waits were short ones (171 ns
        // at most on stack A): a stack's estimated average must not exceed its maximum.
        let totals = [raw(1, &[], 3, 34_000, 20_000)];
        let sampled = [raw(1, &[0xa], 1, 171, 171), raw(1, &[0xb], 1, 200, 200)];
        let out = spread_over_stacks(&totals, &sampled);
        assert_eq!(out.iter().map(|k| k.count).sum::<u64>(), 3);
        for k in &out {
            assert!(k.max_ns >= k.total_ns / k.count.max(1), "{k:?}");
        }
        assert_eq!(out.iter().map(|k| k.max_ns).max(), Some(20_000));
    }

    #[test]
    fn a_lock_of_fewer_waits_than_stacks_keeps_its_numbers_in_agreement() {
        // One wait of 21.5 µs, sampled on two stacks (as a kernel rwsem was in CI): no
        // stack may get time without a wait, and the lock's maximum stays with one.
        let totals = [raw(1, &[], 1, 21_553, 21_553)];
        let sampled = [
            raw(1, &[0xa], 1, 415, 415),
            raw(1, &[0xb], 1, 21_138, 21_138),
        ];
        let out = spread_over_stacks(&totals, &sampled);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (out[0].count, out[0].total_ns, out[0].max_ns),
            (1, 21_553, 21_553)
        );
        // The heavier stack first, rounding to no wait: the other keeps all.
        let sampled = [
            raw(1, &[0xb], 1, 21_138, 21_138),
            raw(1, &[0xa], 1, 415, 415),
        ];
        let out = spread_over_stacks(&totals, &sampled);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (out[0].count, out[0].total_ns, out[0].max_ns),
            (1, 21_553, 21_553)
        );
    }

    #[test]
    fn proc_maps_lines_parse() {
        let m = parse_proc_maps(
            "55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 123 /tmp/prog\n\
             55d0c0a01000-55d0c0a02000 r-xp 00001000 fd:01 123 /tmp/prog\n\
             7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n",
        );
        assert_eq!(m.len(), 4);
        assert!(m[1].executable && !m[0].executable);
        assert_eq!(m[1].offset, 0x1000);
        assert_eq!(m[2].path, "[stack]");
        assert_eq!(m[3].path, "");
    }

    #[test]
    fn our_own_maps_are_readable() {
        let m = read_proc_maps(std::process::id());
        assert!(m
            .iter()
            .any(|e| e.executable && e.path.contains("scalprof")));
    }
}
