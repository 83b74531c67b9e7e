/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): kernel lock contention from the lock:contention_begin/end tracepoints. */

/* Spinlock waits are not traced: they are on-CPU, so the sampler sees them (and names
 * them from the sampled stack), and a program on every spinlock contention runs while
 * the lock is wanted or held: on an fd-table lock it made a program 66% slower. */
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
	if (flags & LCB_F_SPIN)
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	if (!is_tracked(id >> 32))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct ustart *us =
		bpf_task_storage_get(&wait_start, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!us) {
		__sync_fetch_and_add(&fail_task_map, 1);
		return 0;
	}
	struct kstart *st = &us->k;
	if (st->lock && !before_attach(st->ts)) {
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
	if (before_attach(st->ts)) {
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

