//! Lock tables as data: the naming vocabulary, merging repeats, the on-CPU side of
//! locks, and the lock findings.
//!
//! - Naming rules the converter (`scalprof_symbolize::locks`) applies to each repeat's
//!   records: a dynamic kernel lock gets the conventional name its callers identify
//!   (`mmap_lock`, `runqueue lock`, `futex hash bucket`, `siglock`), else `TYPE@caller`;
//!   a user futex wait is a mutex, condvar, join… by the libc frames on its stack.
//! - Spin paths and the futex system call's on-CPU time, found in the profile, are added
//!   to the rows they belong to (`attribute_spin`, `attribute_futex_cpu`).
//! - Kernel contention on the futex hash-bucket lock is attributed to the user locks.

use scalprof_model::locks::{LockKind, Scope, Side};
use scalprof_model::FindingKind;
use std::collections::HashMap;

use scalprof_model::locks::{LockCaller, LockProfile, LockRow};
use scalprof_model::{Finding, Point};
use scalprof_model::{FindingDetails, LockDetails};

/// contention_begin flags (include/trace/events/lock.h).
pub const LCB_F_SPIN: u32 = 1 << 0;
pub const LCB_F_READ: u32 = 1 << 1;
pub const LCB_F_WRITE: u32 = 1 << 2;
pub const LCB_F_RT: u32 = 1 << 3;
pub const LCB_F_PERCPU: u32 = 1 << 4;
pub const LCB_F_MUTEX: u32 = 1 << 5;

/// Callers kept per lock.
const TOP_CALLERS: usize = 3;
/// A lock whose wait growth explains at least this share of the lost time is a finding…
pub const LOCK_MIN_SCORE: f64 = 0.05;
/// …if it was waited for at least this often at the last point: one long wait is an event
/// (a join, a startup barrier), not contention.
pub const LOCK_MIN_WAITS: u64 = 10;

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

/// Adds to the kernel lock rows the on-CPU time the profile sampled in their spin paths:
/// a stack whose kernel leaf is a spin function is attributed, through its callers, to the
/// lock those callers name (as for traced contention). Spinlocks are not traced at all
/// (their waits are on-CPU and a tracepoint program per contention costs more than the
/// contention): a spinlock without a traced row gets one from the samples alone, named
/// by convention or as `spinlock@caller`, with `address` "sampled" and `count` the
/// number of samples. Returns the spin time attributed.
pub fn attribute_spin(rows: &mut Vec<LockRow>, profile: &scalprof_model::PointProfile) -> u64 {
    let mut added = 0;
    // Callers of the rows made from samples, by spin weight.
    let mut sampled_callers: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for f in &profile.folded {
        let kernel: Vec<&str> = f
            .stack
            .split(';')
            .filter_map(|fr| fr.strip_suffix("_[k]"))
            .collect();
        let Some(leaf) = kernel.last() else { continue };
        if !is_spin_path(leaf) {
            continue;
        }
        let spin = leaf.contains("spin_lock") || leaf.contains("spin_unlock");
        let flags = if spin { LCB_F_SPIN } else { 0 };
        // Innermost first, as kernel stacks are read elsewhere.
        let inner_first: Vec<&str> = kernel.iter().rev().copied().collect();
        let caller = inner_first
            .iter()
            .find(|f| !is_lock_internal(f))
            .copied()
            .unwrap_or("[unknown]");
        let name = match conventional_name(&inner_first, flags) {
            Some(n) => n.to_string(),
            None if spin => format!("spinlock@{caller}"),
            // A sleeping lock spun on: the traced row its caller named (`rwsem:W@caller`).
            None => match rows.iter().find(|r| {
                r.scope == Scope::Kernel
                    && r.name.rsplit_once('@').map(|(_, c)| c) == Some(caller)
                    && r.lock_type != LockKind::Spinlock
            }) {
                Some(r) => r.name.clone(),
                None => continue,
            },
        };
        // Samples pile up on the unlock that re-enables interrupts (cpu-clock cannot fire
        // before it): time there is not spinning, so it names no lock of its own.
        let acquiring = !leaf.contains("spin_unlock");
        let row = match rows
            .iter()
            .position(|r| r.scope == Scope::Kernel && r.name == name)
        {
            Some(i) => &mut rows[i],
            None if spin && acquiring => {
                rows.push(LockRow {
                    scope: Scope::Kernel,
                    attributed_to: (name == "futex hash bucket").then(|| "user locks".into()),
                    name: name.clone(),
                    lock_type: LockKind::from("spinlock"),
                    address: "sampled".into(),
                    count: 0,
                    total_wait_ns: 0,
                    max_wait_ns: 0,
                    callers: Vec::new(),
                    wait_ns_per_op: None,
                    spin_ns: None,
                    woken_by: None,
                    process: None,
                    peer_attached: false,
                });
                rows.last_mut().expect("just pushed")
            }
            None => continue,
        };
        if row.address == "sampled" {
            row.count += f.samples;
            *sampled_callers
                .entry(name)
                .or_default()
                .entry(caller.to_string())
                .or_default() += f.weight;
        }
        *row.spin_ns.get_or_insert(0) += f.weight;
        added += f.weight;
    }
    for (name, callers) in sampled_callers {
        if let Some(r) = rows
            .iter_mut()
            .find(|r| r.scope == Scope::Kernel && r.name == name)
        {
            let total = callers.values().sum();
            r.callers = top_callers(callers, total);
        }
    }
    added
}

