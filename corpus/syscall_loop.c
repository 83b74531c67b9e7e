/* System-call heavy and embarrassingly parallel: every thread pwrite()s to its own
 * /dev/null descriptor and calls getppid() in a loop, sharing nothing (one shared open
 * file would bounce its reference count between CPUs). It scales linearly; a tracer that
 * hooks every system call halves its throughput. scalprof must report no finding and a
 * perturbation of a few percent at most. */
#include "common.h"
#include <fcntl.h>
#include <unistd.h>

static long iters;

static void *worker(void *arg)
{
    (void)arg;
    char byte = 0;
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull < 0) {
        perror("/dev/null");
        exit(1);
    }
    for (long i = 0; i < iters; i++) {
        if (pwrite(devnull, &byte, 1, 0) != 1) {
            perror("pwrite");
            exit(1);
        }
        (void)getppid();
    }
    close(devnull);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(750000);
    corpus_run_threads(threads, worker);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
