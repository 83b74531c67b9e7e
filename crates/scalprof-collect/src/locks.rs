//! The lock tracer: kernel lock contention and user futex waits of the workload's process
//! tree, aggregated in BPF maps (src/bpf/locks.bpf.c), plus a sample of user stack copies
//! for futex waits so that user space can name the caller of a contended mutex.
//!
//! The BPF object lives on a thread of its own for the duration of one execution: it is
//! loaded and attached before the workload execs, drains the snapshot ring buffer while the
//! workload runs, and reads the maps once the workload has exited.

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

use crate::exec::Attach;
use crate::CollectError;

#[allow(
    clippy::all,
    dead_code,
    non_camel_case_types,
    non_snake_case,
    unused_imports
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/locks.skel.rs"));
}
use skel::LocksSkelBuilder;

/// Kernel stack depth recorded per contention (matches STACK_DEPTH in the BPF program).
const STACK_DEPTH: usize = 32;

#[derive(Clone, Debug, Default)]
pub struct LockConfig {
    /// Trace every process, not only the workload's tree (`-a`).
    pub system_wide: bool,
    /// Have the kernel time every run of the tracer's BPF programs (`BPF_ENABLE_STATS`).
    pub bpf_stats: bool,
}

pub use scalprof_model::locks::{
    KernelLockRaw, LockFailures, ProcMap, RawLocks, StackSnapshot, TracerCost, UserLockRaw,
};

pub struct LockTracer {
    config: LockConfig,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<RawLocks>>,
    result: Option<RawLocks>,
}

impl LockTracer {
    pub fn new(config: LockConfig) -> LockTracer {
        LockTracer {
            config,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            result: None,
        }
    }

    pub fn take(&mut self) -> Option<RawLocks> {
        self.result.take()
    }
}

impl Attach for LockTracer {
    fn attach(&mut self, pid: i32) -> Result<(), CollectError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = self.stop.clone();
        let config = self.config.clone();
        let thread = std::thread::Builder::new()
            .name("scalprof-locks".into())
            .spawn(move || trace(pid as u32, &config, ready_tx, &stop))
            .map_err(|e| {
                CollectError::Locks(format!("cannot start the lock tracer thread: {e}"))
            })?;
        match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {
                self.thread = Some(thread);
                Ok(())
            }
            Ok(Err(msg)) => {
                let _ = thread.join();
                Err(CollectError::Locks(msg))
            }
            Err(_) => Err(CollectError::Locks(
                "the BPF lock tracer did not start in 30 s".into(),
            )),
        }
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            self.result = t.join().ok();
        }
    }
}

/// What to run to get BPF working, from what failed.
pub fn bpf_hint(err: &str) -> String {
    let mut hint = String::new();
    if err.contains("Operation not permitted") || err.contains("EPERM") {
        hint = "loading BPF programs needs root (or CAP_BPF and CAP_PERFMON)".into();
    } else if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        hint = "the kernel has no BTF (/sys/kernel/btf/vmlinux): a kernel built with CONFIG_DEBUG_INFO_BTF=y is needed".into();
    } else if err.contains("contention_begin") {
        hint = "the kernel lacks the lock:contention_begin tracepoint (Linux 5.19 or later)".into();
    }
    if hint.is_empty() {
        err.to_string()
    } else {
        format!("{err} ({hint}; or pass --no-locks)")
    }
}

