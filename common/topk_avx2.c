/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_avx2.c - the top-k count and selection passes with AVX2
 * (common/topk.h): 8 magnitudes per compare, "not less than, unordered"
 * (for a threshold 0 <= t <= inf, elem_topk_keep: a NaN passes as +inf
 * does), counts by movemask popcount;
 * the few kept entries of a vector are written one by one (at the
 * densities top-k is for, most vectors keep none).
 */
#include <immintrin.h>

#include "common/topk_impl.h"

/* |v| of 8 floats. */
static inline __m256 abs8(__m256 v)
{
	return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

static void count_avx2(const float *x, size_t n, const float *t, unsigned nt,
		       uint64_t *counts)
{
	__m256 tv[TOPK_MAX_THRESH];
	size_t i = 0;

	for (unsigned j = 0; j < nt; j++) {
		tv[j] = _mm256_set1_ps(t[j]);
		counts[j] = 0;
	}
	for (; i + 8 <= n; i += 8) {
		__m256 a = abs8(_mm256_loadu_ps(x + i));
		for (unsigned j = 0; j < nt; j++)
			counts[j] += (uint64_t)__builtin_popcount(
				_mm256_movemask_ps(_mm256_cmp_ps(a, tv[j], _CMP_NLT_UQ)));
	}
	topk_count_tail(x, i, n, t, nt, counts);
}

static size_t pass_avx2(float *x, float *g, size_t n, float t, uint32_t *idx, float *val,
			size_t cap, unsigned flags)
{
	const __m256 tv = _mm256_set1_ps(t);
	const __m256 canon = _mm256_castsi256_ps(_mm256_set1_epi32((int)ELEM_CANON_NAN));
	size_t i = 0, m = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		if (g) {
			v = _mm256_add_ps(v, _mm256_loadu_ps(g + i));
			v = _mm256_blendv_ps(v, canon, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
			_mm256_storeu_ps(x + i, v);
			if (flags & TOPK_CLEAR_G)
				_mm256_storeu_ps(g + i, _mm256_setzero_ps());
		}
		unsigned k = (unsigned)_mm256_movemask_ps(
			_mm256_cmp_ps(abs8(v), tv, _CMP_NLT_UQ));
		for (; k; k &= k - 1, m++) {
			if (m >= cap)
				continue;
			size_t j = i + (unsigned)__builtin_ctz(k);
			idx[m] = (uint32_t)j;
			val[m] = x[j];
			if (flags & TOPK_ZERO_KEPT)
				x[j] = 0;
		}
	}
	return topk_pass_tail(x, g, i, n, t, idx, val, cap, flags, m);
}

const struct topk_kernels topk_kernels_avx2 = {
	.name = "avx2",
	.count = count_avx2,
	.pass = pass_avx2,
};
