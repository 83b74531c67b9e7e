/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): the failure counters, every map and record type user space reads, and the helpers the tracers share (tracking the workload's tree, aggregation). */

/* Failure counters, read by user space and shown in the report. */
u64 fail_task_map = 0;
u64 fail_stack = 0;
u64 fail_agg_map = 0;
u64 fail_nested = 0;
u64 lost_snapshots = 0;

/* When the programs were last attached (CLOCK_MONOTONIC, as bpf_ktime_get_ns), set by
 * user space. A tracer loaded once and attached window by window (`scalprof watch`)
 * finds in its tasks' storage the waits that began before a detach and ended unseen:
 * a start older than the attach is dropped, not read as a wait across the gap. */
u64 attached_at = 0;

/* Whether a start (a timestamp) was taken before the programs' last attach. */
static __always_inline int before_attach(u64 ts)
{
	return ts < attached_at;
}

struct kstart {
	u64 ts;
	u64 lock;
	u32 flags;
	s32 stack_id;
	s32 waker_stack; /* the kernel stack of the task that woke it, or -1 */
	u32 pad;
};


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

/* Who released a sleeping kernel lock to a sampled waiter, per (lock, waker's kernel
 * stack, flags, waiter's tgid): the wait each release ended. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct kkey);
	__type(value, struct stat);
} kernel_wakers SEC(".maps");

/* Frames kept per kernel stack: a value of `stacks` is this many addresses, innermost
 * first (user space reads them through the generated enum of the same name). */
enum stack_depth {
	STACK_DEPTH = 32,
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, STACK_DEPTH * sizeof(u64));
} stacks SEC(".maps");

/* What a traced task waits in (`ustart.kind`; `snapshot.holder_blocked_kind`, where 0 is
 * none), shared with user space through the generated enum of the same name. */
enum wait_kind {
	WAIT_FUTEX = 1,
	WAIT_SYSCALL = 2,
};

/* What a traced task is waiting for, kept with the task (freed when it exits). */
#define LAST_WAITS 4
struct ustart {
	u64 ts;       /* blocked at; 0 when not in a traced wait */
	u64 uaddr;    /* the futex, or the system call's first argument */
	u32 op;       /* the futex operation, or the system call number */
	u8 kind;      /* enum wait_kind: WAIT_FUTEX or WAIT_SYSCALL */
	u8 snapped;   /* a stack copy was taken: a wait_end record follows */
	u8 woken;     /* runnable since a wakeup ended its wait (not since a preemption) */
	u8 pending;   /* a wakeup ended its wait (`ended_ns`): counted once it runs */
	s32 kstack;   /* kernel stack of a sampled system-call wait, or -1 */
	u32 sliced;   /* preempted by an untraced task: `rq_slices` may hold its slices */
	u64 runnable; /* woken or preempted at: waiting for a CPU since */
	u64 ended_ns; /* length of the wait that ended last (its wakeup latency may follow) */
	u64 slept_ns; /* time slept (nanosleep) since the last copied sleep */
	/* The key its last wait was counted on and that key's count then: a task that waits
	 * on the same key again, past the key's first waits, decides whether to copy its
	 * stack by its own count (`nth`) rather than by a lookup of the key's. */
	u64 counted_uaddr;
	u64 counted_n;
	u32 counted_op;
	u32 nth;
	u8 counted_kind;
	u8 pad3[7];
	/* The LAST_WAITS waits that ended last (a ring; `last_at` is the newest): when this
	 * task wakes a waiter of a lock it held, the part of the waiter's wait it spent
	 * blocked itself (the holder's own wait, a link of a wait chain). */
	u64 last_start[LAST_WAITS];
	u64 last_end[LAST_WAITS];
	u64 last_uaddr[LAST_WAITS];
	u32 last_op[LAST_WAITS];
	u8 last_kind[LAST_WAITS];
	u8 last_at;
	u8 pad2[3];
	/* The sleeping kernel lock it is contending for: kept in the same storage, so that
	 * a switch or a wakeup reads one task storage, not two. */
	struct kstart k;
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

/* A wait's totals, with the wakeup latencies of the waits woken onto an idle CPU counted
 * apart as well (the time from the wakeup until the task ran: in total_ns, and in idle_*,
 * of which user space makes the `wakeup:idle` rows). Kept in the wait's own entry, so
 * that a wait costs one lookup, made once its task runs. */
struct wstat {
	u64 count;
	u64 total_ns;
	u64 max_ns;
	u64 idle_count;
	u64 idle_ns;
	u64 idle_max_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ukey);
	__type(value, struct wstat);
} user_locks SEC(".maps");

