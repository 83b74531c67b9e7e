//! One execution of the workload: its own process group, stdout/stderr to files (kept
//! within a size as they are written, see [`capture`]), rusage of the whole process tree
//! from wait4, and an optional timeout.

mod capture;

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::interrupt::{kill_group, Interrupt};
use crate::launch::Suspended;
use crate::CollectError;

pub use capture::Keep;

/// How much of each output file a repeat keeps with `--keep-output`: 64 MiB, head and
/// tail 32 MiB each.
pub const OUTPUT_LIMIT: u64 = 64 << 20;

/// How much of stderr a repeat keeps by default: its first and last 32 KiB, enough for
/// the message of a crash.
pub const STDERR_KEPT: u64 = 64 << 10;

/// What a repeat keeps of the workload's stdout and stderr.
#[derive(Clone, Debug)]
pub struct OutputPolicy {
    pub stdout: Keep,
    pub stderr: Keep,
}

impl OutputPolicy {
    /// Everything, up to [`OUTPUT_LIMIT`] of each (`--keep-output`).
    pub fn keep_all() -> OutputPolicy {
        OutputPolicy {
            stdout: Keep::HeadTail(OUTPUT_LIMIT),
            stderr: Keep::HeadTail(OUTPUT_LIMIT),
        }
    }

