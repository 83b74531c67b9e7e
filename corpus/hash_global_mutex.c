/* One global lock in front of a hash table: NetBSD's ubc_alloc / Linux's kmap_lock.
 * Every lookup, by every thread, serializes on table_lock. */
#include "common.h"
#include <stdint.h>

#define NBUCKETS 4096
#define NKEYS 16384

struct entry {
    uint64_t key;
    uint64_t value;
    struct entry *next;
};

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *buckets[NBUCKETS];
static struct entry entries[NKEYS];
static long iters;

static inline uint64_t hash64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* The function the lock table must name as the caller. */
__attribute__((noinline)) uint64_t table_lookup(uint64_t key)
{
    uint64_t v = 0;
    pthread_mutex_lock(&table_lock);
    for (struct entry *e = buckets[hash64(key) % NBUCKETS]; e; e = e->next) {
        if (e->key == key) {
            v = e->value;
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return v;
}

static void *worker(void *arg)
{
    uint64_t x = (uint64_t)(long)arg * 7919 + 1, sum = 0;
    for (long i = 0; i < iters; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        sum += table_lookup((x >> 20) % NKEYS);
    }
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(4000000);
    for (uint64_t k = 0; k < NKEYS; k++) {
        struct entry *e = &entries[k];
        e->key = k;
        e->value = k;
        e->next = buckets[hash64(k) % NBUCKETS];
        buckets[hash64(k) % NBUCKETS] = e;
    }
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
