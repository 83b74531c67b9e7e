/* O(n^2) flow expiry (FreeBSD PMC thread): for every flow to expire, the scan restarts
 * from the start of the bitmap. Takes the number of flows as argv[1]. Also sorts the
 * flows' timestamps (n log n), which must not be flagged as superlinear. */
#include "common.h"
#include <stdint.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) void sort_flow_times(uint64_t *times, long n)
{
    qsort(times, (size_t)n, sizeof(*times), cmp_u64);
}

/* Finds the first active flow by scanning from bit 0 every time: O(n) per call. */
__attribute__((noinline)) long flow_find_first(const uint64_t *bitmap, long nwords)
{
    for (long w = 0; w < nwords; w++)
        if (bitmap[w])
            return w * 64 + __builtin_ctzll(bitmap[w]);
    return -1;
}

__attribute__((noinline)) long expire_flows(uint64_t *bitmap, long n)
{
    long nwords = (n + 63) / 64, expired = 0, f;
    while ((f = flow_find_first(bitmap, nwords)) >= 0) {
        bitmap[f / 64] &= ~(1ULL << (f % 64));
        expired++;
    }
    return expired;
}

int main(int argc, char **argv)
{
    long n = corpus_arg(argc, argv, 10000);
    long nwords = (n + 63) / 64;
    uint64_t *bitmap = calloc((size_t)nwords, sizeof(uint64_t));
    uint64_t *times = malloc((size_t)n * sizeof(uint64_t));
    if (!bitmap || !times)
        return 1;
    uint64_t x = 88172645463325252ULL;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        times[i] = x;
        bitmap[i / 64] |= 1ULL << (i % 64);
    }
    long rounds = corpus_scaled(100);
    long expired = 0;
    for (long r = 0; r < rounds; r++) {
        memset(bitmap, 0, (size_t)nwords * sizeof(uint64_t));
        for (long i = 0; i < n; i++)
            bitmap[i / 64] |= 1ULL << (i % 64);
        sort_flow_times(times, n);
        expired += expire_flows(bitmap, n);
        times[r % n] ^= x; /* keep the next sort from seeing sorted input */
    }
    printf("ops=%ld\n", expired);
    return 0;
}
