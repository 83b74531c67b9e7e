/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): kernel lock contention from the lock:contention_begin/end tracepoints. */

/* Spinlock waits are not traced: they are on-CPU, so the sampler sees them (and names
 * them from the sampled stack), and a program on every spinlock contention runs while
 * the lock is wanted or held: on an fd-table lock it made a program 66% slower. */
/* The contention programs run at every contention of every lock on the machine, the
 * spinning ones too (the tracepoint cannot be filtered before the program runs): a
 * program handing a futex back and forth between two threads made a million and a half
 * runs a second of the futex hash buckets' spinlocks, 4% of its CPU at the tracepoint's
 * dispatch alone. User space counts their runs (`klock_runs`) and the sleeping
 * contentions of traced tasks (`klock_seen`), and where they cost more than its budget
 * and no traced task contended for a sleeping lock, takes them off between bursts. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} klock_runs SEC(".maps");

u64 klock_seen = 0;

/* Contention starts before this (CLOCK_MONOTONIC) are stale: set by user space (while the
 * programs run, hence a map) to when the contention programs were last attached, and to
 * the largest time while they are off (a contention begun then ends unseen, and must not
 * hold its task's waits as a kernel lock's). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} klocks_from SEC(".maps");

/* Whether a task's kernel-lock wait state is one the contention programs still follow. */
static __always_inline int klock_live(struct kstart *k)
{
	if (!k->lock || before_attach(k->ts))
		return 0;
	u32 zero = 0;
	u64 *from = bpf_map_lookup_elem(&klocks_from, &zero);
	return !from || k->ts >= *from;
}

/* The command name of the current task's process, kept once per tgid (with the wakers'),
 * so that rows can say which process waited even after it exited. */
static __always_inline void remember_comm(u32 tgid)
{
	if (bpf_map_lookup_elem(&waker_comms, &tgid))
		return;
	struct comm c = {};
	bpf_get_current_comm(c.name, sizeof(c.name));
	bpf_map_update_elem(&waker_comms, &tgid, &c, BPF_NOEXIST);
}

SEC("tp_btf/contention_begin")
int BPF_PROG(on_contention_begin, void *lock, unsigned int flags)
{
	u32 zero = 0;
	u64 *runs = bpf_map_lookup_elem(&klock_runs, &zero);
	if (runs)
		*runs += 1;
	if (flags & LCB_F_SPIN)
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	if (!is_tracked(id >> 32))
		return 0;
	__sync_fetch_and_add(&klock_seen, 1);
	struct task_struct *task = bpf_get_current_task_btf();
	struct ustart *us =
		bpf_task_storage_get(&wait_start, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!us) {
		__sync_fetch_and_add(&fail_task_map, 1);
		return 0;
	}
	struct kstart *st = &us->k;
	if (klock_live(st)) {
		__sync_fetch_and_add(&fail_nested, 1);
		return 0;
	}
	st->lock = (u64)lock;
	st->flags = flags;
	st->stack_id = -1;
	st->waker_stack = -1;
	struct kkey total = { .lock = (u64)lock, .stack_id = -1, .flags = flags,
			      .tgid = id >> 32, .pad = 0 };
	struct stat *s = bpf_map_lookup_elem(&kernel_locks, &total);
	u64 n = s ? s->count : 0;
	if (!s)
		remember_comm(id >> 32);
	if (n < kstack_first || n % kstack_every == 0) {
		st->stack_id = bpf_get_stackid(ctx, &stacks, 0);
		if (st->stack_id < 0) {
			__sync_fetch_and_add(&fail_stack, 1);
			st->stack_id = -2; /* sampled, but the unwind failed */
		}
	}
	st->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(on_contention_end, void *lock, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ustart *us = bpf_task_storage_get(&wait_start, task, 0, 0);
	if (!us || us->k.lock != (u64)lock)
		return 0;
	struct kstart *st = &us->k;
	if (!klock_live(st)) {
		st->lock = 0;
		return 0;
	}
	u64 wait = bpf_ktime_get_ns() - st->ts;
	struct kkey key = { .lock = st->lock, .stack_id = -1, .flags = st->flags,
			    .tgid = bpf_get_current_pid_tgid() >> 32, .pad = 0 };
	s32 stack_id = st->stack_id;
	s32 waker_stack = st->waker_stack;
	st->lock = 0;
	account(&kernel_locks, &key, wait);
	if (stack_id != -1) {
		key.stack_id = stack_id;
		account(&kernel_stacks, &key, wait);
	}
	if (waker_stack >= 0) {
		key.stack_id = waker_stack;
		account(&kernel_wakers, &key, wait);
	}
	return 0;
}

