//! From perf records to folded stacks: one analysis for live recording and perf.data
//! import alike. Feed every record to [`ProfileBuilder::handle`], then [`finish`].
//!
//! Kernel frames come from the sample's callchain and `/proc/kallsyms`. User frames come
//! from the copied user stack, unwound with the binaries' `.eh_frame` (framehop), so
//! programs and libraries built without frame pointers still reach their callers; when a
//! sample has a user callchain instead (perf.data recorded with `-g`), that is used.
//!
//! [`finish`]: ProfileBuilder::finish

mod names;
mod parallel;
mod sample;
mod serial;
mod user;

pub use names::BEYOND_CAP;
use names::{cap_folded, cut, sanitize, MAX_FOLDED_BYTES, MAX_FRAME_NAME};

pub use parallel::{
    parallel, parallel_workers, Part, RecordIndex, Share, PARALLEL_CHUNK, PARALLEL_MIN_SAMPLES,
};

use user::{framehop_module, is_anonymous};
pub use user::{UserSpace, JIT_PATH};

use std::collections::{HashMap, HashSet};

/// The maps looked up once or more per sample: foldhash rather than SipHash (hashing was
/// 11% of an import's CPU time). Nothing is emitted in their order.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwinderX86_64};
use framehop::Unwinder;
use linux_perf_event_reader::EventRecord;
use linux_perf_event_reader::Mmap2FileId;
use scalprof_debuginfo::mapped::Mapped;
use scalprof_debuginfo::{ElfInfo, Kallsyms, SymbolCache};

use crate::perf_map::PerfMap;
use scalprof_model::{FoldedStack, HotInstruction, PointProfile, ProfileStats, Unreadable};

/// perf's callchain context markers are the top 4095 values of u64.
const PERF_CONTEXT_MAX: u64 = u64::MAX - 4094;
const PERF_CONTEXT_USER: u64 = u64::MAX - 511;
/// `PERF_RECORD_SAMPLE`.
const PERF_RECORD_SAMPLE: u32 = 9;
/// Linux maps nothing below `vm.mmap_min_addr` (4096 at least).
const MIN_CODE_ADDRESS: u64 = 4096;
/// x86-64 perf register numbers.
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;
/// Deeper stacks are cut (and counted as truncated).
const MAX_FRAMES: usize = 256;
/// Width of the time bins for the serial-fraction estimate. At ~1 kHz sampling a thread
/// on CPU for a whole bin leaves ~10 samples in it.
const SERIAL_BIN_NS: u64 = 10_000_000;
const MAX_SERIAL_BINS: usize = 1_000_000;
/// Hot user instructions kept per profile.
const HOT_INSTRUCTIONS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("the recorded perf_event_attr is unreadable: {0}")]
    Attr(String),
}

/// Shared, read-only symbol sources; kept across repeats and points.
pub struct Symbols {
    pub kernel: Arc<Kallsyms>,
    pub files: SymbolCache,
}

impl Symbols {
    pub fn load() -> Symbols {
        Symbols {
            kernel: Arc::new(Kallsyms::load()),
            files: SymbolCache::default(),
        }
    }
}

#[derive(Clone)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    /// Shared by every clone (forks) and every hot-instruction key.
    path: Arc<str>,
    elf: Option<Arc<ElfInfo>>,
}

#[derive(Default)]
struct Process {
    comm: String,
    /// `comm`'s interned name, once it is known (reset when the name changes).
    comm_id: Option<u32>,
    /// By start address; they never overlap. A map, not a sorted list: a perf.data of a
    /// JIT carries one MMAP per method, and re-sorting a list per mapping was quadratic.
    mappings: std::collections::BTreeMap<u64, Mapping>,
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    /// Symbolized frames per address (innermost first), to symbolize each address once,
    /// and whether they are unresolved.
    names: FastMap<u64, (Arc<[u32]>, bool)>,
}

