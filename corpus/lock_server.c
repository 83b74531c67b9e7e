/* A server behind one global lock: a thread per connection on a UNIX socket, every
 * request a lookup in one table under `table_lock`. Run it, then sweep lock_client
 * against it with `scalprof run --attach-name lock_server`: the cause is in the server,
 * not in the client the sweep starts.
 *   lock_server [SOCKET]   (default lock_server.sock next to the executable)
 * It serves until killed. */
#define _GNU_SOURCE /* accept4 */
#include "common.h"
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BUCKETS 4096
#define ENTRIES 65536

struct entry {
    uint64_t key, value;
    struct entry *next;
};

static struct entry *table[BUCKETS];
static struct entry pool[ENTRIES];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* The lookup holds the lock while it walks and then scores the entry: the critical
 * section every connection serializes on. */
static __attribute__((noinline)) uint64_t table_lookup(uint64_t key)
{
    pthread_mutex_lock(&table_lock);
    uint64_t v = 0;
    for (struct entry *e = table[key % BUCKETS]; e; e = e->next)
        if (e->key == key)
            v = e->value;
    for (int i = 0; i < 40000; i++)
        v = v * 6364136223846793005ULL + 1442695040888963407ULL;
    pthread_mutex_unlock(&table_lock);
    return v;
}

static void *serve_connection(void *arg)
{
    int fd = (int)(intptr_t)arg;
    uint64_t key;
    while (corpus_read_full(fd, &key, sizeof(key)) == 0) {
        uint64_t v = table_lookup(key);
        if (write(fd, &v, sizeof(v)) != sizeof(v))
            break;
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    char own_path[4200];
    corpus_own_path(own_path, sizeof(own_path), "lock_server.sock");
    const char *path = argc > 1 ? argv[1] : own_path;
    for (uint64_t i = 0; i < ENTRIES; i++) {
        pool[i].key = i * 7919;
        pool[i].value = i;
        pool[i].next = table[pool[i].key % BUCKETS];
        table[pool[i].key % BUCKETS] = &pool[i];
    }
    int s = corpus_listen(path, "lock_server");
    for (;;) {
        int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            perror("accept");
            return 1;
        }
        pthread_t t;
        if (pthread_create(&t, NULL, serve_connection, (void *)(intptr_t)c) != 0) {
            close(c);
            continue;
        }
        pthread_detach(t);
    }
}
