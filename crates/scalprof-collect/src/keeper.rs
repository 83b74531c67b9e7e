//! Nothing of a workload outlives scalprof, even when scalprof is killed with SIGKILL.
//!
//! The workload's own child dies with scalprof (parent-death signal), and on every normal
//! end scalprof kills the workload's group and the orphans reparented to it. But a
//! SIGKILLed scalprof runs no code: the workload's grandchildren, reparented to init, would
//! run on. So every process scalprof starts carries a token in its environment
//! ([`TREE_ENV`]), which its descendants inherit, and a small keeper process (scalprof
//! itself, run as [`KEEPER_ARG`]) waits on a pipe that only scalprof holds open. When
//! scalprof ends, however it ends, the pipe closes and the keeper kills every process whose
//! environment carries the token. Written by hand: a scan of /proc, which no crate here does
//! for this purpose.
//!
//! The keeper runs as root when scalprof does, so what it kills is checked twice. The
//! token is a secret: it reaches the keeper down its pipe, never in its command line
//! (which every user may read, where a process's environment is readable only by its
//! owner). And a process is killed only when all its uids are the keeper's own, the
//! uids scalprof starts workloads with: another user's process, or a setuid program
//! another user started, is never killed, whatever its environment says. An environment
//! is read a chunk at a time and no further than an exec can make one
//! ([`ENVIRON_LIMIT_BYTES`]): any user can make /proc/PID/environ gigabytes long.
//!
//! A process that clears its environment, or changes its uids (a setuid program the
//! workload runs), escapes the keeper; scalprof's own ends still kill its group.
//! Attached processes (`--attach`) were not started by scalprof and never carry the token.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

pub use crate::token::token;

/// The environment variable that marks the processes of scalprof's workloads: one token
/// per scalprof process, space-separated when one scalprof runs inside another's workload.
pub const TREE_ENV: &str = "SCALPROF_TREE";

/// The first argument that makes the scalprof binary a keeper (not a user command).
pub const KEEPER_ARG: &str = "__scalprof-keeper";

/// The most of a process's environment the keeper reads. An exec refuses arguments and
/// environment larger than three quarters of the kernel's 8 MiB default stack limit
/// (fs/exec.c, `bprm_stack_limits`), whatever `ulimit -s` says: a longer environment
/// was made with PR_SET_MM (which needs no privilege) and is no workload's.
pub const ENVIRON_LIMIT_BYTES: usize = 6 << 20;

/// The longest [`TREE_ENV`] entry the keeper looks into: a token is under 30 bytes, so
/// this is thousands of nested scalprofs.
const TREE_ENTRY_LIMIT_BYTES: usize = 64 << 10;

/// The value of [`TREE_ENV`] for a workload started now: the inherited tokens and ours.
pub fn tree_value() -> String {
    match std::env::var(TREE_ENV) {
        Ok(outer) if !outer.trim().is_empty() => format!("{} {}", outer.trim(), token()),
        _ => token().to_string(),
    }
}

/// The write end of the keeper's pipe, held (never written after the token) for the life
/// of this process.
static KEEPER: Mutex<Option<ChildStdin>> = Mutex::new(None);

