//! The tracer thread while the workload runs: the snapshot ring buffer drained in short
//! rounds, the traced processes' memory maps and the files their waits block on read
//! while they still exist.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};

use super::decode;
use super::skel::types::{exec_event, record_kind, snapshot, ukey, wait_end, wait_kind};
use super::skel::LocksMaps;
use crate::locks::{merge_maps, read_proc_maps, ProcMap, StackSnapshot};

/// A record of the snapshot ring buffer.
enum Record {
    /// `struct snapshot`: a user stack copied as a waiter blocked.
    Snapshot {
        tid: u32,
        start: u64,
        snapshot: StackSnapshot,
    },
    /// `struct wait_end`: that waiter's wait ended.
    WaitEnd { tid: u32, start: u64, wait_ns: u64 },
    /// `struct exec_event`: a traced process executed a program.
    Exec { tgid: u32 },
}

/// A record is told apart by its first field (`enum record_kind`, shared with the BPF
/// program through its BTF); one of an unknown kind, of the wrong size for its kind, or a
/// copy claiming more bytes than it has is dropped.
fn parse_record(d: &[u8]) -> Option<Record> {
    let kind = record_kind(u32::from_ne_bytes(d.get(..4)?.try_into().ok()?));
    if kind == record_kind::RECORD_EXEC {
        let e = decode::<exec_event>(d)?;
        return Some(Record::Exec { tgid: e.tgid });
    }
    if kind == record_kind::RECORD_WAIT_END {
        let e = decode::<wait_end>(d)?;
        return Some(Record::WaitEnd {
            tid: e.tid,
            start: e.start,
            wait_ns: e.wait_ns,
        });
    }
    if ![
        record_kind::RECORD_WAITER_STACK,
        record_kind::RECORD_SYSCALL_STACK,
        record_kind::RECORD_WAKER_STACK,
        record_kind::RECORD_WAKER_SYSCALL,
    ]
    .contains(&kind)
    {
        return None;
    }
    let s = decode::<snapshot>(d)?;
    Some(Record::Snapshot {
        tid: s.tid,
        start: s.start,
        snapshot: StackSnapshot {
            uaddr: s.uaddr,
            tgid: s.tgid,
            op: s.op,
            syscall: kind == record_kind::RECORD_SYSCALL_STACK
                || kind == record_kind::RECORD_WAKER_SYSCALL,
            waker: (kind == record_kind::RECORD_WAKER_STACK
                || kind == record_kind::RECORD_WAKER_SYSCALL)
                .then_some(s.waker_tid),
            tid: s.tid,
            waiter_tgid: s.waiter_tgid,
            start: s.start,
            holder_blocked: (s.waker_tid != 0 && s.holder_blocked_ns > 0).then_some(
                scalprof_model::locks::HolderBlocked {
                    ns: s.holder_blocked_ns,
                    syscall: wait_kind(s.holder_blocked_kind) == wait_kind::WAIT_SYSCALL,
                    op: s.holder_blocked_op,
                    uaddr: s.holder_blocked_uaddr,
                },
            ),
            wait_ns: 0,
            ip: s.ip,
            sp: s.sp,
            bp: s.bp,
            stack: s.stack.get(..s.len as usize)?.to_vec(),
            comm: {
                let bytes: Vec<u8> = s
                    .comm
                    .iter()
                    .map(|&b| b as u8)
                    .take_while(|&b| b != 0)
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            },
        },
    })
}

/// How often the traced processes' memory maps are read again while they run.
const MAPS_REFRESH: Duration = Duration::from_millis(100);

/// Whether an address lies in one of the mappings.
fn covers(maps: &[ProcMap], addr: u64) -> bool {
    maps.iter().any(|m| addr >= m.start && addr < m.end)
}

/// What the ring buffer brought in, with the memory maps read for its copies.
#[derive(Default)]
struct Received {
    /// The stack copies by (waiter's tid, wait's start), their waits not yet known.
    snapshots: Vec<(u32, u64, StackSnapshot)>,
    /// The waits that ended, by (waiter's tid, wait's start).
    wait_ends: HashMap<(u32, u64), u64>,
    /// The traced processes' memory maps, by tgid.
    maps: HashMap<u32, Vec<ProcMap>>,
    /// The processes that executed a program since the last round.
    execs: Vec<u32>,
}

