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
 * kernel's BTF at load time. */
struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long bp;
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
#define NR_MAX 1024 /* orig_ax above this: not in a system call (a fault, an interrupt) */
#define WAIT_FUTEX 1
#define WAIT_SYSCALL 2
#define FUTEX_CMD_MASK 0x7f /* ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) */
#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13

#define STACK_DEPTH 32
#define USER_STACK_COPY 4096

const volatile u32 root_tgid = 0;
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
/* Unwind the kernel stack of the first contentions on each lock, then one in
 * `kstack_every`: an unwind costs microseconds, a contention can be 100 ns. */
const volatile u32 kstack_first = 64;
const volatile u32 kstack_every = 64;

/* Failure counters, read by user space and shown in the report. */
u64 fail_task_map = 0;
u64 fail_stack = 0;
u64 fail_agg_map = 0;
u64 fail_nested = 0;
u64 lost_snapshots = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u8);
} tracked SEC(".maps");

struct kstart {
	u64 ts;
	u64 lock;
	u32 flags;
	s32 stack_id;
};

/* The sleeping lock a task is contending for, kept with the task. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct kstart);
} task_start SEC(".maps");

struct kkey {
	u64 lock;
	s32 stack_id;
	u32 flags;
	u32 tgid; /* the waiter's process: a server's lock says it is the server's */
	u32 pad;
};

struct stat {
	u64 count;
	u64 total_ns;
	u64 max_ns;
};

/* Exact totals per (lock, flags); stack_id is always -1 here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct kkey);
	__type(value, struct stat);
} kernel_locks SEC(".maps");

/* The sampled contentions per (lock, stack, flags): who the callers are. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct kkey);
	__type(value, struct stat);
} kernel_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, STACK_DEPTH * sizeof(u64));
} stacks SEC(".maps");

/* What a traced task is waiting for, kept with the task (freed when it exits). */
struct ustart {
	u64 ts;       /* blocked at; 0 when not in a traced wait */
	u64 uaddr;    /* the futex, or the system call's first argument */
	u32 op;       /* the futex operation, or the system call number */
	u8 kind;      /* WAIT_FUTEX or WAIT_SYSCALL */
	u8 snapped;   /* a stack copy was taken: a wait_end record follows */
	u8 woken;     /* runnable since a wakeup ended its wait (not since a preemption) */
	u8 pad;
	s32 kstack;   /* kernel stack of a sampled system-call wait, or -1 */
	u32 sliced;   /* preempted by an untraced task: `rq_slices` may hold its slices */
	u64 runnable; /* woken or preempted at: waiting for a CPU since */
	u64 ended_ns; /* length of the wait that ended last (its wakeup latency may follow) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ustart);
} wait_start SEC(".maps");

struct ukey {
	u64 uaddr;
	u32 tgid;
	u32 op;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ukey);
	__type(value, struct stat);
} user_locks SEC(".maps");

/* Blocking system calls other than futex, by (argument 0, tgid, system call number):
 * fcntl/flock waits on a file lock, sleeps, reads waiting for data. Argument 0 is the
 * file descriptor of the fd-based calls; user space names the file while it is open. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ukey);
	__type(value, struct stat);
} syscall_waits SEC(".maps");

/* The sampled system-call waits per (argument 0, tgid, call, kernel stack): the blocked
 * kernel path tells a disk wait from a pipe, a socket or a sleep. */
struct skey {
	u64 uaddr;
	u32 tgid;
	u32 op;
	s32 stack_id;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct skey);
	__type(value, struct stat);
} syscall_stacks SEC(".maps");

/* Who ended the sampled system-call waits: the waking task's process, per (argument 0,
 * tgid, call, waker tgid); a pipe's writer, a socket's sender. */
struct wkey {
	u64 uaddr;
	u32 tgid;
	u32 op;
	u32 waker;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct wkey);
	__type(value, struct stat);
} wakers SEC(".maps");

/* The command name of each waking task seen, by its tgid. */
struct comm {
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct comm);
} waker_comms SEC(".maps"); /* and the waiters': every traced process's name by tgid */

/* Waiting for a CPU: from a wakeup or a preemption until the task runs, per tgid, split
 * by who had the CPU. When a traced task is preempted by another process or by scalprof
 * itself, that task's slice (until it is switched out) is the part of the wait it caused;
 * the rest of the wait is behind the traced tasks themselves, or not known (a woken task
 * waits behind whoever runs there). */