/// Whether a kernel frame belongs to the futex system call (user locks' kernel side).
pub fn is_futex_path(f: &str) -> bool {
    f.contains("sys_futex") || f == "do_futex" || f.starts_with("futex_")
}

/// Whether a folded stack ran inside the futex system call.
fn in_futex_syscall(stack: &str) -> bool {
    stack
        .split(';')
        .filter_map(|fr| fr.strip_suffix("_[k]"))
        .any(|f| f.contains("sys_futex") || f == "do_futex")
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

/// Whether a folded stack was sampled doing a user lock's work: inside the futex system
/// call, or with libc's lock code as its innermost user frame.
pub fn in_user_lock(stack: &str) -> bool {
    in_futex_syscall(stack)
        || stack
            .split(';')
            .skip(1)
            .filter(|fr| !fr.ends_with("_[k]"))
            .last()
            .is_some_and(is_user_lock_code)
}

/// The share of `function`'s self samples taken inside the futex system call.
pub fn futex_share(profile: &scalprof_model::PointProfile, function: &str) -> f64 {
    let (mut all, mut futex) = (0u64, 0u64);
    for f in &profile.folded {
        let leaf = f.stack.rsplit(';').next().unwrap_or("");
        if leaf.strip_suffix("_[k]") == Some(function) {
            all += f.weight;
            if in_futex_syscall(&f.stack) {
                futex += f.weight;
            }
        }
    }
    if all == 0 {
        0.0
    } else {
        futex as f64 / all as f64
    }
}

/// Adds to the user lock rows the on-CPU time the profile sampled inside the futex system
/// call — hash-bucket spinning, wake-ups, entering and leaving the kernel — and in libc's
/// lock code (the contended atomic on the lock word): what a
/// contended user lock costs besides the time its waiters are blocked (which is all the
/// scheduler-based futex tracing sees). Split over the point's user locks in proportion
/// to their blocked time. Returns the time attributed.
pub fn attribute_futex_cpu(rows: &mut [LockRow], profile: &scalprof_model::PointProfile) -> u64 {
    let on_cpu: u64 = profile
        .folded
        .iter()
        .filter(|f| in_user_lock(&f.stack))
        .map(|f| f.weight)
        .sum();
    let waits: u64 = rows
        .iter()
        .filter(|r| takes_futex_cpu(r))
        .map(|r| r.total_wait_ns)
        .sum();
    if on_cpu == 0 || waits == 0 {
        return 0;
    }
    let mut added = 0;
    for r in rows.iter_mut().filter(|r| takes_futex_cpu(r)) {
        let share = (u128::from(on_cpu) * u128::from(r.total_wait_ns) / u128::from(waits)) as u64;
        *r.spin_ns.get_or_insert(0) += share;
        added += share;
    }
    added
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
    for f in stack.split(';').filter_map(|fr| fr.strip_suffix("_[k]")) {
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

/// Adds to file-lock and sleep rows the on-CPU time sampled inside their system calls
/// (taking and releasing the lock, waking the next waiter, switching back in), split in
/// proportion to their waits. Returns the time attributed.
pub fn attribute_syscall_cpu(rows: &mut [LockRow], profile: &scalprof_model::PointProfile) -> u64 {
    let mut added = 0;
    for kind in [LockKind::PosixLock, LockKind::Flock, LockKind::Sleep] {
        let on_cpu: u64 = profile
            .folded
            .iter()
            .filter(|f| blocking_call_of(&f.stack).as_ref() == Some(&kind))
            .map(|f| f.weight)
            .sum();
        let waits: u64 = rows
            .iter()
            .filter(|r| r.lock_type == kind)
            .map(|r| r.total_wait_ns)
            .sum();
        if on_cpu == 0 || waits == 0 {
            continue;
        }
        for r in rows.iter_mut().filter(|r| r.lock_type == kind) {
            let share =
                (u128::from(on_cpu) * u128::from(r.total_wait_ns) / u128::from(waits)) as u64;
            *r.spin_ns.get_or_insert(0) += share;
            added += share;
        }
    }
    added
}

/// The user rows that share the futex call's on-CPU time: the waits made of futexes —
/// locks, condition variables, semaphores — but not joins and barriers (the harness's),
/// nor waits in other system calls (a sleep, a file lock, I/O: a main thread sleeping
/// while the workers contend must not take the workers' lock code).
pub fn takes_futex_cpu(r: &LockRow) -> bool {
    r.scope == Scope::User
        && matches!(
            r.lock_type,
            LockKind::Mutex
                | LockKind::PiMutex
                | LockKind::Rwlock(_)
                | LockKind::Spinlock
                | LockKind::Lock
                | LockKind::Condvar
                | LockKind::Semaphore
                | LockKind::Futex
                | LockKind::Other(_)
        )
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

/// The variable a user lock named `SYMBOL+0xOFFSET` lies in (`stripes` for
/// `stripes+0xb80`), when it is one: not unnamed code (`[zstd]+0x…`), nor a heap or
/// caller-named lock.
fn object_of(name: &str) -> Option<(&str, &str)> {
    // The element at offset 0 is named by the bare symbol.
    let (sym, off) = name.rsplit_once("+0x").unwrap_or((name, "0"));
    let plain = !sym.is_empty()
        && sym
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '$'));
    (plain && !off.is_empty() && off.chars().all(|c| c.is_ascii_hexdigit())).then_some((sym, off))
}

/// One object, one cause: user locks that are elements of one array or fields of one
/// struct (`stripes+0xb80`, `stripes+0x8c0`, …) become one row named by the variable,
/// with the count and the busiest elements in its `address`; waits and spinning add up,
/// the maximum is the largest, the callers are weighed by each element's wait. A variable
/// with one contended lock keeps its `SYMBOL+0xOFFSET` name.
pub fn group_objects(rows: &mut Vec<LockRow>) {
    use std::collections::BTreeMap;
    let mut groups: BTreeMap<(String, String, Option<String>), Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.scope != Scope::User || r.attributed_to.is_some() {
            continue;
        }
        if let Some((sym, _)) = object_of(&r.name) {
            groups
                .entry((sym.to_string(), r.lock_type.to_string(), r.process.clone()))
                .or_default()
                .push(i);
        }
    }
    let mut remove: Vec<usize> = Vec::new();
    for ((sym, _, _), idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        let cost = |r: &LockRow| (r.total_wait_ns + r.spin_ns.unwrap_or(0)) as f64;
        let total: f64 = idx.iter().map(|&i| cost(&rows[i])).sum::<f64>().max(1.0);
        let mut callers: HashMap<String, u64> = HashMap::new();
        let mut elements: Vec<(String, f64)> = Vec::new();
        let mut merged = rows[idx[0]].clone();
        merged.count = 0;
        merged.total_wait_ns = 0;
        merged.max_wait_ns = 0;
        merged.spin_ns = None;
        for &i in &idx {
            let r = &rows[i];
            merged.count += r.count;
            merged.total_wait_ns += r.total_wait_ns;
            merged.max_wait_ns = merged.max_wait_ns.max(r.max_wait_ns);
            if let Some(s) = r.spin_ns {
                merged.spin_ns = Some(merged.spin_ns.unwrap_or(0) + s);
            }
            for c in &r.callers {
                *callers.entry(c.function.clone()).or_default() += (c.share * cost(r)) as u64;
            }
            let off = object_of(&r.name).map_or("", |(_, o)| o);
            elements.push((format!("+0x{off}"), cost(r) / total));
        }
        elements.sort_by(|a, b| b.1.total_cmp(&a.1));
        let busiest: Vec<String> = elements
            .iter()
            .take(3)
            .map(|(o, s)| format!("{o} {:.0}%", s * 100.0))
            .collect();
        merged.name = sym;
        merged.address = format!("{} elements; busiest {}", idx.len(), busiest.join(", "));
        let weight: u64 = callers.values().sum();
        merged.callers = top_callers(callers, weight.max(1));
        remove.extend(idx.iter().skip(1).copied());
        let first = idx[0];
        rows[first] = merged;
    }
    remove.sort_unstable();
    for i in remove.into_iter().rev() {
        rows.remove(i);
    }
}

/// Locks first (joins and condition variables after them), heaviest first (traced wait
/// plus sampled spinning).
pub fn sort_rows(rows: &mut [LockRow]) {
    let cost = |r: &LockRow| r.total_wait_ns + r.spin_ns.unwrap_or(0);
    rows.sort_by(|a, b| {
        b.is_lock()
            .cmp(&a.is_lock())
            .then(cost(b).cmp(&cost(a)))
            .then_with(|| a.name.cmp(&b.name))
    });
}

pub fn top_callers(callers: HashMap<String, u64>, total: u64) -> Vec<LockCaller> {
    let mut v: Vec<(String, u64)> = callers.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter()
        .take(TOP_CALLERS)
        .map(|(function, w)| LockCaller {
            function,
            share: if total == 0 {
                0.0
            } else {
                w as f64 / total as f64
            },
        })
        .collect()
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

/// The rows of one lock (its read and write sides, or one row): counts and waits summed,
/// the heaviest side's type and callers, the longest wait.
fn combine_sides<'a>(rows: impl Iterator<Item = &'a LockRow>) -> Option<LockRow> {
    let mut rows: Vec<&LockRow> = rows.collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.total_wait_ns + r.spin_ns.unwrap_or(0)));
    let mut out = (*rows.first()?).clone();
    for r in &rows[1..] {
        out.count += r.count;
        out.total_wait_ns += r.total_wait_ns;
        out.max_wait_ns = out.max_wait_ns.max(r.max_wait_ns);
        if let Some(spin) = r.spin_ns {
            *out.spin_ns.get_or_insert(0) += spin;
        }
        if out.attributed_to.is_none() {
            out.attributed_to.clone_from(&r.attributed_to);
        }
    }
    Some(out)
}

