/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_check.h - the fuzzers' invariant check: a failed CHECK prints where
 * and what, then aborts, which libFuzzer reports as a crash and saves the
 * input.
 */
#ifndef PBOX_FUZZ_CHECK_H
#define PBOX_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
				__FILE__, __LINE__, #c);                       \
			abort();                                               \
		}                                                              \
	} while (0)

#endif
