//! The user-lock delay: `interpose.c`, built by build.rs into a shared object that this
//! crate carries, written next to the experiment's outputs and preloaded into the
//! workload (`LD_PRELOAD`, inherited by its whole tree), with its counters in a small
//! memfd that every process of the tree maps shared. The same object times the holds in
//! a sweep's traced repeats (holds.c), its records in a larger memfd that scalprof sizes
//! and reads ([`HoldArea`]). The workload inherits the object and the memfds as
//! descriptors: no path is opened, so no folder's permissions and no uid change stand in
//! the way, and no file of the workload's grows.

use std::collections::HashMap;
use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use scalprof_model::locks::UserHoldRaw;

use super::DelayCounts;
use crate::DelayError;

/// The interposer, as built for this machine.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libscalprof-delay.so"));

/// The interposer's counters of one execution: releases seen, nanoseconds spun, in a
/// memfd that every process of the tree maps shared, from a descriptor it inherits.
pub(super) struct Counters(Arc<OwnedFd>);

impl Counters {
    /// What the execution's tree counted (zeros if they cannot be read).
    pub(super) fn read(&self) -> DelayCounts {
        let mut bytes = [0u8; 16];
        let read = self
            .0
            .try_clone()
            .map(File::from)
            .and_then(|f| f.read_exact_at(&mut bytes, 0));
        if read.is_err() {
            return DelayCounts::default();
        }
        let word =
            |i: usize| u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        DelayCounts {
            calls: word(0),
            spun_ns: word(1),
        }
    }
}

/// What the interposer lengthens.
pub(super) enum Lengthened<'a> {
    /// The lock at `address` of `exe`, at each release.
    Lock { exe: &'a Path, address: u64 },
    /// The sleep calls of the tree, after each returns.
    Sleeps,
}

/// Readies the interposer (written to `dir`) and fresh counters, and returns the counters
/// with the environment that makes the workload lengthen what it is told by `delay_ns`
/// at each occurrence, and the descriptors that environment names, which the workload
/// inherits.
#[allow(clippy::type_complexity)] // the counters, and the two parts of an ExecSpec
pub(super) fn prepare(
    dir: &Path,
    lengthened: Lengthened<'_>,
    delay_ns: u64,
) -> Result<(Counters, Vec<(String, String)>, Vec<Arc<OwnedFd>>), DelayError> {
    let object = preload_object(dir)?;
    let what = "lock delay's counters";
    let memory = |source| DelayError::Memory { what, source };
    let counts = File::from(memfd(c"scalprof-delay-counts").map_err(memory)?);
    counts.set_len(16).map_err(memory)?;
    let counts = Arc::new(OwnedFd::from(counts));
    let theirs = std::env::var("LD_PRELOAD").ok();
    let mut env = vec![
        ("LD_PRELOAD".into(), preload(&object, theirs.as_deref())),
        ("SCALPROF_DELAY_NS".into(), delay_ns.to_string()),
        (
            "SCALPROF_DELAY_COUNTS".into(),
            counts.as_raw_fd().to_string(),
        ),
    ];
    match lengthened {
        Lengthened::Lock { exe, address } => {
            let meta = std::fs::metadata(exe).map_err(|source| DelayError::Interposer {
                path: exe.to_path_buf(),
                source,
            })?;
            env.push((
                "SCALPROF_DELAY_EXE".into(),
                format!("{}:{}", meta.dev(), meta.ino()),
            ));
            env.push(("SCALPROF_DELAY_ADDRESS".into(), format!("{address:x}")));
        }
        Lengthened::Sleeps => env.push(("SCALPROF_DELAY_SLEEPS".into(), "1".into())),
    }
    Ok((Counters(counts.clone()), env, vec![object, counts]))
}

