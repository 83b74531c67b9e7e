/* Which copy of the interposer acts (copy.c): interpose.c and holds.c ask it. */
#pragma once

/* Whether this copy of the interposer is the one the program's calls reach. */
__attribute__((visibility("hidden"))) int first_copy(void);
