//! The workload's executable mappings without mapping records.
//!
//! A sampling event with `mmap`/`mmap2` set makes every new mapping of every process on
//! the machine pay for a record: the kernel names the file (`d_path`) and walks the
//! events for each one (`perf_event_mmap`), so a program that maps and unmaps memory in a
//! loop ran 10–11% slower traced. The sampler asks for none. Instead the reader thread,
//! as it drains the rings, keeps each process's executable ranges and reads
//! `/proc/PID/maps` when a sample's user address lies outside them: at the first sample
//! after an exec, and when a library was loaded since (at most every [`FIRST_WAIT_NS`]
//! per process, backing off to [`MAX_WAIT_NS`] while a read does not cover the address,
//! as a JIT's code outside every mapping would not). What it read goes into the records
//! as the MMAP2 records the kernel would have written, stamped at the process image's
//! start (its exec or fork) or, for a mapping added later, just before the first sample
//! that needed it: the symbolizer reads them as it read the kernel's.
//!
//! Written by hand: the record layout is the kernel's (perf_event_open(2)), and nothing
//! else needs it. What is lost: a process that exits before the reader's next drain
//! (every 50 ms) leaves its samples without mappings; they are counted
//! ([`MapStats::unmapped_exits`]).

use std::collections::{HashMap, HashSet};

use super::{b, clock_ns};
use crate::locks::ProcMap;

/// The shortest wait between two reads of one process's maps.
pub(super) const FIRST_WAIT_NS: u64 = 10_000_000;
/// The longest, after reads that did not cover the address that asked for them.
pub(super) const MAX_WAIT_NS: u64 = 2_000_000_000;
/// How long after an exec its maps are first read: the dynamic loader has mapped the
/// program's libraries by then (about a millisecond on this VM), and a short-lived
/// program is still running.
pub(super) const EXEC_SETTLE_NS: u64 = 2_000_000;

const PERF_RECORD_MISC_CPUMODE_MASK: u16 = 7;
const PERF_RECORD_MISC_USER: u16 = 2;
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;

/// What the tracker did, for the profile's statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// Reads of a `/proc/PID/maps`.
    pub reads: u64,
    /// Mapping records written from them.
    pub records: u64,
    /// Process images whose maps could not be read at all (gone, or another process by
    /// then): their samples have no mappings.
    pub unmapped_exits: u64,
}

/// One process as the reader knows it.
#[derive(Clone, Debug, Default)]
struct Known {
    /// Executable ranges, sorted by start.
    ranges: Vec<(u64, u64, ProcMap)>,
    /// When the current image began (its exec or fork), on the samples' clock.
    image_ns: u64,
    /// Whether its maps were read since the image began.
    read: bool,
    /// The earliest sample, and its address, outside every range since the last read.
    pending: Option<(u64, u64)>,
    /// Not before this (reader clock) is it read again, and how long it waited last.
    next_read_ns: u64,
    wait_ns: u64,
    /// Read once more [`EXEC_SETTLE_NS`] after the exec (the first read is at once).
    settle: bool,
}

impl Known {
    fn covers(&self, ip: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.0 <= ip);
        i > 0 && ip < self.ranges[i - 1].1
    }
}

/// What reading a process's maps needs from the machine (the tests give their own).
pub(super) trait MapSource {
    /// The executable mappings of `pid`, if it is still the process that began at or
    /// before `sampled_ns` (on the samples' clock): a PID reused since is not read.
    fn read(&mut self, pid: i32, sampled_ns: u64) -> Option<Vec<ProcMap>>;
    /// The reader's clock, in ns.
    fn now_ns(&self) -> u64;
}

/// The processes of the workload and their executable ranges, as the reader drains.
pub(super) struct MapTracker {
    known: HashMap<i32, Known>,
    /// With attached processes: the processes to follow (and their children, through fork
    /// records); `None`: every record is the workload's.
    only: Option<HashSet<i32>>,
    stats: MapStats,
    /// False where the kernel writes mapping records itself: the tracker reads nothing.
    enabled: bool,
}