#define RQ_OWN 0
#define RQ_OTHER 1
#define RQ_OBSERVER 2
struct rq_key {
	u32 tgid;
	u32 behind;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct rq_key);
	__type(value, struct stat);
} runqueue SEC(".maps");

/* Per CPU: the traced task the running task preempted, until the preemptor switches out. */
struct rq_victim {
	u64 since; /* the victim's wait for a CPU began */
	u64 ts;    /* the preemptor's slice began */
	u32 pid;
	u32 behind;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct rq_victim);
} rq_victim SEC(".maps");

/* Per waiting task (by tid): the slices of other processes and of scalprof in its
 * current wait for a CPU (the wait that began at `since`). */
struct rq_slices {
	u64 since;
	u64 ns[3];
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct rq_slices);
} rq_slices SEC(".maps");

/* A user stack copy, taken as the waiter blocks; its wait time follows in a `wait_end`
 * record with the same (tid, start) once the waiter runs again. */
struct snapshot {
	u64 uaddr;
	u64 start;
	u64 ip;
	u64 sp;
	u64 bp;
	u32 tgid;
	u32 tid;
	u32 len;
	u32 op;      /* the futex operation, or the system call number */
	u32 syscall; /* 1: a system-call wait (uaddr is its first argument) */
	u32 pad;
	u8 stack[USER_STACK_COPY];
};

struct wait_end {
	u64 start;
	u64 wait_ns;
	u32 tid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} snapshots SEC(".maps");

/* Never used here: they put the record types into the skeleton, so that user space reads
 * the ring buffer through the generated structs rather than by byte offsets. */
struct snapshot *record_snapshot_type = 0;
struct wait_end *record_wait_end_type = 0;

