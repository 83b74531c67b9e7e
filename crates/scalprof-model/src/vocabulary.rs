//! The naming vocabulary of locks and waits, as tables: contention flags, the lock
//! machinery's own frames, the paths where a lock spins or a thread blocks, the
//! conventional names of dynamic kernel locks (`mmap_lock`, `i_rwsem`,
//! `files_struct.file_lock`, …), the kinds of user futex waits (mutex, condvar, join…), and
//! the frames a profiler or tracer adds.
//!
//! It sits on the ground floor because both the converter (which names each repeat's
//! records) and the analysis (which attributes and scores them) read it. Each rule is a row
//! of a table of [`Pat`]s, as perf's lock tooling keeps its `lock_type_table[]`: a new
//! kernel function or runtime is one more row, not one more `||`.

use crate::locks::{LockKind, Side};
use crate::profile::folded;

/// How a frame name matches one row of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pat {
    Exact(&'static str),
    Prefix(&'static str),
    Suffix(&'static str),
    Contains(&'static str),
    /// Starts with the first and ends with the second (`rwsem_down_*_slowpath`).
    Around(&'static str, &'static str),
}

impl Pat {
    pub fn matches(self, f: &str) -> bool {
        match self {
            Pat::Exact(p) => f == p,
            Pat::Prefix(p) => f.starts_with(p),
            Pat::Suffix(p) => f.ends_with(p),
            Pat::Contains(p) => f.contains(p),
            Pat::Around(p, s) => f.starts_with(p) && f.ends_with(s),
        }
    }

    /// The first byte every name it matches starts with, where there is one.
    pub fn first_byte(self) -> Option<u8> {
        match self {
            Pat::Exact(p) | Pat::Prefix(p) | Pat::Around(p, _) => p.as_bytes().first().copied(),
            Pat::Suffix(_) | Pat::Contains(_) => None,
        }
    }
}

/// Whether `f` matches a row of `table`.
pub fn matches_any(table: &[Pat], f: &str) -> bool {
    table.iter().any(|p| p.matches(f))
}

use Pat::{Around, Contains, Exact, Prefix, Suffix};

mod runtimes;
mod tool;
mod waits;
pub use runtimes::{
    is_runtime_service_thread, is_runtime_work, java_method, runtime_work, JVM_SERVICE_THREADS,
    RUNTIME_WORK,
};
pub use tool::{is_tool_frame, set_aside_tool_frames, stack_tool_cost, tool_cost};
pub use waits::user_wait_kind;

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

/// In a VM, the spin-on-owner loops (`rwsem_spin_on_owner`, `mutex_spin_on_owner`,
/// `osq_lock`) ask the hypervisor on every turn whether the owner's vCPU still runs
/// (`vcpu_is_preempted`, a paravirt call: `__raw_callee_save___kvm_vcpu_is_preempted`
/// on KVM). Its samples are the spinning's: on a 2-CPU KVM guest (AMD EPYC) it was 1–1.5%
/// of the thread-time of two writers of one file, left as a kernel hotspot beside the
/// inode lock it spun on. Its other caller, the scheduler's idle-CPU check at wakeup,
/// costs next to nothing.
const VCPU_PREEMPTED_CHECK: Pat = Contains("vcpu_is_preempted");

/// Frames that are the locking machinery itself, not who asked for the lock.
pub const LOCK_INTERNAL: &[Pat] = &[
    Prefix("bpf_"),
    Prefix("__bpf"),
    Contains("contention_"),
    Contains("spin_lock"),
    Contains("lock_slowpath"),
    Prefix("queued_"),
    Prefix("down_"),
    Prefix("up_"),
    Prefix("rwsem_"),
    Prefix("__rwsem"),
    Prefix("mutex_"),
    Prefix("__mutex"),
    Prefix("rt_mutex"),
    Prefix("percpu_down"),
    Exact("osq_lock"),
    Contains("schedule"),
    Prefix("mmap_read_lock"),
    Prefix("mmap_write_lock"),
    VCPU_PREEMPTED_CHECK,
];

pub fn is_lock_internal(f: &str) -> bool {
    matches_any(LOCK_INTERNAL, f)
}

/// Kernel functions where lock waiters spin on a CPU (optimistic spinning, queued
/// spinlocks), and a sleeping lock's on-CPU paths: its slow path's own time (the
/// optimistic spin is inlined there) and the atomic operations on the lock word of taking
/// and releasing it, whose cost grows as the word bounces between CPUs. Their samples are
/// the on-CPU cost of a lock.
pub const SPIN_PATHS: &[Pat] = &[
    Exact("osq_lock"),
    Suffix("_spin_on_owner"),
    // a sleeping lock's on-CPU paths
    Around("rwsem_down_", "_slowpath"),
    Exact("rwsem_optimistic_spin"),
    Prefix("__mutex_lock"),
    Exact("down_write"),
    Exact("up_write"),
    Exact("down_read"),
    Exact("up_read"),
    Exact("mutex_lock"),
    Exact("mutex_unlock"),
    // spinlocks
    Contains("spin_lock_slowpath"),
    Prefix("_raw_spin_lock"),
    Prefix("_raw_spin_unlock"),
    VCPU_PREEMPTED_CHECK,
];

pub fn is_spin_path(f: &str) -> bool {
    matches_any(SPIN_PATHS, f)
}

/// Functions that take an inode's `i_rwsem` (through the inlined `inode_lock` and
/// `inode_lock_shared`): writes, truncation, attribute changes, and directory changes and
/// lookups (the directory's inode).
pub const INODE_LOCK_TAKERS: &[Pat] = &[
    Suffix("_file_write_iter"),
    Suffix("_buffered_write_iter"),
    Suffix("_dio_write_iter"),
    Suffix("_fallocate"),
    Suffix("_punch_hole"),
    Suffix("_setattr"),
    Exact("do_truncate"),
    Exact("chmod_common"),
    Exact("chown_common"),
    Exact("lookup_slow"),
    Exact("open_last_lookups"),
    Exact("filename_create"),
    Exact("do_unlinkat"),
    Exact("do_rmdir"),
    Exact("iterate_dir"),
    Exact("lock_rename"),
    Exact("vfs_setxattr"),
    Exact("btrfs_inode_lock"),
    Exact("xfs_ilock"),
];

pub fn takes_inode_lock(caller: &str) -> bool {
    matches_any(INODE_LOCK_TAKERS, caller)
}

/// The fd table's spinlock (fs/file.c): every function that allocates, installs,
/// duplicates or closes a descriptor of a shared table takes `current->files`'s one lock,
/// whichever of them is the caller.
pub const FD_TABLE_USERS: &[Pat] = &[
    Exact("alloc_fd"),
    Exact("file_close_fd"),
    Exact("close_fd"),
    Exact("do_dup2"),
    Exact("ksys_dup3"),
    Exact("__close_range"),
    Exact("__range_close"),
    Exact("replace_fd"),
    Exact("set_close_on_exec"),
    Exact("f_dupfd"),
    Exact("iterate_fd"),
    Exact("expand_files"),
    Exact("expand_fdtable"),
    Exact("do_close_on_exec"),
    Exact("put_unused_fd"),
    Exact("dup_fd"),
];

/// The futex system call's kernel frames (user locks' kernel side).
pub const FUTEX_PATH: &[Pat] = &[Contains("sys_futex"), Exact("do_futex"), Prefix("futex_")];
/// The futex system call's entry, whatever the kernel names its inner functions.
const FUTEX_SYSCALL: &[Pat] = &[Contains("sys_futex"), Exact("do_futex")];

pub fn is_futex_path(f: &str) -> bool {
    matches_any(FUTEX_PATH, f)
}

/// Whether a folded stack ran inside the futex system call.
pub fn in_futex_syscall(stack: &str) -> bool {
    folded::kernel_frames(stack).any(|f| matches_any(FUTEX_SYSCALL, f))
}

/// libc's lock and unlock paths (the atomic exchange on the lock word, the futex call
/// around it), once glibc's internal prefixes are off (`__GI___lll_lock_wait`), and the
/// runtimes' own (Go's sync slow paths, HotSpot's monitors): time spent there is the user
/// locks', not the caller's work. `futex_` is libc's own futex wrappers
/// (user frames; the kernel's end in `_[k]`).
pub const USER_LOCK_CODE: &[Pat] = &[
    Prefix("pthread_mutex_"),
    Prefix("pthread_cond_"),
    Prefix("condvar_"),
    Prefix("pthread_rwlock_"),
    Prefix("pthread_spin_"),
    Prefix("lll_"),
    Prefix("futex_"),
    // Go's sync slow paths and the runtime's spin in them.
    Prefix("sync.(*Mutex)."),
    Prefix("sync.(*RWMutex)."),
    Prefix("internal/sync.(*Mutex)."),
    Prefix("runtime.procyield"),
    // HotSpot's monitors (`synchronized`): spinning, entering, parking.
    Prefix("ObjectMonitor::"),
    Prefix("ObjectSynchronizer::"),
    Prefix("SharedRuntime::complete_monitor"),
    Prefix("os::PlatformEvent::"),
    Prefix("Parker::"),
    Prefix("SpinPause"),
    // The JDK's locks, compiled (`int java.util.concurrent.locks.AbstractQueuedSynchronizer
    // .acquire(…)` in a perf map) and LockSupport's park.
    Contains(" java.util.concurrent.locks."),
    Contains(" jdk.internal.misc.Unsafe.park"),
    // Rust's std locks (futex-based since 1.62: Mutex, RwLock, Condvar, Once), their guards
    // and poison flags, and the futex calls under them; parking_lot's. Statically linked
    // into the program, they are its frames: named here, they fold into the lock's row as
    // pthread's code does, and a holder is named past them.
    Contains("std::sys::sync::"),
    Contains("std::sys::pal::unix::futex"),
    Contains("std::sys::futex"),
    Contains("std::sync::poison::"),
    Contains("std::sync::mutex::"),
    Contains("std::sync::rwlock::"),
    Contains("std::sync::condvar::"),
    Contains("std::sync::once::"),
    Contains("std::sync::once_lock::"),
    // Channels (std's and crossbeam's): their waits park the thread.
    Contains("std::sync::mpmc::"),
    Contains("std::sync::mpsc::"),
    Contains("crossbeam_channel"),
    Contains("std::thread::park"),
    Contains("std::thread::thread::Thread>::park"),
    Contains("MutexGuard<"),
    Contains("RwLockReadGuard<"),
    Contains("RwLockWriteGuard<"),
    Prefix("parking_lot"),
    Contains("<parking_lot"),
    Prefix("core::sync::atomic::atomic_"),
];

pub fn is_user_lock_code(f: &str) -> bool {
    // glibc's internal aliases: __GI___lll_lock_wait.
    let f = f.trim_start_matches('_');
    let f = f.strip_prefix("GI_").unwrap_or(f).trim_start_matches('_');
    matches_any(USER_LOCK_CODE, f)
}

/// Whether a locked write was made by a lock's own code (its acquire or release inlined
/// into the program, as Rust std's futex mutex is): it writes the lock's word, which the
/// lock's row accounts for, so it is never a sharing cause of its own. `functions` is the
/// write's inline chain; a bare atomic (`core::sync::atomic::atomic_add`) is the
/// program's own counter unless lock code surrounds it.
pub fn is_lock_word_write(functions: &[String]) -> bool {
    functions
        .iter()
        .any(|f| is_user_lock_code(f) && !f.starts_with("core::sync::atomic::"))
}

/// A function of Rust's standard library or of the map it builds on (`core::`, `std::`,
/// `alloc::`, `hashbrown::`, or a method of their types, `<hashbrown::raw::RawTable<T>>::
/// find`): linked into every Rust program, it is library code as libc is to C. A lock's
/// holder is named by the program's function that called it.
pub fn is_rust_library_frame(f: &str) -> bool {
    const CRATES: [&str; 4] = ["core::", "std::", "alloc::", "hashbrown::"];
    // Methods of the primitive types are core's (`<u64>::rotate_left`, `<[T]>::iter`).
    const PRIMITIVES: [&str; 17] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str",
    ];
    let Some(inner) = f.strip_prefix('<') else {
        return CRATES.iter().any(|c| f.starts_with(c));
    };
    let ty = inner.split(['>', ' ']).next().unwrap_or(inner);
    CRATES.iter().any(|c| inner.starts_with(c))
        || PRIMITIVES.contains(&ty)
        || ["[", "*const ", "*mut ", "&"]
            .iter()
            .any(|p| inner.starts_with(p))
}

/// A program's own lock layer over futexes or semaphores (PostgreSQL's LWLocks and
/// per-backend semaphores, CPython's GIL hand-off): machinery around a critical section,
/// never the holder's work, so a holder is named past it.
pub const LOCK_WRAPPERS: &[Pat] = &[
    Prefix("PGSemaphore"),
    Prefix("LWLock"),
    Prefix("sem_"),
    Prefix("__new_sem_"),
    Exact("PyThread_release_lock"),
    Exact("PyThread_acquire_lock_timed"),
    Exact("drop_gil"),
    Exact("take_gil"),
];

pub fn is_lock_wrapper(f: &str) -> bool {
    matches_any(LOCK_WRAPPERS, f)
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
pub const DISK_WAITS: &[Pat] = &[
    Prefix("io_schedule"),
    Prefix("bit_wait_io"),
    Prefix("folio_wait_bit"),
    Prefix("wait_on_page_bit"),
    Prefix("__wait_on_buffer"),
    Prefix("submit_bio_wait"),
    Prefix("wait_for_completion_io"),
    Prefix("jbd2_log_wait_commit"),
    Prefix("blk_mq_get_tag"),
];

pub fn is_disk_wait(f: &str) -> bool {
    matches_any(DISK_WAITS, f)
}

/// Where a blocked task waits for a kernel lock that the contention tracepoints do not
/// report: the per-VMA lock's writer waiting for the page faults that hold it for reading
/// (`__vma_start_write`, Linux 6.4 and later).
const VMA_LOCK_WAITS: &[Pat] = &[
    Exact("__vma_start_write"),
    Exact("vma_start_write"),
    Exact("__vma_enter_locked"),
];

/// The untraced kernel lock a blocked task waits for in `f`, if any: its name and type.
pub fn untraced_kernel_lock(f: &str) -> Option<(&'static str, LockKind)> {
    matches_any(VMA_LOCK_WAITS, f).then_some(("vma lock", LockKind::Rwsem(Some(Side::Write))))
}

/// The scheduler's and the wait machinery's own frames, above the kernel function that
/// decided to wait.
pub const SCHEDULER_FRAMES: &[Pat] = &[
    Prefix("bpf_"),
    Prefix("__bpf"),
    Prefix("__traceiter"),
    Contains("schedule"),
    Prefix("prepare_to_wait"),
    Prefix("finish_wait"),
    Contains("wait_event"),
    Contains("wait_woken"),
    Prefix("wait_for_completion"),
    Prefix("do_nanosleep"),
    Prefix("hrtimer_nanosleep"),
    Prefix("futex_"),
];

pub fn is_scheduler_frame(f: &str) -> bool {
    matches_any(SCHEDULER_FRAMES, f)
}

/// The system calls whose on-CPU time belongs to the wait they make: a file lock's
/// fcntl/flock, a sleep's nanosleep. The first row a frame matches names it.
fn blocking_call(f: &str) -> Option<LockKind> {
    if Suffix("sys_fcntl").matches(f) {
        Some(LockKind::PosixLock)
    } else if Suffix("sys_flock").matches(f) {
        Some(LockKind::Flock)
    } else if Suffix("sys_clock_nanosleep").matches(f) || Suffix("sys_nanosleep").matches(f) {
        Some(LockKind::Sleep)
    } else {
        None
    }
}

/// The kind of wait whose system call a folded stack was sampled in (the innermost such
/// frame), for the waits whose on-CPU time belongs to them.
pub fn blocking_call_of(stack: &str) -> Option<LockKind> {
    folded::kernel_frames(stack)
        .filter_map(blocking_call)
        .last()
}

/// Whether a dynamic kernel lock's row applies to spinning waits, sleeping ones, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spins {
    Any,
    Only,
    Never,
}

/// What on the waiting stack names a lock.
#[derive(Clone, Copy, Debug)]
enum Clue {
    /// A frame that contains one of these.
    AnyFrame(&'static [&'static str]),
    /// The function that asked for the lock (the first frame outside the lock machinery)
    /// matches a row of the table.
    Caller(&'static [Pat]),
}

/// The conventional names of dynamic kernel locks, by who takes them; the first row that
/// applies names the lock.
const KERNEL_LOCK_NAMES: &[(&str, Spins, Clue)] = &[
    (
        "futex hash bucket",
        Spins::Any,
        Clue::AnyFrame(&[
            "futex_q_lock",
            "futex_wait_setup",
            "futex_wake",
            "futex_hash",
            "futex_lock_pi",
            "futex_unqueue",
        ]),
    ),
    ("i_rwsem", Spins::Never, Clue::Caller(INODE_LOCK_TAKERS)),
    (
        "mmap_lock",
        Spins::Never,
        Clue::AnyFrame(&[
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
        ]),
    ),
    (
        "runqueue lock",
        Spins::Any,
        Clue::AnyFrame(&["raw_spin_rq_lock", "_task_rq_lock", "rq_lock"]),
    ),
    (
        "runqueue lock",
        Spins::Only,
        Clue::AnyFrame(&["try_to_wake_up", "__schedule", "scheduler_tick"]),
    ),
    (
        "page table lock",
        Spins::Any,
        Clue::AnyFrame(&[
            "pte_offset_map_lock",
            "pte_lockptr",
            "pmd_lock",
            "__pte_alloc",
        ]),
    ),
    (
        "siglock",
        Spins::Any,
        Clue::AnyFrame(&[
            "sigprocmask",
            "do_signal",
            "get_signal",
            "__lock_task_sighand",
            "send_signal",
            "do_send_sig",
        ]),
    ),
    (
        "files_struct.file_lock",
        Spins::Only,
        Clue::Caller(FD_TABLE_USERS),
    ),
];

/// The conventional name of a dynamic kernel lock, from who takes it.
pub fn conventional_name(frames: &[&str], flags: u32) -> Option<&'static str> {
    let spinning = flags & LCB_F_SPIN != 0;
    let caller = frames.iter().find(|f| !is_lock_internal(f));
    KERNEL_LOCK_NAMES
        .iter()
        .find(|(_, spins, clue)| {
            let applies = match spins {
                Spins::Any => true,
                Spins::Only => spinning,
                Spins::Never => !spinning,
            };
            applies
                && match clue {
                    Clue::AnyFrame(pats) => {
                        frames.iter().any(|f| pats.iter().any(|p| f.contains(p)))
                    }
                    Clue::Caller(table) => caller.is_some_and(|c| matches_any(table, c)),
                }
        })
        .map(|(name, _, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_by_inlined_lock_code_is_the_lock_s_and_a_bare_atomic_is_the_program_s() {
        let chain = |fs: &[&str]| fs.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        // Rust std's mutex, acquired inline in the program's function.
        assert!(is_lock_word_write(&chain(&[
            "core::sync::atomic::atomic_compare_exchange",
            "<std::sys::sync::mutex::futex::Mutex>::lock",
            "std::sync::poison::mutex::Mutex<T>::lock",
            "rust_mutex::route_lookup",
        ])));
        // A reference count: the program's own atomic, a sharing cause when it bounces.
        assert!(!is_lock_word_write(&chain(&[
            "core::sync::atomic::atomic_add",
            "<core::sync::atomic::AtomicU64>::fetch_add",
            "refcount::get",
        ])));
        assert!(!is_lock_word_write(&chain(&["counters_bump"])));
    }

    #[test]
    fn methods_of_primitive_types_are_rust_library_code() {
        for f in [
            "<u64>::rotate_left",
            "<[T]>::iter",
            "<*mut T>::add",
            "<i32 as core::cmp::PartialOrd>::lt",
            "core::hint::black_box",
            "<hashbrown::raw::RawTableInner>::find_inner",
        ] {
            assert!(is_rust_library_frame(f), "{f}");
        }
        for f in [
            "rust_mutex::route_lookup",
            "<rust_mutex::Table>::get",
            "table_lookup",
        ] {
            assert!(!is_rust_library_frame(f), "{f}");
        }
    }

    #[test]
    fn static_libc_and_rust_std_lock_code_is_lock_code_and_std_is_library() {
        // A statically linked glibc's unlock and wake-up, named in the program's binary.
        for f in [
            "__lll_lock_wake",
            "__GI___lll_lock_wait",
            "__pthread_mutex_unlock_usercnt",
        ] {
            assert!(is_user_lock_code(f), "{f}");
        }
        // Rust std's futex mutex, its guard and poison flag; parking_lot.
        for f in [
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
            "<std::sys::sync::mutex::futex::Mutex>::spin",
            "std::sys::pal::unix::futex::futex_wake",
            "<std::sync::poison::mutex::MutexGuard<T> as core::ops::drop::Drop>::drop",
            "std::sync::poison::Flag::guard",
            "parking_lot::raw_mutex::RawMutex::lock_slow",
            "core::sync::atomic::atomic_load",
        ] {
            assert!(is_user_lock_code(f), "{f}");
        }
        assert!(!is_user_lock_code("rustmutex::route_lookup"));
        assert!(!is_user_lock_code("table_lookup"));
        assert!(is_rust_library_frame(
            "<hashbrown::raw::RawTableInner>::probe_seq"
        ));
        assert!(is_rust_library_frame("core::intrinsics::likely"));
        assert!(is_rust_library_frame(
            "<core::hash::sip::Sip13Rounds as core::hash::sip::Sip>::c_rounds"
        ));
        assert!(!is_rust_library_frame(
            "<rustmutex::Table as core::fmt::Debug>::fmt"
        ));
        assert!(!is_rust_library_frame("rustmutex::route_lookup"));
    }

    #[test]
    fn a_runtime_s_own_work_is_named_by_the_frames_that_run_it() {
        assert_eq!(
            runtime_work("go_mutex;runtime.gcBgMarkWorker;runtime.gcDrain;runtime.scanobject"),
            Some("GC (Go runtime)")
        );
        assert_eq!(
            runtime_work("java;thread_native_entry(Thread*);CompileBroker::compiler_thread_loop();PhaseIdealLoop::build_loop_tree()"),
            Some("JIT compilation (JVM)")
        );
        assert_eq!(runtime_work("go_mutex;runtime.goexit;main.worker"), None);
        assert!(is_runtime_work("GC (JVM)"));
    }

    #[test]
    fn java_methods_lose_their_return_type_and_parameters_and_nothing_else_changes() {
        assert_eq!(java_method("void SyncCounter.add(long)"), "SyncCounter.add");
        assert_eq!(
            java_method("void SyncCounter.lambda$main$0(long, long)"),
            "SyncCounter.lambda$main$0"
        );
        for same in [
            "main.(*T).Inc",
            "ObjectMonitor::TrySpin(JavaThread*)",
            "table_lookup",
        ] {
            assert_eq!(java_method(same), same);
        }
    }

    #[test]
    fn lock_wrappers_are_machinery_not_work() {
        assert!(is_lock_wrapper("PGSemaphoreUnlock") && is_lock_wrapper("LWLockRelease"));
        assert!(is_lock_wrapper("drop_gil"));
        assert!(!is_lock_wrapper("XLogFlush") && !is_lock_wrapper("rebuild_index"));
    }

    #[test]
    fn each_pattern_matches_as_it_says() {
        assert!(Exact("osq_lock").matches("osq_lock") && !Exact("osq_lock").matches("osq_locks"));
        assert!(Prefix("down_").matches("down_write") && !Prefix("down_").matches("up_down_"));
        assert!(Suffix("_setattr").matches("ext4_setattr") && !Suffix("_setattr").matches("x"));
        assert!(Contains("schedule").matches("__schedule") && !Contains("sched").matches("x"));
        let slow = Around("rwsem_down_", "_slowpath");
        assert!(slow.matches("rwsem_down_write_slowpath") && !slow.matches("rwsem_down_write"));
    }

    #[test]
    fn a_spinning_wait_and_a_sleeping_one_are_named_by_their_own_rows() {
        // The fd table's lock is a spinlock: a sleeping wait under alloc_fd is not it.
        assert_eq!(
            conventional_name(&["_raw_spin_lock", "alloc_fd"], LCB_F_SPIN),
            Some("files_struct.file_lock")
        );
        assert_eq!(conventional_name(&["alloc_fd"], 0), None);
        // The scheduler's functions name the runqueue lock only when it spins.
        assert_eq!(
            conventional_name(&["try_to_wake_up"], LCB_F_SPIN),
            Some("runqueue lock")
        );
        assert_eq!(conventional_name(&["try_to_wake_up"], 0), None);
        // The inode lock is named by its caller, past the lock machinery.
        assert_eq!(
            conventional_name(&["down_write", "ext4_buffered_write_iter"], LCB_F_WRITE),
            Some("i_rwsem")
        );
    }

    #[test]
    fn a_join_is_told_from_a_condvar_whatever_the_frame_order() {
        let frames = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            user_wait_kind(&frames(&["pthread_cond_wait", "pthread_join"])),
            LockKind::Join
        );
        assert_eq!(
            user_wait_kind(&frames(&["__lll_lock_wait"])),
            LockKind::Mutex
        );
        assert_eq!(user_wait_kind(&frames(&["main"])), LockKind::Futex);
    }

    #[test]
    fn rust_std_and_parking_lot_waits_read_as_their_types() {
        let kind = |f: &str| user_wait_kind(&[f.to_string(), "app::worker".to_string()]);
        assert_eq!(
            kind("std::sys::sync::mutex::futex::Mutex::lock_contended"),
            LockKind::Mutex
        );
        assert_eq!(
            kind("<std::sys::sync::condvar::futex::Condvar>::wait_optional_timeout"),
            LockKind::Condvar
        );
        assert_eq!(
            kind("std::sys::sync::rwlock::futex::RwLock::read_contended"),
            LockKind::Rwlock(Some(Side::Read))
        );
        assert_eq!(
            kind("std::sys::sync::rwlock::futex::RwLock::write_contended"),
            LockKind::Rwlock(Some(Side::Write))
        );
        assert_eq!(
            kind("parking_lot::raw_mutex::RawMutex::lock_slow"),
            LockKind::Mutex
        );
        assert_eq!(
            kind("parking_lot::condvar::Condvar::wait_until_internal"),
            LockKind::Condvar
        );
        // A C++ std::mutex goes through pthread_mutex_lock; its own name is no Rust path.
        assert_eq!(kind("std::mutex::lock"), LockKind::Futex);
        // A condvar's waiter taking its Rust mutex back after waking waits on the mutex.
        let relock = [
            "<std::sys::sync::condvar::futex::Condvar>::wait_optional_timeout".to_string(),
            "std::sys::sync::mutex::futex::Mutex::lock_contended".to_string(),
        ];
        assert_eq!(user_wait_kind(&relock), LockKind::Mutex);
    }

    #[test]
    fn a_rust_channel_s_waits_read_as_the_channel_by_the_side_that_waited() {
        use crate::locks::ChanSide;
        let w = |v: &[&str]| user_wait_kind(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let park = [
            "std::sys::pal::unix::futex::futex_wait",
            "<std::sys::sync::thread_parking::futex::Parker>::park",
            "<std::thread::thread::Thread>::park",
            "<std::sync::mpmc::context::Context>::wait_until",
        ];
        let send = [
            &park[..],
            &["std::sync::mpmc::array::Channel<T>::send::{{closure}}"],
        ]
        .concat();
        let recv = [
            &park[..],
            &["std::sync::mpmc::array::Channel<T>::recv::{{closure}}"],
        ]
        .concat();
        assert_eq!(w(&send), LockKind::Chan(Some(ChanSide::Send)));
        assert_eq!(w(&recv), LockKind::Chan(Some(ChanSide::Recv)));
        // The channel's own mutex: both sides take it, so no side.
        let own = [
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
            "<std::sync::mpmc::waker::SyncWaker>::register",
            "std::sync::mpmc::array::Channel<T>::send::{{closure}}",
        ];
        assert_eq!(w(&own), LockKind::Chan(None));
        // A mutex elsewhere, and a thread parked for another reason, are not a channel's.
        assert_eq!(
            w(&["<std::sys::sync::mutex::futex::Mutex>::lock_contended"]),
            LockKind::Mutex
        );
        assert_eq!(w(&park[..3]), LockKind::Futex);
        assert_eq!(
            w(&["<std::sys::sync::once::futex::Once>::call"]),
            LockKind::Once
        );
        // The words round-trip through the run document.
        for k in [
            LockKind::Chan(Some(ChanSide::Send)),
            LockKind::Chan(Some(ChanSide::Recv)),
            LockKind::Chan(None),
            LockKind::Once,
            LockKind::GoCond,
        ] {
            assert_eq!(LockKind::from(k.to_string()), k);
        }
        assert!(
            !LockKind::Chan(None).is_lock() && LockKind::Chan(None).one_holder() == Some(false)
        );
    }

    #[test]
    fn the_innermost_blocking_call_names_the_wait() {
        assert_eq!(
            blocking_call_of("app;main;__x64_sys_fcntl_[k];do_fcntl_[k]"),
            Some(LockKind::PosixLock)
        );
        assert_eq!(blocking_call_of("app;main"), None);
    }
}
