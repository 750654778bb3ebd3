/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum_avx2.c - the sum kernels for AVX2 + F16C, compiled with -mavx2
 * -mf16c and chosen at run time.
 *
 * 8 elements per vector, 4 vectors per step (4 independent accumulators
 * keep several loads in flight), then single vectors, then the scalar
 * per-element code for the last < 8 elements. Same bits as sum_scalar.c:
 * the same additions in rank order, the same one rounding (vcvtps2ph with
 * round-to-nearest-even; bf16 with the integer round-to-nearest-even of
 * elem_f2b) and the same canonical NaN. No FMA, no FTZ/DAZ. Loads and
 * stores are unaligned: sources are only element-aligned.
 */
#include <immintrin.h>

#include "common/sum_impl.h"

#define VEC 8 /* floats per __m256 */
#define UNROLL 4

static inline __attribute__((always_inline))
__m256 load8(const void *p, size_t i, enum wire_dtype t)
{
	switch (t) {
	case WIRE_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	case WIRE_BF16: {
		__m128i b = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
	}
	default:
		return _mm256_loadu_ps((const float *)p + i);
	}
}

static inline __m256 canon8(__m256 acc)
{
	__m256 nan = _mm256_cmp_ps(acc, acc, _CMP_UNORD_Q);
	return _mm256_blendv_ps(acc, _mm256_castsi256_ps(_mm256_set1_epi32(SUM_CANON_NAN)), nan);
}

/* float -> bf16 round to nearest even, for non-NaN (and canonical NaN) input. */
static inline __m128i f2b8(__m256 v)
{
	__m256i u = _mm256_castps_si256(v);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
	u = _mm256_srli_epi32(u, 16); /* every lane now <= 0xffff: packus is exact */
	return _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

static inline __attribute__((always_inline))
void store8(void *p, size_t i, __m256 acc, enum wire_dtype t)
{
	acc = canon8(acc);
	switch (t) {
	case WIRE_F16:
		_mm_storeu_si128((__m128i *)((uint16_t *)p + i),
				 _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT));
		break;
	case WIRE_BF16:
		_mm_storeu_si128((__m128i *)((uint16_t *)p + i), f2b8(acc));
		break;
	default:
		_mm256_storeu_ps((float *)p + i, acc);
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
		__m256 a0 = load8(src[0], i, t);
		__m256 a1 = load8(src[0], i + VEC, t);
		__m256 a2 = load8(src[0], i + 2 * VEC, t);
		__m256 a3 = load8(src[0], i + 3 * VEC, t);
		for (unsigned k = 1; k < n; k++) {
			a0 = _mm256_add_ps(a0, load8(src[k], i, t));
			a1 = _mm256_add_ps(a1, load8(src[k], i + VEC, t));
			a2 = _mm256_add_ps(a2, load8(src[k], i + 2 * VEC, t));
			a3 = _mm256_add_ps(a3, load8(src[k], i + 3 * VEC, t));
		}
		store8(dst, i, a0, t);
		store8(dst, i + VEC, a1, t);
		store8(dst, i + 2 * VEC, a2, t);
		store8(dst, i + 3 * VEC, a3, t);
	}
	for (; i + VEC <= count; i += VEC) {
		__m256 a = load8(src[0], i, t);
		for (unsigned k = 1; k < n; k++)
			a = _mm256_add_ps(a, load8(src[k], i, t));
		store8(dst, i, a, t);
	}
	return i;
}

static void sum_f32_avx2(void *dst, const void *const *src, unsigned n, size_t count)
{
	float *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = sum_vec(dst, src, n, count, WIRE_F32); i < count; i++)
		d[i] = sum_f32_elem(src, n, i);
}

static void sum_f16_avx2(void *dst, const void *const *src, unsigned n, size_t count)
{
	uint16_t *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = sum_vec(dst, src, n, count, WIRE_F16); i < count; i++)
		d[i] = sum_f16_elem(src, n, i);
}

static void sum_bf16_avx2(void *dst, const void *const *src, unsigned n, size_t count)
{
	uint16_t *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = sum_vec(dst, src, n, count, WIRE_BF16); i < count; i++)
		d[i] = sum_bf16_elem(src, n, i);
}

const struct sum_kernels sum_kernels_avx2 = {
	.name = "avx2",
	.fn = {
		[WIRE_F32] = sum_f32_avx2,
		[WIRE_F16] = sum_f16_avx2,
		[WIRE_BF16] = sum_bf16_avx2,
	},
};