static __always_inline int is_tracked(u32 tgid)
{
	if (system_wide)
		return 1;
	return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

static __always_inline void account(void *map, void *key, u64 wait)
{
	struct stat *s = bpf_map_lookup_elem(map, key);
	if (!s) {
		struct stat init = { .count = 1, .total_ns = wait, .max_ns = wait };
		if (bpf_map_update_elem(map, key, &init, BPF_NOEXIST) == 0)
			return;
		s = bpf_map_lookup_elem(map, key);
		if (!s) {
			__sync_fetch_and_add(&fail_agg_map, 1);
			return;
		}
	}
	__sync_fetch_and_add(&s->count, 1);
	__sync_fetch_and_add(&s->total_ns, wait);
	if (wait > s->max_ns)
		s->max_ns = wait;
}

/* Follow the workload's children: a forked process joins the traced tree. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 ctgid = BPF_CORE_READ(child, tgid);
	u8 one = 1;
	if (ptgid != ctgid && bpf_map_lookup_elem(&tracked, &ptgid))
		bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY);
	return 0;
}

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
	struct kstart *st = bpf_task_storage_get(&task_start, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		__sync_fetch_and_add(&fail_task_map, 1);
		return 0;
	}
	if (st->lock) {
		__sync_fetch_and_add(&fail_nested, 1);
		return 0;
	}
	st->lock = (u64)lock;
	st->flags = flags;
	st->stack_id = -1;
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
	struct kstart *st = bpf_task_storage_get(&task_start, task, 0, 0);
	if (!st || st->lock != (u64)lock)
		return 0;
	u64 wait = bpf_ktime_get_ns() - st->ts;
	struct kkey key = { .lock = st->lock, .stack_id = -1, .flags = st->flags,
			    .tgid = bpf_get_current_pid_tgid() >> 32, .pad = 0 };
	s32 stack_id = st->stack_id;
	st->lock = 0;
	account(&kernel_locks, &key, wait);
	if (stack_id != -1) {
		key.stack_id = stack_id;
		account(&kernel_stacks, &key, wait);
	}
	return 0;
}

static __always_inline int is_futex_wait(u32 op)
{
	return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI ||
	       op == FUTEX_LOCK_PI2 || op == FUTEX_WAIT_REQUEUE_PI;
}

/* Copies the blocking task's user stack into the ring buffer (it is current). */
static __always_inline int copy_user_stack(struct task_struct *prev, struct pt_regs *regs,
					   struct ustart *st, u32 tgid, u32 syscall)
{
	struct snapshot *snap = bpf_ringbuf_reserve(&snapshots, sizeof(*snap), 0);
	if (!snap) {
		__sync_fetch_and_add(&lost_snapshots, 1);
		return 0;
	}
	snap->uaddr = st->uaddr;
	snap->start = st->ts;
	snap->tgid = tgid;
	snap->tid = BPF_CORE_READ(prev, pid);
	snap->op = st->op;
	snap->syscall = syscall;
	snap->pad = 0;
	snap->ip = BPF_CORE_READ(regs, ip);
	snap->sp = BPF_CORE_READ(regs, sp);
	snap->bp = BPF_CORE_READ(regs, bp);
	snap->len = 0;
	if (bpf_probe_read_user(snap->stack, USER_STACK_COPY, (void *)snap->sp) == 0)
		snap->len = USER_STACK_COPY;
	else if (bpf_probe_read_user(snap->stack, 512, (void *)snap->sp) == 0)
		snap->len = 512;
	/* No wakeup: user space drains the buffer every 10 ms anyway, and waking it for
	 * each record cost the traced program a context switch per copy. */
	bpf_ringbuf_submit(snap, BPF_RB_NO_WAKEUP);
	return 1;
}

/* The wait state of a task of the traced tree, created at its first switch. Only traced
 * tasks ever get one, so a task that has it is traced without a lookup of `tracked` (the
 * common case: every switch of a busy program). */
static __always_inline struct ustart *tracked_storage(struct task_struct *t, u32 tgid)
{
	struct ustart *st = bpf_task_storage_get(&wait_start, t, 0, 0);
	if (st)
		return st;
	if (!is_tracked(tgid))
		return NULL;
	st = bpf_task_storage_get(&wait_start, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		__sync_fetch_and_add(&fail_task_map, 1);
	return st;
}

/* Whether the n-th wait on one key carries stacks: the first ones, then one in a few. */
static __always_inline int sampled(void *map, void *key, u32 first, u32 every)
{
	struct stat *s = bpf_map_lookup_elem(map, key);
	u64 n = s ? s->count : 0;
	return n <= first || (n % every) == 0;
}


/* A traced task blocks: inside futex()? Then it waits on that futex from now; inside
 * another system call, on what that call waits for. Runs in the blocking task's context
 * (current == prev), so its stacks can be taken. */
static __always_inline void on_block(void *ctx, struct task_struct *prev, u64 now)
{
	u32 tgid = BPF_CORE_READ(prev, tgid);
	struct ustart *st = tracked_storage(prev, tgid);
	if (!st)
		return;
	st->runnable = 0;
	/* Sleeping on a traced kernel lock: counted there, not twice. */
	struct kstart *ks = bpf_task_storage_get(&task_start, prev, 0, 0);
	if (ks && ks->lock)
		return;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (!regs)
		return;
	u64 nr = BPF_CORE_READ(regs, orig_ax);
	st->uaddr = BPF_CORE_READ(regs, di);
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
		if (!sampled(&syscall_waits, &key, syscall_sample_first, syscall_sample_every))
			return;
		remember_comm(tgid);
		st->kstack = bpf_get_stackid(ctx, &stacks, 0);
		if (st->kstack < 0) {
			__sync_fetch_and_add(&fail_stack, 1);
			st->kstack = -1;
		}
		st->snapped = copy_user_stack(prev, regs, st, tgid, 1);
		return;
	}
	u32 op = BPF_CORE_READ(regs, si) & FUTEX_CMD_MASK;
	if (!is_futex_wait(op))
		return;
	st->ts = now;
	st->op = op;
	st->kind = WAIT_FUTEX;
	/* A sample of waits carries the user stack, to find the caller of the lock. */
	struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = op };
	if (sampled(&user_locks, &key, sample_first, sample_every)) {
		remember_comm(tgid);
		st->snapped = copy_user_stack(prev, regs, st, tgid, 0);
	}
}

/* Time from `since` to `now`, which another CPU may have read a moment before `since` was
 * written (a waker racing with the sleeper's switch-out): never a wrapped difference. */
static __always_inline u64 elapsed(u64 now, u64 since)
{
	return now > since ? now - since : 0;
}

/* A blocked task's wait ends: it was woken by `waker` (a tgid; 0 when not known), or
 * runs again. */
