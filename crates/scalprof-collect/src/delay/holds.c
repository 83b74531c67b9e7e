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
 *   SCALPROF_HOLDS  "FD:NONCE": an inherited descriptor of scalprof's records area (a
 *                   memfd scalprof made and sized before the exec) and the number its
 *                   header carries, so that a descriptor the program reused is not taken
 *                   for it.
 *
 * The area is mapped shared once, by the constructor (and kept by forked children), and
 * records are stores to memory: no write(2), so they count against no file-size limit
 * (`ulimit -f`, whose SIGXFSZ would kill the workload); every process image adds to
 * chunks of its own (an exec in the same pid, or a reused pid, keeps what came before);
 * and a process that changes its uid or closes its descriptors keeps the mapping. Each
 * thread claims chunks of the area with one atomic add on the header; a record is two
 * stores and a count published to its thread's chunk. Once every chunk is taken the
 * records are dropped and counted in the header, which scalprof reports. A process whose
 * descriptor was closed before its exec cannot map the area: it says so on stderr (one
 * line that scalprof looks for, see interpose.rs) and times nothing.
 *
 * Records are 16 bytes (lock address, value), the value either a hold in nanoseconds or,
 * with the top bit set, the acquisitions a thread made of that lock. The layout below is
 * read by interpose.rs: keep the two in step.
 *
 * Overhead, bounded: an acquisition costs a lookup in the thread's own table (no atomic,
 * no shared line); an acquisition is timed with a chance of one in SAMPLE_EVERY, drawn
 * from the thread's own xorshift generator, each timing two reads of the vDSO clock.
 * Every thread's holds are sampled at one rate, so the samples weigh each thread's holds
 * as often as it takes them, and at random, so that a program's own period cannot alias
 * with the sampling's: timing each thread's first 256 and then every 256th let a lock
 * rebuilt under every 2000th acquisition (index_rebuild) be timed 8 times as often as its
 * lookups, and its mean hold read 9 times the wall time the lock was held. The acquisitions go
 * to the area at the thread's exit and at the process's (a thread still running then is
 * written out by the exiting one); the samples as they are taken, so a process killed by
 * a signal, or that calls _exit, loses only its counts.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "holds.h"

#define SLOTS 256	/* locks a thread may hold records of (a power of 2) */
#define PROBES 8	/* slots looked at before a lock counts as overflow */
#define SAMPLE_EVERY 64
#define COUNT_BIT (1ull << 63)

/* The area: a header page, then chunks of a page. */
#define AREA_MAGIC 0x31646c6f68706373ull /* "scphold1", little-endian */
#define HEADER_BYTES 4096
#define CHUNK_BYTES 4096
#define CHUNK_RECORDS (CHUNK_BYTES / 16 - 1)

struct record {
	uint64_t lock, value;
};

struct header {
	uint64_t magic;
	uint64_t nonce;
	uint64_t next;		   /* chunks claimed (atomic; may pass the count once full) */
	uint64_t dropped_samples; /* timed holds lost because every chunk was taken (atomic) */
	uint64_t dropped_counts;  /* threads' acquisition counts lost so (atomic) */
	uint64_t processes;	   /* process images that mapped the area (atomic) */
};

struct chunk {
	uint32_t tgid;
	uint32_t used; /* records written, published after each */
	uint64_t unused;
	struct record records[CHUNK_RECORDS];
};

_Static_assert(sizeof(struct chunk) == CHUNK_BYTES, "a chunk is a page");

struct slot {
	uintptr_t lock;
	uint64_t acquired;
	uint64_t since; /* when the sampled hold began; 0 when not sampled */
};

struct table {
	struct table *next;
	int free; /* its thread exited: another may take it */
	unsigned timing;    /* holds being timed now: a release looks only then */
	struct slot *last; /* the slot of the lock last taken */
	struct chunk *chunk; /* where this thread's records go; NULL until its first */
	uint64_t random; /* the sampling's xorshift state; 0 until the first draw */
	struct slot slots[SLOTS];
};

int hold_timing; /* set once this process has the area mapped */
/* An acquisition is timed when the thread's next random number has these bits clear:
 * one in SAMPLE_EVERY, or every one with SCALPROF_HOLDS_EVERY=1 (tests that count the
 * timed holds of a few acquisitions). */
static uint64_t sample_mask = SAMPLE_EVERY - 1;
static struct header *area;
static uint64_t chunks; /* in the area, from its size (not from the shared header) */
static struct table *tables; /* every thread's, to write out the running ones at exit */
static pthread_key_t exit_key;
static __thread __attribute__((tls_model("initial-exec"))) struct table *mine;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A fresh chunk for this process's records, or NULL once every one is taken. Samples
 * leave the last eighth of the chunks (one at least) to the acquisitions, which the
 * table's `taken/op` needs whole: a full area loses samples first. */
static struct chunk *claim(int counts)
{
	uint64_t limit = counts || chunks < 2 ? chunks : chunks - (chunks / 8 + 1);
	if (__atomic_load_n(&area->next, __ATOMIC_RELAXED) >= limit)
		return NULL;
	uint64_t i = __atomic_fetch_add(&area->next, 1, __ATOMIC_RELAXED);
	if (i >= chunks)
		return NULL;
	struct chunk *c = (struct chunk *)((char *)area + HEADER_BYTES + i * CHUNK_BYTES);
	c->tgid = (uint32_t)getpid();
	return c;
}

