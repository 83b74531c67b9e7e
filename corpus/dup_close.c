/* File-descriptor churn: every thread dup()s stdin and close()s the copy in a loop, the
 * shape of will-it-scale's dup1. Each thread touches the process's one fd table, yet on
 * a small machine this scales nearly linearly (≈1.9× at 2 threads untraced): scalprof
 * must not report a finding, and must not make it look like it does not scale. */
#include "common.h"
#include <unistd.h>

static long iters;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        int fd = dup(0);
        if (fd < 0) {
            perror("dup");
            exit(1);
        }
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(1000000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
