/* A long-running server whose number of busy workers changes by itself, as a production
 * server's load does through the day. Every request takes `table_lock` for most of its work,
 * so the second busy worker adds little: the curve drops at 2. `scalprof watch` builds that
 * curve from the server's own load, without restarting it at 1 and 2 workers.
 *   phase_server N            N busy workers for a fixed amount of work; prints ops=TOTAL
 *                             (the sweep's form: `scalprof run -t 1,2 -- phase_server {threads}`)
 *   phase_server --phases B:S[,B:S…] [--every MS]
 *                             B busy workers for S seconds, phase after phase, then exits;
 *                             prints "served K" every MS milliseconds (200): the requests
 *                             since the last line (`watch --ops-regex 'served (\d+)'`).
 * Idle workers wait on a condition variable: an idle server, not a contended one. */
#include "common.h"
#include <stdint.h>
#include <time.h>

#define MAX_WORKERS 64

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t table[4096];

static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t phase_changed = PTHREAD_COND_INITIALIZER;
static long busy_workers; /* workers 0 … busy_workers-1 serve; the rest wait */
static int finished;

static _Atomic uint64_t served;
static long requests_per_worker; /* the sweep's form: each worker serves this many */

static __attribute__((noinline)) uint64_t parse_request(uint64_t key)
{
    uint64_t v = key;
    for (int i = 0; i < 3000; i++)
        v = v * 6364136223846793005ULL + 1442695040888963407ULL;
    return v;
}

/* Most of a request's work is done holding table_lock. */
static __attribute__((noinline)) void update_table(uint64_t v)
{
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < 15000; i++) {
        v = v * 6364136223846793005ULL + 1442695040888963407ULL;
        table[v % 4096] += v;
    }
    pthread_mutex_unlock(&table_lock);
}

static void serve_one(uint64_t *key)
{
    update_table(parse_request(++*key));
    served++;
}

/* Whether worker `id` may serve now; waits while it may not. 0: the server is done. */
static int wait_for_turn(long id)
{
    pthread_mutex_lock(&phase_lock);
    while (!finished && id >= busy_workers)
        pthread_cond_wait(&phase_changed, &phase_lock);
    int go = !finished;
    pthread_mutex_unlock(&phase_lock);
    return go;
}

static void *phased_worker(void *arg)
{
    long id = (long)arg;
    uint64_t key = (uint64_t)id << 40;
    while (wait_for_turn(id)) {
        /* A batch between looks at the phase: the look is cheap, but not free. */
        for (int i = 0; i < 64; i++)
            serve_one(&key);
    }
    return NULL;
}

static void *fixed_worker(void *arg)
{
    uint64_t key = (uint64_t)(long)arg << 40;
    for (long i = 0; i < requests_per_worker; i++)
        serve_one(&key);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void set_busy(long b, int done)
{
    pthread_mutex_lock(&phase_lock);
    busy_workers = b;
    finished = done;
    pthread_cond_broadcast(&phase_changed);
    pthread_mutex_unlock(&phase_lock);
}

static void usage(const char *self)
{
    fprintf(stderr, "usage: %s N | %s --phases BUSY:SECONDS[,BUSY:SECONDS...] [--every MS]\n",
            self, self);
    exit(2);
}

static int run_phases(const char *self, const char *spec, long every_ms)
{
    long busy[64];
    double secs[64];
    int phases = 0;
    long most = 1;
    for (const char *p = spec; *p && phases < 64;) {
        char *end;
        busy[phases] = strtol(p, &end, 10);
        if (*end != ':' || busy[phases] < 0 || busy[phases] > MAX_WORKERS)
            usage(self);
        secs[phases] = strtod(end + 1, &end);
        if (secs[phases] <= 0 || (*end && *end != ','))
            usage(self);
        if (busy[phases] > most)
            most = busy[phases];
        phases++;
        p = *end ? end + 1 : end;
    }
    if (phases == 0)
        usage(self);
    pthread_t tids[MAX_WORKERS];
    for (long i = 0; i < most; i++)
        if (pthread_create(&tids[i], NULL, phased_worker, (void *)i) != 0) {
            perror("pthread_create");
            return 1;
        }
    uint64_t reported = 0;
    double next = now_s();
    for (int ph = 0; ph < phases; ph++) {
        set_busy(busy[ph], 0);
        double end = now_s() + secs[ph];
        while (now_s() < end) {
            next += (double)every_ms / 1000.0;
            double wait = next - now_s();
            if (wait > 0) {
                struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
                nanosleep(&ts, NULL);
            }
            uint64_t total = served;
            printf("served %llu\n", (unsigned long long)(total - reported));
            fflush(stdout);
            reported = total;
        }
    }
    set_busy(0, 1);
    for (long i = 0; i < most; i++)
        pthread_join(tids[i], NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--phases") == 0) {
        long every = 200;
        if (argc == 5 && strcmp(argv[3], "--every") == 0)
            every = strtol(argv[4], NULL, 10);
        else if (argc != 3)
            usage(argv[0]);
        if (every <= 0)
            usage(argv[0]);
        return run_phases(argv[0], argv[2], every);
    }
    long n = corpus_arg(argc, argv, 1);
    requests_per_worker = corpus_scaled(16000);
    corpus_run_threads(n, fixed_worker);
    printf("ops=%llu\n", (unsigned long long)served);
    return 0;
}
