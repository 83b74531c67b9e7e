/* True sharing: one global reference count taken and dropped by every thread
 * (DragonFly: cache-line bounces on uncontended globals). */
#include "common.h"

struct object {
    const char *name;
    long payload[6];
};

struct object shared_obj = { "shared", { 0 } };
long obj_refcount;
static long iters;

static void obj_hold(void) { __atomic_fetch_add(&obj_refcount, 1, __ATOMIC_ACQ_REL); }
static void obj_drop(void) { __atomic_fetch_sub(&obj_refcount, 1, __ATOMIC_ACQ_REL); }

static void *worker(void *arg)
{
    (void)arg;
    long sum = 0;
    for (long i = 0; i < iters; i++) {
        obj_hold();
        sum += shared_obj.payload[i & 3];
        obj_drop();
    }
    return (void *)sum;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(20000000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return obj_refcount == 0 ? 0 : 1;
}
