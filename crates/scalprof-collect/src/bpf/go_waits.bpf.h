/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): goroutines of Go programs
 * parked on a sync primitive's semaphore, seen by uprobes on the Go runtime.
 *
 * A goroutine that waits for a sync.Mutex parks; the OS thread that ran it goes on to run
 * other goroutines, or idles in the scheduler's futex. The futex tracer sees only the
 * idle thread. Here the wait is the goroutine's: from the entry of the runtime's
 * semaphore acquire (`sync.runtime_SemacquireMutex` and its kin, whose first argument is
 * the semaphore inside the Mutex) to `runtime.ready` of the same goroutine (the g, which
 * the register ABI keeps in r14), which the releasing goroutine's Unlock calls through
 * `runtime.semrelease1`. Entry probes only: a return probe would break Go's moving stacks.
 * User stacks are the kernel's frame-pointer walk (Go keeps frame pointers on amd64).
 *
 * A goroutine that waits on a channel (or a sync.Cond) parks through gopark: probes on the
 * calls of gopark inside chanrecv, chansend, selectgo and notifyListWait time it the same
 * way, and probes on the hand-offs that ready it (send, recv, closechan, the Cond's
 * notify) name the channel and the goroutine at its other end. */

/* Which acquire: the attach cookie of each probe. */
enum go_sema_kind {
	GO_MUTEX = 1,      /* sync.Mutex (and the writer side's inner Mutex of a RWMutex) */
	GO_RWMUTEX_R = 2,  /* a reader waits for a writer of a sync.RWMutex */
	GO_RWMUTEX_W = 3,  /* a writer waits for the readers of a sync.RWMutex */
	GO_WAITGROUP = 4,  /* sync.WaitGroup.Wait */
	GO_SEMA = 5,       /* another runtime semaphore (a poller's) */
	/* Parks on a channel or a sync.Cond: probes on gopark's call sites in the runtime's
	 * functions that park there, whose second argument is the channel's (or the
	 * notifyList's) lock, inside it. */
	GO_CHAN_RECV = 6,  /* runtime.chanrecv: waits for a sender */
	GO_CHAN_SEND = 7,  /* runtime.chansend: waits for a receiver (or room) */
	GO_SELECT = 8,     /* runtime.selectgo: its direction is the waker's (below) */
	GO_COND = 9,       /* sync.Cond.Wait (the runtime's notifyListWait) */
};

/* Which hand-off readies a goroutine parked on a channel or a sync.Cond: the cookie of
 * the probes on the runtime's functions that do it, which take the channel (or the
 * notifyList) as their first argument. */
enum go_handoff_kind {
	GO_HANDOFF_SEND = 1,   /* runtime.send: the waker sends to a parked receiver */
	GO_HANDOFF_RECV = 2,   /* runtime.recv: the waker receives from a parked sender */
	GO_HANDOFF_CLOSE = 3,  /* runtime.closechan: every parked receiver */
	GO_HANDOFF_NOTIFY = 4, /* sync.Cond's Signal and Broadcast */
};

struct go_gkey {
	u64 g;
	u32 tgid;
	u32 pad;
};

struct go_park {
	u64 ts;
	u64 addr;
	s32 stack_id;
	u32 kind;
	s32 waker_stack; /* the releasing goroutine's stack, once readied */
	u32 readied;
};

/* Goroutines parked now, by (g, process). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct go_gkey);
	__type(value, struct go_park);
} go_parked SEC(".maps");

/* The semaphore (or channel, or notifyList) each thread is releasing (semrelease1's
 * entry, or a hand-off's), whose ready follows. */
struct go_release {
	u64 addr;
	s32 stack_id;
	u32 handoff; /* enum go_handoff_kind; 0 for a semaphore */
	u64 ts;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct go_release);
} go_releasing SEC(".maps");

struct go_key {
	u64 addr;
	u32 tgid;
	u32 kind;
	s32 stack_id; /* the parked goroutine's user stack; for go_wakers, the releaser's */
	u32 pad;
};

/* The goroutine waits per (semaphore, process, kind) with stack_id -1: exact totals. The
 * first GO_STACKS_FIRST waits of each semaphore, then one in GO_STACKS_EVERY, carry the
 * parked and releasing goroutines' stacks (a user stack walk costs more than the trap):
 * those are also counted per stack in the same maps. */
