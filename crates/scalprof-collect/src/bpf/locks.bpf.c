// SPDX-License-Identifier: GPL-2.0
// scalprof lock tracer: kernel lock contention (lock:contention_begin/end) and user futex
// waits of the workload's process tree, aggregated in kernel maps so that tracing costs
// little however often the locks are hit.
//
// Cost is the design constraint: no system-call hook at all (enabling any syscall
// tracepoint sends every system call of every task down the slow path: +20% to +260%
// measured on a syscall loop). A futex wait is seen at the scheduler instead: a task that
// blocks while its saved user registers say it is inside futex() is waiting on the futex
// in its first argument, until it runs again. Futex calls that do not block cost nothing.
// Kernel stacks (an unwind each) and user stack copies are taken for a sample of events
// per lock; counts and wait times stay exact.
//
// Design after perf's lock_contention.bpf.c (per-task start timestamps, per-CPU slots for
// spinning locks, exported failure counters); written for scalprof.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef __u64 u64;
typedef __u32 u32;
typedef __s32 s32;
typedef __u8 u8;
typedef __u16 u16;

/* CO-RE views of the two kernel structs we read; field offsets come from the running
 * kernel's BTF at load time. The scheduler's programs get typed (BTF) pointers to tasks and
 * to their saved registers, and read them with plain loads, which the verifier checks and
 * the JIT guards, not with BPF_CORE_READ's helper call per field: the switch program went
 * from 520 to 325 ns a run on a lock-heavy program on this 2-CPU VM, the wakeup's from 345
 * to 250 ns (kernel-timed, --bpf-stats). */
struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

struct mm_struct;

struct pt_regs {
	unsigned long r14;
	unsigned long bp;
	unsigned long bx;
	unsigned long ax;
	unsigned long di;
	unsigned long si;
	unsigned long orig_ax;
	unsigned long ip;
	unsigned long sp;
} __attribute__((preserve_access_index));

/* include/trace/events/lock.h */
#define LCB_F_SPIN (1U << 0)

#define NR_FUTEX 202 /* x86-64 */
#define NR_WAIT4 61
#define NR_WAITID 247
#define NR_NANOSLEEP 35
#define NR_CLOCK_NANOSLEEP 230
#define NR_MAX 1024 /* orig_ax above this: not in a system call (a fault, an interrupt) */
#define FUTEX_CMD_MASK 0x7f /* ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) */
#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13

#define USER_STACK_COPY 4096
#define USER_PAGE 4096 /* x86-64's base page: what a stack is mapped in by */

const volatile u8 system_wide = 0;
/* scalprof's own process: a traced thread it preempts waits for a CPU because of the
 * observer, which the clean repeats do not have. */
const volatile u32 observer_tgid = 0;
/* Copy the user stack of the first waits on each futex, then one in `sample_every`. */
const volatile u32 sample_first = 32;
const volatile u32 sample_every = 16;
/* The same for the waits in other system calls, which need only a few stacks to name
 * the function that waits (a stack copy costs a 4 KiB read and user-space work). */
const volatile u32 syscall_sample_first = 8;
const volatile u32 syscall_sample_every = 64;
/* Sleeps more often: a sleep lasts tens of microseconds at least, and only a copied one
 * opens the window in which the other threads' samples say what the sleeper waited for. */
const volatile u32 sleep_sample_every = 4;
/* And only once the task has slept this long since its last copied sleep: a copy costs
 * microseconds whatever the sleep's length, and the window it opens is worth what the
 * sleep lasts (at a 250 Hz tick another thread's sample lands in a 10 us sleep 1 time in
 * 400). 100 us back-offs keep 1 copy in 4; a loop of 10 us sleeps, 1 in 20. */
const volatile u64 sleep_copy_span_ns = 200000;
/* Unwind the kernel stack of the first contentions on each lock, then one in
 * `kstack_every`: an unwind costs microseconds, a contention can be 100 ns. */
const volatile u32 kstack_first = 64;
const volatile u32 kstack_every = 64;

/* The parts, in order: the maps and shared helpers, then one tracer each; the scheduler
 * switch below drives the last two. */
#include "tree.bpf.h"
#include "maps.bpf.h"
#include "kernel_locks.bpf.h"
#include "waits.bpf.h"
#include "runqueue.bpf.h"
#include "mmap_holds.bpf.h"
#include "go_waits.bpf.h"

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* Most switches on a machine are not the workload's (kworkers, the journal thread,
	 * other programs, and the idle task, pid 0, on half the switches of a program that
	 * blocks): they cost two bit tests, and the end of a slice a traced task waits on. */
	int prev_ours = prev->pid && is_tracked(prev->tgid);
	int next_ours = next->pid && is_tracked(next->tgid);
	end_slice();
	if (!prev_ours && !next_ours)
		return 0;
	u64 now = bpf_ktime_get_ns();
	if (prev_ours) {
		/* TASK_RUNNING (0) means preempted, not blocked. */
		if (prev_state != 0)
			on_block(ctx, prev, now);
		else
			on_preempt(prev, next, now);
	}
	if (next_ours)
		on_run(next, now, prev->pid == 0, prev->tgid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
