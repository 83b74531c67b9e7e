/* Hold times of user locks, sampled: the same preloaded object as interpose.c, in the
 * traced repeats of a sweep. It interposes the acquire functions of pthread mutexes,
 * rwlocks and spinlocks (the releases are interpose.c's, which call hold_releasing and
 * hold_released), and for every lock address a thread takes it counts the acquisitions
 * and times a sample of the holds: from the acquire's return to the release's call.
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
 * Overhead, bounded, and kept out of the holds: whatever lengthens a hold slows a
 * contended lock's hand-off (each hold is the wait of the threads behind it). Between
 * the real acquire's return and the real release's call, a hold that is not timed costs
 * one thread-local test at the release (the acquire ends in a tail call to the real
 * one), and a timed one a read of the vDSO clock at each end. The rest happens outside
 * the hold: before the real acquire, the thread's own table (no atomic, no shared line;
 * one comparison with the lock it took last, else a lookup) counts the acquisition and a
 * countdown says whether it is timed; after the real release returns, a timed hold's
 * record is stored. A blocking acquire is counted before it is called, so one that fails
 * (a program's error, such as an error-checking mutex it holds already) counts too; a
 * trylock or timedlock, which fail as a matter of course, is taken back when it fails.
 * Counting and timing inside the holds, as this file first did, cost two threads taking
 * one pthread mutex in a loop 55-60% of their throughput on 2 CPUs, and hash_global_mutex
 * at 2 threads 30% (benches/hold-cost.sh); this way 20-30% and 12-17%, of which the
 * preload alone (two calls more per acquisition and release) takes 10-20% and 5-8%. A
 * timed hold costs some 120 ns, over half of it the two clock reads: 2 ns an
 * acquisition at one in 64.
 *
 * Which holds are timed: each acquisition with a chance of one in SAMPLE_EVERY,
 * independently, drawn as a countdown whose length is geometric (one draw of the
 * thread's own xorshift generator and a logarithm per timed hold, a decrement per
 * acquisition). Every thread's holds are sampled at this one rate, fixed for the whole
 * run, so that the samples, which the reader (interpose.rs) averages with equal weights,
 * weigh each thread's holds as often as it takes them; and at random, so that a
 * program's own period cannot alias with the sampling's: timing each thread's first 256
 * and then every 256th let a lock rebuilt under every 2000th acquisition (index_rebuild)
 * be timed 8 times as often as its lookups, and its mean hold read 9 times the wall time
 * the lock was held. The rate does not adapt to how often a thread takes its locks: a
 * rarer rate for the busy threads would give a rare long holder's holds more weight than
 * the lookups' in the mean (the same error), and the records carry no weight to correct
 * it. At one in 64 a lock taken 10^8 times gives 1.5 M samples, more than the reader
 * keeps (interpose.rs: HOLDS_KEPT), and a lock taken 10^4 times still some 150.
 *
 * A thread times holds of several locks at once (nested), but a lock taken again
 * before its release (a recursive mutex, a second read lock) drops its timing and is
 * drawn anew. The acquisitions go to the area at the thread's exit and at the
 * process's (a thread still running then is written out by the exiting one); the
 * samples as they are taken, so a process killed by a signal, or that calls _exit,
 * loses only its counts.
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

#include "copy.h"
#include "gaps.h"
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
	uint64_t since; /* when the timed hold began; 1 while in a condition wait; 0: not timed */
};

struct table {
	struct table *next;
	int free; /* its thread exited: another may take it */
	struct chunk *chunk; /* where this thread's records go; NULL until its first */
	uint64_t random; /* the sampling's xorshift state; 0 until the first draw */
	struct slot slots[SLOTS];
};

int hold_timing; /* set once this process has the area mapped */
static struct header *area;
static uint64_t chunks; /* in the area, from its size (not from the shared header) */
static struct table *tables; /* every thread's, to write out the running ones at exit */
static pthread_key_t exit_key;
#define LOCAL __thread __attribute__((tls_model("initial-exec")))
LOCAL unsigned holds_timed;
/* The rest of the calling thread's state, in one block (its offset looked up once). */
static LOCAL struct {
	struct table *table; /* NULL until its first acquisition */
	uintptr_t last_lock; /* the lock last counted, and its slot; 0 while its hold is timed */
	struct slot *last_slot;
	uint32_t countdown; /* acquisitions until the next timed one, the next included */
	uintptr_t ended_lock; /* the hold hold_releasing ended, for hold_released */
	uint64_t ended_ns;
} me;

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
	memset(&me, 0, sizeof me);
	holds_timed = 0;
	__atomic_store_n(&t->free, 1, __ATOMIC_RELEASE);
}

/* The calling thread's table, taken at its first acquisition: one an exited thread left
 * (with its chunk: the same process's), else a new one. */