fn trace(
    pid: u32,
    config: &LockConfig,
    ready: mpsc::Sender<Result<(), String>>,
    stop: &AtomicBool,
) -> RawLocks {
    let mut object = MaybeUninit::uninit();
    let loaded = load(&mut object, pid, config);
    let skel = match loaded {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(bpf_hint(&format!(
                "loading the BPF lock tracer failed: {e:#}"
            ))));
            return RawLocks::default();
        }
    };

    // BPF run-time statistics for as long as this fd is open: the tracer's own cost,
    // exactly. Opt-in: timing every program run adds two clock reads to each, which cost
    // 10% of CPU time on a program with millions of lock contentions. By default the
    // tracer's cost is what the sampler sees in its frames (`overhead_samples`).
    let stats = if config.bpf_stats {
        BpfStats::enable()
    } else {
        None
    };
    let snapshots: Rc<RefCell<Vec<(u32, u64, StackSnapshot)>>> = Rc::default();
    let wait_ends: Rc<RefCell<HashMap<(u32, u64), u64>>> = Rc::default();
    let maps: Rc<RefCell<HashMap<u32, Vec<ProcMap>>>> = Rc::default();
    let ring = {
        let snapshots = snapshots.clone();
        let wait_ends = wait_ends.clone();
        let maps = maps.clone();
        let mut b = RingBufferBuilder::new();
        match b.add(&skel.maps.snapshots, move |data: &[u8]| {
            match parse_record(data) {
                Some(Record::Snapshot {
                    tid,
                    start,
                    snapshot,
                }) => {
                    // Read the process's memory map while it is alive: the lock's
                    // address is named from it afterwards.
                    maps.borrow_mut()
                        .entry(snapshot.tgid)
                        .or_insert_with(|| read_proc_maps(snapshot.tgid));
                    snapshots.borrow_mut().push((tid, start, snapshot));
                }
                Some(Record::WaitEnd {
                    tid,
                    start,
                    wait_ns,
                }) => {
                    wait_ends.borrow_mut().insert((tid, start), wait_ns);
                }
                None => {}
            }
            0
        }) {
            Ok(_) => b.build(),
            Err(e) => Err(e),
        }
    };
    let ring = match ring {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot read the BPF ring buffer: {e}")));
            return RawLocks::default();
        }
    };
    let _ = ready.send(Ok(()));
    while !stop.load(Ordering::SeqCst) {
        // Short polls: the maps must be read after the exec and before the exit, and a
        // workload may live only tens of milliseconds.
        let _ = ring.poll(Duration::from_millis(10));
        // Keep the memory maps of the traced processes fresh while they live: a snapshot
        // may be read after its process has exited, and the maps die with it.
        let tgids: Vec<u32> = std::iter::once(pid)
            .chain(maps.borrow().keys().copied())
            .collect();
        for tgid in tgids {
            let m = read_proc_maps(tgid);
            if !m.is_empty() {
                maps.borrow_mut().insert(tgid, m);
            }
        }
    }
    let _ = ring.consume();
    drop(ring);

    // A copy's wait is known once its waiter ran again (a separate, later record).
    let ends = wait_ends.take();
    let snapshots = snapshots
        .take()
        .into_iter()
        .map(|(tid, start, mut s)| {
            s.wait_ns = ends.get(&(tid, start)).copied().unwrap_or(0);
            s
        })
        .collect();
    let mut out = RawLocks {
        snapshots,
        maps: maps.take(),
        ..Default::default()
    };
    let mut totals = Vec::new();
    for key in skel.maps.kernel_locks.keys() {
        let Ok(Some(val)) = skel.maps.kernel_locks.lookup(&key, MapFlags::ANY) else {
            continue;
        };
        let (Some(lock), Some(flags)) = (u64_at(&key, 0), u32_at(&key, 12)) else {
            continue;
        };
        totals.push(KernelLockRaw {
            lock,
            flags,
            stack: Vec::new(),
            count: u64_at(&val, 0).unwrap_or(0),
            total_ns: u64_at(&val, 8).unwrap_or(0),
            max_ns: u64_at(&val, 16).unwrap_or(0),
        });
    }
    let mut sampled = Vec::new();
    for key in skel.maps.kernel_stacks.keys() {
        let Ok(Some(val)) = skel.maps.kernel_stacks.lookup(&key, MapFlags::ANY) else {
            continue;
        };
        let (Some(lock), Some(stack_id), Some(flags)) =
            (u64_at(&key, 0), i32_at(&key, 8), u32_at(&key, 12))
        else {
            continue;
        };
        let stack = if stack_id >= 0 {
            skel.maps
                .stacks
                .lookup(&(stack_id as u32).to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .map(|b| {
                    (0..STACK_DEPTH)
                        .filter_map(|i| u64_at(&b, i * 8))
                        .take_while(|&a| a != 0)
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        sampled.push(KernelLockRaw {
            lock,
            flags,
            stack,
            count: u64_at(&val, 0).unwrap_or(0),
            total_ns: u64_at(&val, 8).unwrap_or(0),
            max_ns: u64_at(&val, 16).unwrap_or(0),
        });
    }
    out.kernel = spread_over_stacks(&totals, &sampled);
    for key in skel.maps.user_locks.keys() {
        let Ok(Some(val)) = skel.maps.user_locks.lookup(&key, MapFlags::ANY) else {
            continue;
        };
        let (Some(uaddr), Some(tgid), Some(op)) =
            (u64_at(&key, 0), u32_at(&key, 8), u32_at(&key, 12))
        else {
            continue;
        };
        out.user.push(UserLockRaw {
            uaddr,
            tgid,
            op,
            count: u64_at(&val, 0).unwrap_or(0),
            total_ns: u64_at(&val, 8).unwrap_or(0),
            max_ns: u64_at(&val, 16).unwrap_or(0),
        });
    }
    if let Some(bss) = skel.maps.bss_data.as_deref() {
        out.failures = LockFailures {
            task_map_full: bss.fail_task_map,
            stack_failures: bss.fail_stack,
            aggregation_map_full: bss.fail_agg_map,
            nested: bss.fail_nested,
            lost_snapshots: bss.lost_snapshots,
        };
    }
    if let Some(stats) = &stats {
        let progs = [
            skel.progs.on_fork.as_fd(),
            skel.progs.on_contention_begin.as_fd(),
            skel.progs.on_contention_end.as_fd(),
            skel.progs.on_switch.as_fd(),
        ];
        out.tracer = stats.read(&progs);
    }
    out
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
            .filter(|s| s.lock == t.lock && s.flags == t.flags && !s.stack.is_empty())
            .collect();
        let weight: u128 = mine.iter().map(|s| u128::from(s.total_ns.max(1))).sum();
        if mine.is_empty() || weight == 0 {
            out.push(t.clone());
            continue;
        }
        let longest = mine
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
            count_left -= count;
            ns_left -= total_ns;
            if count == 0 && total_ns == 0 {
                continue;
            }
            out.push(KernelLockRaw {
                lock: t.lock,
                flags: t.flags,
                stack: s.stack.clone(),
                count,
                total_ns,
                max_ns: if i == longest {
                    t.max_ns
                } else {
                    s.max_ns.min(t.max_ns)
                },
            });
        }
    }
    out
}

/// `bpf(BPF_ENABLE_STATS)`: the kernel times every BPF program run while the returned
/// descriptor is open (and stops when it closes, also if scalprof dies).
struct BpfStats(OwnedFd);

impl BpfStats {
    fn enable() -> Option<BpfStats> {
        // SAFETY: a plain system call wrapper; it returns a new descriptor or a negative errno.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        (fd >= 0).then(|| BpfStats(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Run time and run count summed over the given programs.
    fn read(&self, progs: &[BorrowedFd<'_>]) -> TracerCost {
        let _ = &self.0;
        let mut cost = TracerCost::default();
        for fd in progs {
            // SAFETY: bpf_prog_info is plain old data; zeroed is a valid value.
            let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
            // SAFETY: info is a valid, writable buffer of `len` bytes; fd is a program fd.
            let r = unsafe {
                libbpf_sys::bpf_prog_get_info_by_fd(
                    fd.as_raw_fd(),
                    (&mut info as *mut libbpf_sys::bpf_prog_info).cast(),
                    &mut len,
                )
            };
            if r == 0 {
                cost.bpf_run_ns += info.run_time_ns;
                cost.bpf_runs += info.run_cnt;
            }
        }
        cost
    }
}

fn load<'obj>(
    object: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    pid: u32,
    config: &LockConfig,
) -> Result<skel::LocksSkel<'obj>, libbpf_rs::Error> {
    let mut open = LocksSkelBuilder::default().open(object)?;
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.root_tgid = pid;
        ro.system_wide = u8::from(config.system_wide);
    }
    let mut skel = open.load()?;
    skel.maps
        .tracked
        .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)?;
    skel.attach()?;
    Ok(skel)
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    Some(i32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// A record of the snapshot ring buffer.
enum Record {
    /// `struct snapshot`: a user stack copied as a waiter blocked.
    Snapshot {
        tid: u32,
        start: u64,
        snapshot: StackSnapshot,
    },
    /// `struct wait_end`: that waiter ran again.
    WaitEnd { tid: u32, start: u64, wait_ns: u64 },
}

/// Size of `struct wait_end`; snapshots are larger.
const WAIT_END_SIZE: usize = 24;

fn parse_record(d: &[u8]) -> Option<Record> {
    if d.len() == WAIT_END_SIZE {
        return Some(Record::WaitEnd {
            start: u64_at(d, 0)?,
            wait_ns: u64_at(d, 8)?,
            tid: u32_at(d, 16)?,
        });
    }
    let len = u32_at(d, 48)? as usize;
    Some(Record::Snapshot {
        tid: u32_at(d, 44)?,
        start: u64_at(d, 8)?,
        snapshot: StackSnapshot {
            uaddr: u64_at(d, 0)?,
            wait_ns: 0,
            ip: u64_at(d, 16)?,
            sp: u64_at(d, 24)?,
            bp: u64_at(d, 32)?,
            tgid: u32_at(d, 40)?,
            stack: d.get(56..56 + len)?.to_vec(),
        },
    })
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
            let _dev = it.next()?;
            let _inode = it.next()?;
            let path = it.collect::<Vec<_>>().join(" ");
            let (a, b) = range.split_once('-')?;
            Some(ProcMap {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                executable: perms.contains('x'),
                path,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(lock: u64, stack: &[u64], count: u64, total_ns: u64, max_ns: u64) -> KernelLockRaw {
        KernelLockRaw {
            lock,
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
    fn ring_records_are_told_apart_by_size() {
        let mut end = vec![0u8; WAIT_END_SIZE];
        end[0..8].copy_from_slice(&77u64.to_ne_bytes());
        end[8..16].copy_from_slice(&5000u64.to_ne_bytes());
        end[16..20].copy_from_slice(&42u32.to_ne_bytes());
        assert!(matches!(
            parse_record(&end),
            Some(Record::WaitEnd {
                tid: 42,
                start: 77,
                wait_ns: 5000
            })
        ));
        let mut snap = vec![0u8; 56 + 16];
        snap[0..8].copy_from_slice(&0x1000u64.to_ne_bytes());
        snap[8..16].copy_from_slice(&77u64.to_ne_bytes());
        snap[40..44].copy_from_slice(&7u32.to_ne_bytes());
        snap[44..48].copy_from_slice(&42u32.to_ne_bytes());
        snap[48..52].copy_from_slice(&16u32.to_ne_bytes());
        match parse_record(&snap) {
            Some(Record::Snapshot {
                tid,
                start,
                snapshot,
            }) => {
                assert_eq!(
                    (tid, start, snapshot.uaddr, snapshot.tgid),
                    (42, 77, 0x1000, 7)
                );
                assert_eq!(snapshot.stack.len(), 16);
            }
            _ => panic!("not a snapshot"),
        }
        // A copy claiming more bytes than it carries is dropped, not read past its end.
        snap[48..52].copy_from_slice(&4096u32.to_ne_bytes());
        assert!(parse_record(&snap).is_none());
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