#define GO_STACKS_FIRST 32
#define GO_STACKS_EVERY 16

/* The goroutine waits per (semaphore, process, kind, parked stack). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct go_key);
	__type(value, struct stat);
} go_waits SEC(".maps");

/* Who released them: per (semaphore, process, kind, releaser's stack), the waits ended. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct go_key);
	__type(value, struct stat);
} go_wakers SEC(".maps");

enum go_sema_kind go_sema_kind_type = 0;
enum go_handoff_kind go_handoff_kind_type = 0;

/* Parks and hand-offs on channels and sync.Conds seen, by (process, kind): which carry
 * stacks (see GO_STACKS_FIRST). A channel's park is keyed by its lock until a hand-off
 * names the channel, so these are counted apart from the waits. */
struct go_seen_key {
	u32 tgid;
	u32 kind;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct go_seen_key);
	__type(value, u64);
} go_seen SEC(".maps");

/* Whether the next park (or hand-off) of this kind carries stacks. */
static __always_inline int go_seen_sampled(u32 tgid, u32 kind)
{
	struct go_seen_key k = { .tgid = tgid, .kind = kind };
	u64 *n = bpf_map_lookup_elem(&go_seen, &k);
	if (!n) {
		u64 one = 1;
		bpf_map_update_elem(&go_seen, &k, &one, BPF_NOEXIST);
		return 1;
	}
	u64 seen = __sync_fetch_and_add(n, 1);
	return seen < GO_STACKS_FIRST || seen % GO_STACKS_EVERY == 0;
}

/* A hand-off readies a goroutine parked on this channel (or notifyList) within so long. */
#define GO_HANDOFF_NS 1000000
/* A channel's lock (or a notifyList's) lies this close past its start. */
#define GO_LOCK_WITHIN 256

/* The probes' hits in traced processes, read by user space to run them in bursts: each hit
 * is a trap that costs the program microseconds, so where they come fast the probes are
 * attached only part of the time (see locks/bpf/bursts.rs). */
u64 go_hits = 0;

/* Whether a probe hit a traced process, counted. */
static __always_inline int go_hit(u32 tgid)
{
	if (!is_tracked(tgid))
		return 0;
	__sync_fetch_and_add(&go_hits, 1);
	return 1;
}

/* Whether the next wait on this semaphore carries stacks (see GO_STACKS_FIRST). */
static __always_inline int go_sampled(u64 addr, u32 tgid, u32 kind)
{
	struct go_key k = { .addr = addr, .tgid = tgid, .kind = kind, .stack_id = -1 };
	struct stat *s = bpf_map_lookup_elem(&go_waits, &k);
	u64 n = s ? s->count : 0;
	return n < GO_STACKS_FIRST || n % GO_STACKS_EVERY == 0;
}

/* Notes goroutine (r14) of a traced process parked now on `addr` for `kind`, with its
 * stack where `sampled`. */
static __always_inline void park_goroutine(struct pt_regs *ctx, u32 tgid, u64 addr, u32 kind,
					   int sampled)
{
	struct go_gkey key = { .g = BPF_CORE_READ(ctx, r14), .tgid = tgid };
	struct go_park park = {
		.ts = bpf_ktime_get_ns(),
		.addr = addr,
		.stack_id = -1,
		.kind = kind,
		.waker_stack = -1,
	};
	if (sampled) {
		park.stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		if (park.stack_id < 0)
			__sync_fetch_and_add(&fail_stack, 1);
	}
	if (bpf_map_update_elem(&go_parked, &key, &park, BPF_ANY))
		__sync_fetch_and_add(&fail_agg_map, 1);
}

SEC("uprobe")
int go_acquire(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!go_hit(tgid))
		return 0;
	u64 addr = BPF_CORE_READ(ctx, ax);
	u32 kind = (u32)bpf_get_attach_cookie(ctx);
	park_goroutine(ctx, tgid, addr, kind, go_sampled(addr, tgid, kind));
	return 0;
}

SEC("uprobe")
int go_release(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!go_hit(id >> 32))
		return 0;
	u32 tid = (u32)id;
	struct go_release r = { .addr = BPF_CORE_READ(ctx, ax), .stack_id = -1 };
	/* Its stack only where the wait it ends may carry one (a Mutex's, the common case). */
	if (go_sampled(r.addr, id >> 32, GO_MUTEX))
		r.stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	bpf_map_update_elem(&go_releasing, &tid, &r, BPF_ANY);
	return 0;
}

