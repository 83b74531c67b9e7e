//! The user-lock delay: `interpose.c`, built by build.rs into a shared object that this
//! crate carries, written next to the experiment's outputs and preloaded into the
//! workload (`LD_PRELOAD`, inherited by its whole tree), with its counters in a small file
//! that every process of the tree maps shared.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DelayError::Interposer { path, source }
    };
    let object = dir.join("libscalprof-delay.so");
    let text = object.to_string_lossy();
    if text.contains([' ', ':']) {
        return Err(DelayError::PreloadPath(object));
    }
    // Rewritten only when it differs: a process of an earlier execution may still map it.
    if std::fs::read(&object).ok().as_deref() != Some(OBJECT) {
        std::fs::write(&object, OBJECT).map_err(io(&object))?;
    }
    std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644))
        .map_err(io(&object))?;
    let counts = dir.join("delay-counts");
    std::fs::write(&counts, [0u8; 16]).map_err(io(&counts))?;
    let meta = std::fs::metadata(exe).map_err(io(exe))?;
    // The workload's own preloads, if any, still load: after ours.
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(theirs) if !theirs.trim().is_empty() => format!("{text} {theirs}"),
        _ => text.into_owned(),
    };
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