impl Process {
    fn add_mapping(&mut self, m: Mapping) {
        // A new mapping replaces whatever it overlaps (munmap/re-mmap of the same range):
        // the one that starts before it and reaches into it, and those that start inside.
        let before = self
            .mappings
            .range(..m.start)
            .next_back()
            .filter(|(_, o)| o.end > m.start)
            .map(|(&k, _)| k);
        let inside: Vec<u64> = self
            .mappings
            .range(m.start..m.end.max(m.start + 1))
            .map(|(&k, _)| k)
            .collect();
        for k in before.into_iter().chain(inside) {
            self.mappings.remove(&k);
        }
        if let Some(elf) = &m.elf {
            if let Some(module) = framehop_module(&m, elf) {
                self.unwinder.add_module(module);
            }
        }
        self.mappings.insert(m.start, m);
    }

    fn mapping(&self, addr: u64) -> Option<&Mapping> {
        let (_, m) = self.mappings.range(..=addr).next_back()?;
        (addr < m.end).then_some(m)
    }
}

/// Accumulates stacks from records.
pub struct ProfileBuilder {
    event: String,
    frequency: u64,
    kernel_callchains: bool,
    processes: FastMap<i32, Process>,
    cache: CacheX86_64,
    /// Interned frame names.
    names: Vec<String>,
    /// Per interned name: which of scalprof's own costs it is, if it is one (`tool_cost`).
    tool_names: Vec<Option<scalprof_model::profile::ToolCost>>,
    name_ids: FastMap<String, u32>,
    stacks: FastMap<Vec<u32>, (u64, u64)>,
    stats: ProfileStats,
    /// (time, tid, leaf user function) of every sample, for the serial estimate.
    timeline: Vec<(u64, i32, u32)>,
    /// Each sampled thread's process.
    thread_pid: FastMap<i32, i32>,
    /// Kernel address → (name id, unresolved).
    kernel_cache: FastMap<u64, (u32, bool)>,
    /// (file, stated address) → (samples, weight) of user-mode leaf instructions.
    hot: FastMap<(Arc<str>, u64), (u64, u64)>,
    /// JIT code names per process (`/tmp/perf-PID.map`), read at the first address in
    /// anonymous executable memory.
    perf_maps: FastMap<i32, Option<PerfMap>>,
    /// Where perf maps are looked for (`/tmp`; tests use their own folder).
    perf_map_dir: PathBuf,
    /// Users whose perf maps are trusted besides root and this process's (see
    /// [`ProfileBuilder::trust_perf_maps_of`]).
    perf_map_owners: Vec<u32>,
    /// When the records come from every task on the machine (attached processes): the
    /// processes to keep, grown by their forks.
    only: Option<HashSet<i32>>,
    /// Whether the records are this machine's, now (a live recording, not an import):
    /// mapped files are then opened as the file the mapping's device and inode name,
    /// through the process while it runs ([`SymbolCache::get_mapped`]).
    live: bool,
    /// Per holder thread: the waits its samples are blamed for (start, end, lock), by start.
    blame_windows: FastMap<i32, Vec<(u64, u64, usize)>>,
    /// Waits with no known holder (a sleep in a retry loop): every other thread's samples
    /// inside them are blamed (start, end, lock, the waiter), by start.
    blame_others: Vec<(u64, u64, usize, i32)>,
    /// Per lock (a [`BlameWindow::lock`]): the holder's functions → (samples, weight).
    blamed: Blamed,
    /// When several builders read one stream of records in parallel: this one's part.
    share: Option<Share>,
    /// A sample's kernel frames, frames and user frames: vectors reused for every sample.
    scratch: (Vec<u32>, Vec<u32>, Vec<u32>),
    /// A stack copy rebuilt from the sampler's differences, reused for every sample.
    stack_copy: Vec<u8>,
    /// Sample records seen so far, whoever symbolizes them.
    sample_ordinal: u64,
}

/// A wait whose waker was seen: the holder thread that ended it (`None`: any thread but
/// the waiter, for a wait with no waker such as a sleep), the span it waited
/// (CLOCK_MONOTONIC ns, the samples' clock) and the lock, an index of the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlameWindow {
    pub holder_tid: Option<i32>,
    pub waiter_tid: i32,
    pub start: u64,
    pub end: u64,
    pub lock: usize,
}

/// What holders were seen doing, per lock of the [`BlameWindow`]s.
pub type Blamed = HashMap<usize, BlamedLock>;

/// A lock's holder samples: by function, and by whole stack (for the holders' flame graph).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlamedLock {
    /// Function → (samples, weight).
    pub functions: HashMap<String, (u64, u64)>,
    /// Folded stack → (its holder function, samples, weight).
    pub stacks: HashMap<String, (String, u64, u64)>,
}

