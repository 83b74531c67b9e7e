//! The files processes mapped, opened as the mapping's file rather than by its path alone:
//! a path another user controls may name another file by the time scalprof reads it (a
//! FIFO, a device, someone else's binary). Where the process still runs, its mapping is
//! opened through `/proc/PID/map_files` (root may) or its own root directory; the file
//! opened must then be the device and inode the kernel gave for the mapping, or it is
//! refused and gets no names.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{ElfInfo, SymbolCache};

/// A file-backed mapping of a process, as the kernel described it (a line of
/// `/proc/PID/maps`, a perf `MMAP2` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped<'a> {
    pub path: &'a str,
    /// The device of the mapped file, (major, minor), and its inode.
    pub dev: (u32, u32),
    pub inode: u64,
    /// The process and the mapping's range, where the process may still run (a live
    /// recording's; never the PIDs of an imported perf.data, which name other processes).
    pub live: Option<(i32, u64, u64)>,
}

/// Why the file at a mapping's path is not read.
pub const NOT_MAPPED: &str = "not the file the process mapped";

/// `makedev(major, minor)`: the `st_dev` of a file on that device.
pub fn makedev(major: u32, minor: u32) -> u64 {
    libc::makedev(major, minor)
}

/// Opens the file a process mapped, for reading, as a regular file only
/// ([`crate::open_regular`]); refused with [`NOT_MAPPED`] where the file opened is not the
/// mapping's device and inode.
pub fn open_mapped(m: &Mapped<'_>) -> Result<File, String> {
    if let Some((pid, start, end)) = m.live {
        // The mapping's own file, whatever its path names now; root may open it.
        let own = PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}"));
        if let Ok(file) = crate::open_regular(&own) {
            // The kernel hands over the mapped file itself: its inode is the mapping's. Its
            // st_dev may still differ from the maps' device (a btrfs subvolume's, an
            // overlay's), so only the inode is compared.
            return match file.metadata() {
                Ok(meta) if meta.ino() == m.inode => Ok(file),
                Ok(meta) => Err(mismatch(m, &meta)),
                Err(e) => Err(format!("cannot read it: {e}")),
            };
        }
        // The path as the process sees it (its mount namespace, its chroot).
        if m.path.starts_with('/') {
            let within = PathBuf::from(format!("/proc/{pid}/root{}", m.path));
            if let Ok(file) = crate::open_regular(&within) {
                return checked(m, file);
            }
        }
    }
    let file =
        crate::open_regular(Path::new(m.path)).map_err(|e| format!("cannot read it: {e}"))?;
    checked(m, file)
}

/// `file` where it is the mapping's device and inode.
fn checked(m: &Mapped<'_>, file: File) -> Result<File, String> {
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if meta.ino() == m.inode && meta.dev() == makedev(m.dev.0, m.dev.1) {
        Ok(file)
    } else {
        Err(mismatch(m, &meta))
    }
}

fn mismatch(m: &Mapped<'_>, meta: &std::fs::Metadata) -> String {
    let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    format!(
        "{NOT_MAPPED} (it mapped device {:x}:{:x} inode {}; the path now names device \
         {major:x}:{minor:x} inode {}): it is not read",
        m.dev.0,
        m.dev.1,
        m.inode,
        meta.ino()
    )
}

impl SymbolCache {
    /// The ELF file a process mapped ([`open_mapped`]), read once per file like
    /// [`SymbolCache::get`]; the error says why it has no names.
    pub fn get_mapped(&self, m: &Mapped<'_>) -> Result<Arc<ElfInfo>, String> {
        let file = open_mapped(m).map_err(|why| format!("{}: {why}", m.path))?;
        let id = crate::file_id(&file).map_err(|e| format!("{}: cannot read it: {e}", m.path))?;
        let slot = {
            let mut files = self.files();
            let slot = files.by_file.entry(id).or_default().clone();
            // A later look-up by the path alone (the sharing analysis, by the file a
            // sampled address is in) finds this file, unless the path was read before.
            files
                .by_path
                .entry(PathBuf::from(m.path))
                .or_insert_with(|| slot.clone());
            slot
        };
        slot.get_or_init(|| self.read(Path::new(m.path), file))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a mapping of `path` says: its device and inode now.
    fn mapping_of(path: &Path) -> (u32, u32, u64) {
        let meta = std::fs::metadata(path).unwrap();
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        (major, minor, meta.ino())
    }

    #[test]
    fn fifos_and_devices_are_refused_without_being_opened_and_regular_files_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let started = std::time::Instant::now();
        // A FIFO no one writes: an open for reading would wait for a writer.
        let e = crate::open_direct(&fifo).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        // A character device: its driver's open never runs.
        let e = crate::open_direct(Path::new("/dev/null")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        let e = crate::open_direct(dir.path()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let regular = dir.path().join("regular");
        std::fs::write(&regular, b"bytes").unwrap();
        let mut read = String::new();
        use std::io::Read;
        crate::open_direct(&regular)
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "bytes");
        // Through a link too (the file it names is what is opened and checked).
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert!(crate::open_direct(&link).is_err());
    }

    #[test]
    fn a_file_that_is_not_the_one_mapped_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"first").unwrap();
        let (major, minor, inode) = mapping_of(&path);
        let text = path.to_str().unwrap();
        let m = Mapped {
            path: text,
            dev: (major, minor),
            inode,
            live: None,
        };
        assert!(open_mapped(&m).is_ok());
        // Replaced at the same path: another inode.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("other"), b"keeps the inode taken").unwrap();
        std::fs::write(&path, b"second").unwrap();
        assert_ne!(mapping_of(&path).2, inode);
        let e = open_mapped(&m).unwrap_err();
        assert!(e.contains(NOT_MAPPED), "{e}");
        // The same inode on another device is another file too.
        let elsewhere = Mapped {
            dev: (major.wrapping_add(1), minor),
            inode: mapping_of(&path).2,
            ..m
        };
        assert!(open_mapped(&elsewhere).unwrap_err().contains(NOT_MAPPED));
        // A FIFO planted at the path is refused before the identity is looked at.
        std::fs::remove_file(&path).unwrap();
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = open_mapped(&m).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_running_process_s_mapping_is_opened_as_its_own_file() {
        // This test binary maps itself; its maps line gives the device and inode.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        let line = maps
            .lines()
            .find(|l| l.ends_with(exe) && l.split_whitespace().nth(1) == Some("r-xp"))
            .expect("the test binary's code is mapped");
        let f: Vec<&str> = line.split_whitespace().collect();
        let (start, end) = f[0].split_once('-').unwrap();
        let (major, minor) = f[3].split_once(':').unwrap();
        let m = Mapped {
            path: exe,
            dev: (
                u32::from_str_radix(major, 16).unwrap(),
                u32::from_str_radix(minor, 16).unwrap(),
            ),
            inode: f[4].parse().unwrap(),
            live: Some((
                std::process::id() as i32,
                u64::from_str_radix(start, 16).unwrap(),
                u64::from_str_radix(end, 16).unwrap(),
            )),
        };
        let opened = open_mapped(&m).unwrap();
        assert_eq!(opened.metadata().unwrap().ino(), m.inode);
        let cache = SymbolCache::default();
        let elf = cache
            .get_mapped(&m)
            .expect("the test binary is an ELF file");
        assert!(elf.symbol_address("main").is_some());
        // A mapping the path no longer matches gets no names, and says why.
        let wrong = Mapped {
            inode: m.inode + 1,
            live: None,
            ..m
        };
        let e = cache.get_mapped(&wrong).unwrap_err();
        assert!(e.contains(NOT_MAPPED), "{e}");
    }
}
