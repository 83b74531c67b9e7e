//! scalprof collection: runs the workload at every sweep point and measures it.
//!
//! - [`sweep`]: the sweep loop (warm-ups, clean repeats, traced repeats, `{threads}`
//!   substitution), reporting each finished repeat to a sink the moment it ends.
//! - [`exec`]: one execution in its own process group, with rusage of the whole tree, a
//!   timeout, stdout/stderr captured to files, and collectors attached before exec.
//! - [`launch`]: the fork held before exec that collectors attach to.
//! - [`perf`]: the perf_event sampler (cycles or cpu-clock, kernel and user stacks).
//! - [`locks`]: the BPF lock tracer (kernel lock contention, futex waits at the scheduler).
//! - [`import`]: reading perf.data files recorded elsewhere.
//! - [`interrupt`]: SIGINT/SIGTERM forwarded to the workload's process group.
//! - [`keeper`]: a process that kills what is left of the workloads when scalprof ends.
//! - [`host`]: facts about the machine recorded with every run.
//! - [`private`]: directories and files no other user can plant anything in.
//! - [`watch`]: a running server's curve from its own load, window by window.

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod attach;
pub mod cgroup;
pub mod counters;
pub mod delay;
pub mod exec;
pub mod given_cgroups;
pub mod host;
pub mod import;
pub mod interference;
pub mod interrupt;
pub mod keeper;
pub mod launch;
pub mod limits;
pub mod locks;
pub mod perf;
pub mod private;
pub mod sweep;
mod token;
pub mod topology;
#[cfg(feature = "bpf")]
mod tree;
pub mod watch;

