//! Parsing without privileges: the bytes of ELF files and their DWARF, which other users may
//! control, are parsed in a child process that has given up root before it reads any.
//!
//! scalprof usually runs as root. The privileged process opens a file (a regular file only,
//! never a FIFO or device) and hands the open descriptor to a child, scalprof's own binary
//! run as [`PARSER_ARG`]. Before it reads a byte, the child ([`serve`]):
//! - caps its address space ([`MEMORY_CAP`]), CPU time ([`CPU_CAP_S`]), open files, and the
//!   size of any file it could write (zero), and asks to be the OOM killer's first victim;
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
use std::os::fd::{AsRawFd, FromRawFd};
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
/// How long the parent waits for one answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// The descriptor the child finds its file on.
const FILE_FD: i32 = 3;
/// The longest name that crosses back (longer ones are cut): one pathological symbol must
/// not cost the store hundreds of megabytes.
pub const MAX_NAME: usize = 1024;
/// The most bytes one answer may have.
const MAX_REPLY: u64 = 1 << 30;

mod broker;
mod wire;

pub(crate) use broker::brokered_open;
pub use broker::use_broker;
use broker::{serve_files, use_broker_at, BROKER_FD};
pub use wire::Wire;

static PARSER: OnceLock<PathBuf> = OnceLock::new();

/// Parse in children of `exe` (scalprof's own binary, which dispatches [`PARSER_ARG`] to
/// [`serve`]) from now on. The binary calls this first thing.
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

// ---- the child --------------------------------------------------------------------------

/// The child's main: confine, then run `job` on the file at descriptor 3. Never returns.
pub fn serve(job: &str) -> ! {
    if let Err(e) = confine(MEMORY_CAP) {
        let _ = writeln!(std::io::stderr(), "cannot drop privileges: {e}");
        std::process::exit(3);
    }
    // SAFETY: the parent put an open file on FILE_FD for this child (see `spawn`), and
    // nothing else in this process owns that descriptor.
    let file = unsafe { File::from_raw_fd(FILE_FD) };
    let code = match job {
        "elf" => elf_job(file),
        "dwarf" => dwarf_job(file),
        "layout" => layout_job(file),
        _ => 2,
    };
    std::process::exit(code)
}

/// A resource limit's (soft, hard) values; None when getrlimit fails.
fn current_limit(resource: libc::__rlimit_resource_t) -> Option<(u64, u64)> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    (unsafe { libc::getrlimit(resource, &mut rl) } == 0).then_some((rl.rlim_cur, rl.rlim_max))
}

/// Limits (`memory_cap` of address space), then the change of user, then no way back to
/// privileges, then the system-call filter: what a parser child does before it reads
/// anything.
pub fn confine(memory_cap: u64) -> std::io::Result<()> {
    let limit = |resource, value: u64| {
        // Lower only: a limit the user set lower (`ulimit -v`) stays, and raising one
        // above its hard limit needs CAP_SYS_RESOURCE, which root in a container lacks.
        let inherited = current_limit(resource).map_or(u64::MAX, |(_, hard)| hard);
        let value = value.min(inherited);
        let rl = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct it is given; no memory is shared.
        if unsafe { libc::setrlimit(resource, &rl) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    limit(libc::RLIMIT_AS, memory_cap)?;
    limit(libc::RLIMIT_CPU, CPU_CAP_S)?;
    // Room for a DWARF server's memory file only; [`no_more_files`] closes it.
    limit(libc::RLIMIT_FSIZE, MEMORY_CAP / 2)?;
    limit(libc::RLIMIT_CORE, 0)?;
    limit(libc::RLIMIT_NOFILE, 16)?;
    // The first victim of an OOM killer in the cgroup it shares with the run.
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    // SAFETY: prctl and setsid with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // A session of its own: no controlling terminal to read keys from or push input
        // into (the filter refuses TIOCSTI too). It still dies with its parent.
        libc::setsid();
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let (uid, gid) = nobody();
        // SAFETY: plain system calls with integer arguments (setgroups with none).
        let failed = unsafe {
            libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(gid, gid, gid) != 0
                || libc::setresuid(uid, uid, uid) != 0
        };
        if failed {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as above.
        if unsafe { libc::setuid(0) } == 0 {
            return Err(std::io::Error::other("root could be regained"));
        }
    }
    // SAFETY: prctl with integer arguments only.
    let ok = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    };
    if !ok {
        return Err(std::io::Error::last_os_error());
    }
    crate::seccomp::install()
}

/// From here on the child can write no byte to any file.
pub fn no_more_files() {
    let rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads the struct it is given.
    unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &rl) };
}