static __always_inline void end_wait(struct ustart *st, u32 tgid, u32 tid, u64 now, u32 waker)
{
	u64 wait = elapsed(now, st->ts);
	struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = st->op };
	u64 start = st->ts;
	st->ts = 0;
	st->ended_ns = wait;
	if (st->kind == WAIT_SYSCALL) {
		account(&syscall_waits, &key, wait);
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
	} else {
		account(&user_locks, &key, wait);
	}
	if (!st->snapped)
		return;
	struct wait_end *e = bpf_ringbuf_reserve(&snapshots, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_snapshots, 1);
		return;
	}
	e->start = start;
	e->wait_ns = wait;
	e->tid = tid;
	e->pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* A task is being woken (in the waker's context, before the wakeup may be queued to
 * another CPU): its wait ends here, and its wait for a CPU begins. */
SEC("tp_btf/sched_waking")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	struct ustart *st = bpf_task_storage_get(&wait_start, p, 0, 0);
	if (!st)
		return 0;
	u64 now = bpf_ktime_get_ns();
	/* The waker is the current task, unless the wakeup comes from an interrupt (a
	 * timer, a completed I/O), where current is whoever was interrupted: only the
	 * sampled waits of calls that wait for another task keep it (user space decides). */
	st->woken = 0;
	if (st->ts) {
		end_wait(st, BPF_CORE_READ(p, tgid), BPF_CORE_READ(p, pid), now,
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
	if (!is_tracked(BPF_CORE_READ(p, tgid)))
		return 0;
	struct ustart *st = bpf_task_storage_get(&wait_start, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st) {
		st->runnable = bpf_ktime_get_ns();
		st->woken = 0;
	}
	return 0;
}

/* Time added to a wait already counted (`ended`): the latency of its wakeup. The wait
 * is that much longer, so it may be the longest: a total with no maximum to match read
 * as a maximum below the average. */
static __always_inline void add_time(void *map, void *key, u64 ns, u64 ended)
{
	struct stat *s = bpf_map_lookup_elem(map, key);
	if (!s)
		return;
	__sync_fetch_and_add(&s->total_ns, ns);
	if (ended + ns > s->max_ns)
		s->max_ns = ended + ns;
}

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
	u32 tgid = BPF_CORE_READ(next, tgid);
	u32 pid = BPF_CORE_READ(next, pid);
	if (st->ts)
		end_wait(st, tgid, pid, now, 0);
	if (!st->runnable)
		return;
	u64 wait = elapsed(now, st->runnable);
	if (from_idle && st->woken && !st->sliced) {
		struct ukey key = { .uaddr = st->uaddr, .tgid = tgid, .op = st->op };
		add_time(st->kind == WAIT_SYSCALL ? (void *)&syscall_waits : (void *)&user_locks,
			 &key, wait, st->ended_ns);
		st->woken = 0;
		st->runnable = 0;
		return;
	}
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
	struct ustart *st = tracked_storage(prev, BPF_CORE_READ(prev, tgid));
	if (!st)
		return;
	st->runnable = now;
	st->woken = 0;
	u32 by = BPF_CORE_READ(next, tgid);
	u32 behind = observer_tgid && by == observer_tgid ? RQ_OBSERVER
		     : is_tracked(by)			  ? RQ_OWN
							  : RQ_OTHER;
	u32 zero = 0;
	struct rq_victim *v = bpf_map_lookup_elem(&rq_victim, &zero);
	if (v && behind != RQ_OWN) {
		st->sliced = 1;
		v->since = now;
		v->ts = now;
		v->pid = BPF_CORE_READ(prev, pid);
		v->behind = behind;
	}
}

/* The task that preempted a traced one switches out: its slice is part of that wait. */
static __always_inline void end_slice(u64 now)
{
	u32 zero = 0;
	struct rq_victim *v = bpf_map_lookup_elem(&rq_victim, &zero);
	if (!v || !v->pid)
		return;
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

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	u64 now = bpf_ktime_get_ns();
	end_slice(now);
	/* TASK_RUNNING (0) means preempted, not blocked. */
	if (prev_state != 0)
		on_block(ctx, prev, now);
	else
		on_preempt(prev, next, now);
	on_run(next, now, BPF_CORE_READ(prev, pid) == 0, BPF_CORE_READ(prev, tgid));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
