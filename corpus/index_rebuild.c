/* A rare long holder (the kmap_lock case study's shape): lookups hold index_lock for a
 * moment, and every 2000th operation rebuilds the whole index, an O(n) pass, while
 * holding it. The waiters wait behind rebuild_index, not behind each other: the fix is to
 * build the new index aside and swap a pointer under the lock, not to shard the lock. */
#include "common.h"

#define ENTRIES 100000
#define REBUILD_EVERY 2000

static pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;
static long index_table[ENTRIES];
static long iters;

__attribute__((noinline)) static long lookup(unsigned long key)
{
    pthread_mutex_lock(&index_lock);
    long v = index_table[key % ENTRIES];
    pthread_mutex_unlock(&index_lock);
    return v;
}

__attribute__((noinline)) static void rebuild_index(long seed)
{
    pthread_mutex_lock(&index_lock);
    for (long i = 0; i < ENTRIES; i++)
        index_table[i] = index_table[i] * 31 + seed + i;
    pthread_mutex_unlock(&index_lock);
}

static void *worker(void *arg)
{
    unsigned long x = 0x9e3779b97f4a7c15UL * ((unsigned long)(long)arg + 1);
    long sum = 0;
    for (long i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (i % REBUILD_EVERY == 0)
            rebuild_index((long)x);
        else
            sum += lookup(x);
    }
    return (void *)sum;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(8000000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
