/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum_impl.h - private to the sum kernels (sum*.c): the variant tables and
 * the scalar per-element code every variant shares.
 *
 * The per-element functions here are the reference: the scalar kernels are
 * loops over them, and the SIMD kernels call them for the tail elements
 * that do not fill a vector. The SIMD main loops reproduce them exactly.
 *
 * NaN rules (the same in every variant, so no result depends on the CPU):
 *  - n == 1 is a copy: the input bits come back unchanged, NaNs included.
 *  - n >= 2: a NaN sum (a NaN input, or inf + -inf) is stored as the
 *    canonical quiet NaN SUM_CANON_NAN (0x7fc00000; f16 0x7e00, bf16
 *    0x7fc0). Which NaN payload an x86 add returns depends on which operand
 *    the compiler put first, so payloads cannot be kept reproducibly.
 *  - half -> float: exact, a signalling NaN is quieted (as vcvtph2ps does).
 *  - float -> half: round to nearest even; a NaN keeps its sign and the top
 *    9 payload bits and is quieted (as vcvtps2ph does).
 *  - bf16 -> float: exact (the bits shifted up; NaNs unchanged).
 *  - float -> bf16: round to nearest even; a NaN keeps its sign and the top
 *    6 payload bits and is quieted.
 */
#ifndef PBOX_SUM_IMPL_H
#define PBOX_SUM_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/sum.h"

#define SUM_CANON_NAN 0x7fc00000u

extern const struct sum_kernels sum_kernels_scalar;
extern const struct sum_kernels sum_kernels_avx2;
extern const struct sum_kernels sum_kernels_avx512;

static inline uint32_t sum_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float sum_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* half -> float, exact; sNaN quieted. */
static inline float sum_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;

	if (exp == 0x1f) /* inf, or NaN (quiet bit forced) */
		return sum_bits_f32(sign | 0x7f800000u | (mant << 13) |
				    (mant ? 0x00400000u : 0));
	if (exp != 0)
		return sum_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
	/* zero or subnormal: mant * 2^-24, exact in binary32 */
	float m = (float)mant * 0x1p-24f;
	return sign ? -m : m;
}

/* float -> half, round to nearest even; NaN quieted, sign and top bits kept. */
static inline uint16_t sum_f2h(float f)
{
	uint32_t u = sum_f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t abs = u & 0x7fffffffu;

	if (abs >= 0x7f800000u) /* inf or NaN */
		return (uint16_t)(sign | 0x7c00u |
				  (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0));
	if (abs >= 0x477ff000u) /* rounds to >= 2^16: overflow */
		return (uint16_t)(sign | 0x7c00u);
	if (abs >= 0x38800000u) { /* normal half (>= 2^-14) */
		uint32_t r = abs - (112u << 23); /* rebias exponent */
		r += 0xfffu + ((r >> 13) & 1u);  /* round to nearest even */
		return (uint16_t)(sign | (r >> 13));
	}
	if (abs < 0x33000000u) /* below half of the smallest subnormal */
		return sign;
	/* subnormal half: value = m * 2^-24, shift the full significand */
	uint32_t e = abs >> 23;           /* 102 .. 112 */
	uint32_t m = (abs & 0x7fffffu) | 0x800000u;
	uint32_t shift = 126 - e;         /* 14 .. 24 */
	uint32_t q = m >> shift;
	uint32_t rem = m & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1u)))
		q++; /* may carry into the smallest normal: still correct */
	return (uint16_t)(sign | q);
}

/* bf16 -> float: exact. */
static inline float sum_b2f(uint16_t b)
{
	return sum_bits_f32((uint32_t)b << 16);
}

/* float -> bf16, round to nearest even; NaN quieted, sign and top bits kept. */
static inline uint16_t sum_f2b(float f)
{
	uint32_t u = sum_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* The canonical NaN rule for sums of n >= 2 sources. */
static inline float sum_canon(float acc)
{
	return acc != acc ? sum_bits_f32(SUM_CANON_NAN) : acc;
}

/* Element i of a source that may be only 2-byte aligned (a payload held in
 * place in a received packet, see engine.h): loaded with memcpy, which
 * compiles to one unaligned load. */
static inline float sum_ld_f32(const void *p, size_t i)
{
	float f;
	memcpy(&f, (const uint8_t *)p + i * sizeof(float), sizeof(f));
	return f;
}

/* Element i of an n >= 2 way sum, in rank order, one rounding at the end. */
static inline float sum_f32_elem(const void *const *src, unsigned n, size_t i)
{
	float acc = sum_ld_f32(src[0], i);
	for (unsigned k = 1; k < n; k++)
		acc += sum_ld_f32(src[k], i);
	return sum_canon(acc);
}

static inline uint16_t sum_f16_elem(const void *const *src, unsigned n, size_t i)
{
	float acc = sum_h2f(((const uint16_t *)src[0])[i]);
	for (unsigned k = 1; k < n; k++)
		acc += sum_h2f(((const uint16_t *)src[k])[i]);
	return sum_f2h(sum_canon(acc));
}

static inline uint16_t sum_bf16_elem(const void *const *src, unsigned n, size_t i)
{
	float acc = sum_b2f(((const uint16_t *)src[0])[i]);
	for (unsigned k = 1; k < n; k++)
		acc += sum_b2f(((const uint16_t *)src[k])[i]);
	return sum_f2b(sum_canon(acc));
}

/* Shared entry check: n == 1 copies, n == 0 leaves dst alone.
 * Returns 1 if the call is fully handled. */
static inline int sum_trivial(void *dst, const void *const *src, unsigned n,
			      size_t count, size_t esize)
{
	if (n >= 2)
		return 0;
	if (n == 1 && count != 0)
		memcpy(dst, src[0], count * esize);
	return 1;
}

#endif
