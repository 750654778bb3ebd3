/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_args.h - command-line number parsing shared by the benchmark
 * programs (pbox-perf, bench/compare/mpi_allreduce): sizes with K/M/G
 * suffixes, bounded non-negative integers and bounded finite reals.
 * Header-only: the MPI program is built by mpicc on its own.
 */
#ifndef PBOX_PERF_ARGS_H
#define PBOX_PERF_ARGS_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* "4096", "1.5M", "64K", "1G" (binary units) -> bytes; 0 or -1 (not a
 * number, negative, NaN, infinite or beyond SIZE_MAX). */
static inline int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	double mul = 1;

	if (end == s || errno || !isfinite(v) || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': mul = 1024; end++; break;
	case 'm': case 'M': mul = 1024 * 1024; end++; break;
	case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	}
	/* SIZE_MAX + 1 is a power of two, exact as a double: below it converts */
	if (*end || v * mul >= (double)SIZE_MAX + 1.0)
		return -1;
	*out = (size_t)(v * mul);
	return 0;
}

/* A finite decimal number in (lo, hi] (the whole string); 0 or -1. */
static inline int parse_real(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);

	if (end == s || *end || errno || !isfinite(v) || !(v > lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

/* A decimal integer in [0, 2^30]; 0 or -1. */
static inline int parse_int(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < 0 || v > 1 << 30)
		return -1;
	*out = (int)v;
	return 0;
}

#endif