/// Starts the keeper: `program` (scalprof's own binary) run as [`KEEPER_ARG`], in a
/// process group of its own so that a Ctrl-C or a kill of scalprof's group does not reach
/// it first, and sends it this process's token as the first line on its pipe. Call once,
/// before the first workload starts (the keeper is a child of scalprof and must not be
/// taken for a workload's leftover).
#[allow(clippy::disallowed_methods)] // runs: scalprof's own binary (/proc/self/exe) as the keeper
pub fn start(program: &Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut held = KEEPER.lock().unwrap_or_else(|e| e.into_inner());
    if held.is_some() {
        return Ok(());
    }
    let mut child = Command::new(program)
        .arg(KEEPER_ARG)
        .env_remove(TREE_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let mut pipe = child.stdin.take().expect("stdin was piped");
    // Shorter than PIPE_BUF: written whole, and before any workload starts.
    pipe.write_all(format!("{}\n", token()).as_bytes())?;
    *held = Some(pipe);
    // The keeper outlives this handle: it exits when our end of the pipe closes.
    std::mem::forget(child);
    Ok(())
}

/// The keeper's whole life: read the token from the pipe, wait until scalprof's end of
/// it closes, then kill the processes that carry the token, a few rounds (a dying parent
/// may fork once more).
pub fn serve() -> ! {
    // A name of its own, so that `pkill scalprof` or `killall scalprof` (the usual way to
    // stop a stuck tool) leaves the keeper to clean up after it.
    let name = b"scalprof-keeper\0";
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes; setting
    // signal dispositions to SIG_IGN runs no handler.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut stdin = std::io::stdin().lock();
    // The first line is the token; then nothing comes until the pipe closes.
    let mut line = Vec::new();
    let mut sink = [0u8; 64];
    let mut token = None;
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(n) if token.is_none() => {
                line.extend_from_slice(&sink[..n]);
                if let Some(end) = line.iter().position(|&b| b == b'\n') {
                    token = Some(String::from_utf8_lossy(&line[..end]).into_owned());
                } else if line.len() > sink.len() {
                    // Not a token: leave without killing anything.
                    break;
                }
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    // A scalprof that ended before sending its token started no workload.
    if let Some(token) = token.filter(|t| !t.is_empty()) {
        // The workloads' cgroup first: it holds every process of theirs, whatever became
        // of its environment (see [`crate::cgroup`]); then the token's carriers elsewhere.
        if let Some(dir) = crate::cgroup::path_for(&token).filter(|d| d.exists()) {
            crate::cgroup::remove(&dir);
        }
        for _ in 0..20 {
            if kill_carriers(&token) == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    std::process::exit(0)
}

/// SIGKILLs every process of this process's uids whose environment carries `token` in
/// [`TREE_ENV`]; how many.
#[allow(clippy::disallowed_methods)] // opens: /proc/PID/environ, kernel-made, read with a cap
pub fn kill_carriers(token: &str) -> usize {
    let own = std::process::id() as i32;
    let Some(own_uids) = uids(Path::new("/proc/self")) else {
        return 0;
    };
    let mut killed = 0;
    for (pid, path) in crate::processes(Path::new("/proc")) {
        if pid == own {
            continue;
        }
        // Held from before the checks to the signal: a process that exits meanwhile and
        // whose pid is taken by another is not the one signalled.
        let Some(target) = Target::open(pid) else {
            continue;
        };
        if uids(&path) != Some(own_uids) {
            continue;
        }
        let carried = std::fs::File::open(path.join("environ"))
            .is_ok_and(|f| carries(f, token, ENVIRON_LIMIT_BYTES));
        if carried && target.kill() {
            killed += 1;
        }
    }
    killed
}

/// A process to signal: a pidfd where the kernel has them (5.3 on), else its pid.
enum Target {
    Fd(std::os::fd::OwnedFd),
    Pid(i32),
}

impl Target {
    /// `None`: no such process now.
    fn open(pid: i32) -> Option<Target> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // SAFETY: the descriptor is new and owned by nothing else.
            return Some(Target::Fd(unsafe {
                std::os::fd::OwnedFd::from_raw_fd(fd as i32)
            }));
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOSYS) => Some(Target::Pid(pid)),
            _ => None,
        }
    }

    fn kill(&self) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: a signal sent by descriptor or pid; no memory is passed but a null info.
        let r = unsafe {
            match self {
                Target::Fd(fd) => libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                ) as i32,
                Target::Pid(pid) => libc::kill(*pid, libc::SIGKILL),
            }
        };
        r == 0
    }
}

/// A process's real, effective, saved and filesystem uids (the `Uid:` line of its status).
fn uids(proc_dir: &Path) -> Option<[u32; 4]> {
    let status = std::fs::read_to_string(proc_dir.join("status")).ok()?;
    parse_uids(&status)
}