/// (scope, name, type): what makes two rows the same lock.
type RowKey = (Scope, String, LockKind);

/// Merges the lock profiles of a point's repeats: rows by (scope, name, type).
pub fn merge(profiles: impl IntoIterator<Item = LockProfile>) -> Option<LockProfile> {
    let mut out: Option<LockProfile> = None;
    let mut rows: HashMap<RowKey, (LockRow, HashMap<String, f64>)> = HashMap::new();
    for p in profiles {
        for r in &p.rows {
            let e = rows
                .entry((r.scope, r.name.clone(), r.lock_type.clone()))
                .or_insert_with(|| {
                    let mut z = r.clone();
                    z.count = 0;
                    z.total_wait_ns = 0;
                    z.max_wait_ns = 0;
                    z.callers.clear();
                    (z, HashMap::new())
                });
            e.0.count += r.count;
            e.0.total_wait_ns += r.total_wait_ns;
            e.0.max_wait_ns = e.0.max_wait_ns.max(r.max_wait_ns);
            for c in &r.callers {
                *e.1.entry(c.function.clone()).or_default() += c.share * r.total_wait_ns as f64;
            }
        }
        match &mut out {
            None => {
                let mut first = p;
                first.rows.clear();
                out = Some(first);
            }
            Some(o) => {
                o.snapshots += p.snapshots;
                o.snapshots_resolved += p.snapshots_resolved;
                o.repeats += p.repeats;
                let f = &mut o.failures;
                f.task_map_full += p.failures.task_map_full;
                f.stack_failures += p.failures.stack_failures;
                f.aggregation_map_full += p.failures.aggregation_map_full;
                f.nested += p.failures.nested;
                f.lost_snapshots += p.failures.lost_snapshots;
                f.undecoded += p.failures.undecoded;
                o.tracer.bpf_run_ns += p.tracer.bpf_run_ns;
                o.tracer.bpf_runs += p.tracer.bpf_runs;
            }
        }
    }
    let mut out = out?;
    out.rows = rows
        .into_values()
        .map(|(mut row, callers)| {
            let total: f64 = callers.values().sum();
            let mut v: Vec<(String, f64)> = callers.into_iter().collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            row.callers = v
                .into_iter()
                .take(TOP_CALLERS)
                .map(|(function, w)| LockCaller {
                    function,
                    share: if total > 0.0 { w / total } else { 0.0 },
                })
                .collect();
            row
        })
        .collect();
    sort_rows(&mut out.rows);
    Some(out)
}

