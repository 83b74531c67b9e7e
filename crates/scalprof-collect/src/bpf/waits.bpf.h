/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): off-CPU waits seen at the scheduler: futex waits (user locks) and other blocking system calls, with their user stack copies and wakers. */

static __always_inline int is_futex_wait(u32 op)
{
	return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI ||
	       op == FUTEX_LOCK_PI2 || op == FUTEX_WAIT_REQUEUE_PI;
}

/* A task's user registers and the top of its user stack, into a stack copy record (the
 * task must be current: its user memory is the one readable). */
static __always_inline void copy_regs_and_stack(struct snapshot *snap, struct pt_regs *regs)
{
	snap->ip = regs->ip;
	snap->sp = regs->sp;
	snap->bp = regs->bp;
	snap->len = 0;
	if (bpf_probe_read_user(snap->stack, USER_STACK_COPY, (void *)snap->sp) == 0) {
		snap->len = USER_STACK_COPY;
		return;
	}
	/* The read fails whole where a page of its range is not mapped in: a frame's large
	 * local array whose far end was never written leaves such a hole right above the
	 * frames in use (a server's path buffers above the worker's calls). The stack
	 * pointer's own page holds the innermost frames: copy the rest of it where it is the
	 * larger part, else the first 512 bytes, else the rest of the page however short. */
	u32 rest = USER_PAGE - (u32)(snap->sp & (USER_PAGE - 1));
	if (rest > 512 && bpf_probe_read_user(snap->stack, rest, (void *)snap->sp) == 0)
		snap->len = rest;
	else if (bpf_probe_read_user(snap->stack, 512, (void *)snap->sp) == 0)
		snap->len = 512;
	else if (rest < 512 && bpf_probe_read_user(snap->stack, rest, (void *)snap->sp) == 0)
		snap->len = rest;
}

/* The fields every copy starts with: the wait (its address, start, call, kind), whose it
 * is, who woke it (0: none yet), and no holder chain yet. */
static __always_inline void snapshot_head(struct snapshot *snap, struct ustart *st, u32 kind,
					  u32 tgid, u32 tid, u32 waker_tid, u32 waiter_tgid)
{
	snap->uaddr = st->uaddr;
	snap->start = st->ts;
	snap->tgid = tgid;
	snap->tid = tid;
	snap->op = st->op;
	snap->kind = kind;
	snap->waker_tid = waker_tid;
	snap->waiter_tgid = waiter_tgid;
	snap->pad = 0;
	snap->holder_blocked_ns = 0;
	snap->holder_blocked_uaddr = 0;
	snap->holder_blocked_op = 0;
	snap->holder_blocked_kind = 0;
	/* The current task's: the blocking waiter's, or the waker's for a waker's copy. */
	bpf_get_current_comm(snap->comm, sizeof(snap->comm));
}

/* Copies the blocking task's user stack into the ring buffer (it is current). */
static __always_inline int copy_user_stack(struct task_struct *prev, struct pt_regs *regs,
					   struct ustart *st, u32 tgid, u32 kind)
{
	struct snapshot *snap = bpf_ringbuf_reserve(&snapshots, sizeof(*snap), 0);
	if (!snap) {
		__sync_fetch_and_add(&lost_snapshots, 1);
		return 0;
	}
	snapshot_head(snap, st, kind, tgid, prev->pid, 0, tgid);
	copy_regs_and_stack(snap, regs);
	/* No wakeup: user space drains the buffer every 10 ms anyway, and waking it for
	 * each record cost the traced program a context switch per copy. */
	bpf_ringbuf_submit(snap, BPF_RB_NO_WAKEUP);
	return 1;
}

/* The wait state of a task of the traced tree (the caller checked), created at its first
 * switch: only traced tasks ever get one. */
