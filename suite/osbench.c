/* scalprof suite: the kernel's scalability, one operation at a time (in the manner of
 * will-it-scale). Each test repeats one operation in N workers — threads of one process, or
 * processes — for a fixed time, and prints the operations done as `ops=N`.
 *
 *   osbench TEST threads|processes N [SECONDS]
 *
 * SECONDS (default 1) is the time the workers run. Files live in SUITE_DIR (default: a new
 * private directory under /tmp, removed at exit), named scalprof-suite-*; each worker's "own"
 * file carries its number. A file is never opened through a symlink, and one that is not a
 * regular file of ours with one link (planted by another user) is refused. The tests' names are part
 * of scalprof's contract (`scalprof suite --tests`). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/futex.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
struct slot {
    _Alignas(LINE) volatile uint64_t ops;
};

/* Shared with the workers (MAP_SHARED, so processes see it too). */
struct shared {
    volatile int go, stop;
    struct slot slots[];
};

static struct shared *sh;
static const char *dir;
static long page;

static void die(const char *what)
{
    fprintf(stderr, "osbench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void path_of(char *buf, size_t n, const char *name, long id)
{
    if (id < 0)
        snprintf(buf, n, "%s/scalprof-suite-%s", dir, name);
    else
        snprintf(buf, n, "%s/scalprof-suite-%s-%ld", dir, name, id);
}

static int open_file(const char *name, long id, size_t size)
{
    char p[512];
    path_of(p, sizeof(p), name, id);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0)
        die(p);
    struct stat st;
    if (fstat(fd, &st) != 0)
        die(p);
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        fprintf(stderr, "osbench: %s is not a regular file of ours with one link: refusing it\n", p);
        exit(1);
    }
    if (size && ftruncate(fd, (off_t)size) != 0)
        die("ftruncate");
    return fd;
}

/* Removes the private directory made when SUITE_DIR is unset, with the files in it. */
static void remove_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(path);
}

static pid_t owner;
static void remove_tmp(void)
{
    if (getpid() == owner)
        remove_dir(dir);
}

#define LOOP(body)                                                                          \
    do {                                                                                    \
        while (!sh->go)                                                                     \
            ;                                                                               \
        while (!sh->stop) {                                                                 \
            body;                                                                           \
            slot->ops++;                                                                    \
        }                                                                                   \
    } while (0)

/* page_fault: map 8 MiB, touch every page, unmap; an operation is one page fault. */
static void t_page_fault(long id, struct slot *slot)
{
    (void)id;
    size_t len = 8 << 20;
    while (!sh->go)
        ;
    while (!sh->stop) {
        char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            die("mmap");
        for (size_t off = 0; off < len && !sh->stop; off += (size_t)page) {
            m[off] = 1;
            slot->ops++;
        }
        munmap(m, len);
    }
}

