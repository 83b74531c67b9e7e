// SPDX-License-Identifier: GPL-2.0
// scalprof tick sampler: samples the workload's process tree at the scheduler tick that
// already interrupts each busy CPU, instead of with a perf event of its own.
//
// Why: a per-task perf event is switched out and in with its task; on a virtual machine
// each switch cancels and re-arms its timer, and a thread that blocks 20 000 times a
// second paid 6-16 us a block for it (measured on 10 us sleeps). A per-CPU event never
// switches, but its timer wakes idle CPUs at the sampling rate, which changes how fast a
// woken CPU answers (a pipe ping-pong ran 2x faster under one at 645 Hz). The tick is
// neither: it runs only while a CPU is busy, at HZ, and is there whether we look or not.
// So the sample is taken in the tick's own timer expiry (timer:hrtimer_expire_entry, the
// tick's hrtimer only), one tick in `every` of the traced tree's running time, and
// written to a ring buffer in the form user space turns into perf's sample record.
//
// The kernel stack is walked from here, so it starts with the tick's own frames, then the
// interrupt's entry, then what the interrupt found running; user space cuts it at the
// entry. The user registers are the task's saved ones (where it entered the kernel, as
// perf's user registers are), and the user stack is copied from its stack pointer.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef __u64 u64;
typedef __u32 u32;
typedef __u8 u8;

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long bp;
	unsigned long ip;
	unsigned long sp;
} __attribute__((preserve_access_index));

struct hrtimer {
	void *function;
} __attribute__((preserve_access_index));

#define MAX_STACK (63 * 1024) /* perf's own limit on a sample's stack copy */
#define STACK_MASK 0xffff /* a length masked with it fits `stack` (for the verifier) */
#define KERNEL_FRAMES 64
#define USER_PAGE 4096

/* The tick's hrtimer function (from /proc/kallsyms), one tick in `every` sampled, and
 * the user stack copied per sample. */
const volatile u64 tick_function = 0;
const volatile u32 every = 1;
const volatile u32 stack_bytes = 8192;
/* Past this much unread, a sample wakes the reader (user space: a quarter of the ring);
 * below it none does, so a sample costs the workload no wakeup of another CPU. */
const volatile u64 wake_bytes = 2 << 20;


/* Samples taken, those the ring buffer had no room for, and the time spent taking the
 * `timed` ones (the tick itself is there whether we sample or not). */
u64 taken = 0;
u64 lost = 0;
u64 spent_ns = 0;
u64 timed = 0;

/* What user space reads: the head, the kernel frames, then `stack_len` bytes of stack. */
struct sample {
	u32 pid;
	u32 tid;
	u64 time;
	u32 cpu;
	u32 kernel_len; /* bytes of `kernel` filled */
	u64 ip;
	u64 sp;
	u64 bp;
	u32 stack_len;
	u32 pad;
	u64 kernel[KERNEL_FRAMES];
	u8 stack[STACK_MASK + 1];
};

/* The workload's process tree: its root from user space, forks followed. */
#include "tree.bpf.h"

/* Ticks of the traced tree on each CPU since its last sample. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} ticks SEC(".maps");

/* Where a sample is built (too big for the BPF stack or a per-CPU value): one slot per
 * CPU, indexed by the CPU's number; user space sets max_entries to the CPUs possible. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sample);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} samples SEC(".maps");

/* Copies as much of the user stack above `sp` as can be read, up to `stack_bytes`. A read
 * fails whole where a page of its range is not mapped in (above a thread's stack top, or a
 * hole a frame's untouched buffer left): then the pages above sp are probed a byte each,
 * and what lies below the first one missing is copied, as perf's copy stops there too. */
static __always_inline u32 copy_stack(struct sample *s, u64 sp)
{
	u32 n = stack_bytes;
	if (n > MAX_STACK)
		n = MAX_STACK;
	n &= STACK_MASK;
	if (bpf_probe_read_user(s->stack, n, (void *)sp) == 0)
		return n;
	u64 page = sp & ~(u64)(USER_PAGE - 1);
	u32 extent = 0;
	for (int i = 1; i <= (STACK_MASK + 1) / USER_PAGE; i++) {
		u64 next = page + (u64)i * USER_PAGE;
		if (next - sp >= n)
			break;
		u8 probe;
		if (bpf_probe_read_user(&probe, 1, (void *)next)) {
			extent = (u32)(next - sp);
			break;
		}
	}
	extent &= STACK_MASK;
	if (extent && bpf_probe_read_user(s->stack, extent, (void *)sp) == 0)
		return extent;
	return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(ticks_sample, struct hrtimer *timer, void *now)
{
	if ((u64)timer->function != tick_function)
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	if (!tgid || !in_tree(tgid))
		return 0;
	u32 zero = 0;
	u32 *n = bpf_map_lookup_elem(&ticks, &zero);
	if (!n)
		return 0;
	*n += 1;
	if (*n < every)
		return 0;
	*n = 0;
	u64 start = bpf_ktime_get_ns();
	u32 cpu = bpf_get_smp_processor_id();
	struct sample *s = bpf_map_lookup_elem(&scratch, &cpu);
	if (!s)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	s->pid = tgid;
	s->tid = (u32)id;
	s->time = bpf_ktime_get_ns();
	s->cpu = cpu;
	/* The kernel stack, walked from here: the tick's own frames, then (where the tick
	 * interrupted the kernel) the interrupt's entry and what it interrupted; user space
	 * cuts it. The walk is most of a sample's cost (4-5 us of 5-6 on the 2-CPU VM, even
	 * where it finds no kernel below the entry), and nothing cheaper tells a tick in user
	 * space from one in a page fault: the fault's entry sets the saved registers' orig_ax
	 * to -1 as an interrupt's does, and the per-CPU interrupt registers have no symbol. */
	long k = bpf_get_stack(ctx, s->kernel, sizeof(s->kernel), 0);
	s->kernel_len = k > 0 ? (u32)k : 0;
	s->ip = regs->ip;
	s->sp = regs->sp;
	s->bp = regs->bp;
	s->pad = 0;
	u32 len = copy_stack(s, s->sp) & STACK_MASK;
	s->stack_len = len;
	u64 size = __builtin_offsetof(struct sample, stack) + len;
	u64 wake = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) > wake_bytes ?
			   BPF_RB_FORCE_WAKEUP :
			   BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, s, size, wake))
		__sync_fetch_and_add(&lost, 1);
	else
		__sync_fetch_and_add(&taken, 1);
	/* A sample that took over 100 us was stopped by the host (a virtual machine's vCPU
	 * descheduled mid-sample): its time is the host's, not the sampler's. */
	u64 took = bpf_ktime_get_ns() - start;
	if (took < 100000) {
		__sync_fetch_and_add(&spent_ns, took);
		__sync_fetch_and_add(&timed, 1);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
