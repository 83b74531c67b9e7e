/* Lengthens the hold of one user lock: loaded into the workload with LD_PRELOAD by
 * `scalprof verify` (and, to time the holds, by a sweep's traced repeats: holds.c), it
 * interposes the release functions of pthread mutexes, rwlocks and spinlocks, and when
 * the lock released is the one named, spins for a known time first, still holding it.
 *
 * Written by hand: no library lengthens one lock by address. A uprobe on
 * pthread_mutex_unlock does the same without touching the workload's environment, but a
 * uprobe traps into the kernel at every release of every lock of every process (16 µs a
 * hit measured on this project's machine: a lock-bound loop ran 350 times slower with the
 * probe attached and no delay). Here a release that is not the named lock costs one
 * comparison (and one thread-local test for the hold times, holds.c).
 *
 * Set by scalprof (nothing happens when any is missing or the program is not the one):
 *   SCALPROF_DELAY_EXE      "DEV:INO" of the executable whose global the lock is;
 *   SCALPROF_DELAY_ADDRESS  the lock's link-time address in it (hex), the load bias added
 *                           here, so that position-independent executables need no fixed
 *                           address;
 *   SCALPROF_DELAY_NS       nanoseconds to spin at each release (0: count only);
 *   SCALPROF_DELAY_SLEEPS   set: lengthen the sleep calls (nanosleep, clock_nanosleep,
 *                           usleep) of every process of the tree instead of a lock, by
 *                           sleeping the delay after each returns: a cause the workload
 *                           sleeps in takes no CPU, and its lengthening takes none either
 *                           (a BPF spin where the call returns took a CPU from the
 *                           workers, so a sleep off their path looked costly);
 *   SCALPROF_DELAY_COUNTS   the number of an inherited descriptor of a 16-byte memfd,
 *                           mapped shared by the whole process tree: releases seen, then
 *                           nanoseconds spun (a long delay sleeps first: see
 *                           SLEEP_ABOVE_NS). A descriptor, not a path: a process that
 *                           changed its uid still reaches it; the descriptor stays open
 *                           for the programs the process execs.
 *
 * Each thread counts in its own variables and adds them to the shared ones every
 * FLUSH_EVERY releases, when it exits, and (the thread that exits the process) at exit:
 * an atomic add to a line every CPU writes cost a lock-bound loop 13% of its throughput
 * at zero delay. A thread still running
 * when the process exits loses fewer than FLUSH_EVERY releases.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "holds.h"

static uintptr_t target; /* 0 until this process is the one and the lock is known (no lock is at 0) */
static uint64_t delay_ns;
static uint64_t *counts; /* [releases, ns spun] */

#define FLUSH_EVERY 1024
#define LOCAL __thread __attribute__((tls_model("initial-exec")))
static LOCAL uint64_t my_releases, my_spun;
static LOCAL int my_registered;
static pthread_key_t flush_key; /* its destructor flushes a thread's counts at its exit */

static int sleep_mode; /* SCALPROF_DELAY_SLEEPS: the sleep calls, not a lock */
static int (*real_nanosleep)(const struct timespec *, struct timespec *);
static int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
static int (*real_usleep)(useconds_t);
static int (*real_mutex_unlock)(pthread_mutex_t *);
static int (*real_rwlock_unlock)(pthread_rwlock_t *);
static int (*real_spin_unlock)(pthread_spinlock_t *);

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void flush(void)
{
	if (my_releases)
		__atomic_fetch_add(&counts[0], my_releases, __ATOMIC_RELAXED);
	if (my_spun)
		__atomic_fetch_add(&counts[1], my_spun, __ATOMIC_RELAXED);
	my_releases = my_spun = 0;
}

static void flush_at_thread_exit(void *unused)
{
	(void)unused;
	flush();
}

/* A delay this long sleeps first, and spins only its last SPIN_TAIL_NS: a spin takes a
 * CPU from the workers, which makes a lock off their path look costly on a machine of
 * few CPUs; a sleep's wake-up is late by tens of µs, which the spun tail absorbs. */
#define SLEEP_ABOVE_NS 300000u
#define SPIN_TAIL_NS 150000u

/* The named lock is about to be released: wait for the delay, still holding it. */
static void lengthen(void)
{
	if (!delay_ns)
		return;
	uint64_t start = now_ns(), until = start + delay_ns, now;
	if (delay_ns > SLEEP_ABOVE_NS) {
		uint64_t wake = until - SPIN_TAIL_NS;
		struct timespec t = { .tv_sec = wake / 1000000000u, .tv_nsec = wake % 1000000000u };
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
			;
	}
	uint64_t spin_from = now_ns();
	do
		now = now_ns();
	while (now < until);
	my_spun += now - spin_from;
}

/* The named lock was released: count it, outside its critical section (inside, the
 * count alone cost a lock-bound loop 20% at zero delay). */
static void count(void)
{
	if (!my_registered) {
		my_registered = 1;
		pthread_setspecific(flush_key, &my_registered);
	}
	if (++my_releases == FLUSH_EVERY)
		flush();
}

__attribute__((destructor)) static void fini(void)
{
	if (counts)
		flush();
}

/* The main program is the first object dl_iterate_phdr reports: its load bias. */
static int main_bias(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uintptr_t *)data = info->dlpi_addr;
	return 1;
}

