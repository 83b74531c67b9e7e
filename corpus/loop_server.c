/* A server with one event loop: one thread polls every connection and answers each request
 * itself (Redis's shape). Every request costs the loop the same work, so with more clients
 * the loop's thread saturates and the requests queue behind it. Sweep lock_client against
 * it with `scalprof run --attach-name loop_server`: the cause is the server's one thread.
 *   loop_server [SOCKET]   (default lock_server.sock next to the executable)
 * It serves until killed. */
#define _GNU_SOURCE /* accept4 */
#include "common.h"
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CONNECTIONS 256

/* The work of one request, done on the loop's thread. */
static __attribute__((noinline)) uint64_t serve_request(uint64_t key)
{
    uint64_t v = key;
    for (int i = 0; i < 150000; i++)
        v = v * 6364136223846793005ULL + 1442695040888963407ULL;
    return v;
}

int main(int argc, char **argv)
{
    char own_path[4200];
    corpus_own_path(own_path, sizeof(own_path), "lock_server.sock");
    const char *path = argc > 1 ? argv[1] : own_path;
    int s = corpus_listen(path, "loop_server");
    struct pollfd fds[MAX_CONNECTIONS + 1];
    int n = 1;
    fds[0] = (struct pollfd){.fd = s, .events = POLLIN};
    for (;;) {
        if (poll(fds, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            perror("poll");
            return 1;
        }
        for (int i = n - 1; i >= 1; i--) {
            if (!fds[i].revents)
                continue;
            uint64_t key;
            /* A request is 8 bytes, written at once by the client: read it whole. */
            if (read(fds[i].fd, &key, sizeof(key)) != sizeof(key)) {
                close(fds[i].fd);
                fds[i] = fds[--n];
                continue;
            }
            uint64_t v = serve_request(key);
            if (write(fds[i].fd, &v, sizeof(v)) != sizeof(v)) {
                close(fds[i].fd);
                fds[i] = fds[--n];
            }
        }
        if (fds[0].revents & POLLIN) {
            int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0 && n <= MAX_CONNECTIONS)
                fds[n++] = (struct pollfd){.fd = c, .events = POLLIN};
            else if (c >= 0)
                close(c);
        }
    }
}
