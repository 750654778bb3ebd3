/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * csum_avx2.c - frame_csum_partial with AVX2 (common/csum_impl.h): each
 * 64-bit lane adds the low and the high 32-bit word of its 8 bytes into
 * two sums, 64 bytes per step in two independent pairs; the scalar
 * variant takes the tail.
 */
#include <immintrin.h>

#include "common/csum_impl.h"

static uint64_t lanes(__m256i v)
{
	return (uint64_t)_mm256_extract_epi64(v, 0) + (uint64_t)_mm256_extract_epi64(v, 1) +
	       (uint64_t)_mm256_extract_epi64(v, 2) + (uint64_t)_mm256_extract_epi64(v, 3);
}

uint64_t frame_csum_avx2(const void *p, size_t len, uint64_t sum)
{
	const uint8_t *b = p;
	const __m256i low = _mm256_set1_epi64x(0xFFFFFFFF);
	__m256i lo0 = _mm256_setzero_si256(), hi0 = lo0, lo1 = lo0, hi1 = lo0;

	/* a lane gains < 2^33 per step: no carry is lost below 2^30 steps */
	for (; len >= 64; len -= 64, b += 64) {
		__m256i w0 = _mm256_loadu_si256((const __m256i *)b);
		__m256i w1 = _mm256_loadu_si256((const __m256i *)(b + 32));
		lo0 = _mm256_add_epi64(lo0, _mm256_and_si256(w0, low));
		hi0 = _mm256_add_epi64(hi0, _mm256_srli_epi64(w0, 32));
		lo1 = _mm256_add_epi64(lo1, _mm256_and_si256(w1, low));
		hi1 = _mm256_add_epi64(hi1, _mm256_srli_epi64(w1, 32));
	}
	sum += lanes(_mm256_add_epi64(_mm256_add_epi64(lo0, hi0), _mm256_add_epi64(lo1, hi1)));
	return frame_csum_scalar(b, len, sum);
}
