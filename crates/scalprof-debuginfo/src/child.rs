//! The parser child's side of privilege separation ([`crate::sandbox`] is the parent's):
//! it confines itself, then parses the one file it was handed and answers down its pipe.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::path::Path;

use crate::sandbox::{
    cpu_cap_s, current_limit, cut_name, use_broker_at, Wire, BROKER_FD, CPU_CAP_S, FILE_FD,
    MEMORY_CAP,
};

/// The child's main: confine, then run `job` on the file at descriptor 3. Never returns.
pub fn serve(job: &str) -> ! {
    if let Err(e) = confine(MEMORY_CAP).and_then(|()| limit_cpu(cpu_cap_s(job))) {
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

/// Limits (`memory_cap` of address space), then the change of user, then no way back to
/// privileges, then the system-call filter: what a parser child does before it reads
/// anything.
pub fn confine(memory_cap: u64) -> std::io::Result<()> {
    limit(libc::RLIMIT_AS, memory_cap)?;
    limit_cpu(CPU_CAP_S)?;
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

/// Sets a resource's limit to `value`, soft and hard, or lowers it there.
fn limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    limit_to(resource, value, value)
}

/// Sets a resource's soft and hard limits, lowering only: a limit the user set lower
/// (`ulimit -v`) stays, and raising one above its hard limit needs CAP_SYS_RESOURCE,
/// which root in a container lacks.
fn limit_to(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> std::io::Result<()> {
    let (inherited_soft, inherited_hard) = current_limit(resource).unwrap_or((u64::MAX, u64::MAX));
    let hard = hard.min(inherited_hard);
    let rl = libc::rlimit {
        rlim_cur: soft.min(inherited_soft).min(hard),
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct it is given; no memory is shared.
    if unsafe { libc::setrlimit(resource, &rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Caps the CPU time at `seconds`: SIGXCPU then (the parent says the child ran over its
/// CPU time), SIGKILL a second later at the hard limit, should SIGXCPU be caught.
pub(crate) fn limit_cpu(seconds: u64) -> std::io::Result<()> {
    limit_to(libc::RLIMIT_CPU, seconds, seconds.saturating_add(1))
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
    let loader = crate::elf::read_all(file).and_then(|data| crate::elf::load_dwarf(&data));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_over_its_cpu_cap_ends_on_sigxcpu_not_sigkill() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut spin = std::process::Command::new("sh");
        spin.args(["-c", "while :; do :; done"]);
        // SAFETY: getrlimit and setrlimit only, between fork and exec.
        unsafe { spin.pre_exec(|| limit_cpu(1)) };
        let status = spin.status().unwrap();
        // Not SIGKILL: at a hard limit equal to the soft one the kernel sends that, and the
        // parent took it for the out-of-memory killer.
        assert_eq!(status.signal(), Some(libc::SIGXCPU), "{status:?}");
    }
}