/// The uid and gid of `nobody` (65534 where the user database has none).
fn nobody() -> (libc::uid_t, libc::gid_t) {
    let name = c"nobody";
    // SAFETY: getpwnam reads a C string and returns a pointer into static storage (or
    // null), read here before any other call could reuse it; this process has one thread.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        (65534, 65534)
    } else {
        // SAFETY: non-null: a valid passwd entry (see above).
        unsafe { ((*pw).pw_uid, (*pw).pw_gid) }
    }
}

/// Parses the file's tables and writes them.
fn elf_job(file: File) -> i32 {
    no_more_files();
    let mut out = std::io::stdout().lock();
    // Read, not mapped: the same cost for a parse that touches most pages, and no SIGBUS.
    let answer = crate::elf::read_all(file).and_then(|data| crate::elf::Tables::parse(&data));
    let mut w = Wire::default();
    match answer {
        Ok(t) => {
            w.u64(0);
            t.encode(&mut w);
        }
        Err(e) => {
            w.u64(1);
            w.str(&e);
        }
    }
    if out.write_all(&w.framed()).is_err() {
        return 1;
    }
    0
}

/// Reads the file's data layout (symbols, DWARF types and fields) and writes it. Its
/// separate debug file, when it has one, comes from the parent.
fn layout_job(file: File) -> i32 {
    use_broker_at(BROKER_FD);
    no_more_files();
    let answer = crate::elf::read_all(file)
        .and_then(|data| crate::layout::layout_of(&data, Path::new(crate::elf::DEBUG_ROOT)))
        .and_then(|l| serde_json::to_vec(&l).map_err(|e| e.to_string()));
    let mut w = Wire::default();
    match answer {
        Ok(json) => {
            w.u64(0);
            w.bytes(&json);
        }
        Err(e) => {
            w.u64(1);
            w.str(&e);
        }
    }
    let mut out = std::io::stdout().lock();
    if out.write_all(&w.framed()).is_err() || out.flush().is_err() {
        return 1;
    }
    0
}

/// Answers frame lookups (an address in, its frames out) until the parent closes the pipe.
/// The DWARF loader opens a path: the file is copied into a memory file of this child's
/// own (a descriptor passed by root cannot be reopened by `nobody`), which no one else can
/// truncate.
fn dwarf_job(file: File) -> i32 {
    let mut out = std::io::stdout().lock();
    let mut input = std::io::stdin().lock();
    let loader = crate::elf::read_all(file).and_then(|data| load_dwarf(&data));
    no_more_files();
    let mut w = Wire::default();
    match &loader {
        Ok(_) => w.u64(0),
        Err(e) => {
            w.u64(1);
            w.str(e);
        }
    }
    if out.write_all(&w.framed()).is_err() || out.flush().is_err() {
        return 1;
    }
    let Ok(loader) = loader else { return 0 };
    let mut req = [0u8; 8];
    while input.read_exact(&mut req).is_ok() {
        let svma = u64::from_le_bytes(req);
        let mut names: Vec<String> = Vec::new();
        if let Ok(mut frames) = loader.find_frames(svma) {
            while let Ok(Some(f)) = frames.next() {
                if let Some(func) = f.function {
                    if let Ok(name) = func.demangle() {
                        names.push(cut_name(&name).into_owned());
                    }
                }
                if names.len() >= 64 {
                    break;
                }
            }
        }
        let mut w = Wire::default();
        w.u64(names.len() as u64);
        for n in &names {
            w.str(n);
        }
        if out.write_all(&w.framed()).is_err() || out.flush().is_err() {
            return 1;
        }
    }
    0
}