/* Appends a record to the chunk of `t`, whose thread is the caller: only it writes there. */
static void put(struct table *t, uint64_t lock, uint64_t value)
{
	struct chunk *c = t->chunk;
	if (!c || c->used == CHUNK_RECORDS) {
		int counts = (value & COUNT_BIT) != 0;
		c = claim(counts);
		if (!c) {
			__atomic_fetch_add(counts ? &area->dropped_counts : &area->dropped_samples, 1,
					   __ATOMIC_RELAXED);
			return;
		}
		t->chunk = c;
	}
	uint32_t n = c->used;
	c->records[n] = (struct record){ lock, value };
	__atomic_store_n(&c->used, n + 1, __ATOMIC_RELEASE);
}

/* Writes the acquisitions of `t` to the chunk of `to` (the caller's), and forgets them. */
static void write_counts(struct table *t, struct table *to)
{
	for (unsigned i = 0; i < SLOTS; i++) {
		struct slot *s = &t->slots[i];
		if (!s->lock || !s->acquired)
			continue;
		put(to, s->lock, COUNT_BIT | s->acquired);
		s->acquired = 0;
	}
}

static void at_thread_exit(void *p)
{
	struct table *t = p;
	write_counts(t, t);
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
	/* A table an exited thread left (with its chunk: the same process's), else a new one. */
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

/* The thread's next pseudo-random number (xorshift64), seeded from its table's address. */
static uint64_t next_random(struct table *t)
{
	uint64_t x = t->random ? t->random : ((uintptr_t)t | 1) * 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return t->random = x;
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
	s->acquired++;
	if (s->since)
		t->timing--; /* taken again before its release was seen (a recursive mutex) */
	s->since = 0;
	if ((next_random(t) & sample_mask) == 0) {
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
	put(mine, s->lock, held & ~COUNT_BIT);
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

/* A forked child has the parent's counts in its copy of the tables: it starts over with
 * chunks of its own, keeping the forking thread's table (the only thread it has). The
 * mapping is the parent's, shared. */
static void after_fork(void)
{
	if (mine) {
		memset(mine->slots, 0, sizeof mine->slots);
		mine->free = 0;
		mine->timing = 0;
		mine->last = NULL;
		mine->next = NULL;
		mine->chunk = NULL;
	}
	tables = mine;
	__atomic_fetch_add(&area->processes, 1, __ATOMIC_RELAXED);
}

__attribute__((destructor)) static void write_all(void)
{
	if (!hold_timing)
		return;
	struct table *to = table();
	if (!to)
		return;
	for (struct table *t = __atomic_load_n(&tables, __ATOMIC_ACQUIRE); t; t = t->next)
		write_counts(t, to);
}

/* Says on stderr why this process times no holds, as one line scalprof looks for; not
 * when stderr is a file the line would take past the file-size limit (its SIGXFSZ would
 * kill the program). */
static void say_unmapped(int fd, const char *why)
{
	char line[256];
	int n = snprintf(line, sizeof line,
			 "scalprof: no hold times from pid %d: descriptor %d of SCALPROF_HOLDS %s\n",
			 (int)getpid(), fd, why);
	if (n <= 0 || n >= (int)sizeof line)
		return;
	struct stat st;
	struct rlimit limit;
	if (fstat(2, &st) != 0)
		return;
	if (S_ISREG(st.st_mode) && getrlimit(RLIMIT_FSIZE, &limit) == 0 &&
	    limit.rlim_cur != RLIM_INFINITY) {
		off_t at = lseek(2, 0, SEEK_CUR);
		off_t end = at > st.st_size ? at : st.st_size;
		if ((uint64_t)end + (uint64_t)n > (uint64_t)limit.rlim_cur)
			return;
	}
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

/* Maps the area named by SCALPROF_HOLDS ("FD:NONCE"); 0 when there is none to map. */
static int map_area(const char *value)
{
	char *end;
	long fd = strtol(value, &end, 10);
	if (end == value || *end != ':' || fd < 0 || fd > 1 << 30)
		return 0;
	uint64_t nonce = strtoull(end + 1, &end, 16);
	if (*end)
		return 0;
	struct stat st;
	if (fstat((int)fd, &st) != 0) {
		say_unmapped((int)fd, "was closed before this program's exec");
		return 0;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < HEADER_BYTES + CHUNK_BYTES) {
		say_unmapped((int)fd, "is not scalprof's records area (closed and reused before this program's exec)");
		return 0;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (m == MAP_FAILED) {
		say_unmapped((int)fd, "cannot be mapped");
		return 0;
	}
	struct header *h = m;
	if (h->magic != AREA_MAGIC || h->nonce != nonce) {
		munmap(m, (size_t)st.st_size);
		say_unmapped((int)fd, "is not scalprof's records area (closed and reused before this program's exec)");
		return 0;
	}
	chunks = ((uint64_t)st.st_size - HEADER_BYTES) / CHUNK_BYTES;
	area = h;
	return 1;
}

__attribute__((constructor)) static void start(void)
{
	const char *value = getenv("SCALPROF_HOLDS");
	if (!value || !*value || !first_copy() || pthread_key_create(&exit_key, at_thread_exit) != 0)
		return;
	if (!map_area(value))
		return;
	if (pthread_atfork(NULL, NULL, after_fork) != 0)
		return;
	__atomic_fetch_add(&area->processes, 1, __ATOMIC_RELAXED);
	const char *every = getenv("SCALPROF_HOLDS_EVERY");
	if (every && strcmp(every, "1") == 0)
		sample_mask = 0;
	hold_timing = 1;
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
