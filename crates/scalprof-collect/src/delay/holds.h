/* What interpose.c's release functions call of holds.c: the end of a hold. */
#pragma once

#define HIDDEN __attribute__((visibility("hidden")))

/* Non-zero once this process writes hold records (SCALPROF_HOLDS_DIR was set). */
HIDDEN extern int hold_timing;
HIDDEN void hold_acquired(const volatile void *lock);
HIDDEN void hold_released(const volatile void *lock);