/// Writes the interposer to `dir` (unless it is there already, readable by every uid)
/// and opens it for the workload to inherit and preload as `/proc/self/fd/N`. Opened
/// through that link, the file needs no search permission on its folders: a process that
/// changed its uid (a server dropping to `nobody` before an exec) loads it from scalprof's
/// own folder (mode 0700), where the path alone made ld.so answer "cannot be preloaded".
/// A file, not a memfd: its mappings keep its name and path, by which the symbolizer
/// unwinds through it and counts its time as scalprof's.
#[allow(clippy::disallowed_methods)] // opens: scalprof's own interposer, just written in its private folder
fn preload_object(dir: &Path) -> Result<Arc<OwnedFd>, DelayError> {
    let object = dir.join("libscalprof-delay.so");
    let failed = |source| DelayError::Interposer {
        path: object.clone(),
        source,
    };
    // Rewritten only when it differs: a process of an earlier execution may still map it.
    if std::fs::read(&object).ok().as_deref() != Some(OBJECT) {
        within_file_size_limit("interposer", OBJECT.len() as u64)?;
        std::fs::write(&object, OBJECT).map_err(failed)?;
    }
    std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644)).map_err(failed)?;
    let file = File::open(&object).map_err(failed)?;
    Ok(Arc::new(above_stderr(file.into()).map_err(failed)?))
}

/// The `LD_PRELOAD` that loads the interposer `object` before the workload's own preloads
/// (`theirs`).
fn preload(object: &OwnedFd, theirs: Option<&str>) -> String {
    let ours = format!("/proc/self/fd/{}", object.as_raw_fd());
    match theirs {
        Some(theirs) if !theirs.trim().is_empty() => format!("{ours} {theirs}"),
        _ => ours,
    }
}