static __always_inline struct ustart *tracked_storage(struct task_struct *t)
{
	struct ustart *st =
		bpf_task_storage_get(&wait_start, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		__sync_fetch_and_add(&fail_task_map, 1);
	return st;
}

/* Whether the task's wait now (its key in `st`, looked up in `map` as `key`) carries
 * stacks: the key's first ones, then one in `every`; a sleep after the first ones also
 * only once `slept` reaches `sleep_copy_span_ns`. A task that waits on the key its last
 * wait was counted on, past the key's first waits, counts its own waits instead of
 * looking the key's count up: a lookup saved a wait, and each task still copies one wait
 * in `every` of its own (a decision taken from the key's count as the task last saw it
 * would sample one of two alternating threads always and the other never). */
static __always_inline int sampled(struct ustart *st, void *map, void *key, u32 first, u32 every,
				   u64 *slept)
{
	u64 n;
	if (st->counted_n > first && st->counted_uaddr == st->uaddr &&
	    st->counted_op == st->op && st->counted_kind == st->kind) {
		n = ++st->nth;
	} else {
		struct wstat *s = bpf_map_lookup_elem(map, key);
		n = s ? s->count : 0;
		if (n <= first)
			return 1;
	}
	return (n % every) == 0 && (!slept || *slept >= sleep_copy_span_ns);
}

/* A wait ended by a wakeup and not yet counted (the task had not run since): counted now,
 * with `idle` the latency until it ran where it was woken onto an idle CPU (else 0). One
 * lookup of the wait's key; the key's count is kept for `sampled`. */
static __always_inline void count_wait(struct ustart *st, u32 tgid, u64 idle)
{
	st->pending = 0;
	void *map = st->kind == WAIT_SYSCALL ? (void *)&syscall_waits : (void *)&user_locks;
	struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = st->op };
	u64 wait = st->ended_ns + idle;
	u64 n = 1;
	struct wstat *s = bpf_map_lookup_elem(map, &key);
	if (!s) {
		struct wstat init = { .count = 1, .total_ns = wait, .max_ns = wait,
				      .idle_count = idle ? 1 : 0, .idle_ns = idle,
				      .idle_max_ns = idle };
		if (bpf_map_update_elem(map, &key, &init, BPF_NOEXIST) != 0) {
			s = bpf_map_lookup_elem(map, &key);
			if (!s) {
				__sync_fetch_and_add(&fail_agg_map, 1);
				return;
			}
		}
	}
	if (s) {
		n = __sync_fetch_and_add(&s->count, 1) + 1;
		__sync_fetch_and_add(&s->total_ns, wait);
		if (wait > s->max_ns)
			s->max_ns = wait;
		if (idle) {
			__sync_fetch_and_add(&s->idle_count, 1);
			__sync_fetch_and_add(&s->idle_ns, idle);
			if (idle > s->idle_max_ns)
				s->idle_max_ns = idle;
		}
	}
	if (st->counted_uaddr != st->uaddr || st->counted_op != st->op ||
	    st->counted_kind != st->kind)
		st->nth = 0;
	st->counted_n = n;
	st->counted_uaddr = st->uaddr;
	st->counted_op = st->op;
	st->counted_kind = st->kind;
}

/* A traced task blocks: inside futex()? Then it waits on that futex from now; inside
 * another system call, on what that call waits for. Runs in the blocking task's context
 * (current == prev), so its stacks can be taken. */
static __always_inline void on_block(void *ctx, struct task_struct *prev, u64 now)
{
	u32 tgid = prev->tgid;
	struct ustart *st = tracked_storage(prev);
	if (!st)
		return;
	st->runnable = 0;
	/* A wait whose task blocks again before it was seen to run (never, but cheap). */
	if (st->pending)
		count_wait(st, tgid, 0);
	/* Sleeping on a traced kernel lock: counted there, not twice. */
	if (klock_live(&st->k))
		return;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (!regs)
		return;
	u64 nr = regs->orig_ax;
	st->uaddr = regs->di;
	st->snapped = 0;
	st->kstack = -1;
	if (nr != NR_FUTEX) {
		/* Another blocking system call; the harness's wait for its children is
		 * structure, not a wait of the workload. */
		if (nr >= NR_MAX || nr == NR_WAIT4 || nr == NR_WAITID)
			return;
		st->ts = now;
		st->op = nr;
		st->kind = WAIT_SYSCALL;
		struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = nr };
		int sleep = nr == NR_NANOSLEEP || nr == NR_CLOCK_NANOSLEEP;
		u32 every = sleep ? sleep_sample_every : syscall_sample_every;
		if (!sampled(st, &syscall_waits, &key, syscall_sample_first, every,
			     sleep ? &st->slept_ns : NULL))
			return;
		if (sleep)
			st->slept_ns = 0;
		remember_comm(tgid);
		/* The kernel path tells a disk wait from a pipe's or a lock's; a sleep's says
		 * nothing its call does not, and the unwind is half of what a copy costs. */
		if (!sleep) {
			st->kstack = bpf_get_stackid(ctx, &stacks, 0);
			if (st->kstack < 0) {
				__sync_fetch_and_add(&fail_stack, 1);
				st->kstack = -1;
			}
		}
		st->snapped = copy_user_stack(prev, regs, st, tgid, RECORD_SYSCALL_STACK);
		return;
	}
	u32 op = regs->si & FUTEX_CMD_MASK;
	if (!is_futex_wait(op))
		return;
	st->ts = now;
	st->op = op;
	st->kind = WAIT_FUTEX;
	/* A sample of waits carries the user stack, to find the caller of the lock. */
	struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = op };
	if (sampled(st, &user_locks, &key, sample_first, sample_every, NULL)) {
		remember_comm(tgid);
		st->snapped = copy_user_stack(prev, regs, st, tgid, RECORD_WAITER_STACK);
	}
}