/// `lock_contention` findings. `points`: (point, work, lock profile), in sweep order.
///
/// A lock's score is the share of the lost thread-time per operation that the growth of
/// its wait per operation explains: with N threads, each operation costs N·wall/ops of
/// thread time; ideal scaling keeps that at the first point's value, and waiting is
/// thread time.
pub fn lock_findings(points: &[(&Point, f64, &LockProfile)]) -> Vec<Finding> {
    let Some(&(last_point, last_work, _)) = points.last() else {
        return Vec::new();
    };
    let (first_point, first_work, _) = points[0];
    // From the clean throughput (work units per second): N threads' time per unit.
    let thread_time_per_op = |p: &Point, work: f64| -> Option<f64> {
        let x = p.throughput?;
        (work > 0.0 && x > 0.0).then(|| p.value as f64 * 1e9 / x)
    };
    let (Some(t_last), Some(t_first)) = (
        thread_time_per_op(last_point, last_work),
        thread_time_per_op(first_point, first_work),
    ) else {
        return Vec::new();
    };
    let single = points.len() == 1;
    // For a single point, waits are compared with the whole thread time.
    let lost = if single { t_last } else { t_last - t_first };
    if lost <= 0.0 {
        return Vec::new();
    }
    // One finding per lock: a reader-writer lock's read and write sides are one lock.
    let mut names: Vec<(Scope, String)> = Vec::new();
    for (_, _, lp) in points {
        for r in &lp.rows {
            let k = (r.scope, r.name.clone());
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    let mut out = Vec::new();
    for (scope, name) in names {
        let combined: Vec<Option<LockRow>> = points
            .iter()
            .map(|(_, _, lp)| {
                combine_sides(
                    lp.rows
                        .iter()
                        .filter(|r| r.scope == scope && r.name == name),
                )
            })
            .collect();
        let rows: Vec<Option<&LockRow>> = combined.iter().map(Option::as_ref).collect();
        let lock_type = match rows.iter().rev().flatten().next() {
            Some(r) => r.lock_type.clone(),
            None => continue,
        };
        let Some(any) = rows.iter().flatten().next() else {
            continue;
        };
        // Condition variables and semaphores are handoffs (an interpreter lock, a queue);
        // joins and barriers are the harness's structure.
        // A wait for an attached server's answer is the server's time, which its own
        // rows break down.
        if matches!(
            any.lock_type,
            LockKind::Join | LockKind::Barrier | LockKind::Idle
        ) || any.attributed_to.is_some()
            || any.peer_attached
        {
            continue;
        }
        let per_op: Vec<f64> = rows
            .iter()
            .zip(points)
            .map(|(r, (_, work, _))| {
                r.map_or(0.0, |r| {
                    (r.total_wait_ns + r.spin_ns.unwrap_or(0)) as f64 / work.max(1e-300)
                })
            })
            .collect();
        let growth = if single {
            per_op[0]
        } else {
            per_op[per_op.len() - 1] - per_op[0]
        };
        let score = (growth / lost).clamp(0.0, 1.0);
        let last_count = rows.last().copied().flatten().map_or(0, |r| r.count);
        // Over a sweep the budget scores and keeps the findings (`budget::score_findings`);
        // a single point has no budget, so its own share decides.
        if (single && score < LOCK_MIN_SCORE) || score <= 0.0 || last_count < LOCK_MIN_WAITS {
            continue;
        }
        let last = rows.iter().rev().flatten().next().expect("some row");
        let callers: Vec<String> = last
            .callers
            .iter()
            .map(|c| format!("{} ({:.0}%)", c.function, c.share * 100.0))
            .collect();
        let counts: Vec<u64> = rows.iter().map(|r| r.map_or(0, |r| r.count)).collect();
        let values: Vec<u64> = points.iter().map(|(p, _, _)| p.value).collect();
        // One meaning of "wait per op" everywhere (this text, the finding's details, the
        // lock rows' wait_ns_per_op): the blocked wait. The on-CPU time spent in the lock
        // (spinning, lock code, the futex path) is said beside it; the score counts both.
        let per_work = |f: &dyn Fn(&LockRow) -> u64| -> Vec<f64> {
            rows.iter()
                .zip(points)
                .map(|(r, (_, work, _))| r.map_or(0.0, |r| f(r) as f64 / work.max(1e-300)))
                .collect()
        };
        let wait_per_op = per_work(&|r| r.total_wait_ns);
        let cpu_per_op = per_work(&|r| r.spin_ns.unwrap_or(0));
        let on_cpu_text = if cpu_per_op.iter().any(|x| *x >= 1.0) {
            format!(", on-CPU in it {} per op", fmt_list(&cpu_per_op))
        } else {
            String::new()
        };
        out.push(Finding {
            kind: if lock_type.is_blocked_wait() {
                FindingKind::BlockedWait
            } else {
                FindingKind::LockContention
            },
            scope: Some(scope),
            subject: name.clone(),
            score,
            evidence: last
                .process
                .as_ref()
                .map_or(String::new(), |p| format!("in {p} (attached): "))
                + &if last.address == "sampled" {
                    // A spinlock is not traced: its row is made of the samples that spun.
                    format!(
                        "{lock_type}, sampled (spinlocks are not traced): on-CPU spinning per op {} at {} threads; {} samples{}",
                        fmt_list(&cpu_per_op),
                        values.last().expect("point"),
                        last.count,
                        if callers.is_empty() {
                            String::new()
                        } else {
                            format!("; callers: {}", callers.join(", "))
                        },
                    )
                } else {
                    format!(
                    "{lock_type}: wait per op {} at {} threads{}{on_cpu_text}; {} {}, avg {}, max {}{}",
                    fmt_list(&wait_per_op),
                    values.last().expect("point"),
                    if single {
                        String::new()
                    } else {
                        format!(" (was {} at {})", human_ns(wait_per_op[0]), values[0])
                    },
                    last.count,
                    if lock_type.is_blocked_wait() {
                        "waits"
                    } else {
                        "contended waits"
                    },
                    human_ns(last.avg_wait_ns()),
                    // The largest wait is at least the average (they come from separate
                    // aggregations: a dropped ring record can leave max below avg).
                    human_ns((last.max_wait_ns as f64).max(last.avg_wait_ns())),
                    if callers.is_empty() {
                        String::new()
                    } else {
                        format!("; callers: {}", callers.join(", "))
                    },
                )
                }
                + &last
                    .woken_by
                    .as_ref()
                    .map_or(String::new(), |p| format!("; woken by {p}")),
            suggestion: if last.address.contains(" elements; ") {
                // A lock array (`group_objects`): already sharded.
                format!("{name} is already an array of locks and the waits are few: the cost is the lock words moving between CPUs. Partition the work per thread or CPU so each thread keeps to its own locks; more shards do not help when every thread touches every shard")
            } else {
                suggestion(&lock_type, scope, &name)
            },
            details: FindingDetails::Lock(LockDetails {
                lock_type: lock_type.clone(),
                address: last.address.clone(),
                callers: last.callers.clone(),
                points: values,
                wait_ns_per_op: wait_per_op,
                on_cpu_ns_per_op: cpu_per_op,
                count: counts,
                max_wait_ns: last.max_wait_ns,
            }),
            what_if: None,
        });
    }
    out
}

/// What to try against one kind of wait.
fn suggestion(kind: &LockKind, scope: Scope, name: &str) -> String {
    match kind {
        LockKind::Sleep => "the threads sleep while they wait (a retry loop around a try-lock, a busy handler): block on the resource instead (a lock, a condition variable) so the waiter wakes when it is free, or shorten what the holder does".into(),
        LockKind::DiskIo => "the threads wait for the disk: batch the flushes (group commit), write asynchronously, or move the file to faster storage".into(),
        LockKind::CpuWait if name == scalprof_model::locks::CPU_WAIT_OTHER => "other processes on the machine took the CPUs while the workload was runnable: measure on a quiet machine, or keep the sweep's largest point below the CPUs left free".into(),
        LockKind::CpuWait => "more runnable threads than CPUs: run at most one busy thread per CPU (size the pool to the CPUs the process may use), or give the workload more CPUs".into(),
        LockKind::Io | LockKind::Syscall => format!("the threads wait in {name}: overlap the waits (more requests in flight) or feed the other side faster"),
        LockKind::PosixLock | LockKind::Flock => format!("every writer takes a lock on {name}: lock smaller byte ranges, give each writer its own file, or batch more work per lock"),
        // CPython keeps its global interpreter lock in _PyRuntime: sharding it is not an option.
        _ if scope == Scope::User && name.starts_with("_PyRuntime") => "this is CPython's GIL: Python threads run Python code one at a time. Use processes (multiprocessing, concurrent.futures.ProcessPoolExecutor), a free-threaded CPython (3.13t), or move the hot loop into code that releases the GIL (NumPy, a C extension)".into(),
        _ if scope == Scope::User => format!("shard {name} (one lock per bucket or per CPU, each on its own cache line), shorten its critical section, or use a read-mostly scheme"),
        _ if name.starts_with("mmap_lock") => "reduce the address-space changes: fewer mmap/munmap/mprotect and page faults (reuse buffers, MAP_POPULATE, a per-thread arena)".into(),
        _ if name.starts_with("i_rwsem") => "writers of one file take its inode lock in turn: give each writer its own file, or batch the writes (fewer, larger writes)".into(),
        _ if name == "files_struct.file_lock" => "the threads share one file-descriptor table, and opening, duplicating and closing descriptors takes its lock: keep descriptors open and reuse them, or open them in processes (or threads made with clone without CLONE_FILES) that have their own table".into(),
        _ => format!("reduce how often the workload takes the kernel's {name}: its callers are in the lock table (scalprof show RUN -v)"),
    }
}

#[cfg(test)]
#[test]
fn elements_of_one_array_are_one_row() {
    let row = |name: &str, wait: u64, caller: &str| LockRow {
        scope: Scope::User,
        name: name.into(),
        lock_type: LockKind::Mutex,
        address: "0x1000".into(),
        count: 10,
        total_wait_ns: wait,
        max_wait_ns: wait / 5,
        callers: vec![LockCaller {
            function: caller.into(),
            share: 1.0,
        }],
        attributed_to: None,
        wait_ns_per_op: None,
        spin_ns: None,
        woken_by: None,
        process: None,
        peer_attached: false,
    };
    let mut rows = vec![
        row("stripes", 100, "update"),
        row("stripes+0x40", 300, "update"),
        row("stripes+0xb80", 600, "update"),
        row("table_lock", 50, "lookup"),
        row("[zstd]+0xae28", 70, "x"),
        row("_PyRuntime+0x188", 20, "take_gil"),
    ];
    group_objects(&mut rows);
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["stripes", "table_lock", "[zstd]+0xae28", "_PyRuntime+0x188"]
    );
    let s = &rows[0];
    assert_eq!((s.count, s.total_wait_ns, s.max_wait_ns), (30, 1000, 120));
    assert!(
        s.address.starts_with("3 elements; busiest +0xb80 60%"),
        "{}",
        s.address
    );
    assert_eq!(s.callers[0].function, "update");
}

#[cfg(test)]
#[test]
fn suggestions_fit_the_lock() {
    let gil = suggestion(&LockKind::Condvar, Scope::User, "_PyRuntime+0x188");
    assert!(gil.contains("GIL") && !gil.contains("shard"), "{gil}");
    let inode = suggestion(&LockKind::Rwsem(None), Scope::Kernel, "i_rwsem");
    assert!(inode.contains("own file"), "{inode}");
    let other = suggestion(&LockKind::Spinlock, Scope::Kernel, "futex hash bucket");
    assert!(!other.contains("mmap"), "{other}");
}

fn fmt_list(v: &[f64]) -> String {
    v.iter()
        .map(|x| human_ns(*x))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// A duration in nanoseconds in the unit a person reads it in: `850 ns`, `23.2 µs`,
/// `73.2 ms`, `1.35 s`.
pub fn human_ns(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} s", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} ms", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(stacks: &[(&str, u64)]) -> scalprof_model::PointProfile {
        scalprof_model::PointProfile {
            folded: stacks
                .iter()
                .map(|&(stack, weight)| scalprof_model::FoldedStack {
                    stack: stack.to_string(),
                    samples: weight / 1_000_000,
                    weight,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn untraced_spinlocks_get_rows_from_their_sampled_spinning() {
        let prof = folded(&[
            (
                "dup_close;worker;__dup_k_[k];alloc_fd_[k];_raw_spin_lock_[k];queued_spin_lock_slowpath_[k]",
                40_000_000,
            ),
            ("dup_close;worker;__close;file_close_fd_[k];_raw_spin_lock_[k]", 10_000_000),
            // Where interrupts come back on: not spinning, no lock of its own.
            ("xz;worker;do_exit_[k];_raw_spin_unlock_irqrestore_[k]", 30_000_000),
            // Spinning in the futex system call: the futex hash bucket, the user locks'.
            (
                "x;pthread_mutex_lock;__x64_sys_futex_[k];futex_wake_[k];_raw_spin_lock_[k]",
                5_000_000,
            ),
        ]);
        let mut rows = Vec::new();
        let added = attribute_spin(&mut rows, &prof);
        assert_eq!(added, 55_000_000);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        // The fd table's lock, taken by alloc_fd and file_close_fd, is one row.
        assert_eq!(names, vec!["files_struct.file_lock", "futex hash bucket"]);
        let files = &rows[0];
        assert_eq!((files.address.as_str(), files.count), ("sampled", 50));
        assert_eq!(files.spin_ns, Some(50_000_000));
        assert_eq!(files.callers[0].function, "alloc_fd");
        assert_eq!(files.callers[1].function, "file_close_fd");
        assert_eq!(rows[1].attributed_to.as_deref(), Some("user locks"));
        // A spinlock no convention names is named by its caller.
        let mut rows = Vec::new();
        attribute_spin(
            &mut rows,
            &folded(&[("x;worker;my_driver_op_[k];_raw_spin_lock_[k]", 3_000_000)]),
        );
        assert_eq!(rows[0].name, "spinlock@my_driver_op");
    }

    #[test]
    fn a_spun_on_inode_lock_is_the_traced_i_rwsem_and_its_cpu_counts_with_it() {
        // Same-file pwrite: writers spin on the inode's rwsem (the spin is inlined into the
        // slow path) and bounce its word in down_write/up_write.
        let write = [
            "rwsem_down_write_slowpath",
            "down_write",
            "ext4_buffered_write_iter",
            "vfs_write",
        ];
        assert_eq!(conventional_name(&write, LCB_F_WRITE), Some("i_rwsem"));
        // A lock taken deeper in the write path is not the inode's.
        let deeper = [
            "_raw_spin_lock",
            "ext4_da_reserve_space",
            "ext4_da_write_begin",
            "ext4_buffered_write_iter",
        ];
        assert_eq!(conventional_name(&deeper, LCB_F_SPIN), None);
        let mut rows = vec![LockRow {
            scope: Scope::Kernel,
            name: "i_rwsem".into(),
            lock_type: LockKind::Rwsem(Some(scalprof_model::locks::Side::Write)),
            address: "0xffff".into(),
            count: 10,
            total_wait_ns: 1_000_000,
            max_wait_ns: 200_000,
            callers: Vec::new(),
            attributed_to: None,
            wait_ns_per_op: None,
            spin_ns: None,
            woken_by: None,
            process: None,
            peer_attached: false,
        }];
        let prof = folded(&[
            ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];down_write_[k];rwsem_down_write_slowpath_[k]", 7_000_000),
            ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];up_write_[k]", 5_000_000),
            // Not a lock: the write's own work.
            ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];copy_page_from_iter_[k]", 9_000_000),
        ]);
        assert_eq!(attribute_spin(&mut rows, &prof), 12_000_000);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].spin_ns, Some(12_000_000));
        // Without a traced row named by convention, the row its caller named takes it.
        let mut rows = vec![LockRow {
            name: "mutex@pipe_write".into(),
            lock_type: LockKind::Mutex,
            ..rows[0].clone()
        }];
        rows[0].spin_ns = None;
        let prof = folded(&[(
            "p;w;write;vfs_write_[k];pipe_write_[k];mutex_lock_[k];__mutex_lock_[k]",
            3_000_000,
        )]);
        assert_eq!(attribute_spin(&mut rows, &prof), 3_000_000);
    }

    #[test]
    fn kernel_lock_types_from_flags() {
        assert_eq!(kernel_lock_type(LCB_F_SPIN).to_string(), "spinlock");
        assert_eq!(kernel_lock_type(LCB_F_WRITE).to_string(), "rwsem:W");
        assert_eq!(kernel_lock_type(LCB_F_READ).to_string(), "rwsem:R");
        assert_eq!(kernel_lock_type(LCB_F_MUTEX).to_string(), "mutex");
        assert_eq!(
            kernel_lock_type(LCB_F_SPIN | LCB_F_READ).to_string(),
            "rwlock:R"
        );
    }

    #[test]
    fn dynamic_kernel_locks_are_named_by_their_callers() {
        let munmap = [
            "rwsem_down_write_slowpath",
            "down_write_killable",
            "__vm_munmap",
            "__x64_sys_munmap",
        ];
        assert_eq!(conventional_name(&munmap, LCB_F_WRITE), Some("mmap_lock"));
        let fault = [
            "rwsem_down_read_slowpath",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
        ];
        assert_eq!(conventional_name(&fault, LCB_F_READ), Some("mmap_lock"));
        let futex = [
            "_raw_spin_lock",
            "futex_q_lock",
            "futex_wait_setup",
            "futex_wait",
        ];
        assert_eq!(
            conventional_name(&futex, LCB_F_SPIN),
            Some("futex hash bucket")
        );
        assert_eq!(conventional_name(&["do_something"], LCB_F_SPIN), None);
        // The fd table's lock is one lock whoever takes it (dup1: alloc_fd and close).
        for caller in ["alloc_fd", "file_close_fd", "do_dup2"] {
            let frames = ["_raw_spin_lock", caller, "__x64_sys_dup"];
            assert_eq!(
                conventional_name(&frames, LCB_F_SPIN),
                Some("files_struct.file_lock"),
                "{caller}"
            );
        }
        // The first frame outside the lock machinery is the caller.
        assert!(
            is_lock_internal("rwsem_down_write_slowpath")
                && is_lock_internal("down_write_killable")
        );
        assert!(!is_lock_internal("__vm_munmap"));
    }

    #[test]
    fn spinning_is_added_to_the_lock_its_callers_name() {
        let mut rows = vec![LockRow {
            scope: Scope::Kernel,
            name: "mmap_lock".into(),
            lock_type: LockKind::from("rwsem:W"),
            address: "0x1".into(),
            count: 10,
            total_wait_ns: 1000,
            max_wait_ns: 200,
            callers: vec![],
            attributed_to: None,
            wait_ns_per_op: None,
            spin_ns: None,
            woken_by: None,
            process: None,
            peer_attached: false,
        }];
        let p = scalprof_model::PointProfile {
            folded: vec![
                scalprof_model::FoldedStack {
                    stack: "prog;worker;munmap;__x64_sys_munmap_[k];__vm_munmap_[k];down_write_killable_[k];rwsem_down_write_slowpath_[k];rwsem_spin_on_owner_[k]".into(),
                    samples: 3,
                    weight: 3000,
                },
                scalprof_model::FoldedStack {
                    stack: "prog;worker;compute".into(),
                    samples: 5,
                    weight: 5000,
                },
            ],
            ..Default::default()
        };
        assert_eq!(attribute_spin(&mut rows, &p), 3000);
        assert_eq!(rows[0].spin_ns, Some(3000));
    }

    #[test]
    fn user_waits_are_classified_by_libc_frames() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            user_wait_kind(&f(&[
                "__futex_abstimed_wait_common",
                "__pthread_clockjoin_ex"
            ])),
            LockKind::Join
        );
        assert_eq!(
            user_wait_kind(&f(&[
                "futex_wait",
                "__lll_lock_wait",
                "___pthread_mutex_lock"
            ])),
            LockKind::Mutex
        );
        assert_eq!(
            user_wait_kind(&f(&[
                "__futex_abstimed_wait_common",
                "___pthread_cond_wait"
            ])),
            LockKind::Condvar
        );
        assert_eq!(user_wait_kind(&[]), LockKind::Futex);
    }
}
