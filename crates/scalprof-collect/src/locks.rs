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
}

pub use scalprof_model::locks::{
    KernelLockRaw, LockFailures, ProcMap, RawLocks, StackSnapshot, UserLockRaw,
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

    let snapshots: Rc<RefCell<Vec<StackSnapshot>>> = Rc::default();
    let maps: Rc<RefCell<HashMap<u32, Vec<ProcMap>>>> = Rc::default();
    let ring = {
        let snapshots = snapshots.clone();
        let maps = maps.clone();
        let mut b = RingBufferBuilder::new();
        match b.add(&skel.maps.snapshots, move |data: &[u8]| {
            if let Some(s) = parse_snapshot(data) {
                // Read the process's memory map while it is alive: the lock's address
                // is named from it afterwards.
                maps.borrow_mut()
                    .entry(s.tgid)
                    .or_insert_with(|| read_proc_maps(s.tgid));
                snapshots.borrow_mut().push(s);
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

    let mut out = RawLocks {
        snapshots: snapshots.take(),
        maps: maps.take(),
        ..Default::default()
    };
    for key in skel.maps.kernel_locks.keys() {
        let Ok(Some(val)) = skel.maps.kernel_locks.lookup(&key, MapFlags::ANY) else {
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
        out.kernel.push(KernelLockRaw {
            lock,
            flags,
            stack,
            count: u64_at(&val, 0).unwrap_or(0),
            total_ns: u64_at(&val, 8).unwrap_or(0),
            max_ns: u64_at(&val, 16).unwrap_or(0),
        });
    }
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
    out
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

/// `struct snapshot` of the BPF program.
fn parse_snapshot(d: &[u8]) -> Option<StackSnapshot> {
    let len = u32_at(d, 48)? as usize;
    Some(StackSnapshot {
        uaddr: u64_at(d, 0)?,
        wait_ns: u64_at(d, 8)?,
        ip: u64_at(d, 16)?,
        sp: u64_at(d, 24)?,
        bp: u64_at(d, 32)?,
        tgid: u32_at(d, 40)?,
        stack: d.get(56..56 + len)?.to_vec(),
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