/* A task's wait, or its wait for a CPU, begun before the programs' last attach: its end
 * went unseen, so it is forgotten rather than ended now. */
static __always_inline void forget_before_attach(struct ustart *st)
{
	if (st->ts && before_attach(st->ts)) {
		st->ts = 0;
		st->snapped = 0;
	}
	if (st->runnable && before_attach(st->runnable)) {
		st->runnable = 0;
		st->woken = 0;
		st->sliced = 0;
		st->pending = 0;
	}
}

/* Time from `since` to `now`, which another CPU may have read a moment before `since` was
 * written (a waker racing with the sleeper's switch-out): never a wrapped difference. */
static __always_inline u64 elapsed(u64 now, u64 since)
{
	return now > since ? now - since : 0;
}

/* A blocked task's wait ends: it was woken by `waker` (a tgid; 0 when not known), or
 * runs again. It is counted once the task runs (`count_wait`), with the latency of a
 * wakeup onto an idle CPU, in one lookup. */
static __always_inline void end_wait(struct ustart *st, u32 tgid, u32 tid, u64 now, u32 waker)
{
	u64 wait = elapsed(now, st->ts);
	struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = st->op };
	u64 start = st->ts;
	st->ts = 0;
	st->ended_ns = wait;
	u8 at = (st->last_at + 1) & (LAST_WAITS - 1);
	st->last_at = at;
	st->last_start[at] = start;
	st->last_end[at] = now;
	st->last_uaddr[at] = st->uaddr;
	st->last_op[at] = st->op;
	st->last_kind[at] = st->kind;
	st->pending = 1;
	if (st->kind == WAIT_SYSCALL) {
		if (st->op == NR_NANOSLEEP || st->op == NR_CLOCK_NANOSLEEP)
			st->slept_ns += wait;
		if (st->kstack >= 0) {
			struct skey sk = { .uaddr = st->uaddr, .tgid = tgid, .op = st->op,
					   .stack_id = st->kstack, .pad = 0 };
			account(&syscall_stacks, &sk, wait);
			if (waker) {
				struct wkey wk = { .uaddr = st->uaddr, .tgid = tgid, .op = st->op,
						   .waker = waker, .pad = 0 };
				account(&wakers, &wk, wait);
				if (!bpf_map_lookup_elem(&waker_comms, &waker)) {
					struct comm c = {};
					bpf_get_current_comm(c.name, sizeof(c.name));
					bpf_map_update_elem(&waker_comms, &waker, &c, BPF_NOEXIST);
				}
			}
		}
	}
	if (!st->snapped)
		return;
	struct wait_end *e = bpf_ringbuf_reserve(&snapshots, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_snapshots, 1);
		return;
	}
	e->kind = RECORD_WAIT_END;
	e->start = start;
	e->wait_ns = wait;
	e->tid = tid;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* A task is being woken (in the waker's context, before the wakeup may be queued to
 * another CPU): its wait ends here, and its wait for a CPU begins. */
/* The task waking a waiter whose wait carries a stack copy, when it does so from inside
 * futex() (an unlock's FUTEX_WAKE, not an interrupt): its user stack is copied too. Its
 * frames name the end of the critical section that made the waiter wait, the holder's.
 * The record is a RECORD_WAKER_STACK `snapshot` with the waiter's (tid, start), and the
 * waker's tgid and tid. */
/* A system call that waits for a peer's data (read, recv, poll, select, epoll). */
static __always_inline int is_peer_wait(u32 nr)
{
	return nr == 0 || nr == 7 || nr == 19 || nr == 23 || nr == 45 || nr == 47 ||
	       nr == 232 || nr == 270 || nr == 271 || nr == 281 || nr == 299;
}

