/* Hold times of user locks, sampled: the same preloaded object as interpose.c, in the
 * traced repeats of a sweep. It interposes the acquire functions of pthread mutexes,
 * rwlocks and spinlocks (the releases are interpose.c's, which call hold_released), and
 * for every lock address a thread takes it counts the acquisitions and times a sample of
 * the holds: from the acquire's return to the release's call.
 *
 * Written by hand: no library times the holds of every lock of a program (lockmeter's
 * HOLD columns were a kernel patch; mutrace counts contention, not holds, and needs its
 * own build). A uprobe pair costs a trap per acquire and per release.
 *
 * Set by scalprof (nothing is timed when it is missing):
 *   SCALPROF_HOLDS_DIR  a directory writable by the workload, where each process writes
 *                       `holds.PID`: 16-byte records (lock address, value), the value
 *                       either a hold in nanoseconds or, with the top bit set, the
 *                       acquisitions a thread made of that lock.
 *
 * Overhead, bounded: an acquisition costs a lookup in the thread's own table (no atomic,
 * no shared line); the first SAMPLE_ALL acquisitions of each lock by a thread are timed,
 * then one in SAMPLE_EVERY, each timing two reads of the vDSO clock. Samples go to a
 * per-thread buffer written out when full, at the thread's exit and at the process's.
 * A thread still running when the process exits is written out by the exiting one; a
 * process killed by a signal, or that calls _exit, loses its records.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "holds.h"

#define SLOTS 256	/* locks a thread may hold records of (a power of 2) */
#define PROBES 8	/* slots looked at before a lock counts as overflow */
#define BUFFERED 512	/* samples a thread keeps before writing them */
#define SAMPLE_ALL 256
#define SAMPLE_EVERY 256
#define COUNT_BIT (1ull << 63)

struct slot {
	uintptr_t lock;
	uint64_t acquired;
	uint64_t since; /* when the sampled hold began; 0 when not sampled */
};

struct record {
	uint64_t lock, value;
};

struct table {
	struct table *next;
	int free; /* its thread exited: another may take it */
	unsigned buffered;
	unsigned timing;    /* holds being timed now: a release looks only then */
	struct slot *last; /* the slot of the lock last taken */
	struct slot slots[SLOTS];
	struct record buffer[BUFFERED];
};

int hold_timing; /* set once this process writes hold records */
static int out = -1;
static const char *dir;
static struct table *tables; /* every thread's, to write out the running ones at exit */
static pthread_key_t exit_key;
static __thread __attribute__((tls_model("initial-exec"))) struct table *mine;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void write_records(struct record *r, size_t n)
{
	size_t bytes = n * sizeof *r;
	const char *p = (const char *)r;
	while (bytes > 0 && out >= 0) {
		ssize_t w = write(out, p, bytes);
		if (w <= 0)
			return;
		p += w;
		bytes -= (size_t)w;
	}
}

static void drain(struct table *t)
{
	write_records(t->buffer, t->buffered);
	t->buffered = 0;
}

/* Writes out a table's samples and its acquisitions, and forgets them. */
static void write_table(struct table *t)
{
	drain(t);
	for (unsigned i = 0; i < SLOTS; i++) {
		struct slot *s = &t->slots[i];
		if (!s->lock || !s->acquired)
			continue;
		t->buffer[t->buffered++] = (struct record){ s->lock, COUNT_BIT | s->acquired };
		s->acquired = 0;
		if (t->buffered == BUFFERED)
			drain(t);
	}
	drain(t);
}

static void at_thread_exit(void *p)
{
	struct table *t = p;
	write_table(t);
	memset(t->slots, 0, sizeof t->slots);
	t->timing = 0;
	t->last = NULL;
	mine = NULL;
	__atomic_store_n(&t->free, 1, __ATOMIC_RELEASE);
}