/* Blocking system calls other than futex, by (argument 0, tgid, system call number):
 * fcntl/flock waits on a file lock, sleeps, reads waiting for data. Argument 0 is the
 * file descriptor of the fd-based calls; user space names the file while it is open. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ukey);
	__type(value, struct wstat);
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
enum rq_behind {
	RQ_OWN = 0,
	RQ_OTHER = 1,
	RQ_OBSERVER = 2,
	RQ_IDLE = 3, /* not a wait for a CPU: a wakeup onto an idle CPU, until the task ran
		      * (kept in the waits' `wstat`, never in this map) */
};
struct rq_key {
	u32 tgid;
	u32 behind; /* enum rq_behind */
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
	u32 behind; /* enum rq_behind */
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

/* What a record of the `snapshots` ring buffer is: its first field, read by user space
 * before the rest (the generated Rust enum of the same name tells them apart). */
enum record_kind {
	RECORD_WAITER_STACK = 1,  /* `snapshot`: a futex waiter's user stack as it blocked */
	RECORD_SYSCALL_STACK = 2, /* `snapshot`: a blocking system call's (uaddr: its first argument) */
	RECORD_WAKER_STACK = 3,   /* `snapshot`: the waker's stack as it woke a sampled waiter */
	RECORD_WAIT_END = 4,      /* `wait_end`: a sampled waiter's wait ended */
	RECORD_WAKER_SYSCALL = 5, /* `snapshot`: a peer's stack as it answered a sampled
				   * system-call wait (a server's write waking its client) */
	RECORD_EXEC = 6,          /* `exec_event`: a traced process executed a program */
};

/* A user stack copy, taken as the waiter blocks (or as its waker wakes it); its wait time
 * follows in a `wait_end` record with the same (tid, start) once the waiter runs again. */
struct snapshot {
	u32 kind; /* enum record_kind */
	u32 tid;  /* the waiter's */
	u64 start;
	u64 uaddr;
	u64 ip;
	u64 sp;
	u64 bp;
	u32 tgid; /* the copied task's process */
	u32 len;
	u32 op;        /* the futex operation, or the system call number */
	u32 waker_tid; /* RECORD_WAKER_STACK: the waking thread; else 0 */
	/* RECORD_WAKER_STACK: how long the waker itself was blocked during the waiter's wait
	 * (its last LAST_WAITS waits, clipped to the waiter's), and the longest of those
	 * (kind WAIT_FUTEX or WAIT_SYSCALL, 0 for none; op and uaddr as for a wait). */
	u64 holder_blocked_ns;
	u64 holder_blocked_uaddr;
	u32 holder_blocked_op;
	u32 holder_blocked_kind;
	u32 waiter_tgid; /* the waiter's process (a waker may be another: shared memory) */
	u32 pad;
	char comm[16]; /* the copied thread's name (a runtime names its service threads) */
	u8 stack[USER_STACK_COPY];
};

struct wait_end {
	u32 kind; /* RECORD_WAIT_END */
	u32 tid;
	u64 start;
	u64 wait_ns;
};

/* A traced process executed a program (user space probes it if it is Go's). */
struct exec_event {
	u32 kind; /* RECORD_EXEC */
	u32 tgid;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} snapshots SEC(".maps");

/* Never used here: they put the record types and the enums user space reads into the
 * skeleton, so that it reads the ring buffer through the generated structs rather than by
 * byte offsets, and names the constants rather than repeating their numbers. */
struct snapshot *record_snapshot_type = 0;
struct wait_end *record_wait_end_type = 0;
struct exec_event *record_exec_type = 0;
enum record_kind record_kind_type = 0;
enum wait_kind wait_kind_type = 0;
enum rq_behind rq_behind_type = 0;
enum stack_depth stack_depth_type = 0;

/* Whether the lock tracer traces the process `tgid`: it is in the workload's tree, or
 * every process is traced. */
static __always_inline int is_tracked(u32 tgid)
{
	return system_wide || in_tree(tgid);
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

/* Set by user space when it probes the Go programs the workload's tree executes. */
const volatile int watch_execs = 0;

struct linux_binprm;

/* A traced process executed a program: user space looks whether it is a Go program whose
 * runtime it should probe (one started by `sh -c`, `env` or a script). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	u32 tgid = p->tgid;
	if (!watch_execs || !is_tracked(tgid))
		return 0;
	struct exec_event *e = bpf_ringbuf_reserve(&snapshots, sizeof(*e), 0);
	if (!e)
		return 0;
	e->kind = RECORD_EXEC;
	e->tgid = tgid;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