/// What the crate's unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    /// Whether this test may start processes as another user (it runs as root); outside
    /// CI, without root, it says it skips; in CI, which runs as root, it fails.
    pub(crate) fn require_root(test: &str) {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "{test}: needs root (it starts processes as another user); as another user, cargo test lists it as ignored unless CI is set"
        );
    }
}

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The workload could not be moved into a cgroup given with `--cgroup`.
    #[error("the workload could not join the cgroup given with --cgroup (is it writable, and on v2, are its controllers enabled by its parent?)")]
    GivenCgroup,
    #[error("command not found: {0}")]
    CommandNotFound(String),
    #[error("{path} is not executable (chmod +x {path}, or check the path)")]
    NotExecutable { path: String },
    #[error("no command given: put it after `--`, e.g. scalprof run -- ./bench {{threads}}")]
    EmptyCommand,
    #[error("could not start {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not create output file {path}")]
    OutputFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the workload's output to {path}")]
    OutputWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for the workload failed")]
    Wait(#[source] std::io::Error),
    #[error("could not install the SIGINT/SIGTERM handler")]
    Signals(#[source] std::io::Error),
    #[error("invalid sweep list {text:?}: {reason}")]
    BadSweepList { text: String, reason: String },
    #[error("profiling: {0}")]
    Profiling(#[from] ProfilingError),
    #[error("lock tracing: {0}")]
    Locks(#[from] LockTracerError),
    #[error("delay injection: {0}")]
    Delay(#[from] DelayError),
    #[error("{0}")]
    Attach(String),
    #[error("storing a measurement failed")]
    Sink(#[source] SinkError),
    /// `--prepare` or `--cleanup` failed: the sweep stops rather than measure a state that
    /// was not set up.
    #[error(transparent)]
    Hook(Box<HookFailed>),
}

/// A `--prepare` or `--cleanup` command that failed, and where.
#[derive(Debug, thiserror::Error)]
#[error("{flag} `{command}` {outcome} {when} {step}{said}")]
pub struct HookFailed {
    pub flag: &'static str,
    pub command: String,
    /// "exited with status 1", "was killed by SIGKILL".
    pub outcome: String,
    /// "before" or "after".
    pub when: &'static str,
    /// "threads 2, repeat 1".
    pub step: String,
    /// ": its last line of stderr (its stderr: PATH)", or nothing.
    pub said: String,
}

/// What a sink reports when it cannot keep a measurement (the store's error, boxed).
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Why the sampler could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProfilingError {
    #[error("perf_event_open failed: {source}. {hint}")]
    Open {
        #[source]
        source: std::io::Error,
        /// What to run to be allowed to profile (see `perf::paranoia_hint`).
        hint: String,
    },
    #[error(
        "cannot map the perf ring buffer: {0} (raise `ulimit -l` or kernel.perf_event_mlock_kb)"
    )]
    Map(#[source] std::io::Error),
    #[error("cannot start the sampler thread")]
    Thread(#[source] std::io::Error),
}

/// Why the lock tracer could not start.
#[derive(Debug, thiserror::Error)]
pub enum LockTracerError {
    #[error("this scalprof was built without BPF support (the `bpf` cargo feature, which needs clang and libelf-dev to build); rebuild with default features, or pass --no-locks")]
    NotBuilt,
    #[error("cannot start the lock tracer thread")]
    Thread(#[source] std::io::Error),
    #[error("the BPF lock tracer did not start in 30 s")]
    Timeout,
    #[error("loading the BPF lock tracer failed: {message} ({}; or pass --no-locks)", .cause.hint())]
    Load { message: String, cause: BpfCause },
    #[error("cannot read the BPF ring buffer: {0}")]
    RingBuffer(String),
}

/// Why the delay injector could not start.
#[derive(Debug, thiserror::Error)]
pub enum DelayError {
    #[error("this scalprof was built without BPF support (the `bpf` cargo feature, which needs clang and libelf-dev to build): experiments need it")]
    NotBuilt,
    #[error("cannot start the delay injector's thread")]
    Thread(#[source] std::io::Error),
    #[error("the BPF delay injector did not start in 30 s")]
    Timeout,
    #[error("loading the BPF delay injector failed: {message} ({})", .cause.hint())]
    Load { message: String, cause: BpfCause },
    #[error("cannot set up the lock-delay interposer in {}", .path.display())]
    Interposer {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make the {what} in memory (memfd)")]
    Memory {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the file-size limit (`ulimit -f`: {} KiB) is below the {} KiB that the {what} needs, even in memory: raise it", .limit_bytes >> 10, .needed_bytes.div_ceil(1024))]
    FileSizeLimit {
        what: &'static str,
        limit_bytes: u64,
        needed_bytes: u64,
    },
    #[error(
        "a user lock's delay was attached before its environment was prepared (a scalprof bug)"
    )]
    NotPrepared,
}

/// Why BPF programs would not load, as far as scalprof can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BpfCause {
    /// Not root, and no CAP_BPF + CAP_PERFMON.
    Permission,
    /// The kernel has no BTF (`/sys/kernel/btf/vmlinux`).
    NoBtf,
    /// The kernel lacks the `lock:contention_*` tracepoints (before 5.19).
    NoTracepoint,
    Other,
}

impl BpfCause {
    /// What to do about it.
    pub fn hint(self) -> &'static str {
        match self {
            BpfCause::Permission => "loading BPF programs needs root (or CAP_BPF and CAP_PERFMON)",
            BpfCause::NoBtf => "the kernel has no BTF (/sys/kernel/btf/vmlinux): a kernel built with CONFIG_DEBUG_INFO_BTF=y is needed",
            BpfCause::NoTracepoint => "the kernel lacks the lock:contention_begin tracepoint (Linux 5.19 or later)",
            BpfCause::Other => "see the message above",
        }
    }
}

/// Linux capability numbers (include/uapi/linux/capability.h) that scalprof's collectors
/// need without root.
pub mod caps {
    pub const SYS_ADMIN: u32 = 21;
    pub const PERFMON: u32 = 38;
    pub const BPF: u32 = 39;

    /// Whether this process has all of `caps` in its effective set (root has them all).
    pub fn have(caps: &[u32]) -> bool {
        let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
            return false;
        };
        let Some(eff) = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        else {
            return false;
        };
        caps.iter().all(|&c| eff & (1u64 << c) != 0)
    }

    /// Whether BPF programs may be loaded: CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN.
    pub fn may_load_bpf() -> bool {
        have(&[BPF, PERFMON]) || have(&[SYS_ADMIN])
    }

    /// Whether every CPU may be sampled (`--attach`, `-a`): CAP_PERFMON or CAP_SYS_ADMIN,
    /// or `perf_event_paranoid` ≤ 0.
    pub fn may_sample_every_cpu() -> bool {
        have(&[PERFMON]) || have(&[SYS_ADMIN]) || paranoid().is_some_and(|p| p <= 0)
    }

    pub fn paranoid() -> Option<i32> {
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// Finds the program the way execvp would, so that a missing command fails at once,
/// before any run is created.
/// Every process's pid and /proc folder under `proc` (a process that exits meanwhile may
/// still be listed: reading its files then fails, and callers skip it).
pub(crate) fn processes(proc: &std::path::Path) -> Vec<(i32, PathBuf)> {
    let Ok(dir) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, e.path()))
        })
        .collect()
}

pub fn resolve_program(program: &str) -> Result<PathBuf, CollectError> {
    use std::os::unix::fs::PermissionsExt;
    let check = |p: PathBuf| -> Result<PathBuf, CollectError> {
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(p),
            Ok(_) => Err(CollectError::NotExecutable {
                path: p.display().to_string(),
            }),
            Err(_) => Err(CollectError::CommandNotFound(p.display().to_string())),
        }
    };
    if program.is_empty() {
        return Err(CollectError::EmptyCommand);
    }
    if program.contains('/') {
        return check(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        if let Ok(p) = check(dir.join(program)) {
            return Ok(p);
        }
    }
    Err(CollectError::CommandNotFound(format!(
        "{program} (not in PATH)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_programs_in_path_and_rejects_missing_ones() {
        assert!(resolve_program("sh").unwrap().is_absolute());
        let e = resolve_program("/nonexistent").unwrap_err();
        assert_eq!(e.to_string(), "command not found: /nonexistent");
        let e = resolve_program("no-such-program-xyz").unwrap_err();
        assert!(e.to_string().contains("no-such-program-xyz"));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("data.txt");
        std::fs::write(&plain, "not a program").unwrap();
        let e = resolve_program(plain.to_str().unwrap()).unwrap_err();
        assert!(matches!(e, CollectError::NotExecutable { .. }), "{e}");
    }

    /// The model names signals from a table of its own (it has no libc): the table agrees
    /// with this machine's numbers.
    #[test]
    fn the_models_signal_names_are_this_machines() {
        use scalprof_model::signal::name;
        for (number, want) in [
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGSTKFLT, "SIGSTKFLT"),
            (libc::SIGCHLD, "SIGCHLD"),
            (libc::SIGXCPU, "SIGXCPU (the CPU-time limit, ulimit -t)"),
            (libc::SIGXFSZ, "SIGXFSZ (the file-size limit, ulimit -f)"),
            (libc::SIGSYS, "SIGSYS"),
        ] {
            assert_eq!(name(number), want);
        }
    }
}
