/* An array of 64 mutexes, each on its own cache line, and threads that take one picked at
 * random around a short update: the hash_sharded pattern with few waits per lock. Every
 * thread touches every stripe, so the lock words move between CPUs and the occasional
 * collision waits: one lock array, which must read as one cause (`stripes`), not as 64
 * unrelated locks. */
#include "common.h"
#include <stdint.h>

#define STRIPES 64

struct stripe {
    _Alignas(64) pthread_mutex_t m;
    uint64_t value;
};

struct stripe stripes[STRIPES];
static long iters;

__attribute__((noinline)) static void update(struct stripe *s, uint64_t x)
{
    pthread_mutex_lock(&s->m);
    for (int i = 0; i < 40; i++)
        s->value = s->value * 6364136223846793005ULL + x;
    pthread_mutex_unlock(&s->m);
}

static void *worker(void *arg)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * ((uint64_t)(long)arg + 1);
    for (long i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        update(&stripes[x % STRIPES], x);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(3000000);
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&stripes[i].m, NULL);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