/// The fields of a record the tracker reads.
pub(super) enum Seen {
    Sample { pid: i32, time: u64, user_ip: u64 },
    Fork { pid: i32, ppid: i32, time: u64 },
    Exec { pid: i32, time: u64 },
    Other,
}

impl MapTracker {
    /// A tracker that knows `initial` (attached processes, read when sampling began) and
    /// follows only them and `pid` where `only` is given.
    pub(super) fn new(only: Option<&[i32]>, initial: &[super::InitialProcess]) -> MapTracker {
        let mut known = HashMap::new();
        for p in initial {
            let mut k = Known {
                read: true,
                ..Default::default()
            };
            k.ranges = ranges_of(&p.maps);
            known.insert(p.pid, k);
        }
        MapTracker {
            known,
            only: only.map(|o| o.iter().copied().collect()),
            stats: MapStats::default(),
            enabled: true,
        }
    }

    /// A tracker that reads maps only when `on`.
    pub(super) fn enabled(mut self, on: bool) -> MapTracker {
        self.enabled = on;
        self
    }

    pub(super) fn stats(&self) -> MapStats {
        self.stats
    }

    fn wanted(&self, pid: i32) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(&pid))
    }

    /// Notes one drained record.
    pub(super) fn see(&mut self, seen: Seen) {
        if !self.enabled {
            return;
        }
        match seen {
            Seen::Sample { pid, time, user_ip } => {
                if user_ip == 0 || pid <= 0 || !self.wanted(pid) {
                    return;
                }
                let k = self.known.entry(pid).or_default();
                if !k.covers(user_ip) && k.pending.is_none_or(|(t, _)| time < t) {
                    k.pending = Some((time, user_ip));
                }
            }
            Seen::Fork { pid, ppid, time } => {
                if pid == ppid || !self.wanted(ppid) {
                    return;
                }
                if let Some(o) = self.only.as_mut() {
                    o.insert(pid);
                }
                // The rings are drained one after another: a child's exec (on one CPU's
                // ring) may be read before its fork (on another's). A later image stays.
                if self.known.get(&pid).is_some_and(|k| k.image_ns > time) {
                    return;
                }
                // A forked child starts with its parent's mappings.
                let parent = self.known.get(&ppid);
                let child = Known {
                    ranges: parent.map(|p| p.ranges.clone()).unwrap_or_default(),
                    read: parent.is_some_and(|p| p.read),
                    image_ns: time,
                    ..Default::default()
                };
                self.known.insert(pid, child);
            }
            Seen::Exec { pid, time } => {
                if !self.wanted(pid) {
                    return;
                }
                if self.known.get(&pid).is_some_and(|k| k.image_ns > time) {
                    return;
                }
                // A new image: nothing of the old one is mapped. Its maps are read at
                // once (the program and its loader), and again once the loader has
                // mapped the libraries, sampled or not: a program that lives a few
                // milliseconds is gone before the next drain.
                let pending = self.known.get(&pid).and_then(|k| k.pending);
                self.known.insert(
                    pid,
                    Known {
                        image_ns: time,
                        pending: Some(pending.filter(|&(t, _)| t > time).unwrap_or((time + 1, 0))),
                        next_read_ns: time,
                        settle: true,
                        ..Default::default()
                    },
                );
            }
            Seen::Other => {}
        }
    }

    /// When the next read is due (on the samples' clock), if one is waiting.
    pub(super) fn next_due_ns(&self) -> Option<u64> {
        self.known
            .values()
            .filter(|k| k.pending.is_some())
            .map(|k| k.next_read_ns)
            .min()
    }

    /// Reads the maps of the processes that need it (where their wait is over) and
    /// appends what was not known as MMAP2 records to `out`.
    pub(super) fn resolve(&mut self, source: &mut dyn MapSource, out: &mut Vec<u8>) {
        let now = source.now_ns();
        let due: Vec<i32> = self
            .known
            .iter()
            .filter(|(_, k)| k.pending.is_some() && now >= k.next_read_ns)
            .map(|(&pid, _)| pid)
            .collect();
        for pid in due {
            let k = self.known.get_mut(&pid).expect("listed above");
            let (sampled, ip) = k.pending.take().expect("pending");
            self.stats.reads += 1;
            let Some(maps) = source.read(pid, sampled) else {
                // Gone (or another process's PID by now): nothing more to read. Lost
                // only where no read of this image succeeded.
                if !k.read {
                    self.stats.unmapped_exits += 1;
                }
                k.next_read_ns = u64::MAX;
                continue;
            };
            let fresh = ranges_of(&maps);
            // The first read of an image holds what it mapped from its start; a later
            // one's additions were mapped after the last read, before this sample.
            let stamp = if k.read {
                (k.image_ns + 1).max(sampled.saturating_sub(1))
            } else {
                k.image_ns + 1
            };
            for (start, end, m) in &fresh {
                let same = k
                    .ranges
                    .iter()
                    .any(|(s, e, o)| s == start && e == end && o == m);
                if !same {
                    write_mmap2(out, pid, stamp, m);
                    self.stats.records += 1;
                }
            }
            k.ranges = fresh;
            k.read = true;
            if std::mem::take(&mut k.settle) {
                k.pending = Some((sampled, 0));
                k.next_read_ns = k.image_ns.saturating_add(EXEC_SETTLE_NS);
                continue;
            }
            k.wait_ns = if ip == 0 || k.covers(ip) {
                FIRST_WAIT_NS
            } else {
                (k.wait_ns * 2).clamp(FIRST_WAIT_NS, MAX_WAIT_NS)
            };
            k.next_read_ns = now.saturating_add(k.wait_ns);
        }
    }
}

