/*
 * fuzz_check.h - CHECK, how a harness stops on a broken invariant of what
 * the library accepted: abort (a finding the fuzzer records), naming the
 * line and the condition.
 */
#ifndef WSHARD_FUZZ_CHECK_H
#define WSHARD_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "invariant broken at %s:%d: %s\n",   \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

#endif
