//! Parsing without privileges: the bytes of ELF files and their DWARF, which other users may
//! control, are parsed in a child process that has given up root before it reads any.
//!
//! scalprof usually runs as root. The privileged process opens a file (a regular file only,
//! never a FIFO or device) and hands the open descriptor to a child, scalprof's own binary
//! run as [`PARSER_ARG`]. Before it reads a byte, the child ([`crate::child::serve`]):
//! - caps its address space ([`MEMORY_CAP`]), CPU time ([`CPU_CAP_S`]; [`ELF_CPU_S`] to read
//!   symbol tables), open files, and the size of any file it could write (zero), and asks
//!   to be the OOM killer's first victim;
//! - when it is root: drops every supplementary group and changes to the `nobody` user;
//! - sets `no_new_privs`, is not dumpable (no other process of `nobody` can trace it), and
//!   dies with its parent;
//! - leaves the terminal's session (a session of its own) and installs a system-call
//!   filter ([`crate::seccomp`]): no program, process, socket, mount, BPF, signal to another
//!   process, file opened to write, or path made or changed.
//!
//! What crosses back is plain data in a small format of this module's (`Wire`), which the
//! parent decodes with a bound on every length: symbol tables, segments and the unwinder's
//! section bytes ([`crate::elf`]), or the frames at an address (a DWARF server that lives as
//! long as the file's entry in the cache). A crash (SIGBUS from a file truncated under it),
//! running out of memory (a decompression bomb), a timeout or a malformed answer costs that
//! one file its symbols; the reason is kept and shown with the file's name.
//!
//! The privileged process never maps a file another user could truncate. Without root the
//! same split runs, minus the change of user. Library users that never call [`enable`]
//! (unit tests of the crates) parse in their own process, from bytes read, not mapped.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The first argument that makes the scalprof binary a parser child.
pub const PARSER_ARG: &str = "__scalprof-parse";
/// The child's address-space cap: a parse that needs more fails (it costs that file its
/// symbols), it does not grow root's process or the machine's memory.
pub const MEMORY_CAP: u64 = 1 << 30;
/// The child's CPU-time cap, in seconds (a DWARF server's lookups add up).
pub const CPU_CAP_S: u64 = 300;
/// The CPU-time cap of an `elf` child, which reads one file's symbol tables, segments and
/// unwind sections, in seconds: a parse that loops costs that one file its names within
/// seconds, not a minute per path. Chosen with room to spare: a 195 MB binary with its
/// DWARF (scalprof's own debug build) takes the child 0.2 s in user space and 0.3–0.9 s in
/// the kernel (reading it), libLLVM-15 (117 MB) 0.5 s, and it reads nothing over 512 MiB.
pub const ELF_CPU_S: u64 = 10;
/// How long the parent waits for one answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the parent waits for an `elf` child's answer: twice its CPU cap, for a machine
/// whose CPUs are busy.
pub(crate) const ELF_REPLY_TIMEOUT: Duration = Duration::from_secs(2 * ELF_CPU_S);
/// A parse that has run this long is shown by [`slowest_read`] (a progress line names
/// the file it waits for).
pub const SLOW_READ: Duration = Duration::from_secs(1);
/// The descriptor the child finds its file on.
pub(crate) const FILE_FD: i32 = 3;
/// The longest name that crosses back (longer ones are cut): one pathological symbol must
/// not cost the store hundreds of megabytes.
pub const MAX_NAME: usize = 1024;
/// The most bytes one answer may have.
const MAX_REPLY: u64 = 1 << 30;

mod broker;
mod wire;

pub(crate) use broker::brokered_open;
use broker::serve_files;
pub use broker::use_broker;
pub(crate) use broker::{use_broker_at, BROKER_FD};
pub use wire::Wire;

static PARSER: OnceLock<PathBuf> = OnceLock::new();

/// Parse in children of `exe` (scalprof's own binary, which dispatches [`PARSER_ARG`] to
/// [`crate::child::serve`]) from now on. The binary calls this first thing.
pub fn enable(exe: PathBuf) {
    let _ = PARSER.set(exe);
}

/// The binary that parses, when separation is on.
pub fn parser() -> Option<&'static Path> {
    PARSER.get().map(PathBuf::as_path)
}

/// A name cut to [`MAX_NAME`] bytes (on a character boundary), marked as cut.
pub fn cut_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_NAME {
        return name.into();
    }
    let mut end = MAX_NAME;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end]).into()
}

/// A resource limit's (soft, hard) values; None when getrlimit fails.
pub(crate) fn current_limit(resource: libc::__rlimit_resource_t) -> Option<(u64, u64)> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    (unsafe { libc::getrlimit(resource, &mut rl) } == 0).then_some((rl.rlim_cur, rl.rlim_max))
}