    /// The default: of stdout only the lines the ops regex matches, of stderr the
    /// [`STDERR_KEPT`] bytes a crash report needs. A sweep of a chatty program (xz -c
    /// writing 8 MB per repeat) left 47 MB in the store when everything was kept.
    pub fn ops_lines(ops: &regex::Regex) -> OutputPolicy {
        OutputPolicy {
            stdout: Keep::Matching(ops.clone()),
            stderr: Keep::HeadTail(STDERR_KEPT),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ExecSpec {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub timeout: Option<Duration>,
    /// Processes observed alongside the command (`--attach`), found before this run.
    pub attached: Vec<i32>,
    /// Descriptors the workload inherits, at the numbers they have here (scalprof's own
    /// stay close-on-exec, so no other child gets them): the lock interposer, its
    /// counters and the hold times' records, which the workload's environment names.
    pub inherit: Vec<Arc<OwnedFd>>,
}

/// What one execution measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecResult {
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub voluntary_csw: u64,
    pub involuntary_csw: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Processes the workload left running (pid, command name): seen only when scalprof is
    /// a child subreaper ([`become_subreaper`]), which orphans of the workload — daemons
    /// started with setsid included — are then reparented to.
    pub leftover: Vec<(i32, String)>,
    /// scalprof was stopped (Ctrl-Z, SIGSTOP) while the workload ran: `wall_s` counts
    /// the pause, and is no measurement ([`Interrupt::suspensions`]).
    pub suspended: bool,
    /// Bytes the workload wrote to stdout and to stderr; past the output limit, only the
    /// first and last halves of the limit are in the files.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

/// Makes orphaned descendants of the workload this process's children, so that what a
/// workload leaves running can be found ([`ExecResult::leftover`]). For a tool that runs
/// one workload at a time (the CLI), not for a process running several concurrently.
pub fn become_subreaper() {
    // SAFETY: prctl with an integer argument; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
}

fn is_subreaper() -> bool {
    let mut on: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer we pass.
    let r = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut on as *mut libc::c_int) };
    r == 0 && on != 0
}

/// This process's children (all threads'), from /proc.
fn own_children() -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Children that appeared since `before` and still run; zombies among them are reaped.
fn leftovers(before: &[i32], workload: i32) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for pid in own_children() {
        if pid == workload || before.binary_search(&pid).is_ok() {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // "pid (comm) S …": the state follows the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next());
        if state == Some('Z') {
            let mut status = 0;
            // SAFETY: reaping a zombie child of ours.
            unsafe {
                libc::waitpid(pid, &mut status, libc::WNOHANG);
            }
            continue;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        out.push((pid, comm.trim().to_string()));
    }
    out
}

/// Something that attaches to the workload between fork and exec, and is finished
/// once the workload has exited (a profiler, a lock tracer).
pub trait Attach {
    /// `pid` is the suspended command; `attached` are running processes to observe too
    /// (with the processes they create from now on).
    fn attach(&mut self, pid: i32, attached: &[i32]) -> Result<(), CollectError>;
    /// Called after the workload has been reaped.
    fn finish(&mut self);
}

/// Runs the command to completion (or timeout, or interruption).
pub fn run(spec: &ExecSpec, interrupt: &Interrupt) -> Result<ExecResult, CollectError> {
    run_with(spec, interrupt, &mut [])
}

/// Like [`run`], with collectors attached to the workload before it execs.
pub fn run_with(
    spec: &ExecSpec,
    interrupt: &Interrupt,
    collectors: &mut [&mut dyn Attach],
) -> Result<ExecResult, CollectError> {
    run_capped(spec, &OutputPolicy::keep_all(), interrupt, collectors)
}

/// Like [`run_with`], keeping of each output what `output` says. An output that could not
/// be written (a full disk) is an error once the workload has ended.
pub fn run_capped(
    spec: &ExecSpec,
    output: &OutputPolicy,
    interrupt: &Interrupt,
    collectors: &mut [&mut dyn Attach],
) -> Result<ExecResult, CollectError> {
    let program = spec.argv.first().ok_or(CollectError::EmptyCommand)?;
    let path = crate::resolve_program(program)?;
    let start_capture = |path: &std::path::Path, keep: &Keep| {
        create(path).and_then(|file| {
            capture::Capture::start(file, keep.clone()).map_err(|source| CollectError::OutputFile {
                path: path.to_path_buf(),
                source,
            })
        })
    };
    // The workload holds the only write ends: its exit (and its leftovers') ends the copies.
    let (out, out_capture) = start_capture(&spec.stdout, &output.stdout)?;
    let (err, err_capture) = start_capture(&spec.stderr, &output.stderr)?;
    let children_before = own_children();
    let inherit: Vec<i32> = spec.inherit.iter().map(|fd| fd.as_raw_fd()).collect();
    let env = workload_env(&spec.env);
    let child = Suspended::spawn(&path, &spec.argv, &env, &inherit, &out, &err)?;
    drop((out, err));
    let pid = child.pid();
    // Into scalprof's workload cgroup before its exec, so that every process it makes is
    // there too (see [`crate::cgroup`]). Only as a subreaper (the CLI, one workload at a
    // time): what is left in the cgroup after the workload is then this workload's.
    let contained = is_subreaper() && crate::cgroup::add(pid);
    // Then into the cgroups the user gave (`run --cgroup`), whose limits it runs under.
    if !crate::given_cgroups::join(pid) {
        child.abort();
        clean_up(&[], contained);
        return Err(CollectError::GivenCgroup);
    }
    let child = attach_all(child, &spec.attached, collectors)?;
    interrupt.set_child(pid);
    let ended = resume_and_wait(child, spec.timeout, interrupt, collectors)?;
    let leftover = leftovers(&children_before, pid);
    let (stdout, stderr) = (out_capture.finish(), err_capture.finish());
    if ended.timed_out || interrupt.requested() {
        kill_group(pid, libc::SIGKILL);
    }
    clean_up(&leftover, contained);
    let (stdout_bytes, stderr_bytes) = (stdout.bytes, stderr.bytes);
    for (captured, path) in [(stdout, &spec.stdout), (stderr, &spec.stderr)] {
        if let Some(source) = captured.error {
            return Err(CollectError::OutputWrite {
                path: path.clone(),
                source,
            });
        }
    }
    Ok(ended.result(leftover, stdout_bytes, stderr_bytes))
}

pub use crate::launch::WITHHELD_ENV;

/// The workload's environment: the caller's, with scalprof's token that every process of
/// the workload's tree carries (see [`crate::keeper`]). The token (`PID-RANDOM`, inherited
/// tokens before it) names the workloads' tree and carries no secret.
fn workload_env(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut env = env.to_vec();
    env.retain(|(k, _)| k != crate::keeper::TREE_ENV && !WITHHELD_ENV.contains(&k.as_str()));
    env.push((crate::keeper::TREE_ENV.into(), crate::keeper::tree_value()));
    env
}

/// Attaches every collector to the suspended workload; if one fails, the workload is
/// killed and the collectors attached before it are finished.
fn attach_all(
    child: Suspended,
    attached: &[i32],
    collectors: &mut [&mut dyn Attach],
) -> Result<Suspended, CollectError> {
    let pid = child.pid();
    for (i, c) in collectors.iter_mut().enumerate() {
        if let Err(e) = c.attach(pid, attached) {
            child.abort();
            for c in collectors[..i].iter_mut() {
                c.finish();
            }
            return Err(e);
        }
    }
    Ok(child)
}

/// How the workload ended, and what its wait measured.
struct Ended {
    status: i32,
    ru: libc::rusage,
    wall_s: f64,
    suspended: bool,
    timed_out: bool,
}

/// Lets the workload run and waits for it (killing its group past `timeout`); the
/// collectors are finished once it has been reaped, or could not be resumed.
fn resume_and_wait(
    child: Suspended,
    timeout: Option<Duration>,
    interrupt: &Interrupt,
    collectors: &mut [&mut dyn Attach],
) -> Result<Ended, CollectError> {
    let pid = child.pid();
    let suspensions = interrupt.suspensions();
    let start = Instant::now();
    if let Err(e) = child.resume() {
        interrupt.clear_child();
        for c in collectors.iter_mut() {
            c.finish();
        }
        return Err(e);
    }
    let watchdog = Watchdog::start(pid, timeout);
    let waited = wait4(pid);
    let wall_s = start.elapsed().as_secs_f64();
    let suspended = interrupt.suspensions() != suspensions;
    interrupt.clear_child();
    let timed_out = watchdog.stop();
    for c in collectors.iter_mut() {
        c.finish();
    }
    let (status, ru) = waited.map_err(CollectError::Wait)?;
    Ok(Ended {
        status,
        ru,
        wall_s,
        suspended,
        timed_out,
    })
}

impl Ended {
    /// The execution's measurements, with what it left running and wrote.
    fn result(
        self,
        leftover: Vec<(i32, String)>,
        stdout_bytes: u64,
        stderr_bytes: u64,
    ) -> ExecResult {
        let (status, ru) = (self.status, self.ru);
        let (exit_code, signal) = if libc::WIFEXITED(status) {
            (Some(libc::WEXITSTATUS(status)), None)
        } else if libc::WIFSIGNALED(status) {
            (None, Some(libc::WTERMSIG(status)))
        } else {
            (None, None)
        };
        ExecResult {
            wall_s: self.wall_s,
            user_s: tv_secs(ru.ru_utime),
            sys_s: tv_secs(ru.ru_stime),
            exit_code,
            signal,
            timed_out: self.timed_out,
            voluntary_csw: ru.ru_nvcsw.max(0) as u64,
            involuntary_csw: ru.ru_nivcsw.max(0) as u64,
            minor_faults: ru.ru_minflt.max(0) as u64,
            major_faults: ru.ru_majflt.max(0) as u64,
            leftover,
            suspended: self.suspended,
            stdout_bytes,
            stderr_bytes,
        }
    }
}

/// Kills the workload's process group once its time limit has passed, unless stopped first.
struct Watchdog {
    done: mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
    timed_out: Arc<AtomicBool>,
}

impl Watchdog {
    /// Watches `pid`'s group for `limit`, or not at all without one.
    fn start(pid: i32, limit: Option<Duration>) -> Watchdog {
        let timed_out = Arc::new(AtomicBool::new(false));
        let (done, done_rx) = mpsc::channel::<()>();
        let thread = limit.map(|limit| {
            let timed_out = timed_out.clone();
            std::thread::spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(limit) {
                    timed_out.store(true, Ordering::SeqCst);
                    kill_group(pid, libc::SIGKILL);
                }
            })
        });
        Watchdog {
            done,
            thread,
            timed_out,
        }
    }

