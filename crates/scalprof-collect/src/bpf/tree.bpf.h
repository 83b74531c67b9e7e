/* SPDX-License-Identifier: GPL-2.0 */
/* The workload's process tree, shared by every scalprof BPF object (included once, after
 * the u32/u64 typedefs and a `struct task_struct` view with `tgid`): one bit per process
 * id, its root set by user space, its forks followed here.
 *
 * Why a bitmap and not a hash of tgids: the scheduler's programs ask "is this task ours?"
 * at every context switch and wakeup of every task on the machine, and most of them are
 * not (kworkers, the journal thread, other programs). An array map's lookup is inlined by
 * the verifier into a bounds check and a load; a hash's is a helper call that hashes the
 * key and walks a bucket. Measured on this project's 2-CPU VM with a pipe ping-pong of
 * other processes beside a traced sleeper (kernel-timed, --bpf-stats): the scheduler's
 * programs took 161-176 ns a run with the hash, 69-76 with the bitmap, and 62 returning
 * at once (the tracepoint's own dispatch and the timing). */

/* PID_MAX_LIMIT (4 Mi ids on 64-bit kernels) / 64 bits a word. */
#define TREE_WORDS 65536

/* Mappable: user space empties it between a resident tracer's windows with one memset of
 * its 512 KiB, where a batch update of its 65536 words took 20 ms of a CPU before each
 * traced repeat. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, TREE_WORDS);
	__type(key, u32);
	__type(value, u64);
} tree SEC(".maps");

/* The word holding `tgid`'s bit, or NULL (never, for an id the kernel can give). */
static __always_inline u64 *tree_word(u32 tgid)
{
	u32 word = (tgid >> 6) & (TREE_WORDS - 1);
	return bpf_map_lookup_elem(&tree, &word);
}

/* Whether the process `tgid` is in the workload's tree. */
static __always_inline int in_tree(u32 tgid)
{
	u64 *bits = tree_word(tgid);
	return bits && ((*bits >> (tgid & 63)) & 1);
}

/* Follow the workload's children: a forked process joins the tree. A thread (same tgid)
 * is in it already. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(tree_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = parent->tgid;
	u32 ctgid = child->tgid;
	if (ptgid == ctgid || !in_tree(ptgid))
		return 0;
	u64 *bits = tree_word(ctgid);
	if (bits)
		__sync_fetch_and_or(bits, 1ULL << (ctgid & 63));
	return 0;
}
