/* Embarrassingly parallel: private, padded per-thread state, no shared writes.
 * scalprof must never report a finding for this program. */
#include "common.h"
#include <stdint.h>

#define LINE 64
struct thread_state {
    _Alignas(LINE) uint64_t rng;
    uint64_t acc;
};

static struct thread_state states[256];
static long iters;

static void *worker(void *arg)
{
    long id = (long)arg;
    struct thread_state *st = &states[id % 256];
    uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(id + 1);
    uint64_t acc = 0;
    for (long i = 0; i < iters; i++) {
        /* xorshift64: register-only work */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x & 0xff;
    }
    st->rng = x;
    st->acc = acc;
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(150000000);
    corpus_run_threads(threads, worker);
    uint64_t sum = 0;
    for (long i = 0; i < threads && i < 256; i++)
        sum += states[i].acc;
    fprintf(stderr, "checksum=%llu\n", (unsigned long long)sum);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
