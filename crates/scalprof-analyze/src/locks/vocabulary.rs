//! The naming vocabulary of locks and waits: contention flags, the lock machinery's own
//! frames, the paths where a lock spins or a thread blocks, and the conventional names of
//! dynamic kernel locks (`mmap_lock`, `i_rwsem`, `files_struct.file_lock`, …) and of user
//! futex waits (mutex, condvar, join…) from the frames on their stacks.

use scalprof_model::locks::{LockKind, Side};
use scalprof_model::profile::folded;

/// contention_begin flags (include/trace/events/lock.h).
pub const LCB_F_SPIN: u32 = 1 << 0;
pub const LCB_F_READ: u32 = 1 << 1;
pub const LCB_F_WRITE: u32 = 1 << 2;
pub const LCB_F_RT: u32 = 1 << 3;
pub const LCB_F_PERCPU: u32 = 1 << 4;
pub const LCB_F_MUTEX: u32 = 1 << 5;

/// The lock type a contention tracepoint's flags describe.
pub fn kernel_lock_type(flags: u32) -> LockKind {
    let side = if flags & LCB_F_READ != 0 {
        Some(Side::Read)
    } else if flags & LCB_F_WRITE != 0 {
        Some(Side::Write)
    } else {
        None
    };
    if flags & LCB_F_SPIN != 0 {
        if side.is_some() {
            LockKind::Rwlock(side)
        } else {
            LockKind::Spinlock
        }
    } else if flags & LCB_F_PERCPU != 0 {
        LockKind::PercpuRwsem(side)
    } else if flags & LCB_F_MUTEX != 0 {
        LockKind::Mutex
    } else if flags & LCB_F_RT != 0 {
        LockKind::RtMutex
    } else if side.is_some() {
        LockKind::Rwsem(side)
    } else {
        LockKind::Lock
    }
}

/// Frames that are the locking machinery itself, not who asked for the lock.
pub fn is_lock_internal(f: &str) -> bool {
    f.starts_with("bpf_")
        || f.starts_with("__bpf")
        || f.contains("contention_")
        || f.contains("spin_lock")
        || f.contains("lock_slowpath")
        || f.starts_with("queued_")
        || f.starts_with("down_")
        || f.starts_with("up_")
        || f.starts_with("rwsem_")
        || f.starts_with("__rwsem")
        || f.starts_with("mutex_")
        || f.starts_with("__mutex")
        || f.starts_with("rt_mutex")
        || f.starts_with("percpu_down")
        || f == "osq_lock"
        || f.contains("schedule")
        || f.starts_with("mmap_read_lock")
        || f.starts_with("mmap_write_lock")
        || is_vcpu_preempted_check(f)
}

/// Kernel functions where lock waiters spin on a CPU (optimistic spinning, queued
/// spinlocks): their samples are the on-CPU cost of a lock.
pub fn is_spin_path(f: &str) -> bool {
    f == "osq_lock"
        || f.ends_with("_spin_on_owner")
        || is_sleeping_lock_cpu(f)
        || f.contains("spin_lock_slowpath")
        || f.starts_with("_raw_spin_lock")
        || f.starts_with("_raw_spin_unlock")
        || is_vcpu_preempted_check(f)
}

/// In a VM, the spin-on-owner loops (`rwsem_spin_on_owner`, `mutex_spin_on_owner`,
/// `osq_lock`) ask the hypervisor on every turn whether the owner's vCPU still runs
/// (`vcpu_is_preempted`, a paravirt call: `__raw_callee_save___kvm_vcpu_is_preempted`
/// on KVM). Its samples are the spinning's: on a 2-CPU KVM guest (AMD EPYC) it was 1–1.5%
/// of the thread-time of two writers of one file, left as a kernel hotspot beside the
/// inode lock it spun on. Its other caller, the scheduler's idle-CPU check at wakeup,
/// costs next to nothing.
fn is_vcpu_preempted_check(f: &str) -> bool {
    f.contains("vcpu_is_preempted")
}

/// A sleeping lock's on-CPU paths: its slow path's own time (the optimistic spin is
/// inlined there) and the atomic operations on the lock word of taking and releasing it,
/// whose cost grows as the word bounces between CPUs.
fn is_sleeping_lock_cpu(f: &str) -> bool {
    (f.starts_with("rwsem_down_") && f.ends_with("_slowpath"))
        || f == "rwsem_optimistic_spin"
        || f.starts_with("__mutex_lock")
        || matches!(
            f,
            "down_write" | "up_write" | "down_read" | "up_read" | "mutex_lock" | "mutex_unlock"
        )
}

