// SPDX-License-Identifier: GPL-2.0
// scalprof delay injector: lengthens one cause of the workload's process tree by a known
// time, so that `scalprof verify` can measure how the throughput answers.
//
// A system call is lengthened where it returns (raw_syscalls:sys_exit): the calling thread
// spins for `delay_ns` before it goes back to user space, so a call made while holding a
// lock holds it that much longer. Spinning, not sleeping: no tracepoint may sleep. The
// spin takes a CPU, which the prediction accounts for.
//
// A kernel lock is lengthened where a waiter gets it after contention (lock:contention_end,
// as `perf lock contention -J` does): the new holder spins before it goes on, holding the
// lock. Only contended acquisitions are lengthened, and user space caps the delay: a
// spinlock is held with preemption off.
//
// A function of the workload is lengthened at its entry (a uprobe, attached by user space
// to the executable's file offset): the calling thread spins before the function runs.
// Every call traps into the kernel, delayed or not, so the control level carries the trap's
// cost too.
//
// Enabling a system-call tracepoint sends every system call of every task down the slow
// path (see locks.bpf.c): the zero-delay level runs with the hook attached too, so that
// what the experiment compares differs in the delay only.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef __u64 u64;
typedef __u32 u32;
typedef __u8 u8;

struct rw_semaphore {
	long count;
} __attribute__((preserve_access_index));

struct mm_struct {
	struct rw_semaphore mmap_lock;
} __attribute__((preserve_access_index));

struct spinlock {
	int rlock;
} __attribute__((preserve_access_index));

struct files_struct {
	struct spinlock file_lock;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct mm_struct *mm;
	struct files_struct *files;
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

/* The system call to lengthen (x86-64 numbers), or the kernel lock, and by how much. */
const volatile u32 target_nr = 0;
/* Which kernel lock: the one at target_lock, or the current task's own (its address
 * differs from process to process). */
#define LOCK_AT_ADDRESS 1
#define LOCK_MMAP 2
#define LOCK_FD_TABLE 3
const volatile u32 target_lock_kind = 0;
const volatile u64 target_lock = 0;
const volatile u64 delay_ns = 0;

/* What was delayed: calls seen and nanoseconds spun, read back after the execution. */
u64 delayed_calls = 0;
u64 delayed_ns = 0;

/* The workload's process tree: its root from user space, forks followed. */
#include "tree.bpf.h"

static long spin_step(u64 index, void *ctx)
{
	u64 *until = ctx;
	return bpf_ktime_get_ns() >= *until ? 1 : 0;
}

/* One occurrence: counted, then the spin. */
static __always_inline void lengthen(void)
{
	__sync_fetch_and_add(&delayed_calls, 1);
	if (!delay_ns)
		return;
	u64 start = bpf_ktime_get_ns();
	u64 until = start + delay_ns;
	/* 2^23 steps of a clock read each: far longer than any delay asked for (capped by
	 * user space), and bounded for the verifier. */
	bpf_loop(1 << 23, spin_step, &until, 0);
	__sync_fetch_and_add(&delayed_ns, bpf_ktime_get_ns() - start);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(delay_sys_exit, struct pt_regs *regs, long ret)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!in_tree(tgid))
		return 0;
	if (BPF_CORE_READ(regs, orig_ax) != target_nr)
		return 0;
	lengthen();
	return 0;
}

/* The address of the kernel lock to lengthen, for the current task. */
static u64 wanted_lock(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (target_lock_kind == LOCK_MMAP) {
		struct mm_struct *mm = BPF_CORE_READ(task, mm);
		return mm ? (u64)mm + bpf_core_field_offset(struct mm_struct, mmap_lock) : 0;
	}
	if (target_lock_kind == LOCK_FD_TABLE) {
		struct files_struct *files = BPF_CORE_READ(task, files);
		return files ? (u64)files + bpf_core_field_offset(struct files_struct, file_lock) : 0;
	}
	return target_lock;
}

SEC("tp_btf/contention_end")
int BPF_PROG(delay_contention_end, void *lock, int ret)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (ret || !in_tree(tgid))
		return 0;
	u64 want = wanted_lock();
	if (!want || (u64)lock != want)
		return 0;
	lengthen();
	return 0;
}

SEC("uprobe")
int delay_function(void *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!in_tree(tgid))
		return 0;
	lengthen();
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