/* A system call that hands a peer data (write, send): its wakeups are the peer's answer,
 * not an interrupt's. */
static __always_inline int is_peer_wake(u64 nr)
{
	return nr == 1 || nr == 20 || nr == 44 || nr == 46 || nr == 307;
}

/* The same for a waiter in a system call waiting for a peer (a client for its server's
 * answer), when the waker hands it data from a system call: the record is then
 * RECORD_WAKER_SYSCALL, the waker the server thread that answered. */
static __always_inline void copy_waker_stack(struct ustart *st, u32 waiter_tid, u32 waiter_tgid)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	if (!regs)
		return;
	u64 nr = regs->orig_ax;
	u32 kind;
	/* The waker's own futex call is on the waiter's futex (an unlock's FUTEX_WAKE on the
	 * lock word): not a wakeup that a timer or softirq did while the current task was in
	 * futex() for a futex of its own. */
	if (st->kind == WAIT_FUTEX && nr == NR_FUTEX && regs->di == st->uaddr)
		kind = RECORD_WAKER_STACK;
	else if (st->kind == WAIT_SYSCALL && is_peer_wait(st->op) && is_peer_wake(nr))
		kind = RECORD_WAKER_SYSCALL;
	else
		return;
	u32 tgid = cur->tgid;
	if (!system_wide && !is_tracked(tgid))
		return;
	struct snapshot *snap = bpf_ringbuf_reserve(&snapshots, sizeof(*snap), 0);
	if (!snap) {
		__sync_fetch_and_add(&lost_snapshots, 1);
		return;
	}
	snapshot_head(snap, st, kind, tgid, waiter_tid, cur->pid, waiter_tgid);
	/* The waker's own recent waits, clipped to the waiter's: the holder blocked there. */
	struct ustart *hs = bpf_task_storage_get(&wait_start, cur, 0, 0);
	if (hs) {
		u64 now = bpf_ktime_get_ns();
		u64 longest = 0;
		for (int i = 0; i < LAST_WAITS; i++) {
			u64 from = hs->last_start[i] > st->ts ? hs->last_start[i] : st->ts;
			u64 to = hs->last_end[i] < now ? hs->last_end[i] : now;
			if (!hs->last_start[i] || to <= from)
				continue;
			snap->holder_blocked_ns += to - from;
			if (to - from > longest) {
				longest = to - from;
				snap->holder_blocked_uaddr = hs->last_uaddr[i];
				snap->holder_blocked_op = hs->last_op[i];
				snap->holder_blocked_kind = hs->last_kind[i];
			}
		}
	}
	copy_regs_and_stack(snap, regs);
	bpf_ringbuf_submit(snap, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	/* Only traced tasks have a wait state: the others' wakeups (most of the machine's)
	 * end at a bit test. */
	if (!is_tracked(p->tgid))
		return 0;
	struct ustart *st = bpf_task_storage_get(&wait_start, p, 0, 0);
	if (!st)
		return 0;
	/* A sampled waiter on a sleeping kernel lock: the waking task is the one releasing
	 * it (up_write, mutex_unlock), its kernel stack the end of the holder's section. */
	struct kstart *ks = &st->k;
	if (klock_live(ks) && ks->stack_id != -1 && ks->waker_stack == -1)
		ks->waker_stack = bpf_get_stackid(ctx, &stacks, 0);
	forget_before_attach(st);
	u64 now = bpf_ktime_get_ns();
	/* The waker is the current task, unless the wakeup comes from an interrupt (a
	 * timer, a completed I/O), where current is whoever was interrupted: only the
	 * sampled waits of calls that wait for another task keep it (user space decides). */
	st->woken = 0;
	if (st->ts && st->snapped)
		copy_waker_stack(st, p->pid, p->tgid);
	if (st->ts) {
		end_wait(st, p->tgid, p->pid, now,
			 bpf_get_current_pid_tgid() >> 32);
		st->woken = 1;
	}
	st->runnable = now;
	return 0;
}

/* A new thread or process of the traced tree waits for its first CPU from now. */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	if (!is_tracked(p->tgid))
		return 0;
	struct ustart *st = bpf_task_storage_get(&wait_start, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st) {
		st->runnable = bpf_ktime_get_ns();
		st->woken = 0;
	}
	return 0;
}
