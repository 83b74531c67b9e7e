//! The parser child's system-call filter: a deny list of what a parser has no reason to do.
//!
//! A child that parses other users' bytes reads a descriptor, maps memory, starts threads,
//! opens files (its own, by path, or through the broker) and writes answers down its pipes.
//! Whatever code an attacker might run in it therefore needs none of: starting a program or a
//! process, tracing or reading another process, signalling one, making a socket, mounting,
//! loading BPF or kernel modules, making or changing a path (a link planted in `/tmp` as
//! `nobody`), opening a file to write, create or truncate it, or pushing input into a
//! terminal. Those calls fail with `EPERM`. On x86-64 the x32 system calls (numbers with bit
//! 30 set, which a filter keyed by number would not see) fail too.
//!
//! A deny list, not an allow list: the Rust runtime, glibc and the parsing crates call many
//! system calls that vary with their versions; an allow list that misses one would cost every
//! file its symbols. `clone3` answers `ENOSYS` (its flags live in memory, out of a filter's
//! reach), so glibc falls back to `clone`, whose flags are checked: threads only.
//!
//! The filter is built with seccompiler (rust-vmm's BPF compiler for seccomp).

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

#[cfg(target_arch = "x86_64")]
const ARCH: Option<TargetArch> = Some(TargetArch::x86_64);
#[cfg(target_arch = "aarch64")]
const ARCH: Option<TargetArch> = Some(TargetArch::aarch64);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: Option<TargetArch> = None;

