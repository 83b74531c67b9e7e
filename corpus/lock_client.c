/* The client of lock_server: N threads, each with its own connection, send a fixed number
 * of lookups and wait for each answer. Its throughput is what the sweep measures.
 *   lock_client THREADS [SOCKET] */
#include "common.h"
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Default: lock_server.sock next to the executable, where lock_server listens by default. */
static const char *path;
static char own_path[4200];
static long requests;

static void *client(void *arg)
{
    long id = (long)arg;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, path, sizeof(addr.sun_path) - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        perror(path);
        exit(1);
    }
    for (long i = 0; i < requests; i++) {
        uint64_t key = (uint64_t)(i * 31 + id) % 65536 * 7919, v;
        if (write(fd, &key, sizeof(key)) != sizeof(key) || read(fd, &v, sizeof(v)) != sizeof(v)) {
            fprintf(stderr, "lock_client: the server closed the connection\n");
            exit(1);
        }
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = corpus_arg(argc, argv, 1);
    if (argc > 2)
        path = argv[2];
    if (!path) {
        corpus_own_path(own_path, sizeof(own_path), "lock_server.sock");
        path = own_path;
    }
    requests = corpus_scaled(8000);
    corpus_run_threads(threads, client);
    printf("ops=%ld\n", threads * requests);
    return 0;
}
