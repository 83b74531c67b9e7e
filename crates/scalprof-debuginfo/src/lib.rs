//! Debug information for symbolization and unwinding.
//!
//! - [`elf`]: an ELF file's function symbols (`.symtab`, else `.dynsym`), its DWARF
//!   (file:line and inlined frames, via addr2line), its load segments (file offset →
//!   stated address) and the sections an unwinder needs (`.eh_frame`, `.eh_frame_hdr`,
//!   `.text`). Separate debug files under `/usr/lib/debug/.build-id/` are used when present.
//! - [`kallsyms`]: the running kernel's symbols from `/proc/kallsyms`.
//! - [`SymbolCache`]: ELF files opened once per path.

pub mod elf;
pub mod kallsyms;
pub mod kernel_layout;
pub mod layout;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use elf::ElfInfo;

/// Opens a file to read only if it is a regular file, without blocking on the way: a FIFO
/// or a device given (or planted) where a binary or a perf.data is expected would otherwise
/// block the reader forever or feed it endless bytes.
pub fn open_regular(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO for reading waits for a writer without it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory)",
        ));
    }
    Ok(file)
}
pub use kallsyms::Kallsyms;

#[derive(Debug, thiserror::Error)]
pub enum DebugInfoError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a usable ELF file: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("kernel BTF: {0}")]
    KernelBtf(String),
}

/// The data cache's line size, from sysfs (64 if unknown).
pub fn cache_line_size() -> u64 {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &u64| n > 0)
        .unwrap_or(64)
}

/// ELF files opened once each; failures are remembered too, with their reason.
#[derive(Default)]
pub struct SymbolCache {
    files: HashMap<PathBuf, Result<Arc<ElfInfo>, String>>,
}

impl SymbolCache {
    pub fn get(&mut self, path: &Path) -> Option<Arc<ElfInfo>> {
        self.files
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                ElfInfo::open(path)
                    .map(Arc::new)
                    .map_err(|e| error_chain(&e))
            })
            .as_ref()
            .ok()
            .cloned()
    }

    /// Why `path` could not be read, if it was tried and failed.
    pub fn failure(&self, path: &Path) -> Option<&str> {
        self.files.get(path)?.as_ref().err().map(String::as_str)
    }
}

/// An error and its causes, "outer: inner".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text += &format!(": {c}");
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_file_is_remembered_with_its_reason() {
        let mut cache = SymbolCache::default();
        let missing = Path::new("/nonexistent/scalprof/bin");
        assert!(cache.get(missing).is_none());
        let reason = cache.failure(missing).expect("the failure is kept");
        assert!(reason.contains("/nonexistent/scalprof/bin"), "{reason}");
        assert!(reason.contains("No such file"), "{reason}");
        let not_elf = std::env::temp_dir().join(format!("scalprof-not-elf-{}", std::process::id()));
        std::fs::write(&not_elf, b"#!/bin/sh\n").unwrap();
        assert!(cache.get(&not_elf).is_none());
        assert!(cache.failure(&not_elf).is_some());
        std::fs::remove_file(&not_elf).unwrap();
        assert!(cache.failure(Path::new("/never/asked")).is_none());
    }
}
