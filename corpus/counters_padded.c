/* The fix for counters_packed: every hot counter on its own cache line
 * ("move the written counters to the end and pad", the vmmeter review). */
#include "common.h"

#define LINE 64
struct padded_counter {
    _Alignas(LINE) unsigned long value;
};

struct vmmeter_padded {
    struct padded_counter v_swtch;
    struct padded_counter v_trap;
    struct padded_counter v_syscall;
    struct padded_counter v_intr;
    struct padded_counter v_soft;
    struct padded_counter v_vm_faults;
    struct padded_counter v_wire_count;
    struct padded_counter v_free_count;
};

struct vmmeter_padded vm_cnt;
static long iters;

static void *worker(void *arg)
{
    long id = (long)arg;
    unsigned long *field = &((struct padded_counter *)&vm_cnt)[id % 8].value;
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
