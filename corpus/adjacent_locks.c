/* Two hot global locks adjacent in .bss (NetBSD: uvm_fpageqlock next to uvm_pageqlock).
 * Workers take pageq_lock; an "idle" thread polls fpageq_lock with trylock, the way
 * uvm_pageidlezero did with mutex_tryenter. Each trylock dirties the cache line the
 * workers' lock lives on, even though the two locks are never contended with each other. */
#include "common.h"
#include <stdint.h>

/* In NetBSD, uvm_pageqlock and uvm_fpageqlock were separate globals that the linker happened
 * to place on one cache line. Compilers order and align globals as they please (GCC aligns
 * 40-byte objects to 32 bytes, which can split such a pair), so the corpus keeps the two
 * locks together in one cache-line-aligned object: same line, every build. */
_Alignas(64) struct uvm_locks {
    pthread_mutex_t pageq_lock;
    pthread_mutex_t fpageq_lock;
} uvm;
#define pageq_lock uvm.pageq_lock
#define fpageq_lock uvm.fpageq_lock
static uint64_t pageq_len;
static volatile int workers_done;
static long iters;

__attribute__((noinline)) static void pageq_enqueue(void)
{
    pthread_mutex_lock(&pageq_lock);
    pageq_len++;
    pthread_mutex_unlock(&pageq_lock);
}

__attribute__((noinline)) static void *page_idle_zero(void *arg)
{
    (void)arg;
    long polls = 0;
    while (!__atomic_load_n(&workers_done, __ATOMIC_ACQUIRE)) {
        if (pthread_mutex_trylock(&fpageq_lock) == 0) {
            polls++;
            pthread_mutex_unlock(&fpageq_lock);
        }
    }
    return (void *)polls;
}

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++)
        pageq_enqueue();
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(2000000);
    pthread_mutex_init(&pageq_lock, NULL);
    pthread_mutex_init(&fpageq_lock, NULL);
    pthread_t idle;
    if (pthread_create(&idle, NULL, page_idle_zero, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    corpus_run_threads(threads, worker);
    __atomic_store_n(&workers_done, 1, __ATOMIC_RELEASE);
    pthread_join(idle, NULL);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
