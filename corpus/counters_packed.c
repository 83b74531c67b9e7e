/* False sharing at field level: FreeBSD's struct vmmeter.
 * Each thread bumps its own counter, but all counters are packed into one struct,
 * so every atomic add bounces the same cache line between CPUs. */
#include "common.h"

struct vmmeter {
    unsigned long v_swtch;
    unsigned long v_trap;
    unsigned long v_syscall;
    unsigned long v_intr;
    unsigned long v_soft;
    unsigned long v_vm_faults;
    unsigned long v_wire_count;
    unsigned long v_free_count;
};

struct vmmeter vm_cnt;
static long iters;

static void *worker(void *arg)
{
    long id = (long)arg;
    unsigned long *field = &((unsigned long *)&vm_cnt)[id % 8];
    for (long i = 0; i < iters; i++)
        __atomic_fetch_add(field, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(40000000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
