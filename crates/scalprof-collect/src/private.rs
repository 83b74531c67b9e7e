//! Directories and files no other user can plant anything in.
//!
//! scalprof runs as root by design and builds and runs programs (the corpus, the suite's
//! benchmark) from a cache directory; on a shared machine another local user may have
//! created that directory first (under a shared `$TMPDIR`, or with `sudo -E` keeping
//! their `$HOME`). A directory is private when it and every ancestor can be changed only by
//! us or root: the directory itself is owned by us and not writable by group or others,
//! and every ancestor is owned by us or root and is either not writable by others or
//! sticky (like `/tmp`, where others cannot rename or remove what we own). The check runs
//! on the canonical path, which is what callers then use, so no symlink in the path given
//! can be repointed later.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a directory or file is not ours alone.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    #[error("cannot create {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("refusing to use {path}: {reason}; another user could plant files there that scalprof would run or write as you. Remove it, or pick a directory only you can write (XDG_CACHE_HOME for the build cache, SUITE_DIR for the suite's files, --out for `corpus`), and rerun")]
    Unsafe { path: PathBuf, reason: String },
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Creates `path` (and missing parents, mode 0700) and checks that it is private; returns
/// its canonical path.
pub fn private_dir(path: &Path) -> Result<PathBuf, PrivateError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| PrivateError::Create {
            path: path.to_path_buf(),
            source,
        })?;
    let canon = path.canonicalize().map_err(|source| PrivateError::Create {
        path: path.to_path_buf(),
        source,
    })?;
    check_private(&canon)?;
    Ok(canon)
}

/// Checks an existing canonical directory path (see the module comment).
pub fn check_private(canon: &Path) -> Result<(), PrivateError> {
    let me = euid();
    let unsafe_because = |reason: String| PrivateError::Unsafe {
        path: canon.to_path_buf(),
        reason,
    };
    let meta = std::fs::symlink_metadata(canon).map_err(|source| PrivateError::Create {
        path: canon.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(unsafe_because("it is not a directory".into()));
    }
    if meta.uid() != me {
        return Err(unsafe_because(format!(
            "it is owned by uid {}, not by you (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_because(format!(
            "it is writable by others (mode {:o})",
            meta.mode() & 0o7777
        )));
    }
    for dir in canon.ancestors().skip(1) {
        let Ok(m) = std::fs::metadata(dir) else {
            continue;
        };
        let sticky = m.mode() & 0o1000 != 0;
        if m.uid() != me && m.uid() != 0 {
            return Err(unsafe_because(format!(
                "its parent {} is owned by uid {}",
                dir.display(),
                m.uid()
            )));
        }
        if m.mode() & 0o022 != 0 && !sticky {
            return Err(unsafe_because(format!(
                "its parent {} is writable by others (mode {:o})",
                dir.display(),
                m.mode() & 0o7777
            )));
        }
    }
    Ok(())
}

/// Creates (or truncates) a file for writing, owner-only (0600), refusing a symlink, and
/// anything but a regular file with one link that we own: what another user planted at
/// the path is never written through.
pub fn create_file(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() || m.uid() != euid() || m.nlink() != 1 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} already exists and is not a regular file of yours (owner uid {}, {} links): refusing to write through it",
                path.display(),
                m.uid(),
                m.nlink()
            ),
        ));
    }
    f.set_len(0)?;
    Ok(f)
}