static struct table *table(void)
{
	if (mine)
		return mine;
	/* A table an exited thread left, else a new one. */
	for (struct table *t = __atomic_load_n(&tables, __ATOMIC_ACQUIRE); t; t = t->next) {
		if (__atomic_load_n(&t->free, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&t->free, 0, __ATOMIC_ACQ_REL)) {
			pthread_setspecific(exit_key, t);
			return mine = t;
		}
	}
	void *m = mmap(NULL, sizeof(struct table), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	struct table *t = m;
	t->next = __atomic_load_n(&tables, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&tables, &t->next, t, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	pthread_setspecific(exit_key, t);
	return mine = t;
}

static struct slot *slot_of(struct table *t, uintptr_t lock)
{
	if (t->last && t->last->lock == lock)
		return t->last;
	unsigned h = (unsigned)(((uint64_t)lock * 0x9e3779b97f4a7c15ull) >> 56) & (SLOTS - 1);
	for (unsigned i = 0; i < PROBES; i++) {
		struct slot *s = &t->slots[(h + i) & (SLOTS - 1)];
		if (s->lock == lock)
			return t->last = s;
		if (!s->lock) {
			s->lock = lock;
			return t->last = s;
		}
	}
	return NULL;
}

void hold_acquired(const volatile void *lock)
{
	struct table *t = table();
	struct slot *s = t ? slot_of(t, (uintptr_t)lock) : NULL;
	if (!s)
		return;
	uint64_t n = s->acquired++;
	if (s->since)
		t->timing--; /* taken again before its release was seen (a recursive mutex) */
	s->since = 0;
	if (n < SAMPLE_ALL || n % SAMPLE_EVERY == 0) {
		s->since = now_ns();
		t->timing++;
	}
}

/* The hold goes on after a condition wait gave the lock up and took it back: timed again
 * from here when its acquisition was, not counted as an acquisition. */
static void hold_resumed(const volatile void *lock)
{
	struct slot *s = mine ? slot_of(mine, (uintptr_t)lock) : NULL;
	if (s && s->since == 1)
		s->since = now_ns();
}

void hold_released(const volatile void *lock)
{
	struct slot *s = mine ? slot_of(mine, (uintptr_t)lock) : NULL;
	if (!s || !s->since)
		return;
	uint64_t held = now_ns() - s->since;
	s->since = 0;
	mine->buffer[mine->buffered++] = (struct record){ s->lock, held & ~COUNT_BIT };
	if (mine->buffered == BUFFERED)
		drain(mine);
}

/* A condition wait releases the mutex inside the C library, which no interposer sees:
 * the hold ends here, and resumes when the wait returns (marked 1 meanwhile). */
static void hold_suspended(const volatile void *lock)
{
	struct slot *s = mine && mine->timing ? slot_of(mine, (uintptr_t)lock) : NULL;
	if (!s || !s->since)
		return;
	hold_released(lock);
	s->since = 1;
	mine->timing++;
}

static void open_out(void)
{
	char path[4096];
	if (snprintf(path, sizeof path, "%s/holds.%d", dir, (int)getpid()) >= (int)sizeof path)
		return;
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	hold_timing = out >= 0;
}

/* A forked child has the parent's counts in its copy of the tables: it starts over, with
 * its own file, keeping the forking thread's table (the only thread it has). */
static void after_fork(void)
{
	if (out >= 0)
		close(out);
	if (mine) {
		memset(mine->slots, 0, sizeof mine->slots);
		mine->buffered = 0;
		mine->free = 0;
		mine->timing = 0;
		mine->last = NULL;
		mine->next = NULL;
	}
	tables = mine;
	open_out();
}

__attribute__((destructor)) static void write_all(void)
{
	if (!hold_timing)
		return;
	for (struct table *t = __atomic_load_n(&tables, __ATOMIC_ACQUIRE); t; t = t->next)
		write_table(t);
}

__attribute__((constructor)) static void start(void)
{
	dir = getenv("SCALPROF_HOLDS_DIR");
	if (!dir || !*dir || !first_copy() || pthread_key_create(&exit_key, at_thread_exit) != 0)
		return;
	if (pthread_atfork(NULL, NULL, after_fork) != 0)
		return;
	open_out();
}

/* The acquire functions: the real one looked up at first use (a library constructor that
 * ran before ours may take a lock already), the acquisition counted when it succeeded. */
#define ACQUIRE(name, type)                                                   \
	int name(type *lock)                                                  \
	{                                                                     \
		static int (*real)(type *);                                   \
		if (!real)                                                    \
			real = dlsym(RTLD_NEXT, #name);                       \
		int r = real(lock);                                           \
		if (r == 0 && hold_timing)                                    \
			hold_acquired(lock);                                  \
		return r;                                                     \
	}

#define ACQUIRE_TIMED(name, type)                                             \
	int name(type *lock, const struct timespec *until)                    \
	{                                                                     \
		static int (*real)(type *, const struct timespec *);          \
		if (!real)                                                    \
			real = dlsym(RTLD_NEXT, #name);                       \
		int r = real(lock, until);                                    \
		if (r == 0 && hold_timing)                                    \
			hold_acquired(lock);                                  \
		return r;                                                     \
	}

ACQUIRE(pthread_mutex_lock, pthread_mutex_t)
ACQUIRE(pthread_mutex_trylock, pthread_mutex_t)
ACQUIRE_TIMED(pthread_mutex_timedlock, pthread_mutex_t)
ACQUIRE(pthread_rwlock_rdlock, pthread_rwlock_t)
ACQUIRE(pthread_rwlock_wrlock, pthread_rwlock_t)
ACQUIRE(pthread_rwlock_tryrdlock, pthread_rwlock_t)
ACQUIRE(pthread_rwlock_trywrlock, pthread_rwlock_t)
ACQUIRE_TIMED(pthread_rwlock_timedrdlock, pthread_rwlock_t)
ACQUIRE_TIMED(pthread_rwlock_timedwrlock, pthread_rwlock_t)
ACQUIRE(pthread_spin_lock, pthread_spinlock_t)
ACQUIRE(pthread_spin_trylock, pthread_spinlock_t)

/* The condition waits, the current versions (a program built against the pre-2.3.2 ones
 * calls those directly: its holds include its waits). */
int pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
	static int (*real)(pthread_cond_t *, pthread_mutex_t *);
	if (!real)
		real = dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2");
	if (!real)
		real = dlsym(RTLD_NEXT, "pthread_cond_wait");
	if (hold_timing)
		hold_suspended(mutex);
	int r = real(cond, mutex);
	if (hold_timing)
		hold_resumed(mutex);
	return r;
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
			   const struct timespec *until)
{
	static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	if (!real)
		real = dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
	if (!real)
		real = dlsym(RTLD_NEXT, "pthread_cond_timedwait");
	if (hold_timing)
		hold_suspended(mutex);
	int r = real(cond, mutex, until);
	if (hold_timing)
		hold_resumed(mutex);
	return r;
}
