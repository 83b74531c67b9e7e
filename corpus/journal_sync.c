/* A lock held across the disk: workers append records to a journal under journal_lock,
 * and every 50th append flushes the journal with fdatasync while still holding it. The
 * lock's waits are its holder's disk I/O: the fix is to sync outside the lock (or batch
 * the syncs, group commit), not to shard the lock. */
#include "common.h"
#include <fcntl.h>
#include <unistd.h>

#define SYNC_EVERY 50

static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static int fd;
static long appended;
static long iters;

__attribute__((noinline)) static void journal_append(const char *record, size_t len)
{
    pthread_mutex_lock(&journal_lock);
    if (write(fd, record, len) != (ssize_t)len) {
        perror("write");
        exit(1);
    }
    if (++appended % SYNC_EVERY == 0 && fdatasync(fd) != 0) {
        perror("fdatasync");
        exit(1);
    }
    pthread_mutex_unlock(&journal_lock);
}

static void *worker(void *arg)
{
    char record[128];
    memset(record, 'a' + (int)(long)arg % 26, sizeof record);
    for (long i = 0; i < iters; i++)
        journal_append(record, sizeof record);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    iters = corpus_scaled(20000);
    char path[4200];
    corpus_own_path(path, sizeof(path), "journal_sync.dat");
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