fn ranges_of(maps: &[ProcMap]) -> Vec<(u64, u64, ProcMap)> {
    let mut r: Vec<_> = maps
        .iter()
        .filter(|m| m.executable && m.end > m.start)
        .map(|m| (m.start, m.end, m.clone()))
        .collect();
    r.sort_by_key(|r| r.0);
    r
}

/// The fields the tracker needs from a drained record (`u64_at(off)` reads the record's
/// word at byte `off`; `len` is its size): a sample's process, time and user address (its
/// own address in user mode, else the user registers' IP), a fork's or an exec's process
/// and time. The layout follows the sampler's `SAMPLE_TYPE` and `sample_id_all` (pid/tid,
/// time, cpu at the end of every other record).
pub(super) fn seen(
    kind: u32,
    misc: u16,
    len: usize,
    u64_at: impl Fn(usize) -> Option<u64>,
) -> Seen {
    let lo = |v: u64| v as u32 as i32;
    let hi = |v: u64| (v >> 32) as u32 as i32;
    match kind {
        b::PERF_RECORD_SAMPLE => {
            let (Some(pid_tid), Some(time)) = (u64_at(16), u64_at(24)) else {
                return Seen::Other;
            };
            let user_ip = if misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_USER {
                u64_at(8)
            } else {
                user_regs_ip(&u64_at)
            };
            Seen::Sample {
                pid: lo(pid_tid),
                time,
                user_ip: user_ip.unwrap_or(0),
            }
        }
        b::PERF_RECORD_FORK => match (u64_at(8), u64_at(24)) {
            (Some(pids), Some(time)) => Seen::Fork {
                pid: lo(pids),
                ppid: hi(pids),
                time,
            },
            _ => Seen::Other,
        },
        b::PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 => {
            match (u64_at(8), len.checked_sub(16).and_then(&u64_at)) {
                (Some(pids), Some(time)) => Seen::Exec {
                    pid: lo(pids),
                    time,
                },
                _ => Seen::Other,
            }
        }
        _ => Seen::Other,
    }
}

