/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): waiting for a CPU: from a wakeup or a preemption until the task runs, split by who held the CPU. */

/* A task runs: a wait no wakeup ended ends now, and so does its wait for a CPU. When it
 * was woken from a wait onto an idle CPU (`from_idle`), nothing else had that CPU: the
 * time until it ran is the wakeup's latency (the idle CPU's exit), part of the wait it
 * was woken from (a lock's handoff), not a wait for a CPU. */
static __always_inline void on_run(struct task_struct *next, u64 now, int from_idle,
				   u32 prev_tgid)
{
	struct ustart *st = bpf_task_storage_get(&wait_start, next, 0, 0);
	if (!st)
		return;
	forget_before_attach(st);
	u32 tgid = next->tgid;
	u32 pid = next->pid;
	if (st->ts)
		end_wait(st, tgid, pid, now, 0);
	/* Woken from (or preempted in) a kernel lock it still contends for: until it runs and
	 * takes the lock is the contention's wait, which its end program counts whole; not a
	 * wait for a CPU as well. */
	if (klock_live(&st->k)) {
		if (st->pending)
			count_wait(st, tgid, 0);
		st->runnable = 0;
		st->woken = 0;
		st->sliced = 0;
		return;
	}
	if (!st->runnable) {
		if (st->pending)
			count_wait(st, tgid, 0);
		return;
	}
	u64 wait = elapsed(now, st->runnable);
	if (from_idle && st->woken && !st->sliced) {
		/* Part of the wait, and counted apart as well (`wstat.idle_*`), to say how much
		 * of the waits is waking CPUs. */
		if (st->pending)
			count_wait(st, tgid, wait ? wait : 1);
		st->woken = 0;
		st->runnable = 0;
		return;
	}
	if (st->pending)
		count_wait(st, tgid, 0);
	/* Woken onto a CPU that another process (or scalprof) then held: the wait was behind
	 * it. (A preempted task's wait is split by the preemptors' slices below.) */
	if (st->woken && !st->sliced && !is_tracked(prev_tgid)) {
		struct rq_key key = { .tgid = tgid,
				      .behind = observer_tgid && prev_tgid == observer_tgid ?
							RQ_OBSERVER : RQ_OTHER };
		account(&runqueue, &key, wait);
		st->woken = 0;
		st->runnable = 0;
		return;
	}
	st->woken = 0;
	int sliced = 0;
	struct rq_slices *sl = st->sliced ? bpf_map_lookup_elem(&rq_slices, &pid) : NULL;
	st->sliced = 0;
	if (sl && sl->since == st->runnable) {
		for (u32 b = RQ_OTHER; b <= RQ_OBSERVER; b++) {
			u64 part = sl->ns[b] < wait ? sl->ns[b] : wait;
			if (part) {
				struct rq_key key = { .tgid = tgid, .behind = b };
				account(&runqueue, &key, part);
				wait -= part;
				sliced = 1;
			}
		}
		bpf_map_delete_elem(&rq_slices, &pid);
	}
	if (wait || !sliced) {
		struct rq_key key = { .tgid = tgid, .behind = RQ_OWN };
		account(&runqueue, &key, wait);
	}
	st->runnable = 0;
}

/* A traced task preempted by `next`: it waits for a CPU from now. When `next` is not a
 * traced task, its slice on this CPU is counted against that wait. */
static __always_inline void on_preempt(struct task_struct *prev, struct task_struct *next, u64 now)
{
	struct ustart *st = tracked_storage(prev);
	if (!st)
		return;
	st->runnable = now;
	st->woken = 0;
	u32 by = next->tgid;
	u32 behind = observer_tgid && by == observer_tgid ? RQ_OBSERVER
		     : is_tracked(by)			  ? RQ_OWN
							  : RQ_OTHER;
	u32 zero = 0;
	struct rq_victim *v = bpf_map_lookup_elem(&rq_victim, &zero);
	if (v && behind != RQ_OWN) {
		st->sliced = 1;
		v->since = now;
		v->ts = now;
		v->pid = prev->pid;
		v->behind = behind;
	}
}

/* The task that preempted a traced one switches out: its slice is part of that wait. */
static __always_inline void end_slice(void)
{
	u32 zero = 0;
	struct rq_victim *v = bpf_map_lookup_elem(&rq_victim, &zero);
	if (!v || !v->pid)
		return;
	u64 now = bpf_ktime_get_ns();
	if (before_attach(v->ts)) {
		v->pid = 0;
		return;
	}
	u32 pid = v->pid;
	struct rq_slices *sl = bpf_map_lookup_elem(&rq_slices, &pid);
	if (!sl || sl->since != v->since) {
		struct rq_slices init = { .since = v->since };
		bpf_map_update_elem(&rq_slices, &pid, &init, BPF_ANY);
		sl = bpf_map_lookup_elem(&rq_slices, &pid);
	}
	if (sl)
		sl->ns[v->behind == RQ_OBSERVER ? 2 : 1] += elapsed(now, v->ts);
	v->pid = 0;
}