static struct table *table(void)
{
	if (me.table)
		return me.table;
	struct table *t;
	for (t = __atomic_load_n(&tables, __ATOMIC_ACQUIRE); t; t = t->next) {
		if (__atomic_load_n(&t->free, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&t->free, 0, __ATOMIC_ACQ_REL))
			break;
	}
	if (!t) {
		void *m = mmap(NULL, sizeof(struct table), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		t = m;
		t->next = __atomic_load_n(&tables, __ATOMIC_ACQUIRE);
		while (!__atomic_compare_exchange_n(&tables, &t->next, t, 0, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE))
			;
	}
	pthread_setspecific(exit_key, t);
	me.countdown = next_gap(&t->random, (uintptr_t)t);
	return me.table = t;
}

/* The slot of `lock` in the thread's table (taken if new, when `take`); NULL when it has no
 * table or the lock no slot. */
static struct slot *lookup(uintptr_t lock, int take)
{
	struct table *t = take ? table() : me.table;
	if (!t)
		return NULL;
	unsigned h = (unsigned)(((uint64_t)lock * 0x9e3779b97f4a7c15ull) >> 56) & (SLOTS - 1);
	for (unsigned i = 0; i < PROBES; i++) {
		struct slot *s = &t->slots[(h + i) & (SLOTS - 1)];
		if (!s->lock && take)
			s->lock = lock;
		if (s->lock == lock)
			return s;
		if (!s->lock)
			return NULL;
	}
	return NULL;
}

/* The slot of a lock the thread is releasing or waiting on, if it has one. */
static struct slot *slot_of(const volatile void *lock)
{
	uintptr_t l = (uintptr_t)lock;
	return l == me.last_lock ? me.last_slot : lookup(l, 0);
}

/* Before the real acquire: counts the acquisition in the thread's table (*slot: its slot,
 * NULL when it has none), and says whether it is timed. The slot becomes the one the
 * next acquisition looks at first (me.last_slot), unless its hold is timed: that one
 * never is, so that counted_quickly need not look. */
static inline __attribute__((always_inline)) int counted(const volatile void *lock,
							 struct slot **slot)
{
	uintptr_t l = (uintptr_t)lock;
	struct slot *s = *slot = l == me.last_lock ? me.last_slot : lookup(l, 1);
	if (!s)
		return 0;
	s->acquired++;
	if (s->since) { /* taken again before its release (a recursive mutex): not timed */
		s->since = 0;
		holds_timed--;
	}
	if (--me.countdown) {
		me.last_lock = l;
		me.last_slot = s;
		return 0;
	}
	me.countdown = next_gap(&me.table->random, (uintptr_t)me.table);
	return 1;
}

/* counted(), in the common case only: the lock the thread took last (whose hold is not
 * being timed), and this acquisition not timed; 0 (nothing done) otherwise. */
static inline __attribute__((always_inline)) int counted_quickly(const volatile void *lock)
{
	if ((uintptr_t)lock != me.last_lock || me.countdown <= 1)
		return 0;
	me.last_slot->acquired++;
	me.countdown--;
	return 1;
}

/* After the real acquire of a timed acquisition returned `r`: its hold starts (inside the
 * critical section, one read of the clock), or it failed and is not counted. */
static void timed_from_here(struct slot *s, int r)
{
	if (r != 0) {
		s->acquired--;
		return;
	}
	s->since = now_ns();
	holds_timed++;
	if (me.last_slot == s)
		me.last_lock = 0;
}

int hold_releasing(const volatile void *lock)
{
	struct slot *s = slot_of(lock);
	if (!s || s->since <= 1)
		return 0;
	me.ended_ns = now_ns() - s->since;
	me.ended_lock = s->lock;
	s->since = 0;
	holds_timed--;
	return 1;
}

void hold_released(void)
{
	put(me.table, me.ended_lock, me.ended_ns & ~COUNT_BIT);
}

/* A condition wait releases the mutex inside the C library, which no interposer sees:
 * the hold ends here (its record stored at once, still inside it: a wait is no hand-off
 * to hurry), and resumes when the wait returns (marked 1 meanwhile). */
static void hold_suspended(const volatile void *lock)
{
	struct slot *s = slot_of(lock);
	if (!s || s->since <= 1)
		return;
	put(me.table, s->lock, (now_ns() - s->since) & ~COUNT_BIT);
	s->since = 1;
}

/* The hold goes on after a condition wait gave the lock up and took it back: timed again
 * from here when its acquisition was, not counted as an acquisition. */
static void hold_resumed(const volatile void *lock)
{
	struct slot *s = slot_of(lock);
	if (s && s->since == 1)
		s->since = now_ns();
}

/* A forked child has the parent's counts in its copy of the tables: it starts over with
 * chunks of its own, keeping the forking thread's table (the only thread it has). The
 * mapping is the parent's, shared. */
static void after_fork(void)
{
	struct table *t = me.table;
	if (t) {
		memset(t->slots, 0, sizeof t->slots);
		t->free = 0;
		t->next = NULL;
		t->chunk = NULL;
		/* Its own draws, not a copy of the parent's. */
		t->random ^= (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
	}
	me.last_lock = 0;
	holds_timed = 0;
	tables = t;
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
	/* One acquisition in SAMPLE_EVERY is timed, or every one with SCALPROF_HOLDS_EVERY=1
	 * (tests that count the timed holds of a few acquisitions). */
	const char *every = getenv("SCALPROF_HOLDS_EVERY");
	gaps_every(every && strcmp(every, "1") == 0 ? 1 : SAMPLE_EVERY);
	hold_timing = 1;
}

/* The acquire functions: the real one looked up at first use (a library constructor that
 * ran before ours may take a lock already), the acquisition counted before it (a trylock
 * or timedlock taken back when it failed). A blocking acquire does the common case inline
 * and the rest, and the look-up, out of line (NAME_more, NAME_first), so that the common
 * case needs no stack frame. */
#define ACQUIRE(name, type)                                                   \
	static int (*real_##name)(type *);                                    \
	static __attribute__((noinline)) int name##_more(type *lock)          \
	{                                                                     \
		struct slot *s;                                               \
		if (!counted(lock, &s))                                       \
			return real_##name(lock);                             \
		int r = real_##name(lock);                                    \
		timed_from_here(s, r);                                        \
		return r;                                                     \
	}                                                                     \
	static __attribute__((noinline)) int name##_first(type *lock)         \
	{                                                                     \
		real_##name = dlsym(RTLD_NEXT, #name);                        \
		return name(lock);                                            \
	}                                                                     \
	int name(type *lock)                                                  \
	{                                                                     \
		if (__builtin_expect(!real_##name, 0))                        \
			return name##_first(lock);                            \
		if (hold_timing && !counted_quickly(lock))                    \
			return name##_more(lock);                             \
		return real_##name(lock);                                     \
	}

#define ACQUIRE_TRY(name, type)                                               \
	int name(type *lock)                                                  \
	{                                                                     \
		static int (*real)(type *);                                   \
		if (!real)                                                    \
			real = dlsym(RTLD_NEXT, #name);                       \
		if (!hold_timing)                                             \
			return real(lock);                                    \
		struct slot *s;                                               \
		int timed = counted(lock, &s);                                \
		int r = real(lock);                                           \
		if (timed)                                                    \
			timed_from_here(s, r);                                \
		else if (r != 0 && s)                                         \
			s->acquired--;                                        \
		return r;                                                     \
	}

#define ACQUIRE_TIMED(name, type)                                             \
	int name(type *lock, const struct timespec *until)                    \
	{                                                                     \
		static int (*real)(type *, const struct timespec *);          \
		if (!real)                                                    \
			real = dlsym(RTLD_NEXT, #name);                       \
		if (!hold_timing)                                             \
			return real(lock, until);                             \
		struct slot *s;                                               \
		int timed = counted(lock, &s);                                \
		int r = real(lock, until);                                    \
		if (timed)                                                    \
			timed_from_here(s, r);                                \
		else if (r != 0 && s)                                         \
			s->acquired--;                                        \
		return r;                                                     \
	}

ACQUIRE(pthread_mutex_lock, pthread_mutex_t)
ACQUIRE_TRY(pthread_mutex_trylock, pthread_mutex_t)
ACQUIRE_TIMED(pthread_mutex_timedlock, pthread_mutex_t)
ACQUIRE(pthread_rwlock_rdlock, pthread_rwlock_t)
ACQUIRE(pthread_rwlock_wrlock, pthread_rwlock_t)
ACQUIRE_TRY(pthread_rwlock_tryrdlock, pthread_rwlock_t)
ACQUIRE_TRY(pthread_rwlock_trywrlock, pthread_rwlock_t)
ACQUIRE_TIMED(pthread_rwlock_timedrdlock, pthread_rwlock_t)
ACQUIRE_TIMED(pthread_rwlock_timedwrlock, pthread_rwlock_t)
ACQUIRE(pthread_spin_lock, pthread_spinlock_t)
ACQUIRE_TRY(pthread_spin_trylock, pthread_spinlock_t)

/* The condition waits, the current versions (a program built against the pre-2.3.2 ones
 * calls those directly: its holds include its waits). */
int pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
	static int (*real)(pthread_cond_t *, pthread_mutex_t *);
	if (!real)
		real = dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2");
	if (!real)
		real = dlsym(RTLD_NEXT, "pthread_cond_wait");
	if (holds_timed)
		hold_suspended(mutex);
	int r = real(cond, mutex);
	if (holds_timed)
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
	if (holds_timed)
		hold_suspended(mutex);
	int r = real(cond, mutex, until);
	if (holds_timed)
		hold_resumed(mutex);
	return r;
}
