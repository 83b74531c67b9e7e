//! Directories and files no other user can plant anything in.
//!
//! scalprof runs as root by design and builds and runs programs (the corpus, the suite's
//! benchmark) from a cache directory; on a shared machine another local user may have
//! created that directory first (under a shared `$TMPDIR`, or with `sudo -E` keeping
//! their `$HOME`). A directory is private when it and every ancestor can be changed only by
//! us or root: the directory itself is owned by us and not writable by group or others,
//! and every ancestor is owned by us or root and is either not writable by others or
//! sticky (like `/tmp`, where others cannot rename or remove what we own). The check runs
//! on the path as given, one component at a time (a link is judged by its owner and by
//! the folder it is in before it is followed, see [`walk`]), before anything is created
//! there; and again on the canonical path, which is what callers then use, so no symlink
//! in the path given can be repointed later.

mod walk;

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use walk::{euid, Policy, Reached, WalkError, Want};

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

/// Creates `path` (and missing parents, mode 0700) and checks that it is private; returns
/// its canonical path. Each folder is checked before anything is made in it, so a
/// refused path (another user's home, with `sudo -E`) is left as it was.
pub fn private_dir(path: &Path) -> Result<PathBuf, PrivateError> {
    let create = |source| PrivateError::Create {
        path: path.to_path_buf(),
        source,
    };
    // From the root: the folders above a relative path are checked too.
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_err(create)?.join(path)
    };
    match walk::walk(&abs, Policy::Private, Want::Dir) {
        Ok(_) => {}
        Err(WalkError::Refused(reason)) => {
            return Err(PrivateError::Unsafe {
                path: path.to_path_buf(),
                reason,
            })
        }
        Err(WalkError::Io { path: at, source }) => {
            return Err(PrivateError::Create {
                source: explain_denied(&at, source),
                path: at,
            })
        }
    }
    let canon = abs.canonicalize().map_err(create)?;
    check_private(&canon)?;
    Ok(canon)
}

/// A folder we may not create in says whose it is: one left by root in a user's home
/// (`sudo -E scalprof demo`) is otherwise a bare "Permission denied".
fn explain_denied(at: &Path, e: io::Error) -> io::Error {
    if e.kind() != io::ErrorKind::PermissionDenied {
        return e;
    }
    let Some(m) = at
        .parent()
        .and_then(|p| std::fs::metadata(p).ok())
        .filter(|m| m.uid() != euid())
    else {
        return e;
    };
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{e}: its folder belongs to uid {} (mode {:o}), not to you (uid {}); remove that folder (as its owner) or pick another one",
            m.uid(),
            m.mode() & 0o7777,
            euid()
        ),
    )
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
#[allow(clippy::disallowed_methods)] // opens: a file of ours in a checked private folder, O_NOFOLLOW
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

/// Where an output path leads, walked as [`write_user_file`] says: a name in a folder we
/// hold open, or what a /proc link (`/dev/stdout`) leads to, opened.
enum Output {
    Name(OwnedFd, CString),
    Proc(File),
}

/// Walks an output path to its folder, refusing another user's link on the way.
fn output_parent(path: &Path) -> io::Result<Output> {
    match walk::walk(path, Policy::Output, Want::Parent) {
        Ok(Reached::Name { dir, name }) => Ok(Output::Name(dir, name)),
        Ok(Reached::Proc(f)) => Ok(Output::Proc(f)),
        Ok(Reached::Dir) => unreachable!("a walk for a file's folder"),
        Err(WalkError::Refused(why)) => Err(refuse(why)),
        Err(WalkError::Io { source, .. }) => Err(source),
    }
}

/// The error of an output that another user could redirect or that is not one to write.
fn refuse(why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{why}: refusing to write through it"),
    )
}

/// Writes a whole file the user named for output (a report, a document, an export).
///
/// The path is walked one component at a time ([`walk`]): links are followed when they
/// are yours or root's (`/tmp` may be one, `/dev/stdout` is one), and one another user
/// made, in the last component or in any folder of the path (a shared /tmp, a group's
/// project folder), is refused, whatever the kernel's `protected_symlinks` says. An
/// existing file of another user's in a folder others can write to is refused too.
///
/// A regular file is never truncated and then written: the bytes go to an unnamed
/// owner-only file in the same folder, which replaces the old one by rename once it is
/// complete, so an interrupted scalprof (a signal, a full disk) leaves the previous file
/// whole and nothing else behind. The replacement keeps the old file's mode (and owner,
/// when we may set it); a new file gets 0666 less the umask, as `open` would give it.
/// A FIFO is never waited on when no one reads it; a device (`/dev/null`) or what a
/// /proc link leads to (`/dev/stdout`, a pipe) is written as it is.
pub fn write_user_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = match output_parent(path)? {
        Output::Name(dir, name) => (dir, name),
        Output::Proc(f) => return write_in_place(f, bytes),
    };
    let old = match walk::stat_at(&dir, &name) {
        Ok(st) => Some(st),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => return Err(e),
    };
    let folder = walk::fstat(&dir)?;
    if let Some(st) = &old {
        if let Some(why) = foreign_stat(st, &folder) {
            return Err(refuse(why));
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {}
            libc::S_IFDIR => return Err(io::Error::from_raw_os_error(libc::EISDIR)),
            libc::S_IFLNK => return Err(refuse("it changed while it was opened".into())),
            // A FIFO, a device, a socket: written as it is.
            _ => {
                let f = match walk::open_at(
                    Some(&dir),
                    &name,
                    libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW,
                    0,
                ) {
                    Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                        return Err(refuse(
                            "a FIFO that no one reads (it would wait forever)".into(),
                        ))
                    }
                    other => other?,
                };
                return write_in_place(File::from(f), bytes);
            }
        }
    }
    replace(&dir, &name, old.as_ref(), bytes)
}

