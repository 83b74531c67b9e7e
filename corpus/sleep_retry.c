/* A lock taken with trylock, and a short sleep when it is busy: SQLite's busy handler,
 * many hand-rolled spin-then-sleep loops. The waiter is neither spinning nor blocked on
 * the lock: it sleeps in nanosleep, so only an off-CPU view sees where the time went. */
#include "common.h"
#include <stdint.h>
#include <time.h>

pthread_mutex_t db_lock = PTHREAD_MUTEX_INITIALIZER;
static long iters;

/* The function that sleeps: the finding must point here. */
__attribute__((noinline)) void busy_wait_lock(void)
{
    while (pthread_mutex_trylock(&db_lock) != 0) {
        struct timespec ts = { 0, 100000 }; /* 100 µs, SQLite's first busy step is 1 ms */
        nanosleep(&ts, NULL);
    }
}

__attribute__((noinline)) uint64_t transaction(uint64_t x)
{
    for (int i = 0; i < 40000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void *worker(void *arg)
{
    uint64_t x = (uint64_t)(long)arg + 1;
    for (long i = 0; i < iters; i++) {
        busy_wait_lock();
        x = transaction(x);
        pthread_mutex_unlock(&db_lock);
    }
    return (void *)(uintptr_t)x;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(8000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
