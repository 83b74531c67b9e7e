//! The user-lock delay: `interpose.c`, built by build.rs into a shared object that this
//! crate carries, written next to the experiment's outputs and preloaded into the
//! workload (`LD_PRELOAD`, inherited by its whole tree), with its counters in a small file
//! that every process of the tree maps shared.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use scalprof_model::locks::UserHoldRaw;

use super::DelayCounts;
use crate::DelayError;

/// The interposer, as built for this machine.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libscalprof-delay.so"));

/// The interposer's counters of one execution: releases seen, nanoseconds spun.
pub(super) struct Counters(PathBuf);

impl Counters {
    /// What the execution's tree counted (zeros if the file is gone).
    pub(super) fn read(&self) -> DelayCounts {
        let bytes = std::fs::read(&self.0).unwrap_or_default();
        let word = |i: usize| {
            bytes
                .get(i * 8..i * 8 + 8)
                .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
        };
        DelayCounts {
            calls: word(0),
            spun_ns: word(1),
        }
    }
}

/// Writes the interposer and fresh counters to `dir`, and returns them with the
/// environment that makes the workload lengthen the lock at `address` of `exe` by
/// `delay_ns` at each release.
pub(super) fn prepare(
    dir: &Path,
    exe: &Path,
    address: u64,
    delay_ns: u64,
) -> Result<(Counters, Vec<(String, String)>), DelayError> {
    let preload = write_object(dir)?;
    let counts = dir.join("delay-counts");
    std::fs::write(&counts, [0u8; 16]).map_err(io_error(&counts))?;
    let meta = std::fs::metadata(exe).map_err(io_error(exe))?;
    let env = vec![
        ("LD_PRELOAD".into(), preload),
        (
            "SCALPROF_DELAY_EXE".into(),
            format!("{}:{}", meta.dev(), meta.ino()),
        ),
        ("SCALPROF_DELAY_ADDRESS".into(), format!("{address:x}")),
        ("SCALPROF_DELAY_NS".into(), delay_ns.to_string()),
        (
            "SCALPROF_DELAY_COUNTS".into(),
            counts.to_string_lossy().into_owned(),
        ),
    ];
    Ok((Counters(counts), env))
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> DelayError {
    let path = path.to_path_buf();
    move |source| DelayError::Interposer { path, source }
}

/// Writes the interposer to `dir` (unless it is there already) and returns the
/// `LD_PRELOAD` that loads it, before the workload's own preloads.
fn write_object(dir: &Path) -> Result<String, DelayError> {
    let object = dir.join("libscalprof-delay.so");
    let text = object.to_string_lossy();
    if text.contains([' ', ':']) {
        return Err(DelayError::PreloadPath(object));
    }
    // Rewritten only when it differs: a process of an earlier execution may still map it.
    if std::fs::read(&object).ok().as_deref() != Some(OBJECT) {
        std::fs::write(&object, OBJECT).map_err(io_error(&object))?;
    }
    std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644))
        .map_err(io_error(&object))?;
    Ok(match std::env::var("LD_PRELOAD") {
        Ok(theirs) if !theirs.trim().is_empty() => format!("{text} {theirs}"),
        _ => text.into_owned(),
    })
}

/// The hold-time records of one execution: a directory where each process of the tree
/// writes `holds.PID` (holds.c).
pub(crate) struct HoldFiles(PathBuf);

/// At most this many bytes of records are read from one execution's files: 4 M records,
/// far more than the sampling writes (a lock taken 10⁸ times gives 4·10⁵ samples).
const HOLD_BYTES_READ: u64 = 64 << 20;

/// Holds kept per lock of a process: enough for a p99 of a hundred samples beyond it.
const HOLDS_KEPT: usize = 100_000;

/// Readies the hold timing of one execution in `dir/stem`: the interposer written to
/// `dir`, the records' directory made, and the environment that turns the timing on.
pub(crate) fn prepare_holds(
    dir: &Path,
    stem: &str,
) -> Result<(HoldFiles, Vec<(String, String)>), DelayError> {
    let preload = write_object(dir)?;
    let records = dir.join(format!("{stem}.holds"));
    // Left by an execution cut short: its records are not this one's.
    let _ = std::fs::remove_dir_all(&records);
    std::fs::create_dir(&records).map_err(io_error(&records))?;
    let env = vec![
        ("LD_PRELOAD".into(), preload),
        (
            "SCALPROF_HOLDS_DIR".into(),
            records.to_string_lossy().into_owned(),
        ),
    ];
    Ok((HoldFiles(records), env))
}

impl HoldFiles {
    /// What the processes wrote: per process and lock, the acquisitions and the timed
    /// holds. The directory goes with it. Records are fixed-size pairs of numbers; a
    /// file that is not a process's (a name without a PID) or a partial record is skipped.
    pub(crate) fn read(self) -> Vec<UserHoldRaw> {
        let mut by_lock: HashMap<(u32, u64), UserHoldRaw> = HashMap::new();
        let mut budget = HOLD_BYTES_READ;
        let entries = std::fs::read_dir(&self.0).into_iter().flatten().flatten();
        for entry in entries {
            let name = entry.file_name();
            let Some(tgid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("holds."))
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(file) = std::fs::File::open(entry.path()) else {
                continue;
            };
            let mut bytes = Vec::new();
            let _ = file.take(budget).read_to_end(&mut bytes);
            budget -= bytes.len() as u64;
            for record in bytes.chunks_exact(16) {
                let word =
                    |i: usize| u64::from_ne_bytes(record[i..i + 8].try_into().unwrap_or([0; 8]));
                let (uaddr, value) = (word(0), word(8));
                let e = by_lock.entry((tgid, uaddr)).or_insert_with(|| UserHoldRaw {
                    uaddr,
                    tgid,
                    ..UserHoldRaw::default()
                });
                if value & COUNT_BIT != 0 {
                    e.acquisitions += value & !COUNT_BIT;
                } else if e.holds_ns.len() < HOLDS_KEPT {
                    e.holds_ns.push(value);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
        let mut out: Vec<UserHoldRaw> = by_lock.into_values().collect();
        out.sort_by_key(|h| (h.tgid, h.uaddr));
        out
    }
}

/// A record whose value has this bit is a thread's acquisitions of the lock (holds.c).
const COUNT_BIT: u64 = 1 << 63;