impl Received {
    /// Takes one ring record in: a stack copy, or the end of a copied wait.
    fn add_record(&mut self, data: &[u8]) {
        match parse_record(data) {
            Some(Record::Snapshot {
                tid,
                start,
                snapshot,
            }) => {
                // Read the process's memory map while it is alive: the lock's address and
                // the copy's frames are named from it afterwards. Read again at once when
                // the copy points outside what is known (a new thread's stack, a library
                // loaded since).
                let known = self
                    .maps
                    .get(&snapshot.tgid)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let mut wanted = vec![snapshot.ip, snapshot.sp];
                if !snapshot.syscall {
                    wanted.push(snapshot.uaddr);
                }
                if !wanted.iter().all(|&a| covers(known, a)) {
                    self.refresh(snapshot.tgid);
                }
                self.snapshots.push((tid, start, snapshot));
            }
            Some(Record::WaitEnd {
                tid,
                start,
                wait_ns,
            }) => {
                self.wait_ends.insert((tid, start), wait_ns);
            }
            Some(Record::Exec { tgid }) => self.execs.push(tgid),
            None => {}
        }
    }

    /// Reads a process's memory map again, merged into what was known of it (which stays
    /// when the process is gone).
    fn refresh(&mut self, tgid: u32) {
        let fresh = read_proc_maps(tgid);
        if !fresh.is_empty() {
            let merged = merge_maps(self.maps.remove(&tgid).unwrap_or_default(), fresh);
            self.maps.insert(tgid, merged);
        }
    }

    /// The stack copies, each with its wait: known once its waiter ran again (a
    /// separate, later record).
    fn timed_snapshots(&mut self) -> Vec<StackSnapshot> {
        let ends = std::mem::take(&mut self.wait_ends);
        std::mem::take(&mut self.snapshots)
            .into_iter()
            .map(|(tid, start, mut s)| {
                s.wait_ns = ends.get(&(tid, start)).copied().unwrap_or(0);
                s
            })
            .collect()
    }
}

/// What the drain saw while the workload ran.
pub(super) struct Drained {
    pub snapshots: Vec<StackSnapshot>,
    pub maps: HashMap<u32, Vec<ProcMap>>,
    pub fd_paths: HashMap<(u32, u64), String>,
}

/// The ring buffer of stack copies and what the tracer reads of the traced processes
/// while they live.
pub(super) struct Drain<'a> {
    ring: RingBuffer<'a>,
    /// Filled by the ring buffer's callback.
    received: Rc<RefCell<Received>>,
    /// The blocking system calls seen so far, whose file descriptors are named.
    syscall_waits: &'a dyn MapCore,
    /// The processes traced from the start.
    tgids: &'a [u32],
    fd_paths: HashMap<(u32, u64), String>,
    /// When the memory maps were last read.
    refreshed: Instant,
    /// Told of each process that executed a program, and of each round (the Go probes'
    /// watch).
    watch: &'a mut dyn DrainWatch,
}

/// What the drain tells as it goes.
pub(super) trait DrainWatch {
    /// A traced process executed a program.
    fn exec(&mut self, tgid: u32);
    /// A round of the drain ended (every 10 ms or so).
    fn round(&mut self);
}

impl<'a> Drain<'a> {
    /// Opens the ring buffer of the loaded programs' maps.
    pub fn new(
        maps: &'a LocksMaps<'_>,
        tgids: &'a [u32],
        watch: &'a mut dyn DrainWatch,
    ) -> Result<Self, libbpf_rs::Error> {
        let received = Rc::<RefCell<Received>>::default();
        let sink = received.clone();
        let mut b = RingBufferBuilder::new();
        b.add(&maps.snapshots, move |data: &[u8]| {
            sink.borrow_mut().add_record(data);
            0
        })?;
        Ok(Drain {
            ring: b.build()?,
            received,
            syscall_waits: &maps.syscall_waits,
            tgids,
            fd_paths: HashMap::new(),
            refreshed: Instant::now() - MAPS_REFRESH,
            watch,
        })
    }

    /// Drains in rounds until told to stop, then once more.
    pub fn run(mut self, stop: &AtomicBool) -> Drained {
        while !stop.load(Ordering::SeqCst) {
            self.poll();
        }
        let _ = self.ring.consume();
        drop(self.ring);
        let mut received = self.received.take();
        Drained {
            snapshots: received.timed_snapshots(),
            maps: received.maps,
            fd_paths: self.fd_paths,
        }
    }