/// A memfd, close-on-exec (the workload is given it at exec, [`crate::exec::ExecSpec`]'s
/// `inherit`), not executable where the kernel can say so, above the standard descriptors.
fn memfd(name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a NUL-terminated name and flags; the result is checked.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_NOEXEC_SEAL) };
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // Before Linux 6.3, which knows no MFD_NOEXEC_SEAL.
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a fresh descriptor that we now own.
    above_stderr(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fd`, or a copy of it (close-on-exec) numbered above the standard descriptors, which
/// the workload's own are put at before its exec.
fn above_stderr(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own; the result is checked.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if high < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(high) })
}

fn seal(file: &File, seals: libc::c_int) -> io::Result<()> {
    // SAFETY: F_ADD_SEALS on a descriptor we own, with an integer argument.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The soft file-size limit (`ulimit -f`) in bytes, if there is one: it bounds memfds too
/// (their size is set like a file's), and a write past it raises SIGXFSZ.
fn file_size_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through the pointer we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } != 0 {
        return None;
    }
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

fn within_file_size_limit(what: &'static str, needed_bytes: u64) -> Result<(), DelayError> {
    match file_size_limit() {
        Some(limit_bytes) if limit_bytes < needed_bytes => Err(DelayError::FileSizeLimit {
            what,
            limit_bytes,
            needed_bytes,
        }),
        _ => Ok(()),
    }
}

/// The records area's layout (holds.c): a header page, then chunks of a page, each a
/// header record (tgid, records used) and [`CHUNK_RECORDS`] records.
const HEADER_BYTES: u64 = 4096;
const CHUNK_BYTES: u64 = 4096;
const CHUNK_RECORDS: usize = (CHUNK_BYTES / 16 - 1) as usize;
/// "scphold1" read as a little-endian number: the header's first word.
const AREA_MAGIC: u64 = 0x3164_6c6f_6870_6373;

/// The records area's size: 4 M records, far more than the sampling writes (a lock taken
/// 10⁸ times gives 4·10⁵ samples). Pages are allocated as the workload writes them.
const AREA_BYTES: u64 = 64 << 20;

/// The smallest area worth making, where the file-size limit makes it smaller: 8 chunks,
/// one of them kept for the acquisitions (holds.c).
const MIN_AREA_BYTES: u64 = HEADER_BYTES + 8 * CHUNK_BYTES;

/// Holds kept per lock of a process: enough for a p99 of a hundred samples beyond it.
const HOLDS_KEPT: usize = 100_000;

/// What the interposer's processes say on stderr when they cannot map the area (holds.c),
/// and what ld.so says when it cannot load the interposer (its descriptor was closed
/// before an exec).
const UNMAPPED_SAID: &str = "scalprof: no hold times from pid ";
const NOT_PRELOADED_SAID: &str = "from LD_PRELOAD cannot be preloaded";

/// Of a repeat's stderr, at most this much is searched for those lines.
const STDERR_SEARCHED: u64 = 1 << 20;

/// The hold-time records of one execution: an area in memory (a memfd) that each process
/// of the workload's tree maps shared, from a descriptor it inherits, and writes to
/// without a system call (holds.c).
pub(crate) struct HoldArea {
    area: Arc<OwnedFd>,
    object: Arc<OwnedFd>,
    nonce: u64,
    bytes: u64,
}

/// Readies the hold timing of one execution: the interposer (written to `dir`) and a
/// fresh records area.
pub(crate) fn prepare_holds(dir: &Path) -> Result<HoldArea, DelayError> {
    let object = preload_object(dir)?;
    let what = "hold times' records area";
    // The area is sized like a file: within the file-size limit, which then says how
    // many records it holds.
    let bytes = file_size_limit().map_or(AREA_BYTES, |limit| {
        (limit / CHUNK_BYTES * CHUNK_BYTES).min(AREA_BYTES)
    });
    if bytes < MIN_AREA_BYTES {
        return Err(DelayError::FileSizeLimit {
            what,
            limit_bytes: file_size_limit().unwrap_or(0),
            needed_bytes: MIN_AREA_BYTES,
        });
    }
    let memory = |source| DelayError::Memory { what, source };
    let file = File::from(memfd(c"scalprof-holds").map_err(memory)?);
    file.set_len(bytes).map_err(memory)?;
    let nonce = nonce();
    let mut header = [0u8; 16];
    header[..8].copy_from_slice(&AREA_MAGIC.to_ne_bytes());
    header[8..].copy_from_slice(&nonce.to_ne_bytes());
    file.write_all_at(&header, 0).map_err(memory)?;
    // Its size is scalprof's: a workload that truncated it would fault in its own writes.
    seal(
        &file,
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
    )
    .map_err(memory)?;
    Ok(HoldArea {
        area: Arc::new(OwnedFd::from(file)),
        object,
        nonce,
        bytes,
    })
}

/// A number the area's header carries and the workload's environment names, so that a
/// descriptor the workload closed and reused is not taken for the area.
fn nonce() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into the buffer we pass.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        return u64::from_ne_bytes(bytes);
    }
    // Without getrandom: the time and pid, distinct enough for a descriptor check.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32)
}

/// What one execution's interposers recorded, with what they could not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HoldRecords {
    /// Per process and lock, the acquisitions and the timed holds.
    pub holds: Vec<UserHoldRaw>,
    /// Timed holds lost because the area was full: the ones kept are the earlier.
    pub dropped_samples: u64,
    /// Threads' acquisition counts lost so: `taken/op` is low.
    pub dropped_counts: u64,
    /// The process images that mapped the area (a fork or an exec makes one more).
    pub processes: u64,
    /// The processes that said they could not (their descriptor was closed before an
    /// exec), from the lines of the execution's stderr.
    pub unmapped: u64,
    /// The area's size, and whether the file-size limit made it smaller.
    pub area_bytes: u64,
    pub area_limited: bool,
    /// The area's header was not as scalprof wrote it (the workload wrote over it): no
    /// records were read.
    pub damaged: bool,
}

impl HoldRecords {
    /// What the hold times lost, said in a sentence, if anything.
    pub fn lost(&self) -> Option<String> {
        let mut said = Vec::new();
        if self.damaged {
            said.push(
                "the hold times' records area was overwritten by the workload: this repeat has no hold times"
                    .to_string(),
            );
        }
        let (samples, counts) = (self.dropped_samples, self.dropped_counts);
        if samples + counts > 0 {
            let what = match (samples, counts) {
                (s, 0) => format!("{s} timed holds"),
                (0, c) => format!("{c} threads' acquisition counts (`taken/op` is low)"),
                (s, c) => format!(
                    "{s} timed holds and {c} threads' acquisition counts (`taken/op` is low)"
                ),
            };
            let (size, limited) = (self.area_bytes >> 10, self.area_limited);
            said.push(if limited {
                format!("the hold times dropped {what}: their records area ({size} KiB, all that the file-size limit `ulimit -f` allows) was full, and the holds kept are the earliest; raise the limit to keep them all")
            } else {
                format!("the hold times dropped {what}: their records area ({size} KiB) was full, and the holds kept are the earliest")
            });
        }
        if self.unmapped > 0 {
            said.push(format!(
                "{} process{} of the workload timed no holds: {} scalprof's inherited descriptors before an exec (its stderr says which)",
                self.unmapped,
                if self.unmapped == 1 { "" } else { "es" },
                if self.unmapped == 1 { "it closed" } else { "they closed" },
            ));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }
}

impl HoldArea {
    /// The environment that turns the timing on, given the workload's own `LD_PRELOAD`
    /// (ours goes first), and the descriptors it names, which the workload must inherit.
    pub(crate) fn workload(
        &self,
        theirs: Option<&str>,
    ) -> (Vec<(String, String)>, Vec<Arc<OwnedFd>>) {
        let env = vec![
            ("LD_PRELOAD".into(), preload(&self.object, theirs)),
            (
                "SCALPROF_HOLDS".into(),
                format!("{}:{:x}", self.area.as_raw_fd(), self.nonce),
            ),
        ];
        (env, vec![self.object.clone(), self.area.clone()])
    }

    /// What the processes recorded: per process and lock, the acquisitions and the timed
    /// holds, with what was dropped; `stderr`, the execution's, says which processes
    /// could not record. The area goes with it.
    pub(crate) fn read(self, stderr: &Path) -> HoldRecords {
        let mut out = HoldRecords {
            area_bytes: self.bytes,
            area_limited: self.bytes < AREA_BYTES,
            unmapped: self.unmapped_in(stderr),
            ..HoldRecords::default()
        };
        let Ok(file) = self.area.try_clone().map(File::from) else {
            return out;
        };
        let mut header = [0u8; 48];
        if file.read_exact_at(&mut header, 0).is_err() {
            return out;
        }
        let word = |b: &[u8], i: usize| {
            u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
        };
        if word(&header, 0) != AREA_MAGIC || word(&header, 1) != self.nonce {
            out.damaged = true;
            return out;
        }
        let chunks = (self.bytes - HEADER_BYTES) / CHUNK_BYTES;
        let claimed = word(&header, 2).min(chunks);
        out.dropped_samples = word(&header, 3);
        out.dropped_counts = word(&header, 4);
        out.processes = word(&header, 5);
        let mut by_lock: HashMap<(u32, u64), UserHoldRaw> = HashMap::new();
        let mut kept = Reservoir::default();
        // A megabyte at a time.
        let mut block = vec![0u8; (256 * CHUNK_BYTES) as usize];
        let mut first = 0;
        while first < claimed {
            let n = (claimed - first).min(256);
            let bytes = &mut block[..(n * CHUNK_BYTES) as usize];
            if file
                .read_exact_at(bytes, HEADER_BYTES + first * CHUNK_BYTES)
                .is_err()
            {
                break;
            }
            for chunk in bytes.chunks_exact(CHUNK_BYTES as usize) {
                add_chunk(&mut by_lock, &mut kept, chunk);
            }
            first += n;
        }
        let mut holds: Vec<UserHoldRaw> = by_lock.into_values().collect();
        holds.sort_by_key(|h| (h.tgid, h.uaddr));
        out.holds = holds;
        out
    }

    /// How many processes said on `stderr` that they could not record: the interposer's
    /// line, or ld.so's when it could not load this interposer.
    #[allow(clippy::disallowed_methods)] // opens: the experiment's stderr, in the run's private folder
    fn unmapped_in(&self, stderr: &Path) -> u64 {
        let Ok(file) = File::open(stderr) else {
            return 0;
        };
        let mut text = Vec::new();
        let _ = file.take(STDERR_SEARCHED).read_to_end(&mut text);
        let object = format!("'/proc/self/fd/{}'", self.object.as_raw_fd());
        String::from_utf8_lossy(&text)
            .lines()
            .filter(|l| {
                l.starts_with(UNMAPPED_SAID)
                    || (l.contains(NOT_PRELOADED_SAID) && l.contains(&object))
            })
            .count() as u64
    }
}

/// Which of a lock's timed holds are kept, past [`HOLDS_KEPT`]: each with the same chance
/// (reservoir sampling), so that the chunks read first (the threads that claimed theirs
/// early, such as one that rebuilds an index under the lock) do not outweigh the rest.
#[derive(Default)]
struct Reservoir {
    /// Holds seen per lock.
    seen: HashMap<(u32, u64), u64>,
    /// A xorshift generator's state: the choice is the same on every read of a run.
    state: u64,
}

impl Reservoir {
    /// Where the `seen`-th hold (from 1) of a full reservoir goes; `None`: not kept.
    fn slot(&mut self, key: (u32, u64)) -> Option<usize> {
        let seen = self.seen.entry(key).or_insert(0);
        *seen += 1;
        if *seen <= HOLDS_KEPT as u64 {
            return Some(*seen as usize - 1);
        }
        if self.state == 0 {
            self.state = 0x9e37_79b9_7f4a_7c15;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let j = self.state % *seen;
        (j < HOLDS_KEPT as u64).then_some(j as usize)
    }
}

/// Adds one chunk's records: a header record (tgid, records used), then the records
/// (lock address, value), the value a hold in nanoseconds or, with [`COUNT_BIT`], a
/// thread's acquisitions.
fn add_chunk(by_lock: &mut HashMap<(u32, u64), UserHoldRaw>, kept: &mut Reservoir, chunk: &[u8]) {
    let word = |i: usize| u64::from_ne_bytes(chunk[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    let tgid = word(0) as u32;
    let used = ((word(0) >> 32) as usize).min(CHUNK_RECORDS);
    for r in 1..=used {
        let (uaddr, value) = (word(2 * r), word(2 * r + 1));
        // A record claimed but not written: a process killed in between.
        if uaddr == 0 {
            continue;
        }
        let e = by_lock.entry((tgid, uaddr)).or_insert_with(|| UserHoldRaw {
            uaddr,
            tgid,
            ..UserHoldRaw::default()
        });
        if value & COUNT_BIT != 0 {
            e.acquisitions += value & !COUNT_BIT;
        } else if let Some(i) = kept.slot((tgid, uaddr)) {
            match e.holds_ns.get_mut(i) {
                Some(slot) => *slot = value,
                None => e.holds_ns.push(value),
            }
        }
    }
}

/// A record whose value has this bit is a thread's acquisitions of the lock (holds.c).
const COUNT_BIT: u64 = 1 << 63;

#[cfg(test)]
mod tests {
    use super::{Reservoir, HOLDS_KEPT};

    #[test]
    fn past_the_kept_count_every_hold_has_the_same_chance() {
        // A first third of long holds (one thread's chunks, read first), then short ones:
        // the first HOLDS_KEPT alone would be all long; a fair sample is a third long.
        let mut kept = Reservoir::default();
        let mut holds: Vec<u64> = Vec::new();
        let total = 3 * HOLDS_KEPT as u64;
        for n in 0..total {
            let value = if n < HOLDS_KEPT as u64 { 1000 } else { 10 };
            if let Some(i) = kept.slot((1, 0x1000)) {
                match holds.get_mut(i) {
                    Some(slot) => *slot = value,
                    None => holds.push(value),
                }
            }
        }
        assert_eq!(holds.len(), HOLDS_KEPT);
        let long = holds.iter().filter(|&&h| h == 1000).count() as f64 / HOLDS_KEPT as f64;
        assert!((long - 1.0 / 3.0).abs() < 0.01, "{long}");
        // Another lock starts its own count.
        assert_eq!(kept.slot((1, 0x2000)), Some(0));
    }
}
