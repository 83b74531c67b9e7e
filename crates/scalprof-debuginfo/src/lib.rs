//! Debug information for symbolization and unwinding.
//!
//! - [`elf`]: an ELF file's function symbols (`.symtab`, else `.dynsym`), its DWARF
//!   (file:line and inlined frames, via addr2line), its load segments (file offset →
//!   stated address) and the sections an unwinder needs (`.eh_frame`, `.eh_frame_hdr`,
//!   `.text`). Separate debug files under `/usr/lib/debug/.build-id/` are used when present.
//! - [`kallsyms`]: the running kernel's symbols from `/proc/kallsyms`.
//! - [`SymbolCache`]: ELF files opened once per path.

pub mod child;
pub mod elf;
pub mod kallsyms;
pub mod kernel_layout;
pub mod layout;
pub mod sandbox;
pub mod seccomp;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use elf::ElfInfo;

/// Opens a file to read only if it is a regular file, without blocking on the way: a FIFO
/// or a device given (or planted) where a binary or a perf.data is expected would otherwise
/// block the reader forever or feed it endless bytes.
pub fn open_regular(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    // A parser child without privileges asks its parent for what it may not open itself
    // (root's own binaries); what it can open, or what does not exist, costs no question.
    match open_direct(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            sandbox::brokered_open(path).unwrap_or(Err(e))
        }
        opened => opened,
    }
}

/// [`open_regular`] in this process.
pub(crate) fn open_direct(path: &std::path::Path) -> std::io::Result<std::fs::File> {
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

/// ELF files opened once each; failures are remembered too, with their reason. Clones
/// share one cache: the builders that symbolize one profile on several threads open each
/// file once, and read its DWARF once.
#[derive(Clone, Default)]
pub struct SymbolCache {
    files: Arc<Mutex<HashMap<PathBuf, Slot>>>,
}

/// One file's entry, filled by the first thread that asks (the others wait for it).
type Slot = Arc<OnceLock<Result<Arc<ElfInfo>, String>>>;

impl SymbolCache {
    fn slot(&self, path: &Path) -> Slot {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.entry(path.to_path_buf()).or_default().clone()
    }

    pub fn get(&self, path: &Path) -> Option<Arc<ElfInfo>> {
        // Opened outside the map's lock: other files need not wait for this one.
        self.slot(path)
            .get_or_init(|| {
                ElfInfo::open(path)
                    .map(Arc::new)
                    .map_err(|e| error_chain(&e))
            })
            .as_ref()
            .ok()
            .cloned()
    }

    /// Why `path` could not be read, if it was tried and failed.
    pub fn failure(&self, path: &Path) -> Option<String> {
        let slot = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)?
            .clone();
        slot.get()?.as_ref().err().cloned()
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
        let cache = SymbolCache::default();
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

    #[test]
    fn clones_on_several_threads_share_one_opened_file() {
        let exe = std::env::current_exe().unwrap();
        let cache = SymbolCache::default();
        let this = cache.get(&exe).expect("the test binary is an ELF file");
        let addr = this
            .symbol_address("main")
            .expect("the test binary has a main");
        let names = this.frames(addr);
        let others: Vec<_> = (0..4)
            .map(|_| {
                let (cache, exe) = (cache.clone(), exe.clone());
                std::thread::spawn(move || {
                    let elf = cache.get(&exe).unwrap();
                    (elf.clone(), elf.frames(addr))
                })
            })
            .collect();
        for t in others {
            let (elf, frames) = t.join().unwrap();
            assert!(Arc::ptr_eq(&elf, &this), "opened again");
            assert_eq!(frames, names);
        }
    }
}
