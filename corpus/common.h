/* Shared helpers for the scalprof pathology corpus.
 * Every program takes its sweep parameter (threads, or input size) as argv[1],
 * does a fixed amount of work per thread, and prints one line "ops=N". */
#ifndef CORPUS_COMMON_H
#define CORPUS_COMMON_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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
#endif
