/* What interpose.c and holds.c share: the end of a hold, and which copy acts. */
#pragma once

#define HIDDEN __attribute__((visibility("hidden")))

/* Non-zero once this process has scalprof's records area mapped (SCALPROF_HOLDS was set). */
HIDDEN extern int hold_timing;
HIDDEN void hold_acquired(const volatile void *lock);
HIDDEN void hold_released(const volatile void *lock);
/* Whether this copy of the interposer is the one the program's calls reach (interpose.c). */
HIDDEN int first_copy(void);
