//! Resolving a path one component at a time, as the kernel would, but from descriptors
//! of the folders already checked: every link met on the way (in a folder of the path as
//! given, or in the path a link leads to) is judged by its owner before it is followed,
//! and no checked folder can be swapped for another afterwards (each step opens the next
//! folder from the previous one's descriptor, without following links).

use std::collections::VecDeque;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// How many links one walk follows at most (the kernel's own limit, MAXSYMLINKS).
const MAX_LINKS: u32 = 40;

/// `statfs.f_type` of /proc, whose links (`/proc/self/fd/1`) name no path to walk.
const PROC_SUPER_MAGIC: libc::c_long = 0x9fa0;

/// What a walk checks on its way.
#[derive(Clone, Copy)]
pub(super) enum Policy {
    /// A file the user named for output: no link another user made (root's and the
    /// user's own links are followed: `/tmp` may be one, `/dev/stdout` is one).
    Output,
    /// A directory that must be ours alone (see the module comment of `private`): every
    /// folder walked through is ours or root's and others cannot rename in it (not
    /// writable by them, or sticky), every link is ours or root's, and the last folder is
    /// ours and writable by us only.
    Private,
}

/// Where the walk ends.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Want {
    /// The last name's folder, opened, and the name, not followed when it is not a link.
    Parent,
    /// The path as a directory, opened; missing ones are created (mode 0700).
    Dir,
}

pub(super) enum Reached {
    /// The folder of the last component, and its name in it: absent, or anything but a
    /// link (a link there was followed).
    Name { dir: OwnedFd, name: CString },
    /// The last component is one of /proc's links (`/dev/stdout` leads to
    /// `/proc/self/fd/1`, which may be a pipe): opened by the kernel, for writing.
    Proc(File),
    /// [`Want::Dir`]: the directory exists and passed the policy.
    Dir,
}

pub(super) enum WalkError {
    /// The policy refuses what was met: why, in words.
    Refused(String),
    /// `path` (as far as the walk got) could not be opened or created.
    Io { path: PathBuf, source: io::Error },
}

pub(super) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"))
}