impl ProfileBuilder {
    pub fn new(event: &str, frequency: u64, kernel_callchains: bool) -> ProfileBuilder {
        ProfileBuilder {
            event: event.to_string(),
            frequency,
            kernel_callchains,
            processes: FastMap::default(),
            cache: CacheX86_64::new(),
            names: Vec::new(),
            tool_names: Vec::new(),
            name_ids: FastMap::default(),
            stacks: FastMap::default(),
            stats: ProfileStats {
                kernel_stacks: kernel_callchains,
                ..Default::default()
            },
            timeline: Vec::new(),
            thread_pid: FastMap::default(),
            kernel_cache: FastMap::default(),
            hot: FastMap::default(),
            perf_maps: FastMap::default(),
            perf_map_dir: PathBuf::from("/tmp"),
            // SAFETY: geteuid has no preconditions.
            perf_map_owners: vec![unsafe { libc::geteuid() }],
            only: None,
            live: false,
            blame_windows: FastMap::default(),
            blame_others: Vec::new(),
            blamed: HashMap::new(),
            share: None,
            scratch: Default::default(),
            stack_copy: Vec::new(),
            sample_ordinal: 0,
        }
    }

    /// Blame shifting: a sample of a holder thread taken inside one of its waiters' waits
    /// is what the holder did while they waited; it is counted for that lock (by its
    /// innermost function outside the C library), as well as in the profile.
    pub fn blame(mut self, windows: &[BlameWindow]) -> ProfileBuilder {
        for w in windows.iter().filter(|w| w.end > w.start) {
            match w.holder_tid {
                Some(tid) => self
                    .blame_windows
                    .entry(tid)
                    .or_default()
                    .push((w.start, w.end, w.lock)),
                None => self
                    .blame_others
                    .push((w.start, w.end, w.lock, w.waiter_tid)),
            }
        }
        for list in self.blame_windows.values_mut() {
            list.sort_unstable();
        }
        self.blame_others.sort_unstable();
        self
    }

    /// What the holders were seen doing, per lock (taken: call before [`Self::finish`]).
    pub fn take_blamed(&mut self) -> Blamed {
        std::mem::take(&mut self.blamed)
    }

    /// Keeps only the records of these processes and of the processes they fork: for a
    /// profile of every task (sampling with attached processes).
    pub fn only(mut self, pids: &[i32]) -> ProfileBuilder {
        self.only = Some(pids.iter().copied().collect());
        self
    }

    /// The records were recorded here and now, not imported: each mapped
    /// file is read only if it is the file the process mapped.
    pub fn recorded_here(mut self) -> ProfileBuilder {
        self.live = true;
        self
    }

    /// A process that ran before the records began: its name and executable mappings
    /// (from /proc, read when sampling began).
    pub fn add_process(
        &mut self,
        pid: i32,
        comm: &str,
        maps: &[scalprof_model::locks::ProcMap],
        symbols: &mut Symbols,
    ) {
        let p = self.processes.entry(pid).or_default();
        p.comm = comm.to_string();
        p.comm_id = None;
        for m in maps.iter().filter(|m| m.executable) {
            self.add_mapping(
                pid,
                m.start,
                m.end.saturating_sub(m.start),
                m.offset,
                m.path.clone(),
                Some((m.dev, m.inode)),
                symbols,
            );
        }
    }