/// Opens a file the user named for output (a report, a document, an export), truncated.
/// A user's own path may be a link (`-o /dev/stdout`, a link in their home), so links are
/// followed when they are yours or root's; one another user made (in a shared /tmp) is
/// refused, as is an existing file of another user's in a folder others can write to (the
/// kernel's `protected_symlinks`/`protected_regular`, whatever the machine sets them to).
/// A FIFO is never waited on when no one reads it; a device (`/dev/null`) is written as it is.
pub fn create_user_file(path: &Path) -> io::Result<File> {
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{why}: refusing to write through it"),
        ))
    };
    let link = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_symlink());
    if let Some(why) = link.as_ref().and_then(foreign_link) {
        return refuse(why);
    }
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if link.is_none() {
        flags |= libc::O_NOFOLLOW;
    }
    let f = match OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(flags)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return refuse("a FIFO that no one reads (it would wait forever)".into())
        }
        other => other?,
    };
    let m = f.metadata()?;
    // The link checked above is still the one opened through (not swapped meanwhile).
    let same_link = |n: &std::fs::Metadata| n.file_type().is_symlink().then(|| (n.dev(), n.ino()));
    let now = std::fs::symlink_metadata(path).ok();
    if link.as_ref().and_then(same_link) != now.as_ref().and_then(same_link) {
        return refuse("it changed while it was opened".into());
    }
    if let Some(why) = foreign_file(&m, path) {
        return refuse(why);
    }
    // Opened without blocking (a FIFO with a reader, `-o /dev/stdout` into a pipe): the
    // writes may block as any output does.
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    if m.is_file() {
        f.set_len(0)?;
    }
    Ok(f)
}

/// Why an output path the user named is another user's to control, if it is: a link they
/// made, or an existing file of theirs in a folder others can write to. Checked before a
/// sweep (so that it is said before many minutes of work) and again when it is opened.
pub fn foreign_output(path: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(path).ok()?;
    foreign_link(&m).or_else(|| foreign_file(&std::fs::metadata(path).ok()?, path))
}

/// A link (its own metadata) that another user made.
fn foreign_link(m: &std::fs::Metadata) -> Option<String> {
    (m.file_type().is_symlink() && m.uid() != euid() && m.uid() != 0)
        .then(|| format!("a link made by another user (uid {})", m.uid()))
}

/// A file, FIFO or socket at `path` (its metadata) of another user's, in a folder others
/// can write to. Devices (`/dev/null`) are anyone's to write.
fn foreign_file(m: &std::fs::Metadata, path: &Path) -> Option<String> {
    (m.uid() != euid() && m.uid() != 0 && !m.file_type().is_char_device() && others_may_write(path))
        .then(|| {
            format!(
                "it belongs to another user (uid {}) and others can write to its folder",
                m.uid()
            )
        })
}

/// Whether users other than the folder's owner may create files in `path`'s folder.
fn others_may_write(path: &Path) -> bool {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::metadata(parent).is_ok_and(|m| m.mode() & 0o022 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn creates_owner_only_directories_and_refuses_ones_others_can_change() {
        let tmp = tempfile::tempdir().unwrap();
        let d = private_dir(&tmp.path().join("a/b")).unwrap();
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Writable by others: refused.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir(&d).unwrap_err().to_string();
        assert!(e.contains("writable by others"), "{e}");
        // A parent others can write (not sticky): refused.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let parent = d.parent().unwrap();
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir(&d).unwrap_err().to_string();
        assert!(e.contains("parent"), "{e}");
        // Sticky, like /tmp: fine.
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o1777)).unwrap();
        private_dir(&d).unwrap();
        // Owned by someone else (needs root to chown; skipped otherwise).
        if euid() == 0 {
            let other = tmp.path().join("theirs");
            std::fs::create_dir(&other).unwrap();
            std::os::unix::fs::chown(&other, Some(65534), Some(65534)).unwrap();
            let e = private_dir(&other).unwrap_err().to_string();
            assert!(e.contains("owned by uid 65534"), "{e}");
            let e = private_dir(&other.join("sub")).unwrap_err().to_string();
            assert!(e.contains("parent"), "{e}");
        }
    }

    #[test]
    fn never_writes_through_a_symlink_or_a_hard_link() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_file(&link).is_err());
        let hard = tmp.path().join("hard");
        std::fs::hard_link(&victim, &hard).unwrap();
        assert!(create_file(&hard).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let fresh = tmp.path().join("fresh");
        create_file(&fresh).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
