/* A "big interpreter lock" handed off between threads, as CPython's GIL does: a mutex, a
 * condition variable and a held flag. A thread takes the lock, runs a slice of work
 * while holding it, and drops it, waking a waiter. Only one thread runs at a time, so two
 * threads do the work of one; the waiters sleep on gil_cond in take_gil. */
#include "common.h"
#include <stdint.h>

pthread_mutex_t gil_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t gil_cond = PTHREAD_COND_INITIALIZER;
static int gil_held;
static long iters;

/* The waiting function the finding must name. */
__attribute__((noinline)) void take_gil(void)
{
    pthread_mutex_lock(&gil_mutex);
    while (gil_held)
        pthread_cond_wait(&gil_cond, &gil_mutex);
    gil_held = 1;
    pthread_mutex_unlock(&gil_mutex);
}

__attribute__((noinline)) void drop_gil(void)
{
    pthread_mutex_lock(&gil_mutex);
    gil_held = 0;
    pthread_cond_signal(&gil_cond);
    pthread_mutex_unlock(&gil_mutex);
}

/* A slice of "bytecode": ~20 µs of arithmetic. */
__attribute__((noinline)) uint64_t run_slice(uint64_t x)
{
    for (int i = 0; i < 20000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void *worker(void *arg)
{
    uint64_t x = (uint64_t)(long)arg + 1;
    for (long i = 0; i < iters; i++) {
        take_gil();
        x = run_slice(x);
        drop_gil();
    }
    return (void *)(uintptr_t)x;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(12000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
