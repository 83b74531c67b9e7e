//! Signals by name, for the lines that say how a process ended: "killed by SIGXFSZ" says
//! what happened where "killed by signal 25" sends the reader to a table.
//!
//! The numbers are Linux's on x86-64, arm64 and the other architectures of the generic
//! table (signal(7), "Standard signals", the x86/ARM column); the real-time signals are
//! named as `SIGRTMIN+n`, counted from the kernel's 32 (glibc's own SIGRTMIN is 34 or 35,
//! after the ones it keeps).

/// How a scalprof process begins the line it says when an allocation fails (after
/// `scalprof: error: `); it ends with exit code 2, as other errors do, so a parent that
/// must tell it apart (a parser child under the user's `ulimit -v`) reads this.
pub const OUT_OF_MEMORY: &str = "out of memory: ";

/// How a line names signal `signal`: `SIGSEGV`, and for the signals a resource limit
/// raises, the limit too (`SIGXFSZ (the file-size limit, ulimit -f)`); `signal N` for a
/// number Linux has no signal at.
pub fn name(signal: i32) -> String {
    let limit = match signal {
        24 => " (the CPU-time limit, ulimit -t)",
        25 => " (the file-size limit, ulimit -f)",
        _ => "",
    };
    match NAMES.get(signal as usize).filter(|_| signal > 0) {
        Some(name) => format!("{name}{limit}"),
        None if (32..=64).contains(&signal) => format!("SIGRTMIN+{}", signal - 32),
        None => format!("signal {signal}"),
    }
}

/// Index = the signal's number (0 is no signal).
const NAMES: [&str; 32] = [
    "",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

#[cfg(test)]
mod tests {
    use super::name;

    #[test]
    fn signals_are_named_and_the_limits_said() {
        assert_eq!(name(9), "SIGKILL");
        assert_eq!(name(11), "SIGSEGV");
        assert_eq!(name(25), "SIGXFSZ (the file-size limit, ulimit -f)");
        assert_eq!(name(24), "SIGXCPU (the CPU-time limit, ulimit -t)");
        assert_eq!(name(34), "SIGRTMIN+2");
        assert_eq!(name(0), "signal 0");
        assert_eq!(name(-3), "signal -3");
        assert_eq!(name(99), "signal 99");
    }
}
