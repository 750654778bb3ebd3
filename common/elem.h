/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * elem.h - the per-element code that the CPU and the GPU share: the
 * f32 <-> f16/bf16 conversions, the scale of a cast copy, and the
 * comparisons of the top-k selection.
 *
 * One copy of each rule, compiled three ways: by gcc into the sum kernels
 * (their scalar code and SIMD tails), the CPU references of the copies
 * (common/cast.c) and of top-k (common/topk.c); and by nvcc into the
 * device kernels (gpu/cast.cu, gpu/topk.cu), where PBOX_HD makes each function
 * __host__ __device__. So a device kernel computes the same bits as its
 * CPU reference by construction; the unit tests run the references
 * (tests/unit/test_cast.c), the device test compares the two on a GPU
 * (tests/gpu/kernels.c).
 *
 * The rules (the same on every CPU and GPU):
 *  - f16 -> f32: exact; a signalling NaN is quieted (as vcvtph2ps does).
 *  - f32 -> f16: round to nearest even, overflow to infinity, subnormal
 *    halves rounded from the full significand; a NaN keeps its sign and
 *    the top 9 payload bits and is quieted (as vcvtps2ph does).
 *  - bf16 -> f32: exact (the bits shifted up; NaNs unchanged).
 *  - f32 -> bf16: round to nearest even; a NaN keeps its sign and the top
 *    6 payload bits and is quieted.
 *  - scale: x * scale in binary32 (one rounding, subnormals kept: no
 *    FTZ/DAZ, nothing fused); scale 1 leaves x untouched (NaN payloads
 *    included); a NaN product of another scale is the canonical quiet NaN
 *    ELEM_CANON_NAN, because which NaN a multiply returns differs between
 *    x86 (the operand, quieted; 0xffc00000 for inf * 0) and NVIDIA GPUs
 *    (always 0x7fffffff).
 *  - top-k: a NaN's magnitude is +inf's (so gradients that hold NaN are
 *    sent, not kept back in the residual), and e + g of the error
 *    feedback is canonical when NaN (the scale's rule: the GPU's add
 *    returns another NaN than x86's).
 * Integer code only, apart from the scale's multiply and the subnormal
 * half's exact multiply: no rounding mode or FTZ setting changes a result.
 */
#ifndef PBOX_ELEM_H
#define PBOX_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/gpu_ops.h"

#ifdef __CUDACC__
#define PBOX_HD __host__ __device__
#else
#define PBOX_HD
#endif

#define ELEM_CANON_NAN 0x7fc00000u /* f16 0x7e00, bf16 0x7fc0 */

static inline PBOX_HD uint32_t elem_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
#endif
}

static inline PBOX_HD float elem_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
#endif
}

/* half -> float, exact; sNaN quieted. */
static inline PBOX_HD float elem_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;

	if (exp == 0x1f) /* inf, or NaN (quiet bit forced) */
		return elem_bits_f32(sign | 0x7f800000u | (mant << 13) |
				     (mant ? 0x00400000u : 0));
	if (exp != 0)
		return elem_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
	/* zero or subnormal: mant * 2^-24, exact in binary32 */
	float m = (float)mant * 0x1p-24f;
	return sign ? -m : m;
}

/* float -> half, round to nearest even; NaN quieted, sign and top bits kept. */
static inline PBOX_HD uint16_t elem_f2h(float f)
{
	uint32_t u = elem_f32_bits(f);
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
static inline PBOX_HD float elem_b2f(uint16_t b)
{
	return elem_bits_f32((uint32_t)b << 16);
}

/* float -> bf16, round to nearest even; NaN quieted, sign and top bits kept. */
static inline PBOX_HD uint16_t elem_f2b(float f)
{
	uint32_t u = elem_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* ---- cast copies (common/cast.h, gpu/cast.cu) ---- */

/* Element i of an array of dt, widened to float (exact). */
static inline PBOX_HD float elem_load(const void *p, enum gpu_dtype dt, size_t i)
{
	if (dt == GPU_F16)
		return elem_h2f(((const uint16_t *)p)[i]);
	if (dt == GPU_BF16)
		return elem_b2f(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}

/* Element i of an array of dt = v, rounded to nearest even. */
static inline PBOX_HD void elem_store(void *p, enum gpu_dtype dt, size_t i, float v)
{
	if (dt == GPU_F16)
		((uint16_t *)p)[i] = elem_f2h(v);
	else if (dt == GPU_BF16)
		((uint16_t *)p)[i] = elem_f2b(v);
	else
		((float *)p)[i] = v;
}

/* x * scale; scale 1 returns x itself, a NaN product is canonical. */
static inline PBOX_HD float elem_scale(float x, float scale)
{
	float v;

	if (scale == 1.0f)
		return x;
	v = x * scale;
	return v != v ? elem_bits_f32(ELEM_CANON_NAN) : v;
}

/* One element of a cast copy: dst[i] = (dst_dt) (src[i] * scale). */
static inline PBOX_HD void elem_cast(void *dst, enum gpu_dtype dst_dt, const void *src,
				     enum gpu_dtype src_dt, size_t i, float scale)
{
	elem_store(dst, dst_dt, i, elem_scale(elem_load(src, src_dt, i), scale));
}

/* ---- top-k (common/topk.c, gpu/topk.cu) ---- */

/* e + g of error feedback: a NaN sum is the canonical quiet NaN. */
static inline PBOX_HD float elem_topk_add(float e, float g)
{
	float v = e + g;

	return v != v ? elem_bits_f32(ELEM_CANON_NAN) : v;
}

/* The magnitude top-k ranks v by: |v|, a NaN's being +inf's. */
static inline PBOX_HD float elem_topk_mag(float v)
{
	float a = fabsf(v);

	return a != a ? INFINITY : a;
}

/* Does v pass the threshold t (0 <= t <= +inf; a NaN t: nothing does)? */
static inline PBOX_HD int elem_topk_keep(float v, float t)
{
	return elem_topk_mag(v) >= t;
}

/* The final band of an exact take (lo <= hi; a NaN hi: above every
 * magnitude): 2 if |v| >= hi (always kept), 1 if lo <= |v| < hi (kept in
 * index order while the band lasts), 0 otherwise; |v| as elem_topk_mag. */
static inline PBOX_HD int elem_topk_class(float v, float lo, float hi)
{
	float a = elem_topk_mag(v);

	return a >= hi ? 2 : a >= lo;
}

#endif