/// The user registers' IP of a sample (after its callchain: the ABI word, then the
/// registers of `USER_REGS_MASK` in bit order), if it has them.
fn user_regs_ip(u64_at: &impl Fn(usize) -> Option<u64>) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        let nr = u64_at(48)? as usize;
        let off = 56usize.checked_add(nr.checked_mul(8)?)?;
        if u64_at(off)? == 0 {
            return None; // no user context (a kernel thread)
        }
        let mask = super::USER_REGS_MASK;
        let below = mask & ((1u64 << b::PERF_REG_X86_IP) - 1);
        u64_at(off + 8 + 8 * below.count_ones() as usize)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = u64_at;
        None
    }
}

/// Appends an MMAP2 record for mapping `m` of `pid`, as the kernel lays it out, with the
/// `sample_id_all` trailer the sampler's other records carry (pid/tid, time, cpu).
fn write_mmap2(out: &mut Vec<u8>, pid: i32, time: u64, m: &ProcMap) {
    let name = if m.path.is_empty() {
        "//anon"
    } else {
        m.path.as_str()
    };
    // The name, NUL-terminated and padded to 8 bytes, within a record's u16 size.
    let name = &name.as_bytes()[..name.len().min(4000)];
    let padded = (name.len() + 1).div_ceil(8) * 8;
    let size = 8 + 8 + 24 + 8 + 8 + 8 + 8 + padded + 24;
    let start = out.len();
    let put32 = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_ne_bytes());
    let put64 = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_ne_bytes());
    put32(out, b::PERF_RECORD_MMAP2);
    out.extend_from_slice(&PERF_RECORD_MISC_USER.to_ne_bytes());
    out.extend_from_slice(&(size as u16).to_ne_bytes());
    put32(out, pid as u32);
    put32(out, pid as u32);
    put64(out, m.start);
    put64(out, m.end - m.start);
    put64(out, m.offset);
    put32(out, m.dev.0);
    put32(out, m.dev.1);
    put64(out, m.inode);
    put64(out, 0); // inode generation
    put32(out, (libc::PROT_READ | libc::PROT_EXEC) as u32);
    put32(out, libc::MAP_PRIVATE as u32);
    out.extend_from_slice(name);
    out.resize(out.len() + padded - name.len(), 0);
    put32(out, pid as u32);
    put32(out, pid as u32);
    put64(out, time);
    put64(out, 0); // cpu, reserved
    debug_assert_eq!(out.len() - start, size);
}

/// The machine's processes, read from /proc.
pub(super) struct ProcSource {
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, in ns: a process's start time is on the former,
    /// the samples' on the latter.
    boot_offset_ns: u64,
    ticks_per_s: u64,
}

impl ProcSource {
    pub(super) fn new() -> ProcSource {
        let boot_offset_ns =
            clock_ns(libc::CLOCK_BOOTTIME).saturating_sub(clock_ns(libc::CLOCK_MONOTONIC));
        // SAFETY: sysconf has no memory-safety preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        ProcSource {
            boot_offset_ns,
            ticks_per_s: u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100),
        }
    }

    /// When `pid` began, on CLOCK_MONOTONIC, to a clock tick.
    fn started_ns(&self, pid: i32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 22, counted after the command name's closing parenthesis (field 2).
        let after = &stat[stat.rfind(')')? + 1..];
        let ticks: u64 = after.split_whitespace().nth(19)?.parse().ok()?;
        Some(
            (ticks.saturating_mul(1_000_000_000) / self.ticks_per_s)
                .saturating_sub(self.boot_offset_ns),
        )
    }
}

impl MapSource for ProcSource {
    fn read(&mut self, pid: i32, sampled_ns: u64) -> Option<Vec<ProcMap>> {
        // A process that began after the sample is another one under a reused PID.
        let tick = 1_000_000_000 / self.ticks_per_s;
        let began = self.started_ns(pid)?;
        if began > sampled_ns.saturating_add(2 * tick) {
            return None;
        }
        let maps = crate::locks::read_proc_maps(pid as u32);
        (self.started_ns(pid) == Some(began) && !maps.is_empty()).then_some(maps)
    }

