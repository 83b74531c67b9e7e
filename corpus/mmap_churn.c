/* Address-space churn: threads mmap, touch and munmap private buffers.
 * All of them serialize on the process's mmap_lock and trigger TLB shootdowns
 * (the IPIs from pmap_invalidate_range in the FreeBSD PMC thread). */
#include "common.h"
#include <sys/mman.h>
#include <unistd.h>

#define BUF_PAGES 16
static long iters;
static long page_size;

__attribute__((noinline)) static void touch_buffer(volatile char *buf, size_t len)
{
    for (size_t off = 0; off < len; off += (size_t)page_size)
        buf[off] = (char)off;
}

static void *worker(void *arg)
{
    (void)arg;
    size_t len = (size_t)(BUF_PAGES * page_size);
    for (long i = 0; i < iters; i++) {
        char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        touch_buffer(buf, len);
        munmap(buf, len);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    page_size = sysconf(_SC_PAGESIZE);
    iters = corpus_scaled(20000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
