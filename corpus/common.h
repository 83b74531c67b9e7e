/* Shared helpers for the scalprof pathology corpus.
 * Every program takes its sweep parameter (threads, or input size) as argv[1],
 * does a fixed amount of work per thread, and prints one line "ops=N". */
#ifndef CORPUS_COMMON_H
#define CORPUS_COMMON_H
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static long corpus_arg(int argc, char **argv, long dflt)
{
    if (argc < 2)
        return dflt;
    char *end = NULL;
    long v = strtol(argv[1], &end, 10);
    if (!end || *end != '\0' || v <= 0) {
        fprintf(stderr, "%s: expected a positive integer, got '%s'\n", argv[0], argv[1]);
        exit(2);
    }
    return v;
}

/* Per-thread work, overridable for quick runs: CORPUS_SCALE=0.1 does a tenth. */
static long corpus_scaled(long iters)
{
    const char *s = getenv("CORPUS_SCALE");
    if (!s)
        return iters;
    double f = atof(s);
    if (f <= 0)
        return iters;
    long v = (long)(iters * f);
    return v > 0 ? v : 1;
}

static void corpus_run_threads(long nthreads, void *(*fn)(void *))
{
    pthread_t *tids = calloc((size_t)nthreads, sizeof(*tids));
    if (!tids) {
        perror("calloc");
        exit(1);
    }
    for (long i = 0; i < nthreads; i++) {
        if (pthread_create(&tids[i], NULL, fn, (void *)i) != 0) {
            perror("pthread_create");
            exit(1);
        }
    }
    for (long i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    free(tids);
}
/* A file of this program's own, next to its executable (scalprof builds the corpus in a
 * directory only its user can write), never in a shared /tmp where another user could plant
 * a link to a file of ours. */
static void corpus_own_path(char *buf, size_t n, const char *name)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) {
        perror("/proc/self/exe");
        exit(1);
    }
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    if ((size_t)snprintf(buf, n, "%s/%s", exe, name) >= n) {
        fprintf(stderr, "path too long: %s/%s\n", exe, name);
        exit(1);
    }
}

/* Reads exactly n bytes (a request) from a socket: 0, or -1 when the peer closed it. */
static int corpus_read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The corpus servers' socket: a UNIX stream socket listening at `path` (an old socket file
 * there is replaced). Says so on stderr once it listens; exits when it cannot. */
static int corpus_listen(const char *path, const char *program)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (s < 0 || strlen(path) >= sizeof(addr.sun_path)) {
        fprintf(stderr, "%s: bad socket path %s\n", program, path);
        exit(1);
    }
    strcpy(addr.sun_path, path);
    unlink(path);
    if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(s, 64) != 0) {
        perror(path);
        exit(1);
    }
    fprintf(stderr, "%s: listening on %s\n", program, path);
    return s;
}

/* Opens (creating, 0600) a file of ours for reading and writing: never through a symlink,
 * and only a regular file we own with one link. */
static int corpus_open_own(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        fprintf(stderr, "%s is not a regular file of ours with one link: refusing it\n", path);
        exit(1);
    }
    return fd;
}
#endif