    fn now_ns(&self) -> u64 {
        clock_ns(libc::CLOCK_MONOTONIC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linux_perf_event_reader::{EventRecord, Mmap2FileId, RawData, RawEventRecord, RecordType};

    /// Maps a test gives per PID, read as often as asked; a PID missing is gone.
    struct Given {
        maps: HashMap<i32, Vec<ProcMap>>,
        now: u64,
        reads: Vec<(i32, u64)>,
    }

    impl MapSource for Given {
        fn read(&mut self, pid: i32, sampled_ns: u64) -> Option<Vec<ProcMap>> {
            self.reads.push((pid, sampled_ns));
            self.maps.get(&pid).cloned()
        }
        fn now_ns(&self) -> u64 {
            self.now
        }
    }

    fn map(start: u64, end: u64, path: &str) -> ProcMap {
        ProcMap {
            start,
            end,
            offset: 0x1000,
            executable: true,
            path: path.into(),
            dev: (8, 1),
            inode: start,
        }
    }

    fn sample(pid: i32, time: u64, user_ip: u64) -> Seen {
        Seen::Sample { pid, time, user_ip }
    }

    /// The records `out` holds, parsed as the symbolizer parses them, with the sampler's
    /// own attributes: (pid, start, length, offset, path, inode, time).
    fn parsed(out: &[u8]) -> Vec<(i32, u64, u64, u64, String, u64, u64)> {
        let info = super::super::test_parse_info();
        let mut got = Vec::new();
        let mut pos = 0;
        while pos < out.len() {
            let ty = u32::from_ne_bytes(out[pos..pos + 4].try_into().unwrap());
            let misc = u16::from_ne_bytes(out[pos + 4..pos + 6].try_into().unwrap());
            let size = u16::from_ne_bytes(out[pos + 6..pos + 8].try_into().unwrap()) as usize;
            assert_eq!(size % 8, 0);
            let raw = RawEventRecord::new(
                RecordType(ty),
                misc,
                RawData::Single(&out[pos + 8..pos + size]),
                info,
            );
            let time = raw.timestamp().unwrap();
            let EventRecord::Mmap2(m) = raw.parse().unwrap() else {
                panic!("not an MMAP2 record")
            };
            assert_ne!(m.protection & libc::PROT_EXEC as u32, 0);
            let Mmap2FileId::InodeAndVersion(f) = m.file_id else {
                panic!("no inode")
            };
            assert_eq!((f.major, f.minor), (8, 1));
            got.push((
                m.pid,
                m.address,
                m.length,
                m.page_offset,
                String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
                f.inode,
                time,
            ));
            pos += size;
        }
        got
    }

    #[test]
    fn an_exec_s_mappings_are_read_at_its_first_sample_and_stamped_at_its_start() {
        let mut src = Given {
            maps: HashMap::from([(7, vec![map(0x1000, 0x2000, "/usr/bin/app")])]),
            now: 1_000,
            reads: Vec::new(),
        };
        let mut t = MapTracker::new(None, &[]);
        t.see(Seen::Exec { pid: 7, time: 100 });
        t.see(sample(7, 300, 0x1800));
        t.see(sample(7, 200, 0x1900));
        let mut out = Vec::new();
        // At once, and again once the loader has had time to map the libraries.
        t.resolve(&mut src, &mut out);
        assert_eq!(src.reads, [(7, 101)], "read as of the exec");
        assert_eq!(t.next_due_ns(), Some(100 + EXEC_SETTLE_NS));
        src.now = 100 + EXEC_SETTLE_NS;
        t.resolve(&mut src, &mut out);
        assert_eq!(src.reads, [(7, 101), (7, 101)]);
        assert_eq!(
            parsed(&out),
            [(
                7,
                0x1000,
                0x1000,
                0x1000,
                "/usr/bin/app".into(),
                0x1000,
                101
            )]
        );
        // Covered now: no more reads, nothing more written.
        t.see(sample(7, 400, 0x1a00));
        src.now += 2 * MAX_WAIT_NS;
        out.clear();
        t.resolve(&mut src, &mut out);
        assert!(out.is_empty() && src.reads.len() == 2);
    }

    #[test]
    fn a_library_loaded_later_is_added_just_before_the_sample_that_needed_it() {
        let mut src = Given {
            maps: HashMap::from([(7, vec![map(0x1000, 0x2000, "/usr/bin/app")])]),
            now: 1_000,
            reads: Vec::new(),
        };
        let mut t = MapTracker::new(None, &[]);
        t.see(Seen::Exec { pid: 7, time: 100 });
        t.see(sample(7, 200, 0x1800));
        let mut out = Vec::new();
        t.resolve(&mut src, &mut out);
        src.now = 100 + EXEC_SETTLE_NS;
        t.resolve(&mut src, &mut out);
        src.maps
            .get_mut(&7)
            .unwrap()
            .push(map(0x9000, 0xa000, "/usr/lib/libplugin.so"));
        t.see(sample(7, 5_000, 0x9100));
        // Not before its wait is over.
        out.clear();
        t.resolve(&mut src, &mut out);
        assert!(out.is_empty());
        src.now += FIRST_WAIT_NS;
        t.resolve(&mut src, &mut out);
        let got = parsed(&out);
        assert_eq!(got.len(), 1, "only what is new: {got:?}");
        assert_eq!(
            (got[0].1, got[0].4.as_str(), got[0].6),
            (0x9000, "/usr/lib/libplugin.so", 4_999)
        );
    }

    #[test]
    fn an_address_no_read_covers_backs_off_and_a_gone_process_is_counted() {
        let mut src = Given {
            maps: HashMap::from([(7, vec![map(0x1000, 0x2000, "/usr/bin/app")])]),
            now: 0,
            reads: Vec::new(),
        };
        let mut t = MapTracker::new(None, &[]);
        let mut out = Vec::new();
        // A JIT's code outside every mapping: read again, ever less often.
        let mut waits = Vec::new();
        for i in 0..12u64 {
            t.see(sample(7, 10 + i, 0xdead_0000));
            let before = src.reads.len();
            t.resolve(&mut src, &mut out);
            if src.reads.len() > before {
                waits.push(src.now);
            }
            src.now += MAX_WAIT_NS / 4;
        }
        assert!(waits.len() < 12, "{waits:?}");
        assert_eq!(t.stats().records, 1, "the app's mapping, once");
        // A process gone before its maps were read: its samples stay unmapped, counted.
        t.see(sample(8, 50, 0x1000));
        t.resolve(&mut src, &mut out);
        assert_eq!(t.stats().unmapped_exits, 1);
        t.see(sample(8, 60, 0x1000));
        src.now += 10 * MAX_WAIT_NS;
        let reads = src.reads.len();
        t.resolve(&mut src, &mut out);
        assert_eq!(src.reads.len(), reads, "a gone process is not read again");
    }

    #[test]
    fn attached_processes_and_their_children_are_followed_and_no_other() {
        let initial = super::super::InitialProcess {
            pid: 40,
            comm: "server".into(),
            maps: vec![map(0x1000, 0x2000, "/usr/sbin/server")],
            uid: Some(0),
        };
        let mut src = Given {
            maps: HashMap::from([
                (41, vec![map(0x1000, 0x2000, "/usr/sbin/server")]),
                (99, vec![map(0x5000, 0x6000, "/usr/bin/other")]),
            ]),
            now: 0,
            reads: Vec::new(),
        };
        let mut t = MapTracker::new(Some(&[40]), std::slice::from_ref(&initial));
        let mut out = Vec::new();
        // Known from the start: no read.
        t.see(sample(40, 10, 0x1100));
        // Another user's process on the same CPU: never read.
        t.see(sample(99, 11, 0x5100));
        // A child: it has its parent's mappings, then execs something else.
        t.see(Seen::Fork {
            pid: 41,
            ppid: 40,
            time: 20,
        });
        t.see(sample(41, 21, 0x1200));
        t.resolve(&mut src, &mut out);
        assert!(src.reads.is_empty() && out.is_empty(), "{:?}", src.reads);
        t.see(Seen::Exec { pid: 41, time: 30 });
        t.see(sample(41, 31, 0x1300));
        src.now = 30 + EXEC_SETTLE_NS;
        t.resolve(&mut src, &mut out);
        assert_eq!(src.reads, [(41, 31)]);
        assert_eq!(parsed(&out)[0].6, 31, "stamped at the exec");
    }

    #[test]
    fn a_child_s_exec_read_before_its_fork_keeps_the_new_image() {
        let mut src = Given {
            maps: HashMap::from([(8, vec![map(0x7000, 0x8000, "/usr/bin/gzip")])]),
            now: 0,
            reads: Vec::new(),
        };
        let mut t = MapTracker::new(None, &[]);
        // One CPU's ring held the exec, drained before the other's, which held the fork.
        t.see(Seen::Exec { pid: 8, time: 500 });
        t.see(Seen::Fork {
            pid: 8,
            ppid: 7,
            time: 400,
        });
        assert_eq!(t.next_due_ns(), Some(500));
        src.now = 500;
        let mut out = Vec::new();
        t.resolve(&mut src, &mut out);
        assert_eq!(src.reads, [(8, 501)]);
        assert_eq!(parsed(&out)[0].4, "/usr/bin/gzip");
    }

    #[test]
    fn a_record_s_fields_are_read_where_the_sampler_lays_them_out() {
        let words: HashMap<usize, u64> = HashMap::from([
            (8, 0xffff_ffff_8100_0000), // a kernel address
            (16, (7u64 << 32) | 9),     // tid 7, pid 9
            (24, 555),                  // time
            (48, 1),                    // one callchain entry
            (64, 2),                    // regs abi
            (88, 0x40_1000),            // user IP: after BP and SP
        ]);
        let at = |off: usize| words.get(&off).copied().or(Some(0));
        let Seen::Sample { pid, time, user_ip } = seen(b::PERF_RECORD_SAMPLE, 1, 200, at) else {
            panic!("not a sample")
        };
        assert_eq!((pid, time, user_ip), (9, 555, 0x40_1000));
        let Seen::Sample { user_ip, .. } = seen(b::PERF_RECORD_SAMPLE, 2, 200, at) else {
            panic!("not a sample")
        };
        assert_eq!(user_ip, 0xffff_ffff_8100_0000, "user mode: its own IP");
        // An exec: the time is in the trailer, 16 bytes from the end.
        let exec = HashMap::from([(8usize, (5u64 << 32) | 5), (40, 777)]);
        let Seen::Exec { pid, time } =
            seen(b::PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, 56, |off| {
                exec.get(&off).copied().or(Some(0))
            })
        else {
            panic!("not an exec")
        };
        assert_eq!((pid, time), (5, 777));
        assert!(matches!(
            seen(b::PERF_RECORD_COMM, 0, 56, |_| Some(0)),
            Seen::Other
        ));
    }

    #[test]
    fn the_running_test_s_own_maps_are_read_and_a_later_process_is_refused() {
        let mut src = ProcSource::new();
        let me = std::process::id() as i32;
        let now = src.now_ns();
        let maps = src.read(me, now).expect("this process's maps");
        assert!(maps.iter().any(|m| m.executable && m.path.starts_with('/')));
        // A sample taken before this process began (a second after boot) is another's.
        assert_eq!(src.read(me, 1_000_000_000), None);
    }
}
