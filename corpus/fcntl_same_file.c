/* Processes taking a POSIX record lock (fcntl F_SETLKW) on one file around every
 * operation: will-it-scale's lock2. The waiters sleep in the kernel (fcntl_setlk),
 * which no lock tracepoint or futex sees; the argument is the number of processes. */
#include "common.h"
#include <fcntl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

/* A slice of work done while holding the lock: ~10 µs. */
__attribute__((noinline)) uint64_t locked_work(uint64_t x)
{
    for (int i = 0; i < 10000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static uint64_t run(int fd, long iters, uint64_t x)
{
    struct flock lk = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    for (long i = 0; i < iters; i++) {
        lk.l_type = F_WRLCK;
        if (fcntl(fd, F_SETLKW, &lk) != 0) {
            perror("fcntl F_SETLKW");
            exit(1);
        }
        x = locked_work(x);
        lk.l_type = F_UNLCK;
        fcntl(fd, F_SETLK, &lk);
    }
    return x;
}

int main(int argc, char **argv)
{
    long procs = corpus_arg(argc, argv, 1);
    long iters = corpus_scaled(20000);
    char lock_path[4200];
    corpus_own_path(lock_path, sizeof(lock_path), "fcntl_same_file.lock");
    for (long p = 1; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            exit(1);
        }
        if (pid == 0) {
            /* Each process opens the file itself: POSIX locks belong to processes. */
            int fd = corpus_open_own(lock_path);
            _exit(run(fd, iters, (uint64_t)p) == 42 ? 3 : 0);
        }
    }
    int fd = corpus_open_own(lock_path);
    uint64_t x = run(fd, iters, 0);
    int failed = 0, st;
    while (wait(&st) > 0)
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    if (failed) {
        fprintf(stderr, "a worker process failed\n");
        return 1;
    }
    printf("ops=%ld\n", procs * iters + (long)(x == 42));
    return 0;
}