/// Functions that take an inode's `i_rwsem` (through the inlined `inode_lock` and
/// `inode_lock_shared`): writes, truncation, attribute changes, and directory changes and
/// lookups (the directory's inode).
pub fn takes_inode_lock(caller: &str) -> bool {
    caller.ends_with("_file_write_iter")
        || caller.ends_with("_buffered_write_iter")
        || caller.ends_with("_dio_write_iter")
        || caller.ends_with("_fallocate")
        || caller.ends_with("_punch_hole")
        || caller.ends_with("_setattr")
        || matches!(
            caller,
            "do_truncate"
                | "chmod_common"
                | "chown_common"
                | "lookup_slow"
                | "open_last_lookups"
                | "filename_create"
                | "do_unlinkat"
                | "do_rmdir"
                | "iterate_dir"
                | "lock_rename"
                | "vfs_setxattr"
                | "btrfs_inode_lock"
                | "xfs_ilock"
        )
}

/// Whether a kernel frame belongs to the futex system call (user locks' kernel side).
pub fn is_futex_path(f: &str) -> bool {
    f.contains("sys_futex") || f == "do_futex" || f.starts_with("futex_")
}

/// Whether a folded stack ran inside the futex system call.
pub(crate) fn in_futex_syscall(stack: &str) -> bool {
    folded::kernel_frames(stack).any(|f| f.contains("sys_futex") || f == "do_futex")
}

/// libc's lock and unlock paths (the atomic exchange on the lock word, the futex call
/// around it): time spent there is the user locks', not the caller's work.
pub fn is_user_lock_code(f: &str) -> bool {
    // glibc's internal aliases: __GI___lll_lock_wait.
    let f = f.trim_start_matches('_');
    let f = f.strip_prefix("GI_").unwrap_or(f).trim_start_matches('_');
    f.starts_with("pthread_mutex_")
        || f.starts_with("pthread_cond_")
        || f.starts_with("condvar_")
        || f.starts_with("pthread_rwlock_")
        || f.starts_with("pthread_spin_")
        || f.starts_with("lll_")
        // libc's own futex wrappers (user frames; the kernel's end in `_[k]`).
        || f.starts_with("futex_")
}

/// A program's own lock layer over futexes or semaphores (PostgreSQL's LWLocks and
/// per-backend semaphores, CPython's GIL hand-off): machinery around a critical section,
/// never the holder's work, so a holder is named past it.
pub fn is_lock_wrapper(f: &str) -> bool {
    f.starts_with("PGSemaphore")
        || f.starts_with("LWLock")
        || f.starts_with("sem_")
        || f.starts_with("__new_sem_")
        || f == "PyThread_release_lock"
        || f == "PyThread_acquire_lock_timed"
        || f == "drop_gil"
        || f == "take_gil"
}

/// Whether a folded stack was sampled doing a user lock's work: inside the futex system
/// call, or with libc's lock code as its innermost user frame.
pub fn in_user_lock(stack: &str) -> bool {
    in_futex_syscall(stack)
        || folded::user_frames(stack)
            .last()
            .is_some_and(is_user_lock_code)
}

/// A kernel frame of a task that waits for the disk: the block layer's wait for a
/// request, a page under I/O, a journal commit.
pub fn is_disk_wait(f: &str) -> bool {
    f.starts_with("io_schedule")
        || f.starts_with("bit_wait_io")
        || f.starts_with("folio_wait_bit")
        || f.starts_with("wait_on_page_bit")
        || f.starts_with("__wait_on_buffer")
        || f.starts_with("submit_bio_wait")
        || f.starts_with("wait_for_completion_io")
        || f.starts_with("jbd2_log_wait_commit")
        || f.starts_with("blk_mq_get_tag")
}

/// Kernel locks that the contention tracepoints do not report, told from the function a
/// blocked task waits in: the per-VMA lock's writer waiting for the page faults that hold
/// it for reading (`__vma_start_write`, Linux 6.4 and later).
pub fn untraced_kernel_lock(f: &str) -> Option<(&'static str, LockKind)> {
    match f {
        "__vma_start_write" | "vma_start_write" | "__vma_enter_locked" => Some((
            "vma lock",
            LockKind::Rwsem(Some(scalprof_model::locks::Side::Write)),
        )),
        _ => None,
    }
}

/// The scheduler's and the wait machinery's own frames, above the kernel function that
/// decided to wait.
pub fn is_scheduler_frame(f: &str) -> bool {
    f.starts_with("bpf_")
        || f.starts_with("__bpf")
        || f.starts_with("__traceiter")
        || f.contains("schedule")
        || f.starts_with("prepare_to_wait")
        || f.starts_with("finish_wait")
        || f.contains("wait_event")
        || f.contains("wait_woken")
        || f.starts_with("wait_for_completion")
        || f.starts_with("do_nanosleep")
        || f.starts_with("hrtimer_nanosleep")
        || f.starts_with("futex_")
}

