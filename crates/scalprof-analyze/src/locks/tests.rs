//! The lock tables' unit tests.

use super::*;
use scalprof_model::locks::{LockKind, LockRow, Scope};
use scalprof_model::vocabulary::{
    conventional_name, is_lock_internal, is_spin_path, kernel_lock_type, user_wait_kind,
    LCB_F_MUTEX, LCB_F_READ, LCB_F_SPIN, LCB_F_WRITE,
};

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
    assert_eq!(
        (&files.address, files.count),
        (&scalprof_model::locks::LockAddress::Sampled, 50)
    );
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
        address: scalprof_model::locks::LockAddress::Traced(0xffff),
        count: 10,
        total_wait_ns: 1_000_000,
        max_wait_ns: 200_000,
        ..LockRow::new(
            Scope::Kernel,
            "i_rwsem",
            LockKind::Rwsem(Some(scalprof_model::locks::Side::Write)),
        )
    }];
    let prof = folded(&[
        ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];down_write_[k];rwsem_down_write_slowpath_[k]", 7_000_000),
        ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];up_write_[k]", 5_000_000),
        // Not a lock: the write's own work.
        ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];copy_page_from_iter_[k]", 9_000_000),
        // In a KVM guest the spin asks whether the owner's vCPU runs: still the spin.
        ("pw;w;__libc_pwrite64;vfs_write_[k];ext4_buffered_write_iter_[k];down_write_[k];rwsem_down_write_slowpath_[k];__raw_callee_save___kvm_vcpu_is_preempted_[k]", 2_000_000),
    ]);
    assert_eq!(attribute_spin(&mut rows, &prof), 14_000_000);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].spin_ns, Some(14_000_000));
    assert!(is_spin_path("__raw_callee_save___kvm_vcpu_is_preempted"));
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
        is_lock_internal("rwsem_down_write_slowpath") && is_lock_internal("down_write_killable")
    );
    assert!(!is_lock_internal("__vm_munmap"));
}

#[test]
fn spinning_is_added_to_the_lock_its_callers_name() {
    let mut rows = vec![LockRow {
        address: scalprof_model::locks::LockAddress::Traced(0x1),
        count: 10,
        total_wait_ns: 1000,
        max_wait_ns: 200,
        callers: vec![],
        ..LockRow::new(Scope::Kernel, "mmap_lock", LockKind::from("rwsem:W"))
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
