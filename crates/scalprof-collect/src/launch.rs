//! Starting the workload suspended between fork and exec, so that collectors can attach
//! to its pid (perf events with enable-on-exec) before it runs a single instruction.
//!
//! Written by hand: `std::process::Command::spawn` waits for the exec to happen, so a
//! child cannot be held before exec with it. Everything the child needs (paths, argv,
//! envp, file descriptors) is prepared before `fork`; after `fork` the child calls only
//! async-signal-safe functions.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::CollectError;

/// Environment variables no workload (nor a hook) is given: they may hold the team
/// store's password (`--db`'s URL, PostgreSQL's PGPASSWORD, and the variable through which
/// scalprof hands a password taken out of its command line to itself; the binary checks
/// that this list is the store's). The binary also takes them out of its own environment
/// at start; this keeps them out of a workload whatever a caller leaves there.
pub const WITHHELD_ENV: [&str; 3] = ["SCALPROF_DB", "PGPASSWORD", "SCALPROF_DB_PASSWORD"];

/// A forked child waiting for [`Suspended::resume`] before it execs.
pub struct Suspended {
    pid: i32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    program: String,
}

fn cstring(s: &str, what: &str) -> Result<CString, CollectError> {
    CString::new(s).map_err(|_| CollectError::Spawn {
        program: s.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        ),
    })
}

fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors that we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What the forked child execs, made into C strings before the fork: after it, nothing
/// is allocated.
struct ExecImage {
    path: CString,
    /// Owns what `argv` points into.
    _args: Vec<CString>,
    /// Owns what `envp` points into.
    _env: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ExecImage {
    /// The program, its arguments, and scalprof's environment with `extra_env` set (in
    /// place of any variable of the same name), less the variables scalprof withholds
    /// ([`WITHHELD_ENV`]).
    fn new(
        program: &Path,
        argv: &[String],
        extra_env: &[(String, String)],
    ) -> Result<ExecImage, CollectError> {
        let path = cstring(&program.to_string_lossy(), "the program path")?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| cstring(a, "an argument"))
            .collect::<Result<_, _>>()?;
        let mut env: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| {
                !extra_env
                    .iter()
                    .any(|(e, _)| k.to_str() == Some(e.as_str()))
                    && !WITHHELD_ENV.iter().any(|w| k.to_str() == Some(w))
            })
            .filter_map(|(k, v)| {
                let mut kv = k.into_string().ok()?;
                kv.push('=');
                kv.push_str(v.to_str()?);
                CString::new(kv).ok()
            })
            .collect();
        for (k, v) in extra_env {
            env.push(cstring(&format!("{k}={v}"), "an environment variable")?);
        }
        let mut argv_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut envp_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());
        Ok(ExecImage {
            path,
            _args: args,
            _env: env,
            argv: argv_ptrs,
            envp: envp_ptrs,
        })
    }
}

/// The descriptors the forked child uses, as numbers taken before the fork.
struct ChildFds {
    stdin: i32,
    stdout: i32,
    stderr: i32,
    /// The go pipe's read end: a byte lets the child exec, EOF makes it exit.
    go: i32,
    /// The error pipe's write end: why the child failed, or closed by a successful exec.
    exec_err: i32,
    /// Descriptors the workload inherits: close-on-exec here, cleared in the child.
    inherit: Vec<i32>,
    /// The parent's ends, which the forked child must close at once: while the child holds
    /// a copy of the go pipe's write end, it never sees EOF when scalprof gives up on it (a
    /// collector failed), and both wait for each other forever.
    parent_ends: [i32; 2],
}

/// The forked child: its own process group, death with `parent`, the standard
/// descriptors and the inherited ones, then the exec once the go byte comes. A failed
/// step writes its number and errno to the error pipe and exits.
///
/// # Safety
/// Only in the child just forked (single-threaded until execve): it calls only
/// async-signal-safe functions, on descriptors and C strings prepared before the fork.
unsafe fn exec_when_told(fds: &ChildFds, parent: libc::pid_t, image: &ExecImage) -> ! {
    // SAFETY: see the function's contract; every failure ends in _exit.
    unsafe {
        let fail = |step: i32| -> ! {
            let errno = *libc::__errno_location();
            let msg = [step, errno];
            libc::write(fds.exec_err, msg.as_ptr().cast(), 8);
            libc::_exit(127);
        };
        libc::close(fds.parent_ends[0]);
        libc::close(fds.parent_ends[1]);
        if libc::setpgid(0, 0) != 0 {
            fail(1);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 || libc::getppid() != parent {
            fail(2);
        }
        if libc::dup2(fds.stdin, 0) < 0
            || libc::dup2(fds.stdout, 1) < 0
            || libc::dup2(fds.stderr, 2) < 0
        {
            fail(3);
        }
        for &fd in &fds.inherit {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                fail(5);
            }
        }
        // Wait for the go byte (or EOF if scalprof gave up on us).
        let mut b = 0u8;
        loop {
            let r = libc::read(fds.go, (&mut b as *mut u8).cast(), 1);
            if r == 1 {
                break;
            }
            if r == 0 || *libc::__errno_location() != libc::EINTR {
                libc::_exit(126);
            }
        }
        libc::execve(
            image.path.as_ptr(),
            image.argv.as_ptr(),
            image.envp.as_ptr(),
        );
        fail(4);
    }
}

