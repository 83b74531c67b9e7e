//! Debug information for symbolization and unwinding.
//!
//! - [`elf`]: an ELF file's function symbols (`.symtab`, else `.dynsym`), its DWARF
//!   (file:line and inlined frames, via addr2line), its load segments (file offset →
//!   stated address) and the sections an unwinder needs (`.eh_frame`, `.eh_frame_hdr`,
//!   `.text`). Separate debug files under `/usr/lib/debug/.build-id/` are used when present.
//! - [`kallsyms`]: the running kernel's symbols from `/proc/kallsyms`.
//! - [`SymbolCache`]: ELF files read once per run each (by device and inode, not path).

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod child;
pub mod elf;
pub mod kallsyms;
pub mod kernel_layout;
pub mod layout;
pub mod mapped;
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

/// [`open_regular`] in this process. The path is opened first with `O_PATH`, which runs no
/// driver's open and waits for no FIFO's writer; only a regular file is then opened for
/// reading, through `/proc/self/fd` (the same inode, whatever the path names meanwhile).
pub(crate) fn open_direct(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    open_checked(path, 0)
}

/// [`open_regular`] in this process, refusing a link in the path's last component (a
/// place another user may write, where a link could point anywhere).
pub fn open_regular_nofollow(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    open_checked(path, libc::O_NOFOLLOW)
}

/// The one open of a file another user may have put there: `O_PATH` (with `flags`), an
/// fstat that it is regular, then a reopen through `/proc/self/fd`.
#[allow(clippy::disallowed_methods)] // opens: O_PATH, fstat'ed regular, then reopened through /proc/self/fd
fn open_checked(path: &std::path::Path, flags: i32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC | flags)
        .open(path)?;
    // fstat works on an O_PATH descriptor.
    if !handle.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory)",
        ));
    }
    // O_NONBLOCK and O_NOCTTY as a second guard: a regular file ignores both.
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))?;
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

/// ELF files read once each per run, by the file (device and inode), not by the path: a
/// hard link or another path to a file read already gets the same answer, its failure
/// included (with its reason). Clones share one cache: the builders that symbolize one
/// profile on several threads open each file once, and read its DWARF once.
///
/// Reading symbol tables has a budget for the whole run ([`SymbolCache::RUN_BUDGET`]):
/// once the files read have taken that long together, no other file is read, and each
/// says why it has no names.
#[derive(Clone, Default)]
pub struct SymbolCache {
    files: Arc<Mutex<Files>>,
}

#[derive(Default)]
struct Files {
    /// Each path asked for, and the entry of the file it named.
    by_path: HashMap<PathBuf, Slot>,
    /// Each file read, by (device, inode).
    by_file: HashMap<(u64, u64), Slot>,
    /// How long reading the files has taken so far, all together.
    spent: std::time::Duration,
    /// How many files were read.
    read: u64,
}

/// One file's entry, filled by the first thread that asks (the others wait for it).
type Slot = Arc<OnceLock<Result<Arc<ElfInfo>, String>>>;

impl SymbolCache {
    /// The wall time one run may spend reading symbol tables, all files together. A
    /// profile reads a few hundred files at most, each in tens of milliseconds (libc's
    /// parser child answers in 20 ms, libLLVM's 117 MB in 0.6 s); a file that takes long
    /// is stopped at [`sandbox::ELF_CPU_S`] of CPU.
    pub const RUN_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