/// A DWARF loader over `data`, its compressed sections checked first. The loader opens a
/// path: the bytes go to a memory file of this process's own (a descriptor handed over by
/// root cannot be reopened by `nobody`), which no one else can truncate.
pub(crate) fn load_dwarf(data: &[u8]) -> Result<addr2line::Loader, String> {
    crate::elf::check_compressed_sections(data)?;
    let mem = memfd().map_err(|e| format!("memfd: {e}"))?;
    (&mem).write_all(data).map_err(|e| e.to_string())?;
    // The loader opens and maps the memory file itself.
    addr2line::Loader::new(format!("/proc/self/fd/{}", mem.as_raw_fd())).map_err(|e| e.to_string())
}

fn memfd() -> std::io::Result<File> {
    // SAFETY: memfd_create reads a C string; the descriptor it returns is owned here.
    let fd = unsafe { libc::memfd_create(c"scalprof-dwarf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

// ---- the parent -------------------------------------------------------------------------

/// A running parser child.
pub struct Parser {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// What it said before it ended (a line: why it stopped).
    stderr: Option<std::process::ChildStderr>,
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
        })
    }

    /// Sends a request (a DWARF server's address).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
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
    pub(crate) fn reply(&mut self) -> Result<Wire, String> {
        self.reply_within(REPLY_TIMEOUT)
    }

    /// The next answer, within `timeout`.
    pub fn reply_within(&mut self, timeout: Duration) -> Result<Wire, String> {
        let deadline = Instant::now() + timeout;
        let mut len = [0u8; 8];
        if !read_by(&mut self.stdout, &mut len, deadline) {
            return Err(self.ended());
        }
        let len = u64::from_le_bytes(len);
        if len > MAX_REPLY {
            self.kill();
            return Err(format!("the parser's answer claimed {len} bytes"));
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
    fn ended(&mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => Some(s),
            _ => {
                // Still running: it overran the time it had.
                std::thread::sleep(Duration::from_millis(50));
                match self.child.try_wait() {
                    Ok(Some(s)) => Some(s),
                    _ => {
                        self.kill();
                        return "its parser did not answer in time and was stopped".into();
                    }
                }
            }
        };
        use std::os::unix::process::ExitStatusExt;
        match status.and_then(|s| s.signal()) {
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
            Some(libc::SIGXCPU) => format!("its parser ran over {} s of CPU", CPU_CAP_S),
            Some(sig) => format!("its parser ended on signal {sig}"),
            None => {
                // It exited: the last line it wrote says why (at most 4 KiB is read).
                let mut said = Vec::new();
                if let Some(e) = self.stderr.take() {
                    let _ = e.take(4096).read_to_end(&mut said);
                }
                let said = String::from_utf8_lossy(&said);
                match said.lines().rev().find(|l| !l.trim().is_empty()) {
                    Some(line) => line
                        .trim()
                        .trim_start_matches("scalprof: error: ")
                        .to_string(),
                    None => "its parser stopped without an answer".into(),
                }
            }
        }
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

/// A file's tables, parsed by a child.
pub(crate) fn parse_elf(exe: &Path, file: &File) -> Result<crate::elf::Tables, String> {
    let mut parser = Parser::spawn(exe, "elf", file).map_err(|e| e.to_string())?;
    parser.stdin.take();
    let mut w = parser.reply()?;
    w.get_status()?;
    crate::elf::Tables::decode(&mut w)
}

/// A file's data layout, read by a child.
pub(crate) fn parse_layout(exe: &Path, file: &File) -> Result<crate::layout::Layout, String> {
    let mut parser = Parser::spawn_brokered(exe, "layout", file).map_err(|e| e.to_string())?;
    parser.close_input();
    let mut w = parser.reply()?;
    w.get_status()?;
    serde_json::from_slice(w.get_bytes()?).map_err(|e| format!("the parser's layout: {e}"))
}
