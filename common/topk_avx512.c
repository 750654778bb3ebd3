/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_avx512.c - the top-k count and selection passes with AVX-512F/DQ
 * (common/topk.h): 16 magnitudes per compare, "not less than, unordered"
 * (for a threshold 0 <= t <= inf, elem_topk_keep: a NaN passes as +inf
 * does), counts by mask popcount,
 * the kept indices and values written with compress stores.
 */
#include <immintrin.h>

#include "common/topk_impl.h"

/* |v| of 16 floats. */
static inline __m512 abs16(__m512 v)
{
	return _mm512_and_ps(v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)));
}

static void count_avx512(const float *x, size_t n, const float *t, unsigned nt,
			 uint64_t *counts)
{
	__m512 tv[TOPK_MAX_THRESH];
	size_t i = 0;

	for (unsigned j = 0; j < nt; j++) {
		tv[j] = _mm512_set1_ps(t[j]);
		counts[j] = 0;
	}
	for (; i + 16 <= n; i += 16) {
		__m512 a = abs16(_mm512_loadu_ps(x + i));
		for (unsigned j = 0; j < nt; j++)
			counts[j] += (uint64_t)__builtin_popcount(
				_mm512_cmp_ps_mask(a, tv[j], _CMP_NLT_UQ));
	}
	topk_count_tail(x, i, n, t, nt, counts);
}

static size_t pass_avx512(float *x, float *g, size_t n, float t, uint32_t *idx, float *val,
			  size_t cap, unsigned flags)
{
	const __m512 tv = _mm512_set1_ps(t);
	const __m512 canon = _mm512_castsi512_ps(_mm512_set1_epi32((int)ELEM_CANON_NAN));
	const __m512i step = _mm512_set1_epi32(16);
	__m512i iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	size_t i = 0, m = 0;

	/* indices are 32-bit: n <= UINT32_MAX (topk.h) */
	for (; i + 16 <= n; i += 16, iv = _mm512_add_epi32(iv, step)) {
		__m512 v = _mm512_loadu_ps(x + i);
		if (g) {
			v = _mm512_add_ps(v, _mm512_loadu_ps(g + i));
			v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v, canon);
			_mm512_storeu_ps(x + i, v);
			if (flags & TOPK_CLEAR_G)
				_mm512_storeu_ps(g + i, _mm512_setzero_ps());
		}
		__mmask16 k = _mm512_cmp_ps_mask(abs16(v), tv, _CMP_NLT_UQ);
		if (!k)
			continue;
		unsigned c = (unsigned)__builtin_popcount(k);
		if (m + c <= cap) {
			_mm512_mask_compressstoreu_epi32(idx + m, k, iv);
			_mm512_mask_compressstoreu_ps(val + m, k, v);
			if (flags & TOPK_ZERO_KEPT)
				_mm512_mask_storeu_ps(x + i, k, _mm512_setzero_ps());
		} else if (m < cap) { /* the last ones that fit, in index order */
			for (unsigned b = 0; b < 16 && m < cap; b++)
				if (k >> b & 1) {
					idx[m] = (uint32_t)(i + b);
					val[m++] = x[i + b];
					if (flags & TOPK_ZERO_KEPT)
						x[i + b] = 0;
					c--;
				}
		}
		m += c;
	}
	return topk_pass_tail(x, g, i, n, t, idx, val, cap, flags, m);
}

const struct topk_kernels topk_kernels_avx512 = {
	.name = "avx512",
	.count = count_avx512,
	.pass = pass_avx512,
};