    fn wanted(&self, pid: i32) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(&pid))
    }

    /// Looks for JIT perf maps (`perf-PID.map`) in `dir` instead of `/tmp`.
    pub fn with_perf_map_dir(mut self, dir: &Path) -> ProfileBuilder {
        self.perf_map_dir = dir.to_path_buf();
        self
    }

    /// Trusts the perf maps of `uid`'s processes too (besides root's and this process's
    /// user's): the user of an attached process, read when scalprof attached to it, or the
    /// owner of an imported perf.data. Never the user of whatever process has a PID now:
    /// PIDs are reused, and the samples are read after the workload has exited.
    pub fn trust_perf_maps_of(mut self, uid: u32) -> ProfileBuilder {
        self.perf_map_owners.push(uid);
        self
    }

    /// Trusts the perf maps of `owners` only (and root's): a parser child, which runs as
    /// `nobody`, builds with the users its parent vouches for.
    pub fn with_perf_map_owners(mut self, owners: Vec<u32>) -> ProfileBuilder {
        self.perf_map_owners = owners;
        self
    }

    /// The JIT name of an address of process `pid`, from its perf map.
    fn jit_name(&mut self, pid: i32, addr: u64) -> Option<String> {
        let dir = &self.perf_map_dir;
        let owners = &self.perf_map_owners;
        let map = self
            .perf_maps
            .entry(pid)
            .or_insert_with(|| PerfMap::load(&dir.join(format!("perf-{pid}.map")), owners));
        map.as_ref()?.lookup(addr).map(str::to_string)
    }

    fn intern(&mut self, name: &str) -> u32 {
        // Cut once, here: every stack that names it holds the short form.
        let name = &*cut(name, MAX_FRAME_NAME);
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.tool_names
            .push(scalprof_model::vocabulary::tool_cost(name));
        self.name_ids.insert(name.to_string(), id);
        id
    }

    /// Handles one record.
    pub fn handle(&mut self, rec: EventRecord<'_>, symbols: &mut Symbols) {
        if matches!(rec, EventRecord::Sample(_)) && !self.takes_sample() {
            return;
        }
        self.handle_record(rec, symbols);
    }

    /// Counts a record that could not be parsed: a sample by the builder that took it,
    /// any other record once (by the first builder of a share).
    pub fn bad_record(&mut self, sample: bool) {
        if sample || self.counts_stream() {
            self.stats.bad_records += 1;
        }
    }

    /// Handles one record that is this builder's: a sample its reader already chose by
    /// [`Share::takes`], or any other record.
    pub fn handle_taken(&mut self, rec: EventRecord<'_>, symbols: &mut Symbols) {
        self.handle_record(rec, symbols);
    }

    /// Handles one record that is this builder's.
    fn handle_record(&mut self, rec: EventRecord<'_>, symbols: &mut Symbols) {
        if let Some(only) = self.only.as_mut() {
            let pid = match &rec {
                EventRecord::Sample(s) => s.pid,
                EventRecord::Mmap(m) => Some(m.pid),
                EventRecord::Mmap2(m) => Some(m.pid),
                EventRecord::Comm(c) => Some(c.pid),
                EventRecord::Fork(f) => {
                    if only.contains(&f.ppid) {
                        only.insert(f.pid);
                    }
                    Some(f.pid)
                }
                _ => None,
            };
            if pid.is_some_and(|p| !self.wanted(p)) {
                return;
            }
            // The command before its exec is scalprof's own forked child (per-task
            // sampling starts at the exec; sampling every task starts at once).
            if let EventRecord::Sample(s) = &rec {
                let unnamed = s
                    .pid
                    .is_none_or(|p| self.processes.get(&p).is_none_or(|p| p.comm.is_empty()));
                if unnamed {
                    return;
                }
            }
        }
        match rec {
            EventRecord::Sample(s) => self.handle_sample(&s, symbols),
            EventRecord::Mmap(m) if m.is_executable => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let (pid, start, len, pgoff) = (m.pid, m.address, m.length, m.page_offset);
                self.add_mapping(pid, start, len, pgoff, path, None, symbols);
            }
            EventRecord::Mmap2(m) if m.protection & PROT_EXEC != 0 => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let id = match &m.file_id {
                    Mmap2FileId::InodeAndVersion(f) => Some(((f.major, f.minor), f.inode)),
                    Mmap2FileId::BuildId(_) => None,
                };
                let (pid, start, len, pgoff) = (m.pid, m.address, m.length, m.page_offset);
                self.add_mapping(pid, start, len, pgoff, path, id, symbols);
            }
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                let p = self.processes.entry(c.pid).or_default();
                if c.pid == c.tid || p.comm.is_empty() {
                    p.comm = name;
                    p.comm_id = None;
                }
                if c.is_execve {
                    // A new program image: the old mappings are gone.
                    p.mappings.clear();
                    p.unwinder = UnwinderX86_64::new();
                    p.names.clear();
                }
            }
            EventRecord::Fork(f) if f.pid != f.ppid && !self.processes.contains_key(&f.pid) => {
                // A forked child starts with its parent's address space.
                let (comm, maps) = match self.processes.get(&f.ppid) {
                    Some(p) => (p.comm.clone(), p.mappings.clone()),
                    None => (String::new(), Default::default()),
                };
                let mut child = Process {
                    comm,
                    ..Default::default()
                };
                for m in maps.into_values() {
                    child.add_mapping(m);
                }
                self.processes.insert(f.pid, child);
            }
            EventRecord::Lost(l) if self.counts_stream() => {
                self.stats.lost_samples = self.stats.lost_samples.saturating_add(l.count)
            }
            EventRecord::Throttle(_) if self.counts_stream() => self.stats.throttled += 1,
            _ => {}
        }
    }

    /// A mapping of process `pid`; `file` is the mapped file's device and inode where the
    /// record gave them.
    // The record's fields, passed one by one: a struct for them would exist for this call.
    #[allow(clippy::too_many_arguments)]
    fn add_mapping(
        &mut self,
        pid: i32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: String,
        file: Option<((u32, u32), u64)>,
        symbols: &mut Symbols,
    ) {
        let live_file = file.filter(|_| self.live);
        let file_backed = path.starts_with('/') && !is_anonymous(&path);
        let elf = if let (Some((dev, inode)), true) = (live_file, file_backed) {
            let mapped = Mapped {
                path: &path,
                dev,
                inode,
                live: Some((pid, start, start.saturating_add(len))),
            };
            match symbols.files.get_mapped(&mapped) {
                Ok(elf) => Some(elf),
                Err(why) => {
                    self.stats.note_unreadable(Unreadable::File(why));
                    None
                }
            }
        } else if file_backed {
            let file = PathBuf::from(&path);
            let elf = symbols.files.get(&file);
            let st = &mut self.stats;
            if let Some(reason) = symbols.files.failure(&file) {
                st.note_unreadable(Unreadable::File(format!("{path}: {reason}")));
            }
            elf
        } else {
            None
        };
        self.processes.entry(pid).or_default().add_mapping(Mapping {
            start,
            end: start.saturating_add(len),
            pgoff,
            path: path.into(),
            elf,
        });
    }

    /// The point profile: folded stacks (heaviest first) and counters.
    pub fn finish(mut self) -> PointProfile {
        let serial = self.serial_stats();
        let mut folded: Vec<FoldedStack> = self
            .stacks
            .iter()
            .map(|(frames, &(samples, weight))| FoldedStack {
                stack: frames
                    .iter()
                    .map(|&id| sanitize(&self.names[id as usize]))
                    .collect::<Vec<_>>()
                    .join(";"),
                samples,
                weight,
            })
            .collect();
        folded.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.stack.cmp(&b.stack)));
        cap_folded(&mut folded, MAX_FOLDED_BYTES);
        self.stats.kernel_stacks = self.kernel_callchains;
        let mut hot: Vec<HotInstruction> = self
            .hot
            .iter()
            .map(|((file, address), &(samples, weight))| HotInstruction {
                file: file.to_string(),
                address: *address,
                samples,
                weight,
            })
            .collect();
        hot.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| a.address.cmp(&b.address))
        });
        hot.truncate(HOT_INSTRUCTIONS);
        PointProfile {
            hot,
            event: self.event,
            frequency: self.frequency,
            stats: self.stats,
            serial,
            repeats: 1,
            folded,
        }
    }
}

