/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum_avx512.c - the sum kernels for AVX-512 (F, BW, VL) + F16C, compiled
 * with -mavx512f -mavx512bw -mavx512vl -mf16c and chosen at run time.
 *
 * 16 elements per vector, 4 vectors per step (4 independent accumulators
 * keep several loads in flight), then single vectors, then the scalar
 * per-element code for the last < 16 elements. Same bits as sum_scalar.c:
 * the same additions in rank order, the same one rounding (vcvtps2ph with
 * round-to-nearest-even; bf16 with the integer round-to-nearest-even of
 * elem_f2b) and the same canonical NaN. No FMA, no FTZ/DAZ. Loads and
 * stores are unaligned: sources are only element-aligned.
 */
#include <immintrin.h>

#include "common/sum_impl.h"

#define VEC 16 /* floats per __m512 */
#define UNROLL 4

static inline __attribute__((always_inline))
__m512 load16(const void *p, size_t i, enum wire_dtype t)
{
	switch (t) {
	case WIRE_F16:
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
	case WIRE_BF16: {
		__m256i b = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
	}
	default:
		return _mm512_loadu_ps((const float *)p + i);
	}
}

static inline __m512 canon16(__m512 acc)
{
	__mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
	return _mm512_mask_mov_ps(acc, nan, _mm512_castsi512_ps(_mm512_set1_epi32(SUM_CANON_NAN)));
}

/* float -> bf16 round to nearest even, for non-NaN (and canonical NaN) input. */
static inline __m256i f2b16(__m512 v)
{
	__m512i u = _mm512_castps_si512(v);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}

static inline __attribute__((always_inline))
void store16(void *p, size_t i, __m512 acc, enum wire_dtype t)
{
	acc = canon16(acc);
	switch (t) {
	case WIRE_F16:
		_mm256_storeu_si256((__m256i *)((uint16_t *)p + i),
				    _mm512_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT));
		break;
	case WIRE_BF16:
		_mm256_storeu_si256((__m256i *)((uint16_t *)p + i), f2b16(acc));
		break;
	default:
		_mm512_storeu_ps((float *)p + i, acc);
		break;
	}
}

/* The vector part: elements [0, count rounded down to VEC). Returns it.
 * Sources at the same offset in their pages conflict in L1 at large N:
 * stagger contribution buffers (figures: docs/performance.md). */
static inline __attribute__((always_inline))
size_t sum_vec(void *dst, const void *const *src, unsigned n, size_t count, enum wire_dtype t)
{
	size_t i = 0;

	for (; i + UNROLL * VEC <= count; i += UNROLL * VEC) {
		__m512 a0 = load16(src[0], i, t);
		__m512 a1 = load16(src[0], i + VEC, t);
		__m512 a2 = load16(src[0], i + 2 * VEC, t);
		__m512 a3 = load16(src[0], i + 3 * VEC, t);
		for (unsigned k = 1; k < n; k++) {
			a0 = _mm512_add_ps(a0, load16(src[k], i, t));
			a1 = _mm512_add_ps(a1, load16(src[k], i + VEC, t));
			a2 = _mm512_add_ps(a2, load16(src[k], i + 2 * VEC, t));
			a3 = _mm512_add_ps(a3, load16(src[k], i + 3 * VEC, t));
		}
		store16(dst, i, a0, t);
		store16(dst, i + VEC, a1, t);
		store16(dst, i + 2 * VEC, a2, t);
		store16(dst, i + 3 * VEC, a3, t);
	}
	for (; i + VEC <= count; i += VEC) {
		__m512 a = load16(src[0], i, t);
		for (unsigned k = 1; k < n; k++)
			a = _mm512_add_ps(a, load16(src[k], i, t));
		store16(dst, i, a, t);
	}
	return i;
}

static void sum_f32_avx512(void *dst, const void *const *src, unsigned n, size_t count)
{
	float *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = sum_vec(dst, src, n, count, WIRE_F32); i < count; i++)
		d[i] = sum_f32_elem(src, n, i);
}

static void sum_f16_avx512(void *dst, const void *const *src, unsigned n, size_t count)
{
	uint16_t *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = sum_vec(dst, src, n, count, WIRE_F16); i < count; i++)
		d[i] = sum_f16_elem(src, n, i);
}

static void sum_bf16_avx512(void *dst, const void *const *src, unsigned n, size_t count)
{
	uint16_t *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = sum_vec(dst, src, n, count, WIRE_BF16); i < count; i++)
		d[i] = sum_bf16_elem(src, n, i);
}

const struct sum_kernels sum_kernels_avx512 = {
	.name = "avx512",
	.fn = {
		[WIRE_F32] = sum_f32_avx512,
		[WIRE_F16] = sum_f16_avx512,
		[WIRE_BF16] = sum_bf16_avx512,
	},
};