/// Writes `bytes` to an opened output that cannot be replaced by rename, from its start.
fn write_in_place(mut f: File, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    // Opened without blocking (a FIFO with a reader, `-o /dev/stdout` into a pipe): the
    // writes may block as any output does.
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    if f.metadata()?.is_file() {
        f.set_len(0)?;
    }
    f.write_all(bytes)?;
    f.flush()
}

/// Reads a small file from a place another user may control (a checkout's `.git/HEAD`,
/// a cgroup's files): never through a link in its last component, never opening a FIFO
/// or a device (looked at with O_PATH first, and only a regular file is opened), and never
/// more than `cap` bytes (a link to /dev/zero, or a huge file, is refused rather than read whole).
pub fn read_shared(path: &Path, cap: usize) -> io::Result<Vec<u8>> {
    use std::io::Read;
    // O_PATH first: a device planted there never has its driver opened.
    let f = scalprof_debuginfo::open_regular_nofollow(path).map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidInput || e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a regular file: not read", path.display()),
            )
        } else {
            e
        }
    })?;
    let mut bytes = Vec::new();
    f.take(cap as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {cap} bytes: not read", path.display()),
        ));
    }
    Ok(bytes)
}

/// Appends `bytes` to a file the environment names for output (a CI's step summary),
/// creating it when missing. The path is walked as [`write_user_file`] walks it (another
/// user's link refused); only a regular file is appended to (a FIFO or a device is
/// refused, never waited on or read), and what it held before is never read whole nor
/// rewritten: it stays as it was, whatever its bytes. A newline is put first when the
/// file does not end with one.
pub fn append_user_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let (dir, name) = match output_parent(path)? {
        Output::Name(dir, name) => (dir, name),
        Output::Proc(_) => return Err(refuse(format!("{} is not a regular file", path.display()))),
    };
    let folder = walk::fstat(&dir)?;
    if let Ok(st) = walk::stat_at(&dir, &name) {
        if let Some(why) = foreign_stat(&st, &folder) {
            return Err(refuse(why));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(refuse(format!("{} is not a regular file", path.display())));
        }
    }
    let fd = walk::open_at(
        Some(&dir),
        &name,
        libc::O_RDWR | libc::O_APPEND | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        0o666 & !umask(),
    )?;
    let mut f = File::from(fd);
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(refuse(format!("{} is not a regular file", path.display())));
    }
    let mut text = Vec::with_capacity(bytes.len() + 1);
    if m.len() > 0 {
        let mut last = [0u8; 1];
        f.read_exact_at(&mut last, m.len() - 1)?;
        if last[0] != b'\n' {
            text.push(b'\n');
        }
    }
    text.extend_from_slice(bytes);
    f.write_all(&text)?;
    f.flush()
}

/// This process's umask, from /proc (reading it with umask(2) would change it, for a
/// moment, for every thread).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Replaces `name` in `dir` (or creates it) with a file holding `bytes`, by rename.
fn replace(
    dir: &OwnedFd,
    name: &std::ffi::CStr,
    old: Option<&libc::stat>,
    bytes: &[u8],
) -> io::Result<()> {
    let mode = old.map_or(0o666 & !umask(), |st| st.st_mode & 0o777);
    let fill = |f: &mut File| fill_file(f, mode, old, bytes);
    // The unnamed file is never seen by anyone, and vanishes with us if we are killed
    // while writing it; it gets a name (a temporary one, then the target's) only once
    // complete. Filesystems without O_TMPFILE get a named temporary file instead.
    let temp = temp_name();
    match walk::open_at(Some(dir), c".", libc::O_TMPFILE | libc::O_WRONLY, 0o600) {
        Ok(fd) => link_unnamed(dir, fd, &temp, fill)?,
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            write_named(dir, &temp, fill)?
        }
        // A folder we may not create files in, holding a file we may write: written in
        // place, as it cannot be replaced.
        Err(e) if old.is_some() && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            let fd = walk::open_at(Some(dir), name, libc::O_WRONLY | libc::O_NOFOLLOW, 0)?;
            return write_in_place(File::from(fd), bytes);
        }
        Err(e) => return Err(e),
    }
    rename_over(dir, &temp, name)
}

