/* SPDX-License-Identifier: GPL-2.0 */
/* Part of locks.bpf.c (one compilation unit, included in order): how long the traced
 * processes hold their mmap_lock, from the mmap_lock tracepoints (the kernel's one lock
 * with acquire and release events outside lockdep). Every hold is timed: the acquire's
 * return to the release's start, per process and side (read, write), in power-of-two
 * buckets of nanoseconds. Loaded only where the sweep times holds: the two events fire
 * inside the hold, so the first traced repeat of a point runs without them. */

/* The raw records of the two events, as CO-RE views: the field offsets come from the
 * running kernel's BTF (older kernels carry a memcg path between them). */
struct trace_event_raw_mmap_lock_acquire_returned {
	struct mm_struct *mm;
	_Bool write;
	_Bool success;
} __attribute__((preserve_access_index));

struct trace_event_raw_mmap_lock {
	struct mm_struct *mm;
	_Bool write;
} __attribute__((preserve_access_index));

#define HOLD_BUCKETS 40 /* 2^0 .. 2^39 ns: up to 9 minutes */

struct mmap_hold_key {
	u32 tgid;
	u32 write;
	u64 mm;
};

struct mmap_hold_stat {
	u64 count;
	u64 total_ns;
	u64 max_ns;
	u64 buckets[HOLD_BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct mmap_hold_key);
	__type(value, struct mmap_hold_stat);
} mmap_holds SEC(".maps");

/* The hold a task is in: when it began, of which mm and side; `depth` counts the
 * acquisitions nested in it. */
struct mmap_hold_start {
	u64 ts;
	u64 mm;
	u32 write;
	u32 depth;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mmap_hold_start);
} mmap_hold_task SEC(".maps");

static __always_inline u32 log2_bucket(u64 ns)
{
	u32 b = 0;
	for (int i = 0; i < HOLD_BUCKETS - 1; i++) {
		if (ns >> (i + 1) == 0)
			break;
		b = i + 1;
	}
	return b;
}

SEC("tracepoint/mmap_lock/mmap_lock_acquire_returned")
int on_mmap_acquired(struct trace_event_raw_mmap_lock_acquire_returned *ctx)
{
	if (!BPF_CORE_READ(ctx, success) || !is_tracked(bpf_get_current_pid_tgid() >> 32))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct mmap_hold_start *st =
		bpf_task_storage_get(&mmap_hold_task, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	u64 mm = (u64)BPF_CORE_READ(ctx, mm);
	u32 write = BPF_CORE_READ(ctx, write);
	if (st->ts && !before_attach(st->ts)) {
		/* A read acquisition of the mm whose write side the task holds is its
		 * downgrade (munmap does it): the hold goes on, and a read release ends it. */
		if (st->mm == mm && st->write && !write && !st->depth)
			st->write = 0;
		else
			st->depth++;
		return 0;
	}
	st->mm = mm;
	st->write = write;
	st->depth = 0;
	st->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tracepoint/mmap_lock/mmap_lock_released")
int on_mmap_released(struct trace_event_raw_mmap_lock *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct mmap_hold_start *st = bpf_task_storage_get(&mmap_hold_task, task, 0, 0);
	if (!st || !st->ts)
		return 0;
	if (before_attach(st->ts)) {
		st->ts = 0;
		return 0;
	}
	if (st->depth) {
		st->depth--;
		return 0;
	}
	u64 held = bpf_ktime_get_ns() - st->ts;
	struct mmap_hold_key key = { .tgid = bpf_get_current_pid_tgid() >> 32,
				     .write = st->write, .mm = st->mm };
	st->ts = 0;
	struct mmap_hold_stat *s = bpf_map_lookup_elem(&mmap_holds, &key);
	if (!s) {
		struct mmap_hold_stat zero = {};
		bpf_map_update_elem(&mmap_holds, &key, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&mmap_holds, &key);
		if (!s) {
			__sync_fetch_and_add(&fail_agg_map, 1);
			return 0;
		}
	}
	__sync_fetch_and_add(&s->count, 1);
	__sync_fetch_and_add(&s->total_ns, held);
	if (held > s->max_ns)
		s->max_ns = held;
	u32 b = log2_bucket(held);
	if (b < HOLD_BUCKETS)
		__sync_fetch_and_add(&s->buckets[b], 1);
	return 0;
}