/// System calls refused whatever their arguments (the flags and ids compared below are
/// ints: their low 32 bits are compared).
// Whole: one list, a system call a line; split, a reader could not see all it refuses.
fn always_refused() -> Vec<i64> {
    let mut calls = vec![
        // new programs and processes (threads are `clone` with CLONE_THREAD, see below)
        libc::SYS_execve,
        libc::SYS_execveat,
        // other processes
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_getfd,
        libc::SYS_pidfd_send_signal,
        libc::SYS_kill,
        libc::SYS_tkill,
        // new channels: the broker's socket is inherited
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        // the machine
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_setns,
        libc::SYS_unshare,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        // paths: nothing is made, renamed, linked, removed or changed
        libc::SYS_mknodat,
        libc::SYS_mkdirat,
        libc::SYS_unlinkat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_fchmodat,
        libc::SYS_fchownat,
        libc::SYS_fchmod,
        libc::SYS_fchown,
        libc::SYS_truncate,
        libc::SYS_ftruncate,
        libc::SYS_fallocate,
        // fchmodat2 (Linux 6.6; one number on every architecture since 5.1's table)
        452,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_fork,
        libc::SYS_vfork,
        libc::SYS_mknod,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_rename,
        libc::SYS_renameat,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_creat,
    ]);
    calls
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// The rules that refuse an open whose flags (argument `flags_arg`) ask to write (an
/// access mode other than read-only), create (O_CREAT, O_TMPFILE) or truncate.
fn refused_opens(flags_arg: u8) -> Result<Vec<SeccompRule>, String> {
    let accmode = libc::O_ACCMODE as u64;
    let mut rules = Vec::new();
    for mode in [libc::O_WRONLY as u64, libc::O_RDWR as u64, accmode] {
        rules.push(rule(vec![condition(
            flags_arg,
            SeccompCmpOp::MaskedEq(accmode),
            mode,
        )?])?);
    }
    for flag in [libc::O_CREAT, libc::O_TMPFILE, libc::O_TRUNC] {
        let flag = flag as u64;
        rules.push(rule(vec![condition(
            flags_arg,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    Ok(rules)
}

/// x86-64 only: refuse every x32 system call (`nr` with bit 30 set). seccompiler keys its
/// rules by number under the x86-64 audit architecture, which x32 calls share, so without
/// this an x32 `execve` would pass a kernel built with x32 support. Written by hand: four
/// classic BPF instructions.
#[cfg(target_arch = "x86_64")]
fn no_x32() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JMP_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // A = seccomp_data.nr (offset 0)
        ins(LD_W_ABS, 0, 0, 0),
        ins(JMP_JGE_K, 0, 1, X32_SYSCALL_BIT),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// The filters, in the order they are installed: (x86-64) no x32 calls, the deny list
/// (`EPERM`), then the calls that must look absent (`ENOSYS`). `pid` is the child's own: the only process it may
/// signal (an abort raises SIGABRT with `tgkill`). None on an architecture without one.
pub fn filters(pid: u32) -> Result<Option<Vec<BpfProgram>>, String> {
    let Some(arch) = ARCH else { return Ok(None) };
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        always_refused().into_iter().map(|c| (c, vec![])).collect();
    // clone: a thread (CLONE_THREAD) may start, a process may not.
    let thread = libc::CLONE_THREAD as u64;
    refused.insert(
        libc::SYS_clone,
        vec![rule(vec![condition(
            0,
            SeccompCmpOp::MaskedEq(thread),
            0,
        )?])?],
    );
    // Signals (tgkill, and the queued ones that carry a value): only to this process.
    for call in [
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ] {
        refused.insert(
            call,
            vec![rule(vec![condition(0, SeccompCmpOp::Ne, u64::from(pid))?])?],
        );
    }
    // open and openat: to read only; never to write, create or truncate.
    refused.insert(libc::SYS_openat, refused_opens(2)?);
    #[cfg(target_arch = "x86_64")]
    refused.insert(libc::SYS_open, refused_opens(1)?);
    // ioctl: no input pushed into a terminal (TIOCSTI), no console requests (TIOCLINUX).
    #[allow(clippy::unnecessary_cast)] // `Ioctl` is an int, not a u64, on other libcs
    refused.insert(
        libc::SYS_ioctl,
        [libc::TIOCSTI, libc::TIOCLINUX]
            .into_iter()
            .map(|request| rule(vec![condition(1, SeccompCmpOp::Eq, request as u64)?]))
            .collect::<Result<_, _>>()?,
    );
    let deny = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let absent = SeccompFilter::new(
        [(libc::SYS_clone3, vec![]), (libc::SYS_openat2, vec![])]
            .into_iter()
            .collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let deny: BpfProgram = deny
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let absent: BpfProgram = absent
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    #[cfg(target_arch = "x86_64")]
    let filters = vec![no_x32(), deny, absent];
    #[cfg(not(target_arch = "x86_64"))]
    let filters = vec![deny, absent];
    Ok(Some(filters))
}

/// How many filters [`install`] adds (0 on an architecture without them).
pub fn count() -> usize {
    filters(std::process::id()).map_or(0, |f| f.map_or(0, |f| f.len()))
}

/// Installs the filters on this process (every thread it starts inherits them). Needs
/// `no_new_privs` first. A kernel built without seccomp filters refuses the first one with
/// EINVAL: that is no error, the child runs with its other confinements only. Any other
/// failure, or one after a filter went in, is.
pub fn install() -> std::io::Result<()> {
    let filters = filters(std::process::id()).map_err(std::io::Error::other)?;
    for (i, filter) in filters.into_iter().flatten().enumerate() {
        match seccompiler::apply_filter(&filter) {
            Ok(()) => {}
            Err(seccompiler::Error::Seccomp(e))
                if i == 0 && e.raw_os_error() == Some(libc::EINVAL) =>
            {
                return Ok(());
            }
            Err(e) => return Err(std::io::Error::other(format!("seccomp: {e}"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a forked child: install the filters, then try what a parser must not do and what
    /// it must still do. The exit status carries the first step that went wrong.
    #[test]
    fn the_filter_refuses_what_a_parser_never_needs_and_keeps_what_it_does() {
        // SAFETY: fork in a test process: the child builds the filters (glibc's malloc is
        // usable after a fork) and then makes plain system calls only, then _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: getpid has no arguments.
            let me = unsafe { libc::getpid() } as u32;
            let code = (|| {
                let Ok(Some(filters)) = filters(me) else {
                    return 10;
                };
                // SAFETY: prctl with integer arguments.
                if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                    return 11;
                }
                for f in &filters {
                    if seccompiler::apply_filter(f).is_err() {
                        return 12;
                    }
                }
                let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                // SAFETY: each call is a plain system call with integer or C-string
                // arguments; a refused one returns -1 and sets errno.
                unsafe {
                    let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
                    libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), std::ptr::null());
                    if errno() != libc::EPERM {
                        return 20;
                    }
                    if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) != -1
                        || errno() != libc::EPERM
                    {
                        return 21;
                    }
                    if libc::syscall(libc::SYS_clone, libc::SIGCHLD as u64, 0, 0, 0, 0) != -1
                        || errno() != libc::EPERM
                    {
                        return 22;
                    }
                    if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != libc::ENOSYS {
                        return 23;
                    }
                    let flags = libc::O_WRONLY | libc::O_CREAT;
                    if libc::openat(
                        libc::AT_FDCWD,
                        c"/tmp/scalprof-seccomp".as_ptr(),
                        flags,
                        0o600,
                    ) != -1
                        || errno() != libc::EPERM
                    {
                        return 24;
                    }
                    if libc::kill(1, 0) != -1 || errno() != libc::EPERM {
                        return 25;
                    }
                    // Opened to write, or to truncate: refused, even what exists.
                    for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC] {
                        let path = c"/proc/self/status".as_ptr();
                        if libc::openat(libc::AT_FDCWD, path, flags) != -1 || errno() != libc::EPERM
                        {
                            return 26;
                        }
                    }
                    if libc::ioctl(0, libc::TIOCSTI, c"x".as_ptr()) != -1 || errno() != libc::EPERM
                    {
                        return 27;
                    }
                    #[cfg(target_arch = "x86_64")]
                    if libc::syscall(0x4000_0000 | libc::SYS_getpid) != -1 || errno() != libc::EPERM
                    {
                        return 28;
                    }
                    // Still allowed: reading a file, memory, signalling itself.
                    let fd = libc::openat(libc::AT_FDCWD, c"/proc/self/status".as_ptr(), 0);
                    if fd < 0 {
                        return 30;
                    }
                    libc::close(fd);
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        1 << 20,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if p == libc::MAP_FAILED {
                        return 31;
                    }
                    let tid = libc::syscall(libc::SYS_gettid);
                    if libc::syscall(libc::SYS_tgkill, me, tid, 0) != 0 {
                        return 32;
                    }
                }
                0
            })();
            // SAFETY: leaves the forked child at once, running no destructor of the parent's.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the step that went wrong (see the test)"
        );
    }
}
