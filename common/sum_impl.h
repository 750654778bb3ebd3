/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum_impl.h - private to the sum kernels (sum*.c): the variant tables and
 * the scalar per-element code every variant shares.
 *
 * The per-element functions here and the conversions of common/elem.h
 * (elem_h2f, elem_f2h, elem_b2f, elem_f2b: shared with the GPU kernels)
 * are the reference: the scalar kernels are loops over them, and the SIMD
 * kernels call them for the tail elements that do not fill a vector. The
 * SIMD main loops reproduce them exactly.
 *
 * NaN rules (the same in every variant, so no result depends on the CPU):
 *  - n == 1 is a copy: the input bits come back unchanged, NaNs included.
 *  - n >= 2: a NaN sum (a NaN input, or inf + -inf) is stored as the
 *    canonical quiet NaN SUM_CANON_NAN (0x7fc00000; f16 0x7e00, bf16
 *    0x7fc0). Which NaN payload an x86 add returns depends on which operand
 *    the compiler put first, so payloads cannot be kept reproducibly.
 *  - the conversions' NaN and rounding rules: common/elem.h.
 */
#ifndef PBOX_SUM_IMPL_H
#define PBOX_SUM_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/elem.h"
#include "common/sum.h"

#define SUM_CANON_NAN ELEM_CANON_NAN

extern const struct sum_kernels sum_kernels_scalar;
extern const struct sum_kernels sum_kernels_avx2;
extern const struct sum_kernels sum_kernels_avx512;

/* The canonical NaN rule for sums of n >= 2 sources. */
static inline float sum_canon(float acc)
{
	return acc != acc ? elem_bits_f32(SUM_CANON_NAN) : acc;
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
	float acc = elem_h2f(((const uint16_t *)src[0])[i]);
	for (unsigned k = 1; k < n; k++)
		acc += elem_h2f(((const uint16_t *)src[k])[i]);
	return elem_f2h(sum_canon(acc));
}

static inline uint16_t sum_bf16_elem(const void *const *src, unsigned n, size_t i)
{
	float acc = elem_b2f(((const uint16_t *)src[0])[i]);
	for (unsigned k = 1; k < n; k++)
		acc += elem_b2f(((const uint16_t *)src[k])[i]);
	return elem_f2b(sum_canon(acc));
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
