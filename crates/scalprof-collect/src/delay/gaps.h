/* Which acquisitions holds.c times (gaps.c). */
#pragma once

#include <stdint.h>

/* From now on, time one acquisition in `every` (1: every one). */
__attribute__((visibility("hidden"))) void gaps_every(unsigned every);
/* Acquisitions until the next timed one, the next included; `random` is the thread's
 * generator state (0 before its first draw, then seeded from `seed`). */
__attribute__((visibility("hidden"))) uint32_t next_gap(uint64_t *random, uintptr_t seed);