    /// One round: the records of the last 10 ms, the memory maps when they are due, the
    /// files waited on.
    fn poll(&mut self) {
        // Short rounds: the maps must be read after the exec and before the exit, and a
        // workload may live only tens of milliseconds. The BPF side does not wake this
        // thread per record (that cost the workload a context switch per copy): it
        // drains the ring buffer each round.
        std::thread::sleep(Duration::from_millis(10));
        let _ = self.ring.consume();
        let execs = std::mem::take(&mut self.received.borrow_mut().execs);
        for tgid in execs {
            self.watch.exec(tgid);
        }
        self.watch.round();
        // Keep the memory maps of the traced processes fresh while they live (a copy may
        // be read after its process has exited, and the maps die with it), but not at
        // every round: reading a process's maps takes its mmap_lock, and every 10 ms cost
        // a Python program that maps and unmaps arenas 15% of its throughput.
        if self.refreshed.elapsed() >= MAPS_REFRESH {
            self.refreshed = Instant::now();
            let mut received = self.received.borrow_mut();
            let tgids: Vec<u32> = self
                .tgids
                .iter()
                .copied()
                .chain(received.maps.keys().copied())
                .collect();
            for tgid in tgids {
                received.refresh(tgid);
            }
        }
        self.name_files();
    }

    /// Names the files the blocking calls waited on, while they are open.
    fn name_files(&mut self) {
        for key in self.syscall_waits.keys() {
            let Some(k) = decode::<ukey>(&key) else {
                continue;
            };
            if scalprof_model::locks::is_fd_syscall(k.op)
                && !self.fd_paths.contains_key(&(k.tgid, k.uaddr))
            {
                if let Ok(path) = std::fs::read_link(format!("/proc/{}/fd/{}", k.tgid, k.uaddr)) {
                    self.fd_paths
                        .insert((k.tgid, k.uaddr), path.display().to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::bpf::Plain;

    fn bytes<T: Plain>(v: &T) -> Vec<u8> {
        // SAFETY: T is plain integers (`Plain`), so all of its bytes are initialized.
        unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        }
        .to_vec()
    }

    #[test]
    fn ring_records_are_told_apart_by_kind() {
        let end = wait_end {
            kind: record_kind::RECORD_WAIT_END.0,
            start: 77,
            wait_ns: 5000,
            tid: 42,
        };
        assert!(matches!(
            parse_record(&bytes(&end)),
            Some(Record::WaitEnd {
                tid: 42,
                start: 77,
                wait_ns: 5000
            })
        ));
        let mut snap = snapshot {
            uaddr: 0x1000,
            start: 77,
            tgid: 7,
            tid: 42,
            len: 16,
            op: 35,
            kind: record_kind::RECORD_SYSCALL_STACK.0,
            ..Default::default()
        };
        match parse_record(&bytes(&snap)) {
            Some(Record::Snapshot {
                tid,
                start,
                snapshot,
            }) => {
                assert_eq!(
                    (tid, start, snapshot.uaddr, snapshot.tgid, snapshot.op),
                    (42, 77, 0x1000, 7, 35)
                );
                assert!(snapshot.syscall);
                assert_eq!(snapshot.stack.len(), 16);
            }
            _ => panic!("not a snapshot"),
        }
        // The waker's copy names the waking thread.
        snap.kind = record_kind::RECORD_WAKER_STACK.0;
        snap.waker_tid = 9;
        match parse_record(&bytes(&snap)) {
            Some(Record::Snapshot { snapshot, .. }) => {
                assert_eq!((snapshot.syscall, snapshot.waker), (false, Some(9)));
            }
            _ => panic!("not a snapshot"),
        }
        // ... and what that thread was blocked in meanwhile, by `enum wait_kind`.
        snap.holder_blocked_ns = 300;
        for (kind, syscall) in [
            (wait_kind::WAIT_SYSCALL, true),
            (wait_kind::WAIT_FUTEX, false),
        ] {
            snap.holder_blocked_kind = kind.0;
            match parse_record(&bytes(&snap)) {
                Some(Record::Snapshot { snapshot, .. }) => {
                    let blocked = snapshot.holder_blocked.expect("the waker was blocked");
                    assert_eq!((blocked.ns, blocked.syscall), (300, syscall));
                }
                _ => panic!("not a snapshot"),
            }
        }
        // A kind unknown, or a size that is not the kind's: not a record.
        snap.kind = 9;
        assert!(parse_record(&bytes(&snap)).is_none());
        let mut short = bytes(&end);
        short.truncate(20);
        assert!(parse_record(&short).is_none());
        assert!(parse_record(&[0u8; 2]).is_none());
        // A copy claiming more bytes than it carries is dropped, not read past its end.
        snap.kind = record_kind::RECORD_WAITER_STACK.0;
        snap.len = 5000;
        assert!(parse_record(&bytes(&snap)).is_none());
    }
}
