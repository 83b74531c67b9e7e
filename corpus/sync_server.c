/* A server that forks a worker per connection, as PostgreSQL's postmaster forks a backend,
 * and makes every request durable before it answers: the worker appends a record to its
 * log and fdatasync()s it, as a backend flushes the WAL at commit. Sweep lock_client
 * against it with `scalprof run --attach-name sync_server`: the workers exist only once
 * the client connects, inside the traced repeat, and their disk waits must be recorded at
 * every point.
 *   sync_server [SOCKET]   (default sync_server.sock next to the executable; the logs
 *                           are sync_server.log.PID there too)
 * It serves until killed; a worker exits when its client hangs up. */
#define _GNU_SOURCE /* accept4 */
#include "common.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* XLogFlush's part: the record is on disk before the answer goes out. */
static __attribute__((noinline)) void log_commit(int log, uint64_t key)
{
    char record[256];
    memset(record, (int)(key & 0x7f), sizeof(record));
    if (write(log, record, sizeof(record)) != sizeof(record) || fdatasync(log) != 0) {
        perror("sync_server: log");
        _exit(1);
    }
}

static __attribute__((noinline)) void serve_connection(int fd, const char *log_path)
{
    int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (log < 0) {
        perror(log_path);
        _exit(1);
    }
    uint64_t key;
    while (corpus_read_full(fd, &key, sizeof(key)) == 0) {
        log_commit(log, key);
        uint64_t v = key * 2654435761u;
        if (write(fd, &v, sizeof(v)) != sizeof(v))
            break;
    }
    close(log);
    unlink(log_path);
    _exit(0);
}

int main(int argc, char **argv)
{
    char own_path[4200], log_base[4200];
    corpus_own_path(own_path, sizeof(own_path), "sync_server.sock");
    corpus_own_path(log_base, sizeof(log_base), "sync_server.log");
    const char *path = argc > 1 ? argv[1] : own_path;
    /* The workers are reaped by the kernel: no zombies while it serves. */
    signal(SIGCHLD, SIG_IGN);
    int s = corpus_listen(path, "sync_server");
    for (;;) {
        int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            perror("accept");
            return 1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            char log_path[4300];
            snprintf(log_path, sizeof(log_path), "%s.%d", log_base, (int)getpid());
            close(s);
            serve_connection(c, log_path);
        }
        close(c);
    }
}