/* A call of gopark from a channel operation or sync.Cond.Wait: the goroutine parks on the
 * lock of its second argument (none for a select). */
SEC("uprobe")
int go_park(struct pt_regs *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!go_hit(tgid))
		return 0;
	u32 kind = (u32)bpf_get_attach_cookie(ctx);
	park_goroutine(ctx, tgid, BPF_CORE_READ(ctx, bx), kind, go_seen_sampled(tgid, kind));
	return 0;
}

/* A hand-off on a channel or a sync.Cond (its first argument), whose ready follows. */
SEC("uprobe")
int go_handoff(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!go_hit(id >> 32))
		return 0;
	u32 tid = (u32)id;
	u32 handoff = (u32)bpf_get_attach_cookie(ctx);
	struct go_release r = {
		.addr = BPF_CORE_READ(ctx, ax),
		.stack_id = -1,
		.handoff = handoff,
		.ts = bpf_ktime_get_ns(),
	};
	if (go_seen_sampled(id >> 32, 16 + handoff))
		r.stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	bpf_map_update_elem(&go_releasing, &tid, &r, BPF_ANY);
	return 0;
}

/* Whether a hand-off `r` readies the goroutine parked as `park` on a channel or Cond: the
 * park's lock is inside the hand-off's channel (a select parks on none), and the hand-off
 * is this thread's latest, just now. Names the park's channel, and a select's direction. */
static __always_inline int go_handed_off(struct go_park *park, struct go_release *r)
{
	if (!r || !r->handoff || bpf_ktime_get_ns() - r->ts > GO_HANDOFF_NS)
		return 0;
	if (park->addr && (park->addr < r->addr || park->addr - r->addr >= GO_LOCK_WITHIN))
		return 0;
	park->addr = r->addr;
	if (park->kind == GO_SELECT)
		park->kind = r->handoff == GO_HANDOFF_RECV ? GO_CHAN_SEND : GO_CHAN_RECV;
	return 1;
}

/* The park of the goroutine a probed function takes as its first argument (gp), if that
 * goroutine of a traced process is parked on a semaphore; `key` is left naming it. */
static __always_inline struct go_park *parked_goroutine(struct pt_regs *ctx, u64 id,
							 struct go_gkey *key)
{
	u32 tgid = id >> 32;
	if (!go_hit(tgid))
		return NULL;
	key->g = BPF_CORE_READ(ctx, ax);
	key->tgid = tgid;
	key->pad = 0;
	return bpf_map_lookup_elem(&go_parked, key);
}

/* runtime.ready(gp, …): gp is runnable again. Notes who released it, if it was parked on
 * a semaphore and the releaser is this thread. */
SEC("uprobe")
int go_ready(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	struct go_gkey key;
	struct go_park *park = parked_goroutine(ctx, id, &key);
	if (!park)
		return 0;
	u32 tid = (u32)id;
	struct go_release *r = bpf_map_lookup_elem(&go_releasing, &tid);
	if (park->kind >= GO_CHAN_RECV)
		park->waker_stack = go_handed_off(park, r) && r ? r->stack_id : -1;
	else
		park->waker_stack = r && !r->handoff && r->addr == park->addr ? r->stack_id : -1;
	park->readied = 1;
	return 0;
}

/* runtime.execute(gp, …): gp runs again. Ends its wait, if it was parked on a semaphore
 * and readied since (a park whose acquire did not block is never readied). */
SEC("uprobe")
int go_execute(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct go_gkey key;
	struct go_park *park = parked_goroutine(ctx, id, &key);
	if (!park || !park->readied)
		return 0;
	u64 wait = bpf_ktime_get_ns() - park->ts;
	struct go_key k = { .addr = park->addr, .tgid = tgid, .kind = park->kind, .stack_id = -1 };
	account(&go_waits, &k, wait);
	if (park->stack_id >= 0) {
		k.stack_id = park->stack_id;
		account(&go_waits, &k, wait);
	}
	if (park->waker_stack >= 0) {
		k.stack_id = park->waker_stack;
		account(&go_wakers, &k, wait);
	}
	bpf_map_delete_elem(&go_parked, &key);
	return 0;
}
