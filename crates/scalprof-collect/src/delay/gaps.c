/* Which acquisitions holds.c times: each with a chance of one in `sample_every`, drawn as
 * the gap to the next timed one, so that the acquisitions between cost one decrement. */
#include <stdint.h>

#include "gaps.h"

static unsigned sample_every = 1;
static double per_ln_untimed; /* 1 / ln(1 - 1/sample_every), for next_gap (set with it) */

/* The thread's next pseudo-random number (xorshift64) from its `state`, seeded from
 * `seed` (its table's address) at the first draw. */
static uint64_t next_random(uint64_t *state, uintptr_t seed)
{
	uint64_t x = *state ? *state : (seed | 1) * 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

/* ln x for x in (0, 1], without libm, whose `log` a program's own exported function of
 * that name would take the place of: x = m 2^e with m in [1, 2), and ln m = 2 atanh(z),
 * z = (m - 1)/(m + 1) <= 1/3, by its series to z^11 (error below 1e-7). */
static double ln(double x)
{
	union {
		double d;
		uint64_t u;
	} v = { .d = x };
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	v.u = (v.u & ((1ull << 52) - 1)) | (1023ull << 52);
	double z = (v.d - 1) / (v.d + 1), z2 = z * z;
	double series = 1 + z2 * (1. / 3 + z2 * (1. / 5 + z2 * (1. / 7 + z2 * (1. / 9 + z2 / 11))));
	return e * 0.6931471805599453 + 2 * z * series;
}

/* Acquisitions until the next timed one, the next included: geometric, so that each is
 * timed with a chance of 1/sample_every independently of the others (Knuth, TAOCP vol. 2,
 * 3.4.1: the number of trials up to a success is 1 + floor(ln U / ln(1 - p)) for U
 * uniform in (0, 1]). */
uint32_t next_gap(uint64_t *random, uintptr_t seed)
{
	if (sample_every <= 1)
		return 1;
	double u = (double)((next_random(random, seed) >> 11) + 1) * 0x1p-53;
	double gap = 1 + ln(u) * per_ln_untimed;
	return gap > 1e9 ? 1000000000u : (uint32_t)gap;
}

void gaps_every(unsigned every)
{
	sample_every = every;
	if (every > 1)
		per_ln_untimed = 1 / ln(1 - 1. / every);
}
