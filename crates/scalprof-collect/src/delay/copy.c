/* Which copy of the interposer acts (interpose.c and holds.c ask): a tree can preload two.
 * Apart from both so that neither of them needs the other for it. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "copy.h"

/* Whether this copy of the interposer is the one the program's calls reach: a tree can
 * preload two (a sweep's traced repeat times holds with its own copy while the workload's
 * environment already preloads one), and only the first in the search order may act, or
 * a lock would be lengthened twice. The others pass every call on. */
int first_copy(void)
{
	Dl_info mine, theirs;
	void *reached = dlsym(RTLD_DEFAULT, "pthread_mutex_unlock");
	return dladdr((void *)first_copy, &mine) && reached && dladdr(reached, &theirs) &&
	       mine.dli_fbase == theirs.dli_fbase;
}