/// PROT_EXEC on Linux (all architectures).
const PROT_EXEC: u32 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_and_the_lightest_stacks_beyond_the_cap_are_summed() {
        let long = "A".repeat(3000);
        let name = sanitize(&format!("f;{long}"));
        assert!(
            name.len() <= MAX_FRAME_NAME + '…'.len_utf8(),
            "{}",
            name.len()
        );
        assert!(name.starts_with("f:AAA") && name.ends_with('…'));
        // A multi-byte character on the cut is not split.
        assert!(cut(&"é".repeat(600), MAX_FRAME_NAME).ends_with("é…"));
        let stack = |s: &str, weight: u64| FoldedStack {
            stack: s.into(),
            samples: 1,
            weight,
        };
        let mut folded = vec![stack("a;b", 30), stack("a;c", 20), stack("a;d", 10)];
        cap_folded(&mut folded, 8);
        let kept: Vec<(&str, u64)> = folded
            .iter()
            .map(|f| (f.stack.as_str(), f.weight))
            .collect();
        assert_eq!(kept, [("a;b", 30), ("a;c", 20), (BEYOND_CAP, 10)]);
        let mut small = vec![stack("a;b", 30)];
        cap_folded(&mut small, 8);
        assert_eq!(small.len(), 1);
    }

    #[test]
    fn a_new_mapping_replaces_exactly_what_it_overlaps() {
        let m = |start: u64, end: u64, path: &str| Mapping {
            start,
            end,
            pgoff: 0,
            path: Arc::from(path),
            elf: None,
        };
        let mut p = Process::default();
        p.add_mapping(m(0x1000, 0x3000, "a"));
        p.add_mapping(m(0x3000, 0x4000, "b"));
        p.add_mapping(m(0x5000, 0x6000, "c"));
        let at = |p: &Process, addr: u64| p.mapping(addr).map(|m| m.path.to_string());
        assert_eq!(at(&p, 0x2fff).as_deref(), Some("a"));
        assert_eq!(at(&p, 0x3000).as_deref(), Some("b"));
        assert_eq!(at(&p, 0x4800), None);
        // Over the end of a and the whole of b; c, beyond it, stays.
        p.add_mapping(m(0x2000, 0x3800, "d"));
        assert_eq!(at(&p, 0x1000), None);
        assert_eq!(at(&p, 0x2000).as_deref(), Some("d"));
        assert_eq!(at(&p, 0x37ff).as_deref(), Some("d"));
        assert_eq!(at(&p, 0x3800), None);
        assert_eq!(at(&p, 0x5000).as_deref(), Some("c"));
        assert_eq!(p.mappings.len(), 2);
    }

    #[test]
    fn a_binary_that_cannot_be_read_is_named_in_the_profile_stats() {
        let mut symbols = Symbols {
            kernel: Default::default(),
            files: SymbolCache::default(),
        };
        let mut b = ProfileBuilder::new("cpu-clock", 1000, false);
        for _ in 0..2 {
            b.add_mapping(
                1,
                0x1000,
                0x1000,
                0,
                "/nonexistent/app".into(),
                None,
                &mut symbols,
            );
        }
        b.add_mapping(1, 0x9000, 0x1000, 0, "[vdso]".into(), None, &mut symbols);
        let p = b.finish();
        assert_eq!(p.stats.unreadable_binaries.len(), 1, "{:?}", p.stats);
        assert!(p.stats.unreadable_binaries[0]
            .to_string()
            .starts_with("/nonexistent/app: "));
    }

    #[test]
    fn a_live_mapping_whose_path_names_another_file_gets_no_names() {
        use std::os::unix::fs::MetadataExt;
        let mut symbols = Symbols {
            kernel: Default::default(),
            files: SymbolCache::default(),
        };
        let exe = std::env::current_exe().unwrap();
        let meta = std::fs::metadata(&exe).unwrap();
        let dev = (libc::major(meta.dev()), libc::minor(meta.dev()));
        let path = exe.to_str().unwrap().to_string();
        let mut b = ProfileBuilder::new("cpu-clock", 1000, false).recorded_here();
        // Another inode than the path's: the file there is not the one mapped. (PID 0:
        // no process to open it through.)
        let other = Some((dev, meta.ino() + 1));
        b.add_mapping(0, 0x1000, 0x1000, 0, path.clone(), other, &mut symbols);
        // The right one is read.
        let same = Some((dev, meta.ino()));
        b.add_mapping(0, 0x10000, 0x1000, 0, path.clone(), same, &mut symbols);
        let p = &b.processes[&0];
        assert!(p.mappings[&0x1000].elf.is_none());
        assert!(p.mappings[&0x10000].elf.is_some());
        let stats = b.finish().stats;
        assert_eq!(stats.unreadable_binaries.len(), 1, "{stats:?}");
        let why = &stats.unreadable_binaries[0].to_string();
        assert!(why.starts_with(&format!("{path}: ")), "{why}");
        assert!(why.contains("not the file the process mapped"), "{why}");
    }
}
