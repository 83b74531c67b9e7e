/* The kmap_lock case study (linux-kmap-lock-scalability.txt), in user space: every
 * kmap_high and kunmap_high takes one global kmap_lock around a short update of a pool of
 * LAST_PKMAP persistent mappings. When the pool wraps around, map_new_virtual calls
 * flush_all_zero_pkmaps while still holding the lock: an O(LAST_PKMAP) pass over the pool
 * and a flush of every CPU's TLB (modelled as a pass over a large table). The waiters are
 * woken by kmap_high's and kunmap_high's unlocks, but what they wait behind is the flush:
 * the fix in the thread was a smaller pool (LAST_PKMAP 1024 → 128), and the lasting one
 * to stop flushing under the lock. */
#include "common.h"

#define LAST_PKMAP 1024
#define TLB_BYTES (4 << 20)

static pthread_mutex_t kmap_lock = PTHREAD_MUTEX_INITIALIZER;
static int pkmap_count[LAST_PKMAP];
static unsigned long page_address_map[LAST_PKMAP];
static unsigned last_pkmap_nr;
static unsigned char tlb[TLB_BYTES];
static long iters;

__attribute__((noinline)) static void flush_all_zero_pkmaps(void)
{
    for (int i = 0; i < LAST_PKMAP; i++) {
        if (pkmap_count[i] != 1)
            continue;
        pkmap_count[i] = 0;
        page_address_map[i] = 0;
    }
    /* flush_tlb_all(): every CPU drops its translations, and refills them. */
    for (long i = 0; i < TLB_BYTES; i += 64)
        tlb[i]++;
}

__attribute__((noinline)) static unsigned map_new_virtual(unsigned long page)
{
    for (;;) {
        last_pkmap_nr = (last_pkmap_nr + 1) % LAST_PKMAP;
        if (last_pkmap_nr == 0)
            flush_all_zero_pkmaps();
        if (pkmap_count[last_pkmap_nr] == 0)
            break;
    }
    pkmap_count[last_pkmap_nr] = 1;
    page_address_map[last_pkmap_nr] = page;
    return last_pkmap_nr;
}

__attribute__((noinline)) static unsigned kmap_high(unsigned long page)
{
    pthread_mutex_lock(&kmap_lock);
    unsigned nr = map_new_virtual(page);
    pkmap_count[nr]++;
    pthread_mutex_unlock(&kmap_lock);
    return nr;
}

__attribute__((noinline)) static void kunmap_high(unsigned nr)
{
    pthread_mutex_lock(&kmap_lock);
    pkmap_count[nr]--;
    pthread_mutex_unlock(&kmap_lock);
}

static void *worker(void *arg)
{
    unsigned long page = (unsigned long)(long)arg << 32;
    volatile unsigned long sum = 0;
    for (long i = 0; i < iters; i++) {
        unsigned nr = kmap_high(page + i);
        /* Use the mapping: copy a little from the page, outside the lock. */
        for (int j = 0; j < 64; j++)
            sum += page_address_map[nr] ^ (unsigned long)j;
        kunmap_high(nr);
    }
    return (void *)sum;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(4000000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
