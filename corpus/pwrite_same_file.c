/* Threads writing small records into one file with pwrite: every write takes the file's
 * inode lock (i_rwsem) for writing, so the writers take turns inside the kernel, spinning
 * on the lock's owner or sleeping on it. will-it-scale pwrite2; a log or a database file
 * shared by writer threads. */
#include "common.h"
#include <fcntl.h>
#include <unistd.h>

static int fd;
static long iters;

static void *worker(void *arg)
{
    char record[64] = { 0 };
    off_t at = ((long)arg * (off_t)sizeof record) % 4096;
    for (long i = 0; i < iters; i++) {
        if (pwrite(fd, record, sizeof record, at) != (ssize_t)sizeof record) {
            perror("pwrite");
            exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(600000);
    char path[4200];
    corpus_own_path(path, sizeof(path), "pwrite_same_file.dat");
    fd = corpus_open_own(path);
    if (ftruncate(fd, 0) != 0) {
        perror("ftruncate");
        return 1;
    }
    corpus_run_threads(threads, worker);
    close(fd);
    unlink(path);
    printf("ops=%ld\n", threads * iters);
    return 0;
}