static int is_the_executable(const char *want)
{
	struct stat st;
	if (!want || stat("/proc/self/exe", &st) != 0)
		return 0;
	char *end;
	unsigned long long dev = strtoull(want, &end, 10);
	if (*end != ':')
		return 0;
	unsigned long long ino = strtoull(end + 1, &end, 10);
	return *end == '\0' && st.st_dev == dev && st.st_ino == ino;
}

__attribute__((constructor)) static void init(void)
{
	real_mutex_unlock = dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	real_rwlock_unlock = dlsym(RTLD_NEXT, "pthread_rwlock_unlock");
	real_spin_unlock = dlsym(RTLD_NEXT, "pthread_spin_unlock");
	if (!first_copy())
		return;
	real_nanosleep = dlsym(RTLD_NEXT, "nanosleep");
	real_clock_nanosleep = dlsym(RTLD_NEXT, "clock_nanosleep");
	real_usleep = dlsym(RTLD_NEXT, "usleep");
	const char *address = getenv("SCALPROF_DELAY_ADDRESS");
	const char *ns = getenv("SCALPROF_DELAY_NS");
	const char *counted = getenv("SCALPROF_DELAY_COUNTS");
	const char *sleeps = getenv("SCALPROF_DELAY_SLEEPS");
	if (!ns || !counted)
		return;
	if (!sleeps && (!address || !is_the_executable(getenv("SCALPROF_DELAY_EXE"))))
		return;
	char *end;
	long fd = strtol(counted, &end, 10);
	struct stat st;
	if (end == counted || *end || fd < 0 || fd > 1 << 30 || fstat((int)fd, &st) != 0 ||
	    !S_ISREG(st.st_mode) || st.st_size != 2 * sizeof(uint64_t))
		return;
	void *m = mmap(NULL, 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (m == MAP_FAILED)
		return;
	if (pthread_key_create(&flush_key, flush_at_thread_exit) != 0) {
		munmap(m, 2 * sizeof(uint64_t));
		return;
	}
	counts = m;
	delay_ns = strtoull(ns, NULL, 10);
	if (sleeps) {
		sleep_mode = 1;
		return;
	}
	uintptr_t bias = 0;
	dl_iterate_phdr(main_bias, &bias);
	target = bias + (uintptr_t)strtoull(address, NULL, 16);
}

/* Each release function: the real one looked up (a library constructor that ran before
 * ours may release a lock already), the named lock held longer, its release counted. A
 * hold being timed (holds.c) ends before the real release, and its record is stored
 * after it, out of the critical section. Those two, and the look-up, are out of line
 * (NAME_more, NAME_first), so that any other release is a few tests and a tail call to
 * the real one, with no stack frame. */
#define INTERPOSE(name, type, real)                                  \
	static __attribute__((noinline)) int name##_more(type *lock)  \
	{                                                             \
		int ended = holds_timed && hold_releasing(lock);      \
		int r;                                                \
		if (target && (uintptr_t)lock == target) {            \
			lengthen();                                   \
			r = real(lock);                               \
			count();                                      \
		} else {                                              \
			r = real(lock);                               \
		}                                                     \
		if (ended)                                            \
			hold_released();                              \
		return r;                                             \
	}                                                             \
	static __attribute__((noinline)) int name##_first(type *lock) \
	{                                                             \
		real = dlsym(RTLD_NEXT, #name);                       \
		return name(lock);                                    \
	}                                                             \
	int name(type *lock)                                          \
	{                                                             \
		if (__builtin_expect(!real, 0))                       \
			return name##_first(lock);                    \
		if (holds_timed || (uintptr_t)lock == target)         \
			return name##_more(lock);                     \
		return real(lock);                                    \
	}

INTERPOSE(pthread_mutex_unlock, pthread_mutex_t, real_mutex_unlock)
INTERPOSE(pthread_rwlock_unlock, pthread_rwlock_t, real_rwlock_unlock)
INTERPOSE(pthread_spin_unlock, pthread_spinlock_t, real_spin_unlock)

/* A sleep call returned: sleep the delay more, then count it. Only a call that slept its
 * whole time is lengthened (one a signal cut short returns early, as it would have). */
static void sleep_longer(void)
{
	if (delay_ns && real_clock_nanosleep) {
		struct timespec t = { .tv_sec = delay_ns / 1000000000u,
				      .tv_nsec = delay_ns % 1000000000u };
		while (real_clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR)
			;
	}
	count();
}

/* The sleep calls a program makes through libc's entry points (libc's own calls between
 * them do not pass here: sleep() is not lengthened, its seconds dwarf any delay). */
int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (!real_nanosleep)
		real_nanosleep = dlsym(RTLD_NEXT, "nanosleep");
	int r = real_nanosleep(req, rem);
	if (sleep_mode && r == 0)
		sleep_longer();
	return r;
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
	if (!real_clock_nanosleep)
		real_clock_nanosleep = dlsym(RTLD_NEXT, "clock_nanosleep");
	int r = real_clock_nanosleep(clock, flags, req, rem);
	if (sleep_mode && r == 0)
		sleep_longer();
	return r;
}

int usleep(useconds_t us)
{
	if (!real_usleep)
		real_usleep = dlsym(RTLD_NEXT, "usleep");
	int r = real_usleep(us);
	if (sleep_mode && r == 0)
		sleep_longer();
	return r;
}