fn parse_uids(status: &str) -> Option<[u32; 4]> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut ids = line.split_whitespace().map(|w| w.parse::<u32>().ok());
    let out = [ids.next()??, ids.next()??, ids.next()??, ids.next()??];
    Some(out)
}

/// Whether a NUL-separated environment block, read from `environ` no further than
/// `limit` bytes and a chunk at a time, has `token` among [`TREE_ENV`]'s words.
fn carries(mut environ: impl Read, token: &str, limit: usize) -> bool {
    let mut chunk = vec![0u8; 64 << 10];
    // The entry being read, kept only while it may be the variable's.
    let mut entry: Vec<u8> = Vec::new();
    let mut too_long = false;
    let mut read = 0;
    while read < limit {
        let want = chunk.len().min(limit - read);
        let n = match environ.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        read += n;
        for piece in chunk[..n].split_inclusive(|&b| b == 0) {
            let (body, ends) = match piece.split_last() {
                Some((0, body)) => (body, true),
                _ => (piece, false),
            };
            if !too_long {
                if entry.len() + body.len() > TREE_ENTRY_LIMIT_BYTES {
                    too_long = true;
                    entry.clear();
                } else {
                    entry.extend_from_slice(body);
                }
            }
            if ends {
                if !too_long && entry_carries(&entry, token) {
                    return true;
                }
                entry.clear();
                too_long = false;
            }
        }
    }
    // The last entry may lack its NUL, and is whole only when the block ended.
    read < limit && !too_long && entry_carries(&entry, token)
}