/* mmap_munmap: map and unmap 128 MiB, untouched. */
static void t_mmap_munmap(long id, struct slot *slot)
{
    (void)id;
    LOOP({
        void *m = mmap(NULL, 128 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            die("mmap");
        munmap(m, 128 << 20);
    });
}

/* brk: grow the heap by a page and shrink it back. */
static pthread_mutex_t brk_once = PTHREAD_MUTEX_INITIALIZER;
static void t_brk(long id, struct slot *slot)
{
    (void)id;
    pthread_mutex_lock(&brk_once);
    char *start = sbrk(0);
    pthread_mutex_unlock(&brk_once);
    LOOP({
        if (syscall(SYS_brk, start + page) == -1 || syscall(SYS_brk, start) == -1)
            die("brk");
    });
}

/* fork_exec: fork, exec /bin/true, wait. */
static void t_fork_exec(long id, struct slot *slot)
{
    (void)id;
    LOOP({
        pid_t p = fork();
        if (p < 0)
            die("fork");
        if (p == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        if (waitpid(p, NULL, 0) < 0)
            die("waitpid");
    });
}

static void t_stat_same(long id, struct slot *slot)
{
    (void)id;
    char p[512];
    path_of(p, sizeof(p), "stat", -1);
    struct stat st;
    LOOP({
        if (stat(p, &st) != 0)
            die(p);
    });
}

static void t_stat_own(long id, struct slot *slot)
{
    char p[512];
    close(open_file("stat", id, 0));
    path_of(p, sizeof(p), "stat", id);
    struct stat st;
    LOOP({
        if (stat(p, &st) != 0)
            die(p);
    });
}

static void t_open_close(long id, struct slot *slot)
{
    char p[512];
    close(open_file("open", id, 0));
    path_of(p, sizeof(p), "open", id);
    LOOP({
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            die(p);
        close(fd);
    });
}

static void t_dup_close(long id, struct slot *slot)
{
    (void)id;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    LOOP({
        int d = dup(fd);
        if (d < 0)
            die("dup");
        close(d);
    });
}

/* pipe_pingpong: a byte there and back between the worker and its own echo partner. */
static void *echo(void *arg)
{
    int *fds = arg;
    char c;
    while (read(fds[0], &c, 1) == 1)
        if (write(fds[1], &c, 1) != 1)
            break;
    return NULL;
}

static void t_pipe_pingpong(long id, struct slot *slot, int processes)
{
    (void)id;
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0)
        die("pipe");
    static int partner[2];
    partner[0] = to[0];
    partner[1] = from[1];
    if (processes) {
        pid_t child = fork();
        if (child < 0)
            die("fork");
        if (child == 0) {
            /* Only the worker's ends stay open in the worker: its exit ends the echo. */
            close(to[1]);
            close(from[0]);
            echo(partner);
            _exit(0);
        }
    } else {
        pthread_t t;
        int *fds = malloc(2 * sizeof(int));
        fds[0] = to[0];
        fds[1] = from[1];
        pthread_create(&t, NULL, echo, fds);
        pthread_detach(t);
    }
    char c = 'x';
    LOOP({
        if (write(to[1], &c, 1) != 1 || read(from[0], &c, 1) != 1)
            die("pipe");
    });
    close(to[1]);
}

/* fcntl: take and drop a write lock on byte 0. Threads use open-file-description locks on
 * their own open of the file (POSIX record locks never conflict within a process);
 * processes use POSIX record locks. */
static void t_fcntl(long id, struct slot *slot, int processes, int own)
{
    int fd = open_file("lock", own ? id : -1, 0);
    int set = processes ? F_SETLKW : F_OFD_SETLKW;
    struct flock lk = {.l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    LOOP({
        lk.l_type = F_WRLCK;
        if (fcntl(fd, set, &lk) != 0)
            die("fcntl lock");
        lk.l_type = F_UNLCK;
        if (fcntl(fd, set, &lk) != 0)
            die("fcntl unlock");
    });
}

/* pwrite: 4 KiB at offset 0. */
static void t_pwrite(long id, struct slot *slot, int own)
{
    int fd = open_file("pwrite", own ? id : -1, 1 << 20);
    static char buf[4096];
    LOOP({
        if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
            die("pwrite");
    });
}

/* futex_own: wake nobody on a private word. */
static void t_futex_own(long id, struct slot *slot)
{
    (void)id;
    static _Alignas(LINE) int words[256][LINE / sizeof(int)];
    int *w = words[id % 256];
    LOOP(syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));
}

/* poll: 128 descriptors of the worker's own pipe, none ready, no timeout. */
static void t_poll(long id, struct slot *slot)
{
    (void)id;
    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    struct pollfd fds[128];
    for (int i = 0; i < 128; i++)
        fds[i] = (struct pollfd){.fd = p[0], .events = POLLIN};
    LOOP({
        if (poll(fds, 128, 0) < 0)
            die("poll");
    });
}

static void t_lseek(long id, struct slot *slot)
{
    int fd = open_file("lseek", id, 0);
    LOOP({
        if (lseek(fd, 0, SEEK_SET) != 0)
            die("lseek");
    });
}

static const char *test;
static int processes;

static void run(long id)
{
    struct slot *slot = &sh->slots[id];
    if (!strcmp(test, "page_fault"))
        t_page_fault(id, slot);
    else if (!strcmp(test, "mmap_munmap"))
        t_mmap_munmap(id, slot);
    else if (!strcmp(test, "brk"))
        t_brk(id, slot);
    else if (!strcmp(test, "fork_exec"))
        t_fork_exec(id, slot);
    else if (!strcmp(test, "stat_same"))
        t_stat_same(id, slot);
    else if (!strcmp(test, "stat_own"))
        t_stat_own(id, slot);
    else if (!strcmp(test, "open_close"))
        t_open_close(id, slot);
    else if (!strcmp(test, "dup_close"))
        t_dup_close(id, slot);
    else if (!strcmp(test, "pipe_pingpong"))
        t_pipe_pingpong(id, slot, processes);
    else if (!strcmp(test, "fcntl_same_file"))
        t_fcntl(id, slot, processes, 0);
    else if (!strcmp(test, "fcntl_own_file"))
        t_fcntl(id, slot, processes, 1);
    else if (!strcmp(test, "pwrite_same_file"))
        t_pwrite(id, slot, 0);
    else if (!strcmp(test, "pwrite_own_file"))
        t_pwrite(id, slot, 1);
    else if (!strcmp(test, "futex_own"))
        t_futex_own(id, slot);
    else if (!strcmp(test, "poll"))
        t_poll(id, slot);
    else if (!strcmp(test, "lseek"))
        t_lseek(id, slot);
    else {
        fprintf(stderr, "osbench: unknown test %s\n", test);
        exit(2);
    }
}

static void *thread_main(void *arg)
{
    run((long)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (strcmp(argv[2], "threads") && strcmp(argv[2], "processes"))) {
        fprintf(stderr, "usage: osbench TEST threads|processes N [SECONDS]\n");
        return 2;
    }
    test = argv[1];
    processes = !strcmp(argv[2], "processes");
    long n = strtol(argv[3], NULL, 10);
    if (n <= 0 || n > 4096) {
        fprintf(stderr, "osbench: N must be 1..4096\n");
        return 2;
    }
    page = sysconf(_SC_PAGESIZE);
    const char *d = getenv("SUITE_DIR");
    static char tmp[] = "/tmp/scalprof-suite-XXXXXX";
    if (d && *d) {
        dir = d;
    } else {
        if (!mkdtemp(tmp))
            die("mkdtemp");
        dir = tmp;
        owner = getpid();
        atexit(remove_tmp);
    }
    double seconds = argc == 5 ? atof(argv[4]) : 1.0;
    if (seconds <= 0 || seconds > 3600) {
        fprintf(stderr, "osbench: SECONDS must be in (0, 3600]\n");
        return 2;
    }
    sh = mmap(NULL, sizeof(*sh) + (size_t)n * sizeof(struct slot), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        die("mmap");
    /* Shared files exist before the workers start. */
    close(open_file("stat", -1, 0));
    close(open_file("lock", -1, 0));
    close(open_file("pwrite", -1, 1 << 20));
    signal(SIGPIPE, SIG_IGN);

    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    pthread_t *tids = calloc((size_t)n, sizeof(pthread_t));
    for (long i = 0; i < n; i++) {
        if (processes) {
            pids[i] = fork();
            if (pids[i] < 0)
                die("fork");
            if (pids[i] == 0) {
                run(i);
                _exit(0);
            }
        } else if (pthread_create(&tids[i], NULL, thread_main, (void *)i) != 0) {
            die("pthread_create");
        }
    }
    sh->go = 1;
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    sh->stop = 1;
    for (long i = 0; i < n; i++) {
        if (processes)
            waitpid(pids[i], NULL, 0);
        else
            pthread_join(tids[i], NULL);
    }
    uint64_t ops = 0;
    for (long i = 0; i < n; i++)
        ops += sh->slots[i].ops;
    printf("ops=%llu\n", (unsigned long long)ops);
    return 0;
}