// ---- the parent -------------------------------------------------------------------------

/// The CPU seconds a child of `job` may use (see [`crate::child::serve`]).
pub(crate) fn cpu_cap_s(job: &str) -> u64 {
    match job {
        "elf" => ELF_CPU_S,
        _ => CPU_CAP_S,
    }
}

/// The files being read now (by a parser child, or here), and since when.
static READING: std::sync::Mutex<Vec<(u64, PathBuf, Instant)>> = std::sync::Mutex::new(Vec::new());

/// The file that has been read longest of those being read now, and for how long, when
/// that is [`SLOW_READ`] or more: what a progress line says it waits for.
pub fn slowest_read() -> Option<(PathBuf, Duration)> {
    let reading = READING.lock().unwrap_or_else(|e| e.into_inner());
    let (_, path, since) = reading.iter().min_by_key(|(_, _, since)| *since)?;
    let took = since.elapsed();
    (took >= SLOW_READ).then(|| (path.clone(), took))
}

/// A file in [`slowest_read`]'s list while this lives.
pub(crate) struct Reading(u64);

impl Reading {
    pub(crate) fn start(path: &Path) -> Reading {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut reading = READING.lock().unwrap_or_else(|e| e.into_inner());
        reading.push((id, path.to_path_buf(), Instant::now()));
        Reading(id)
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mut reading = READING.lock().unwrap_or_else(|e| e.into_inner());
        reading.retain(|(id, _, _)| *id != self.0);
    }
}

/// A running parser child.
pub struct Parser {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// What it said before it ended (a line: why it stopped).
    stderr: Option<std::process::ChildStderr>,
    /// Its CPU-time cap, in seconds.
    cpu_s: u64,
    /// How long the last answer was waited for.
    waited: Duration,
}

impl Parser {
    /// Starts `job` on `file`.
    pub fn spawn(exe: &Path, job: &str, file: &File) -> std::io::Result<Parser> {
        Parser::start(exe, job, file, None)
    }

    /// Starts `job` on `file`, with a thread here that opens files for it (see
    /// [`use_broker`]) while it runs.
    pub fn spawn_brokered(exe: &Path, job: &str, file: &File) -> std::io::Result<Parser> {
        let (mine, theirs) = std::os::unix::net::UnixStream::pair()?;
        let parser = Parser::start(exe, job, file, Some(theirs.as_raw_fd()))?;
        drop(theirs);
        std::thread::Builder::new()
            .name("scalprof-broker".into())
            .spawn(move || serve_files(mine))?;
        Ok(parser)
    }