/// `openat` relative to `dir` (the working directory when `None`), close-on-exec.
pub(super) fn open_at(
    dir: Option<&OwnedFd>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: name is NUL-terminated; openat returns a new descriptor or -1.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `lstat` of `name` in `dir`.
pub(super) fn stat_at(dir: &OwnedFd, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: stat is plain old data; zeroed is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: name is NUL-terminated and st a writable stat.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

pub(super) fn fstat(fd: &impl AsRawFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain old data; zeroed is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a writable stat; the descriptor is open.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn on_procfs(fd: &OwnedFd) -> bool {
    // SAFETY: statfs is plain old data; zeroed is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: st is a writable statfs; the descriptor is open.
    unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) == 0 && st.f_type == PROC_SUPER_MAGIC }
}

fn read_link_at(dir: &OwnedFd, name: &CStr) -> io::Result<OsString> {
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: buf is writable for buf.len() bytes; name is NUL-terminated.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(OsString::from_vec(buf));
        }
        if buf.len() >= 1 << 16 {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// The components of `path` to walk: names, and `..` (kept: it is resolved from the
/// folder reached, as the kernel does).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

impl Policy {
    /// Why a link met on the way (its own metadata, at `shown`) is refused, if it is.
    fn link(self, shown: &Path, st: &libc::stat, last: bool) -> Option<String> {
        let uid = st.st_uid;
        if uid == euid() || uid == 0 {
            return None;
        }
        Some(match (self, last) {
            (Policy::Output, true) => format!("a link made by another user (uid {uid})"),
            (Policy::Output, false) => format!(
                "its folder {} is a link made by another user (uid {uid})",
                shown.display()
            ),
            (Policy::Private, _) => format!(
                "{} is a link made by another user (uid {uid})",
                shown.display()
            ),
        })
    }

    /// Why a folder walked through (or, `last`, the directory wanted) is refused.
    fn dir(self, shown: &Path, st: &libc::stat, last: bool) -> Option<String> {
        let Policy::Private = self else {
            return None;
        };
        let me = euid();
        let mode = st.st_mode & 0o7777;
        if last {
            if st.st_uid != me {
                return Some(format!(
                    "it is owned by uid {}, not by you (uid {me})",
                    st.st_uid
                ));
            }
            if mode & 0o022 != 0 {
                return Some(format!("it is writable by others (mode {mode:o})"));
            }
            return None;
        }
        if st.st_uid != me && st.st_uid != 0 {
            return Some(format!(
                "its parent {} is owned by uid {}",
                shown.display(),
                st.st_uid
            ));
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Some(format!(
                "its parent {} is writable by others (mode {mode:o})",
                shown.display()
            ));
        }
        None
    }
}

/// Walks `path` under `policy` (see the module comment). With [`Want::Dir`] and the
/// private policy, each folder is checked before anything is created in it: a refused
/// path leaves nothing behind.
pub(super) fn walk(path: &Path, policy: Policy, want: Want) -> Result<Reached, WalkError> {
    let mut walker = Walker::start(path, policy, want)?;
    while let Some(name) = walker.queue.pop_front() {
        match walker.step(&name)? {
            Step::On => {}
            Step::Name(name) => {
                return Ok(Reached::Name {
                    dir: walker.cur,
                    name,
                })
            }
            Step::Proc(file) => return Ok(Reached::Proc(file)),
        }
    }
    match want {
        Want::Dir => Ok(Reached::Dir),
        // A path with no last name ("/", ".", "a/.."): a folder, not a file.
        Want::Parent => Err(WalkError::Io {
            path: path.to_path_buf(),
            source: io::Error::from_raw_os_error(libc::EISDIR),
        }),
    }
}

/// The error of a step that failed at `shown`.
fn io_at(shown: &Path) -> impl FnOnce(io::Error) -> WalkError {
    let shown = shown.to_path_buf();
    move |source| WalkError::Io {
        path: shown,
        source,
    }
}

/// The root folder, opened for walking from.
fn open_root() -> io::Result<OwnedFd> {
    open_at(None, c"/", libc::O_PATH | libc::O_DIRECTORY, 0)
}

/// A walk under way: the folder reached, opened, and the names left to walk from it.
struct Walker {
    policy: Policy,
    want: Want,
    cur: OwnedFd,
    /// `cur`'s path as messages show it.
    shown: PathBuf,
    queue: VecDeque<OsString>,
    /// Links followed so far.
    links: u32,
}

/// What one step of a walk came to.
enum Step {
    /// Walk on: into a folder, or along a link.
    On,
    /// The last name, in the folder reached ([`Want::Parent`]).
    Name(CString),
    /// The last name is one of /proc's links, opened.
    Proc(File),
}

impl Walker {
    /// Opens where `path` starts (the root, or the working directory) and checks it.
    fn start(path: &Path, policy: Policy, want: Want) -> Result<Walker, WalkError> {
        let mut shown = PathBuf::new();
        let cur = if path.is_absolute() {
            shown.push("/");
            open_root()
        } else {
            shown.push(".");
            open_at(None, c".", libc::O_PATH | libc::O_DIRECTORY, 0)
        }
        .map_err(io_at(&shown))?;
        let start = fstat(&cur).map_err(io_at(&shown))?;
        let queue = components(path);
        if let Some(why) = policy.dir(&shown, &start, queue.is_empty() && want == Want::Dir) {
            return Err(WalkError::Refused(why));
        }
        Ok(Walker {
            policy,
            want,
            cur,
            shown,
            queue,
            links: 0,
        })
    }

    /// Walks one name from the folder reached: into a folder, along a link, or to the end.
    fn step(&mut self, name: &OsStr) -> Result<Step, WalkError> {
        let last = self.queue.is_empty();
        let here = self.shown.join(name);
        let c = cstr(name).map_err(io_at(&here))?;
        let Some(st) = self.stat_or_make(&c, &here, last)? else {
            return Ok(Step::Name(c));
        };
        if kind(&st) == libc::S_IFLNK {
            return self.follow(&c, &here, &st, last);
        }
        if last && self.want == Want::Parent {
            return Ok(Step::Name(c));
        }
        self.enter(&c, here, &st, last)?;
        Ok(Step::On)
    }

    /// The name's own metadata. A missing name is made a folder on a [`Want::Dir`] walk;
    /// the missing last name of a [`Want::Parent`] walk is `None`.
    fn stat_or_make(
        &self,
        c: &CStr,
        here: &Path,
        last: bool,
    ) -> Result<Option<libc::stat>, WalkError> {
        match stat_at(&self.cur, c) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if self.want == Want::Parent && last {
                    return Ok(None);
                }
                if self.want == Want::Dir {
                    // SAFETY: c is NUL-terminated; cur is an open directory descriptor.
                    let r = unsafe { libc::mkdirat(self.cur.as_raw_fd(), c.as_ptr(), 0o700) };
                    let e = io::Error::last_os_error();
                    if r != 0 && e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(WalkError::Io {
                            path: here.to_path_buf(),
                            source: e,
                        });
                    }
                }
                stat_at(&self.cur, c).map(Some).map_err(io_at(here))
            }
            other => other.map(Some).map_err(io_at(here)),
        }
    }

    /// Follows the link at `here` if the policy allows it: the names of its target are
    /// walked next (from the root for an absolute one). One of /proc's links at the end of
    /// a [`Want::Parent`] walk is opened instead.
    fn follow(
        &mut self,
        c: &CStr,
        here: &Path,
        st: &libc::stat,
        last: bool,
    ) -> Result<Step, WalkError> {
        if let Some(why) = self.policy.link(here, st, last) {
            return Err(WalkError::Refused(why));
        }
        if last && self.want == Want::Parent && on_procfs(&self.cur) {
            // The kernel's own links: what they lead to has no path to walk.
            return open_at(Some(&self.cur), c, libc::O_WRONLY | libc::O_NONBLOCK, 0)
                .map(|fd| Step::Proc(File::from(fd)))
                .map_err(io_at(here));
        }
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(WalkError::Io {
                path: here.to_path_buf(),
                source: io::Error::from_raw_os_error(libc::ELOOP),
            });
        }
        let target = read_link_at(&self.cur, c).map_err(io_at(here))?;
        let target = Path::new(&target);
        if target.is_absolute() {
            self.cur = open_root().map_err(io_at(here))?;
            self.shown = PathBuf::from("/");
        }
        for part in components(target).into_iter().rev() {
            self.queue.push_front(part);
        }
        Ok(Step::On)
    }

    /// Makes the folder `here` the one reached: opened without following a link, the
    /// same folder that was looked at, and allowed by the policy.
    fn enter(
        &mut self,
        c: &CStr,
        here: PathBuf,
        st: &libc::stat,
        last: bool,
    ) -> Result<(), WalkError> {
        if kind(st) != libc::S_IFDIR {
            return Err(WalkError::Io {
                path: here,
                source: io::Error::from_raw_os_error(libc::ENOTDIR),
            });
        }
        let next = open_at(
            Some(&self.cur),
            c,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(io_at(&here))?;
        let opened = fstat(&next).map_err(io_at(&here))?;
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) {
            return Err(WalkError::Refused(format!(
                "{} changed while it was checked",
                here.display()
            )));
        }
        if let Some(why) = self
            .policy
            .dir(&here, &opened, last && self.want == Want::Dir)
        {
            return Err(WalkError::Refused(why));
        }
        self.cur = next;
        self.shown = here;
        Ok(())
    }
}
