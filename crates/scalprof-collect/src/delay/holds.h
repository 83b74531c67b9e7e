/* What holds.c gives interpose.c: whether holds are timed, and the end of a hold. */
#pragma once

#define HIDDEN __attribute__((visibility("hidden")))

/* Non-zero once this process has scalprof's records area mapped (SCALPROF_HOLDS was set). */
HIDDEN extern int hold_timing;
/* Holds this thread is timing now: a release looks for its own only then. */
HIDDEN extern __thread __attribute__((tls_model("initial-exec"))) unsigned holds_timed;
/* A release is about to be called, the lock still held: ends its hold if it is timed, and
 * then says so (1), and the caller calls hold_released once the release has returned,
 * which stores the hold out of the critical section. */
HIDDEN int hold_releasing(const volatile void *lock);
HIDDEN void hold_released(void);