    fn files(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry of the file at `path`, and the file opened when it is still to be read.
    fn slot(&self, path: &Path) -> (Slot, Option<std::fs::File>) {
        if let Some(slot) = self.files().by_path.get(path) {
            if slot.get().is_some() {
                return (slot.clone(), None);
            }
        }
        // Opened outside the map's lock: other files need not wait for this one. The
        // entry is the opened file's, whatever the path names by now.
        let opened = open_regular(path).and_then(|f| Ok((file_id(&f)?, f)));
        let mut files = self.files();
        let files = &mut *files;
        match opened {
            Ok((id, file)) => {
                let slot = files.by_file.entry(id).or_default().clone();
                files
                    .by_path
                    .entry(path.to_path_buf())
                    .or_insert_with(|| slot.clone());
                (slot, Some(file))
            }
            Err(source) => {
                let e = DebugInfoError::Read {
                    path: path.to_path_buf(),
                    source,
                };
                let slot = Slot::new(OnceLock::from(Err(error_chain(&e))));
                let slot = files.by_path.entry(path.to_path_buf()).or_insert(slot);
                (slot.clone(), None)
            }
        }
    }

    pub fn get(&self, path: &Path) -> Option<Arc<ElfInfo>> {
        let (slot, file) = self.slot(path);
        slot.get_or_init(|| {
            let Some(file) = file else {
                // An entry another thread began and this one could not open: its reason.
                return Err(format!("cannot read {}", path.display()));
            };
            self.read(path, file)
        })
        .as_ref()
        .ok()
        .cloned()
    }

    /// Reads one file, within what is left of the run's budget.
    fn read(&self, path: &Path, file: std::fs::File) -> Result<Arc<ElfInfo>, String> {
        if self.files().spent >= Self::RUN_BUDGET {
            return Err(format!(
                "{} was not read: this run's {} s for reading symbol tables are spent \
                 (the files that took them are named with their reasons)",
                path.display(),
                Self::RUN_BUDGET.as_secs()
            ));
        }
        let started = std::time::Instant::now();
        let read = ElfInfo::from_file(path, file);
        let mut files = self.files();
        files.spent += started.elapsed();
        files.read += 1;
        drop(files);
        read.map(Arc::new).map_err(|e| error_chain(&e))
    }

    /// Why `path` could not be read, if it was tried and failed.
    pub fn failure(&self, path: &Path) -> Option<String> {
        let slot = self.files().by_path.get(path)?.clone();
        slot.get()?.as_ref().err().cloned()
    }
}

/// The (device, inode) of an open file.
fn file_id(file: &std::fs::File) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
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
    fn a_hard_link_or_another_path_to_a_file_read_gets_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let (elf, not_elf) = (dir.path().join("true"), dir.path().join("script"));
        std::fs::copy("/bin/true", &elf).unwrap();
        std::fs::write(&not_elf, b"#!/bin/sh\n").unwrap();
        let cache = SymbolCache::default();
        let first = cache.get(&elf).expect("/bin/true is an ELF file");
        assert!(cache.get(&not_elf).is_none());
        let reason = cache.failure(&not_elf).unwrap();
        for (i, (file, path)) in [
            (&elf, "linked"),
            (&elf, "linked-again"),
            (&not_elf, "linked-script"),
        ]
        .into_iter()
        .enumerate()
        {
            let link = dir.path().join(path);
            if i == 1 {
                std::os::unix::fs::symlink(file, &link).unwrap();
            } else {
                std::fs::hard_link(file, &link).unwrap();
            }
            match cache.get(&link) {
                Some(again) => assert!(Arc::ptr_eq(&again, &first), "{path} read again"),
                None => assert_eq!(cache.failure(&link), Some(reason.clone())),
            }
        }
        assert_eq!(cache.files().read, 2, "a file read twice");
    }

    #[test]
    fn once_the_runs_budget_is_spent_no_other_file_is_read_and_each_says_why() {
        let cache = SymbolCache::default();
        cache.files().spent = SymbolCache::RUN_BUDGET;
        let elf = Path::new("/bin/true");
        assert!(cache.get(elf).is_none());
        let reason = cache.failure(elf).unwrap();
        assert!(reason.starts_with("/bin/true was not read"), "{reason}");
        assert!(
            reason.contains("60 s for reading symbol tables are spent"),
            "{reason}"
        );
        assert_eq!(cache.files().read, 0);
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