/// Gives a new file its mode and, replacing another user's file, that user as owner;
/// then its bytes, synced.
fn fill_file(
    f: &mut File,
    mode: libc::mode_t,
    old: Option<&libc::stat>,
    bytes: &[u8],
) -> io::Result<()> {
    use std::io::Write;
    // SAFETY: fchmod and fchown on a descriptor we own, with integer arguments.
    unsafe {
        if libc::fchmod(f.as_raw_fd(), mode) != 0 {
            return Err(io::Error::last_os_error());
        }
        // Another user's file, replaced by root, stays theirs. Without the right to
        // give it away the replacement is ours, as any editor's save makes it.
        if let Some(st) = old.filter(|st| st.st_uid != euid()) {
            libc::fchown(f.as_raw_fd(), st.st_uid, st.st_gid);
        }
    }
    f.write_all(bytes)?;
    f.sync_data()
}

/// Fills the unnamed file `fd` of `dir`, then links it there as `temp`.
fn link_unnamed(
    dir: &OwnedFd,
    fd: OwnedFd,
    temp: &std::ffi::CStr,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let mut f = File::from(fd);
    fill(&mut f)?;
    let proc_path =
        CString::new(format!("/proc/self/fd/{}", f.as_raw_fd())).expect("no NUL in a number");
    // SAFETY: both paths are NUL-terminated; dir is an open directory descriptor.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            dir.as_raw_fd(),
            temp.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Creates `temp` in `dir` and fills it; a file that could not be filled is removed.
fn write_named(
    dir: &OwnedFd,
    temp: &std::ffi::CStr,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let fd = walk::open_at(
        Some(dir),
        temp,
        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
        0o600,
    )?;
    if let Err(e) = fill(&mut File::from(fd)) {
        unlink_at(dir, temp);
        return Err(e);
    }
    Ok(())
}

/// Renames `temp` over `name` in `dir`; `temp` is removed if that fails.
fn rename_over(dir: &OwnedFd, temp: &std::ffi::CStr, name: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: both names are NUL-terminated; dir is an open directory descriptor.
    let r = unsafe {
        libc::renameat(
            dir.as_raw_fd(),
            temp.as_ptr(),
            dir.as_raw_fd(),
            name.as_ptr(),
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        unlink_at(dir, temp);
        return Err(e);
    }
    Ok(())
}

/// A name for a file being written, unique to this process and call.
fn temp_name() -> CString {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    CString::new(format!(".scalprof-{}-{n}.partial", std::process::id()))
        .expect("no NUL in a number")
}

fn unlink_at(dir: &OwnedFd, name: &std::ffi::CStr) {
    // SAFETY: name is NUL-terminated; dir is an open directory descriptor.
    unsafe {
        libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0);
    }
}

/// Why an output path the user named is another user's to control, if it is: a link they
/// made (anywhere in the path), or an existing file of theirs in a folder others can
/// write to. Checked before a sweep (so that it is said before many minutes of work) and
/// again when the file is written.
pub fn foreign_output(path: &Path) -> Option<String> {
    match walk::walk(path, Policy::Output, Want::Parent) {
        Err(WalkError::Refused(why)) => Some(why),
        Ok(Reached::Name { dir, name }) => {
            let st = walk::stat_at(&dir, &name).ok()?;
            foreign_stat(&st, &walk::fstat(&dir).ok()?)
        }
        _ => None,
    }
}

/// A file, FIFO or socket (its stat) of another user's, in a folder (its stat) others
/// can write to. Devices (`/dev/null`) are anyone's to write.
fn foreign_stat(st: &libc::stat, folder: &libc::stat) -> Option<String> {
    let uid = st.st_uid;
    let device = st.st_mode & libc::S_IFMT == libc::S_IFCHR;
    (uid != euid() && uid != 0 && !device && folder.st_mode & 0o022 != 0).then(|| {
        format!("it belongs to another user (uid {uid}) and others can write to its folder")
    })
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
    fn an_output_is_replaced_whole_and_its_folders_are_walked() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("out.txt");
        std::fs::write(&target, "old").unwrap();
        let before = std::fs::metadata(&target).unwrap().ino();
        // Through our own link to the folder, and `..` on the way.
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), tmp.path().join("sub/up")).unwrap();
        let via = tmp.path().join("sub/up/sub/../out.txt");
        write_user_file(&via, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // Replaced by rename, not rewritten in place; nothing else left in the folder.
        assert_ne!(std::fs::metadata(&target).unwrap().ino(), before);
        let mut names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["out.txt", "sub"]);
        // A new file gets what open(2) would give it.
        write_user_file(&tmp.path().join("fresh"), b"x").unwrap();
        let mode = std::fs::metadata(tmp.path().join("fresh")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
        // A device is written as it is.
        write_user_file(Path::new("/dev/null"), b"x").unwrap();
        assert!(write_user_file(tmp.path(), b"x").is_err());
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
