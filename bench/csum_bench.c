/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * csum_bench.c - how fast frame_csum_partial's variants are (the UDP
 * checksum pass pboxd runs over each result's payload, and over each
 * PUSH's where the port gives no verdict; the xdp and verbs transports
 * over each frame they send and receive), beside memcpy of the same
 * bytes. Payloads of 1408 bytes (MTU 1500) and 8896 (MTU 9000), in cache:
 * TSC cycles per call, the best of --reps (default 20000) calls.
 *
 * Usage: csum_bench [--reps R]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "common/csum_impl.h"
#include "common/frame.h"

typedef uint64_t csum_fn(const void *, size_t, uint64_t);

static uint8_t src[9000], dst[9000];
static volatile uint64_t sink;

static uint64_t best_csum(csum_fn *f, size_t len, int reps)
{
	uint64_t best = UINT64_MAX;

	for (int r = 0; r < reps; r++) {
		uint64_t t = __rdtsc();
		sink += f(src, len, 0);
		t = __rdtsc() - t;
		if (t < best)
			best = t;
	}
	return best;
}

static uint64_t best_copy(size_t len, int reps)
{
	uint64_t best = UINT64_MAX;

	for (int r = 0; r < reps; r++) {
		uint64_t t = __rdtsc();
		memcpy(dst, src, len);
		sink += dst[len - 1];
		t = __rdtsc() - t;
		if (t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	int reps = 20000;
	static const size_t lens[] = { 1408, 8896 };

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
			reps = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: csum_bench [--reps R]\n");
			return 2;
		}
	}
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 131 + 7);
	int avx2 = __builtin_cpu_supports("avx2");
	printf("frame_csum_partial picks %s; TSC cycles per call, best of %d\n",
	       avx2 ? "avx2" : "scalar", reps);
	printf("%6s %8s %8s %8s %9s\n", "bytes", "scalar", "avx2", "memcpy", "scalar/avx2");
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t len = lens[k];
		uint64_t s = best_csum(frame_csum_scalar, len, reps);
		uint64_t v = avx2 ? best_csum(frame_csum_avx2, len, reps) : 0;
		uint64_t m = best_copy(len, reps);
		if (avx2)
			printf("%6zu %8lu %8lu %8lu %9.2f\n", len, (unsigned long)s, (unsigned long)v,
			       (unsigned long)m, (double)s / (double)v);
		else
			printf("%6zu %8lu %8s %8lu %9s\n", len, (unsigned long)s, "-",
			       (unsigned long)m, "-");
	}
	return 0;
}