impl Suspended {
    /// Forks a child in its own process group with stdin from /dev/null, stdout/stderr
    /// to the given files and the descriptors `inherit` (above 2) left open across its
    /// exec. The child dies if scalprof dies (parent-death signal).
    #[allow(clippy::disallowed_methods)] // opens: /dev/null
    pub fn spawn(
        program: &Path,
        argv: &[String],
        extra_env: &[(String, String)],
        inherit: &[i32],
        stdout: &File,
        stderr: &File,
    ) -> Result<Suspended, CollectError> {
        let name = argv.first().cloned().unwrap_or_default();
        let spawn_err = |source| CollectError::Spawn {
            program: name.clone(),
            source,
        };
        let image = ExecImage::new(program, argv, extra_env)?;
        let devnull = File::open("/dev/null").map_err(spawn_err)?;
        let (go_r, go_w) = pipe_cloexec().map_err(spawn_err)?;
        let (err_r, err_w) = pipe_cloexec().map_err(spawn_err)?;
        let fds = ChildFds {
            stdin: devnull.as_raw_fd(),
            stdout: stdout.as_raw_fd(),
            stderr: stderr.as_raw_fd(),
            go: go_r.as_raw_fd(),
            exec_err: err_w.as_raw_fd(),
            inherit: inherit.iter().copied().filter(|&fd| fd > 2).collect(),
            parent_ends: [go_w.as_raw_fd(), err_r.as_raw_fd()],
        };
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };

        // SAFETY: after fork the child only calls async-signal-safe functions (close,
        // setpgid, prctl, getppid, dup2, fcntl, read, write, execve, _exit) on data
        // prepared above.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(spawn_err(std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: this is the child just forked.
            unsafe { exec_when_told(&fds, parent, &image) }
        }
        drop(go_r);
        drop(err_w);
        // The parent sets the group too, so that it exists before anyone signals it.
        // SAFETY: setpgid on our own child's pid; no memory is passed.
        unsafe {
            libc::setpgid(pid, pid);
        }
        Ok(Suspended {
            pid,
            go: Some(go_w),
            exec_err: err_r,
            program: name,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child exec. Returns once the exec happened (or failed: the child is then
    /// reaped and the error returned).
    pub fn resume(mut self) -> Result<i32, CollectError> {
        let go = self.go.take().expect("resume once");
        // SAFETY: writing one byte from a valid buffer to a pipe we own.
        unsafe {
            libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1);
        }
        drop(go);
        let mut msg = [0i32; 2];
        let n = loop {
            // SAFETY: reading into a valid 8-byte buffer from a pipe we own.
            let r = unsafe { libc::read(self.exec_err.as_raw_fd(), msg.as_mut_ptr().cast(), 8) };
            if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break r;
            }
        };
        if n == 0 {
            return Ok(self.pid); // CLOEXEC closed the pipe: exec succeeded
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe {
            libc::waitpid(self.pid, &mut status, 0);
        }
        let source = std::io::Error::from_raw_os_error(msg[1]);
        Err(match (msg[0], source.kind()) {
            (4, std::io::ErrorKind::NotFound) => {
                CollectError::CommandNotFound(self.program.clone())
            }
            (4, std::io::ErrorKind::PermissionDenied) => CollectError::NotExecutable {
                path: self.program.clone(),
            },
            _ => CollectError::Spawn {
                program: self.program.clone(),
                source,
            },
        })
    }

    /// Gives up on the child: it exits without running the workload.
    pub fn abort(mut self) {
        self.go.take();
        let mut status = 0;
        // SAFETY: killing and reaping our own child, still held before exec (it would also
        // exit on its own when its go pipe closes).
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}