/// The kind of wait whose system call a folded stack was sampled in, for the waits whose
/// on-CPU time belongs to them: a file lock's fcntl/flock, a sleep's nanosleep.
pub fn blocking_call_of(stack: &str) -> Option<LockKind> {
    let mut kind = None;
    for f in folded::kernel_frames(stack) {
        if f.ends_with("sys_fcntl") {
            kind = Some(LockKind::PosixLock);
        } else if f.ends_with("sys_flock") {
            kind = Some(LockKind::Flock);
        } else if f.ends_with("sys_clock_nanosleep") || f.ends_with("sys_nanosleep") {
            kind = Some(LockKind::Sleep);
        }
    }
    kind
}

/// The conventional name of a dynamic kernel lock, from who takes it.
pub fn conventional_name(frames: &[&str], flags: u32) -> Option<&'static str> {
    let any = |pats: &[&str]| frames.iter().any(|f| pats.iter().any(|p| f.contains(p)));
    if any(&[
        "futex_q_lock",
        "futex_wait_setup",
        "futex_wake",
        "futex_hash",
        "futex_lock_pi",
        "futex_unqueue",
    ]) {
        return Some("futex hash bucket");
    }
    // The function that asked for the lock: the first frame outside the lock machinery.
    let caller = frames.iter().find(|f| !is_lock_internal(f));
    if flags & LCB_F_SPIN == 0 && caller.is_some_and(|c| takes_inode_lock(c)) {
        return Some("i_rwsem");
    }
    if flags & LCB_F_SPIN == 0
        && any(&[
            "mmap_lock",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
            "vm_mmap_pgoff",
            "__vm_munmap",
            "do_vmi_munmap",
            "do_mprotect",
            "do_madvise",
            "__do_sys_brk",
            "exit_mmap",
        ])
    {
        return Some("mmap_lock");
    }
    if any(&["raw_spin_rq_lock", "_task_rq_lock", "rq_lock"])
        || (flags & LCB_F_SPIN != 0 && any(&["try_to_wake_up", "__schedule", "scheduler_tick"]))
    {
        return Some("runqueue lock");
    }
    if any(&[
        "pte_offset_map_lock",
        "pte_lockptr",
        "pmd_lock",
        "__pte_alloc",
    ]) {
        return Some("page table lock");
    }
    if any(&[
        "sigprocmask",
        "do_signal",
        "get_signal",
        "__lock_task_sighand",
        "send_signal",
        "do_send_sig",
    ]) {
        return Some("siglock");
    }
    // The fd table's spinlock (fs/file.c): every function that allocates, installs,
    // duplicates or closes a descriptor of a shared table takes `current->files`'s one
    // lock, whichever of them is the caller.
    if flags & LCB_F_SPIN != 0
        && caller.is_some_and(|c| {
            matches!(
                *c,
                "alloc_fd"
                    | "file_close_fd"
                    | "close_fd"
                    | "do_dup2"
                    | "ksys_dup3"
                    | "__close_range"
                    | "__range_close"
                    | "replace_fd"
                    | "set_close_on_exec"
                    | "f_dupfd"
                    | "iterate_fd"
                    | "expand_files"
                    | "expand_fdtable"
                    | "do_close_on_exec"
                    | "put_unused_fd"
                    | "dup_fd"
            )
        })
    {
        return Some("files_struct.file_lock");
    }
    None
}

/// What kind of wait a futex is, from the libc functions on the waiting stack.
pub fn user_wait_kind(frames: &[String]) -> LockKind {
    let any = |p: &str| frames.iter().any(|f| f.contains(p));
    if any("pthread_join") || any("clockjoin") || any("timedjoin") {
        LockKind::Join
    } else if any("pthread_cond") {
        LockKind::Condvar
    } else if any("pthread_barrier") {
        LockKind::Barrier
    } else if any("sem_wait") || any("sem_timedwait") || any("sem_clockwait") {
        LockKind::Semaphore
    } else if any("pthread_rwlock") {
        LockKind::Rwlock(None)
    } else if any("lll_lock") || any("pthread_mutex") || any("mutex_lock") {
        LockKind::Mutex
    } else {
        LockKind::Futex
    }
}

#[cfg(test)]
#[test]
fn lock_wrappers_are_machinery_not_work() {
    assert!(is_lock_wrapper("PGSemaphoreUnlock") && is_lock_wrapper("LWLockRelease"));
    assert!(is_lock_wrapper("drop_gil"));
    assert!(!is_lock_wrapper("XLogFlush") && !is_lock_wrapper("rebuild_index"));
}