/// Whether one `KEY=VALUE` entry is [`TREE_ENV`] with `token` among its words.
fn entry_carries(entry: &[u8], token: &str) -> bool {
    entry
        .strip_prefix(TREE_ENV.as_bytes())
        .and_then(|rest| rest.strip_prefix(b"="))
        .is_some_and(|value| {
            value
                .split(|&b| b == b' ')
                .any(|word| word == token.as_bytes())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(environ: &[u8], token: &str) -> bool {
        carries(environ, token, ENVIRON_LIMIT_BYTES)
    }

    #[test]
    fn a_token_is_found_among_the_words_of_its_variable_only() {
        let t = "12-00ab";
        assert!(has(b"A=1\0SCALPROF_TREE=12-00ab\0B=2\0", t));
        assert!(has(b"SCALPROF_TREE=9-ff 12-00ab\0", t));
        assert!(has(b"SCALPROF_TREE=12-00ab", t));
        assert!(!has(b"SCALPROF_TREE=12-00abc\0", t));
        assert!(!has(b"OTHER=12-00ab\0", t));
        assert!(!has(b"XSCALPROF_TREE=12-00ab\0", t));
        assert!(!has(b"SCALPROF_TREE\0", t));
        assert!(!has(b"", t));
    }

    #[test]
    fn an_environment_is_read_in_chunks_and_no_further_than_the_limit() {
        let t = "12-00ab";
        let entry = b"SCALPROF_TREE=12-00ab\0";
        // An entry across the boundary of two chunks.
        let mut env = vec![b'x'; (64 << 10) - 9];
        env.push(0);
        env.extend_from_slice(entry);
        assert!(has(&env, t));
        // Found before an endless rest is read; an endless block without it ends unread.
        assert!(carries(
            entry.chain(std::io::repeat(0)),
            t,
            ENVIRON_LIMIT_BYTES
        ));
        assert!(!carries(std::io::repeat(b'x'), t, ENVIRON_LIMIT_BYTES));
        // Past the limit is not looked at.
        let mut far = vec![0u8; 1 << 20];
        far.extend_from_slice(entry);
        assert!(has(&far, t));
        assert!(!carries(&far[..], t, 1 << 20));
        // An entry of the variable longer than any token list is not kept whole.
        let mut long = b"SCALPROF_TREE=".to_vec();
        long.extend(std::iter::repeat_n(b'y', 1 << 20));
        long.extend_from_slice(b" 12-00ab\0");
        assert!(!has(&long, t));
    }

    #[test]
    fn uids_are_read_from_a_status_file() {
        let status = "Name:\tchfn\nUid:\t1001\t0\t0\t0\nGid:\t1001\t1001\t1001\t1001\n";
        assert_eq!(parse_uids(status), Some([1001, 0, 0, 0]));
        assert_eq!(parse_uids("Name:\tx\n"), None);
        assert_eq!(parse_uids("Uid:\t1\t2\n"), None);
    }

    #[test]
    fn the_marked_processes_are_killed_and_no_other() {
        // A token of this test's own: other tests of this binary start workloads with
        // the process's token meanwhile.
        let token = format!("{}-keeper-test", std::process::id());
        let value = format!("outer-1 {token}");
        let mut marked = Command::new("sleep")
            .arg("30")
            .env(TREE_ENV, value)
            .spawn()
            .unwrap();
        let mut other = Command::new("sleep")
            .arg("30")
            .env(TREE_ENV, "another-token")
            .spawn()
            .unwrap();
        // environ is readable once the child has exec'd.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(kill_carriers(&token), 1);
        let status = marked.wait().unwrap();
        assert!(!status.success());
        assert!(
            other.try_wait().unwrap().is_none(),
            "an unmarked process was killed"
        );
        let _ = other.kill();
        let _ = other.wait();
    }

    use crate::test_support::require_root;

    /// A `sleep 30` carrying `token`, started with the real, effective and saved uids
    /// `uids` (as a setuid program of another user's would run).
    fn sleeper_as(token: &str, uids: (u32, u32, u32)) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("sleep");
        cmd.arg("30").env(TREE_ENV, token);
        // SAFETY: setresuid is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setresuid(uids.0, uids.1, uids.2) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.spawn().unwrap()
    }

    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn processes_of_other_uids_are_spared_even_with_the_token() {
        require_root("processes_of_other_uids_are_spared_even_with_the_token");
        let token = format!("{}-other-uids-test", std::process::id());
        // Another user's own process that copied the token, and a setuid-root program that
        // user started with it (real uid theirs, effective root: `chfn` waiting for a
        // password). Neither is the workload's: the keeper runs as the workload's uid.
        let mut theirs = sleeper_as(&token, (65534, 65534, 65534));
        let mut setuid = sleeper_as(&token, (65534, 0, 0));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(kill_carriers(&token), 0);
        for child in [&mut theirs, &mut setuid] {
            assert!(
                child.try_wait().unwrap().is_none(),
                "a process of another uid was killed"
            );
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The variable that makes this test binary a process with a forged environment (see
    /// [`forged_environment`]): `SIZE_BYTES:AT_END:TOKEN`.
    const FORGE_ENV: &str = "SCALPROF_TEST_FORGED_ENVIRON";

    /// The kernel's `struct prctl_mm_map` (include/uapi/linux/prctl.h).
    #[repr(C)]
    #[derive(Default)]
    struct MmMap {
        start_code: u64,
        end_code: u64,
        start_data: u64,
        end_data: u64,
        start_brk: u64,
        brk: u64,
        start_stack: u64,
        arg_start: u64,
        arg_end: u64,
        env_start: u64,
        env_end: u64,
        auxv: u64,
        auxv_size: u32,
        exe_fd: i32,
    }

    /// Not a test of its own: in a child started by [`forged_environment`], points the
    /// process's environment (what /proc/PID/environ reads) at SIZE bytes of untouched
    /// anonymous memory holding the token at its start or end, as any user may do with
    /// PR_SET_MM_MAP, says "forged" and sleeps.
    #[test]
    fn helper_a_process_with_a_forged_environment() {
        let Ok(spec) = std::env::var(FORGE_ENV) else {
            return;
        };
        let mut parts = spec.splitn(3, ':');
        let size: usize = parts.next().unwrap().parse().unwrap();
        let at_end = parts.next().unwrap() == "1";
        let entry = format!("{TREE_ENV}={}\0", parts.next().unwrap());
        // SAFETY: a private anonymous mapping, written only within its length.
        let base = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            let at = if at_end { size - entry.len() } else { 0 };
            std::ptr::copy_nonoverlapping(entry.as_ptr(), (p as *mut u8).add(at), entry.len());
            p as u64
        };
        // /proc/self/stat fields, numbered from 1 as proc(5) does.
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let field = |n: usize| -> u64 { after.split(' ').nth(n - 3).unwrap().parse().unwrap() };
        let map = MmMap {
            start_code: field(26),
            end_code: field(27),
            start_stack: field(28),
            start_data: field(45),
            end_data: field(46),
            start_brk: field(47),
            // SAFETY: sbrk(0) only reads the current break.
            brk: unsafe { libc::sbrk(0) } as u64,
            arg_start: field(48),
            arg_end: field(49),
            env_start: base,
            env_end: base + size as u64,
            exe_fd: -1,
            ..MmMap::default()
        };
        // SAFETY: the kernel reads `size_of::<MmMap>()` bytes of `map`.
        let r = unsafe {
            libc::prctl(
                libc::PR_SET_MM,
                libc::PR_SET_MM_MAP,
                &map as *const MmMap,
                std::mem::size_of::<MmMap>(),
                0,
            )
        };
        assert_eq!(r, 0, "PR_SET_MM_MAP: {}", std::io::Error::last_os_error());
        // On a line of its own: the test harness has printed the test's name without one.
        println!("\nforged");
        std::thread::sleep(Duration::from_secs(30));
    }

    /// A process whose environment is `size` bytes with `token` at its start or end.
    fn forged_environment(size: usize, at_end: bool, token: &str) -> std::process::Child {
        use std::io::BufRead;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["keeper::tests::helper_a_process_with_a_forged_environment"])
            .args(["--exact", "--nocapture", "--test-threads=1"])
            .env(FORGE_ENV, format!("{size}:{}:{token}", u8::from(at_end)))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            if line.is_ok_and(|l| l == "forged") {
                return child;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the helper did not forge its environment");
    }

    fn peak_rss_kib() -> i64 {
        // SAFETY: getrusage fills the struct it is given.
        unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut ru);
            ru.ru_maxrss
        }
    }

    #[test]
    fn a_huge_environment_costs_the_keeper_neither_memory_nor_time() {
        const GIB: usize = 1 << 30;
        let token = format!("{}-huge-environ-test", std::process::id());
        // The token first, a GiB of zero bytes after it: found at once.
        let mut first = forged_environment(GIB, false, &token);
        // The token after a GiB: further than any environment an exec can build.
        let mut last = forged_environment(GIB, true, &token);
        let rss_before = peak_rss_kib();
        let t0 = std::time::Instant::now();
        let killed = kill_carriers(&token);
        let took = t0.elapsed();
        let grew_kib = peak_rss_kib() - rss_before;
        // ECHILD: another test of this binary reaped it first (CI saw it once on an AMD
        // host); a process reaped is a process gone.
        let gone = |e: std::io::Error| {
            assert_eq!(e.raw_os_error(), Some(libc::ECHILD), "{e}");
            true
        };
        let first_died = first.wait().map_or_else(gone, |s| !s.success());
        let last_alive = last.try_wait().map_or_else(|e| !gone(e), |s| s.is_none());
        let _ = last.kill();
        let _ = last.wait();
        assert!(first_died, "the token at the start was not found");
        assert!(last_alive, "the keeper read a GiB of environment");
        assert_eq!(killed, 1);
        assert!(grew_kib < 64 << 10, "the keeper grew by {grew_kib} KiB");
        assert!(took < Duration::from_secs(2), "the scan took {took:?}");
    }
}
