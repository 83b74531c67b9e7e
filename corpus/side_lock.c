/* Scales, beside a contended lock: the workers do private work (as clean_parallel) while
 * two housekeeping threads, whatever the thread count, take turns on `stats_lock`, each
 * holding it across a 2 ms sleep. The lock is contended all the time, but no worker ever
 * takes it: its waits do not grow with the workers, so scalprof must report no finding. */
#include "common.h"
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define LINE 64
struct thread_state {
    _Alignas(LINE) uint64_t rng;
    uint64_t acc;
};

static struct thread_state states[256];
static long iters;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int done;
static long stats_flushes;

static void *worker(void *arg)
{
    long id = (long)arg;
    struct thread_state *st = &states[id % 256];
    uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(id + 1);
    uint64_t acc = 0;
    for (long i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc += x & 0xff;
    }
    st->rng = x;
    st->acc = acc;
    return NULL;
}

/* Off the workers' path: a "statistics flusher" pair that always contends. */
static void *housekeeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&done)) {
        pthread_mutex_lock(&stats_lock);
        stats_flushes++;
        usleep(2000);
        pthread_mutex_unlock(&stats_lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(150000000);
    pthread_t keepers[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&keepers[i], NULL, housekeeper, NULL);
    corpus_run_threads(threads, worker);
    atomic_store(&done, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(keepers[i], NULL);
    uint64_t sum = 0;
    for (long i = 0; i < threads && i < 256; i++)
        sum += states[i].acc;
    fprintf(stderr, "checksum=%llu flushes=%ld\n", (unsigned long long)sum, stats_flushes);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