    #[allow(clippy::disallowed_methods)] // runs: scalprof's own binary as a parser child
    fn start(exe: &Path, job: &str, file: &File, broker: Option<i32>) -> std::io::Result<Parser> {
        use std::os::unix::process::CommandExt;
        let fd = file.as_raw_fd();
        let mut cmd = Command::new(exe);
        cmd.arg(PARSER_ARG)
            .arg(job)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: between fork and exec only async-signal-safe calls (dup2, fcntl) on
        // descriptors this process owns.
        unsafe {
            cmd.pre_exec(move || {
                // The broker's end first, in case it sits on FILE_FD.
                let broker = match broker {
                    Some(b) if b == FILE_FD => {
                        let moved = libc::fcntl(b, libc::F_DUPFD_CLOEXEC, 10);
                        if moved < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Some(moved)
                    }
                    other => other,
                };
                for (from, to) in [(Some(fd), FILE_FD), (broker, BROKER_FD)] {
                    let Some(from) = from else { continue };
                    if from == to {
                        let flags = libc::fcntl(from, libc::F_GETFD);
                        libc::fcntl(from, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                    } else if libc::dup2(from, to) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take();
        Ok(Parser {
            child,
            stdin,
            stdout,
            stderr,
            cpu_s: cpu_cap_s(job),
            waited: REPLY_TIMEOUT,
        })
    }

    /// Sends a request (a DWARF server's address).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Ended> {
        match self.stdin.as_mut().map(|s| s.write_all(bytes)) {
            Some(Ok(())) => Ok(()),
            _ => Err(self.ended()),
        }
    }

    /// Closes the child's input: it has all it will get.
    pub fn close_input(&mut self) {
        self.stdin.take();
    }

    /// The next answer, within [`REPLY_TIMEOUT`].
    pub(crate) fn reply(&mut self) -> Result<Wire, Ended> {
        self.reply_within(REPLY_TIMEOUT)
    }

    /// The next answer, within `timeout`.
    pub fn reply_within(&mut self, timeout: Duration) -> Result<Wire, Ended> {
        let deadline = Instant::now() + timeout;
        self.waited = timeout;
        let mut len = [0u8; 8];
        if !read_by(&mut self.stdout, &mut len, deadline) {
            return Err(self.ended());
        }
        let len = u64::from_le_bytes(len);
        if len > MAX_REPLY {
            self.kill();
            return Err(Ended::other(format!(
                "the parser's answer claimed {len} bytes"
            )));
        }
        let mut body = vec![0u8; len as usize];
        if !read_by(&mut self.stdout, &mut body, deadline) {
            return Err(self.ended());
        }
        Ok(Wire::from_body(body))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Why the child stopped answering.
    fn ended(&mut self) -> Ended {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => Some(s),
            _ => {
                // Still running: it overran the time it had.
                std::thread::sleep(Duration::from_millis(50));
                match self.child.try_wait() {
                    Ok(Some(s)) => Some(s),
                    _ => {
                        self.kill();
                        return Ended::other(format!(
                            "its parser did not answer within {} s and was stopped",
                            self.waited.as_secs()
                        ));
                    }
                }
            }
        };
        use std::os::unix::process::ExitStatusExt;
        let why = match status.and_then(|s| s.signal()) {
            Some(libc::SIGBUS) => {
                "its parser crashed (SIGBUS: the file shrank while it was read)".into()
            }
            Some(libc::SIGABRT) | Some(libc::SIGSEGV) => match current_limit(libc::RLIMIT_AS) {
                // The user's own `ulimit -v`, inherited by the child: when it is at most
                // the smallest cap a child sets itself, it is the limit the child ran into.
                Some((soft, _)) if soft <= MEMORY_CAP => format!(
                    "its parser ran out of memory under the address-space limit (RLIMIT_AS) \
                     of {} MiB (`ulimit -v {}`); raise it (`ulimit -v unlimited`) and run again",
                    soft >> 20,
                    soft >> 10
                ),
                _ => format!(
                    "its parser ran out of memory or crashed (over the {} MiB cap?)",
                    MEMORY_CAP >> 20
                ),
            },
            Some(libc::SIGKILL) => "its parser was killed (out of memory)".into(),
            Some(libc::SIGXCPU) => format!("its parser ran over {} s of CPU", self.cpu_s),
            Some(sig) => format!("its parser ended on {}", scalprof_model::signal::name(sig)),
            None => {
                // It exited: the last line it wrote says why (at most 4 KiB is read).
                let mut said = Vec::new();
                if let Some(e) = self.stderr.take() {
                    let _ = e.take(4096).read_to_end(&mut said);
                }
                let said = String::from_utf8_lossy(&said);
                match said.lines().rev().find(|l| !l.trim().is_empty()) {
                    Some(line) => {
                        let line = line.trim().trim_start_matches("scalprof: error: ");
                        // The child's allocator said it ran out under the user's limit.
                        let out_of_memory = line.starts_with(scalprof_model::signal::OUT_OF_MEMORY);
                        return Ended {
                            why: line.to_string(),
                            out_of_memory,
                        };
                    }
                    None => "its parser stopped without an answer".into(),
                }
            }
        };
        Ended::other(why)
    }
}

/// Why a parser stopped answering, as a sentence.
#[derive(Debug)]
pub struct Ended {
    pub why: String,
    /// It said it ran out of memory (under the user's own limit): its sentence is whole.
    pub out_of_memory: bool,
}

impl Ended {
    pub fn other(why: String) -> Ended {
        Ended {
            why,
            out_of_memory: false,
        }
    }
}

impl From<Ended> for String {
    fn from(e: Ended) -> String {
        e.why
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        // Closing its input ends a server; a child that still runs is stopped.
        self.stdin.take();
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            self.kill();
        }
    }
}

/// Fills `buf` from `r` before `deadline`; false on EOF, error or time-out.
fn read_by(r: &mut ChildStdout, buf: &mut [u8], deadline: Instant) -> bool {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: r.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads and writes the one pollfd it is given.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return false;
        }
        match r.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(k) => got += k,
        }
    }
    true
}

/// Frames at addresses, from a DWARF server child.
pub(crate) struct DwarfServer {
    parser: Parser,
}

impl DwarfServer {
    pub(crate) fn start(exe: &Path, path: &Path) -> Result<DwarfServer, String> {
        let _reading = Reading::start(path);
        let file = crate::open_regular(path).map_err(|e| format!("cannot read it: {e}"))?;
        let mut parser = Parser::spawn(exe, "dwarf", &file).map_err(|e| e.to_string())?;
        drop(file);
        parser.reply()?.get_status()?;
        Ok(DwarfServer { parser })
    }

    pub(crate) fn frames(&mut self, svma: u64) -> Result<Vec<String>, String> {
        self.parser.send(&svma.to_le_bytes())?;
        let mut w = self.parser.reply()?;
        let n = w.get_count(8)?;
        (0..n).map(|_| w.get_name()).collect()
    }
}