    /// Stops watching: whether the limit had passed (and the group was killed).
    fn stop(self) -> bool {
        drop(self.done);
        if let Some(t) = self.thread {
            let _ = t.join();
        }
        self.timed_out.load(Ordering::SeqCst)
    }
}

/// Leaves nothing of the workload behind, however it ended: the orphans of its tree that
/// were reparented to us (they may have left the group), and whatever is still in its
/// cgroup (a daemon that cleared its environment and left the session). Only as a
/// subreaper are new children of ours the workload's orphans rather than another
/// caller's workloads.
fn clean_up(leftover: &[(i32, String)], contained: bool) {
    if !is_subreaper() {
        return;
    }
    for (orphan, _) in leftover {
        kill_group(*orphan, libc::SIGKILL);
    }
    if contained {
        if let Some(dir) = crate::cgroup::tree() {
            // Made again for the next workload: nothing stays between repeats.
            crate::cgroup::remove(dir);
        }
    }
}

/// The workload's output files: owner-only, never written through a link.
fn create(path: &std::path::Path) -> Result<File, CollectError> {
    crate::private::create_file(path).map_err(|source| CollectError::OutputFile {
        path: path.to_path_buf(),
        source,
    })
}

fn tv_secs(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6
}

/// Waits for `pid` and returns its status with the rusage of it and of every
/// descendant it waited for — threads included: the CPU time of the whole tree.
fn wait4(pid: i32) -> std::io::Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: status and ru are valid, writable locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &tempfile::TempDir, argv: &[&str], timeout: Option<Duration>) -> ExecSpec {
        ExecSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("SCALPROF_TEST".into(), "42".into())],
            stdout: dir.path().join("out"),
            stderr: dir.path().join("err"),
            timeout,
            attached: Vec::new(),
            inherit: Vec::new(),
        }
    }

    #[test]
    fn measures_cpu_time_of_children_and_captures_output() {
        let dir = tempfile::tempdir().unwrap();
        // A child process burns CPU; its time must be counted through the shell.
        let s = spec(
            &dir,
            &[
                "sh",
                "-c",
                "echo ops=$SCALPROF_TEST; echo oops >&2; sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'",
            ],
            None,
        );
        let r = run(&s, &Interrupt::manual()).unwrap();
        assert_eq!(r.exit_code, Some(0));
        assert!(r.user_s + r.sys_s > 0.05, "{r:?}");
        assert!(r.wall_s >= r.user_s * 0.5);
        assert_eq!(std::fs::read_to_string(&s.stdout).unwrap(), "ops=42\n");
        assert_eq!(std::fs::read_to_string(&s.stderr).unwrap(), "oops\n");
    }

    #[test]
    fn records_exit_codes_and_signals() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(
            &spec(&dir, &["sh", "-c", "exit 3"], None),
            &Interrupt::manual(),
        )
        .unwrap();
        assert_eq!((r.exit_code, r.signal), (Some(3), None));
        let r = run(
            &spec(&dir, &["sh", "-c", "kill -SEGV $$"], None),
            &Interrupt::manual(),
        )
        .unwrap();
        assert_eq!((r.exit_code, r.signal), (None, Some(libc::SIGSEGV)));
    }

    #[test]
    fn timeout_reaches_processes_that_left_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survivor");
        let t0 = Instant::now();
        // Parent and child each move to another process group (setpgid), as a daemonizing
        // workload does; the child would write the marker after 3 s if it survived.
        let script = format!(
            "import os,time\npid=os.fork()\nif pid==0:\n os.setpgid(0,0)\n time.sleep(3)\n open('{}','w').write('x')\n os._exit(0)\ntime.sleep(0.1)\nos.setpgid(0,pid)\ntime.sleep(30)\n",
            marker.display()
        );
        let s = spec(
            &dir,
            &["python3", "-c", &script],
            Some(Duration::from_millis(500)),
        );
        let r = run(&s, &Interrupt::manual()).unwrap();
        let err = std::fs::read_to_string(dir.path().join("err")).unwrap_or_default();
        assert!(r.timed_out, "{r:?} {err}");
        assert_eq!(r.signal, Some(libc::SIGKILL));
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        std::thread::sleep(Duration::from_millis(3500));
        assert!(
            !marker.exists(),
            "the child that left the group survived the timeout"
        );
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = Instant::now();
        // The grandchild would outlive a kill of the shell alone.
        let s = spec(
            &dir,
            &["sh", "-c", "sleep 30 & sleep 30; wait"],
            Some(Duration::from_millis(200)),
        );
        let r = run(&s, &Interrupt::manual()).unwrap();
        assert!(r.timed_out);
        assert_eq!(r.signal, Some(libc::SIGKILL));
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn missing_program_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(
            &spec(&dir, &["/nonexistent/prog"], None),
            &Interrupt::manual(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "command not found: /nonexistent/prog");
        // A path that exists but is not an executable.
        let e = run(&spec(&dir, &["/dev/null"], None), &Interrupt::manual()).unwrap_err();
        assert!(matches!(e, CollectError::NotExecutable { .. }), "{e}");
    }
}
