/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum.h - the N-way, rank-ordered sum kernels.
 *
 * dst[i] = ((src[0][i] + src[1][i]) + src[2][i]) + ... + src[n-1][i]
 * accumulated in binary32; F16 and BF16 inputs are widened exactly and the
 * result rounded once to nearest-even. Every variant (scalar, AVX2,
 * AVX-512) produces the same bits as the scalar reference for every input,
 * NaNs included, so results never depend on the CPU that computed them.
 * Shared by the box (engine) and benchmarks; selected once at start-up.
 */
#ifndef PBOX_SUM_H
#define PBOX_SUM_H

#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

/* n >= 1 sources of count elements each; dst may alias no source. */
typedef void (*sum_fn)(void *dst, const void *const *src, unsigned n, size_t count);

struct sum_kernels {
	const char *name;          /* "scalar", "avx2", "avx512" */
	sum_fn fn[WIRE_NDTYPES];   /* indexed by enum wire_dtype */
};

/* The fastest variant this CPU supports; the environment variable
 * PBOX_KERNEL=scalar|avx2|avx512 forces one (ignored if unsupported). */
const struct sum_kernels *sum_best(void);

/* sum_best's choice made once per process (the first call reads
 * PBOX_KERNEL and names a bad one; later calls repeat that choice): for
 * callers that ask at every call (top-k), so a bad PBOX_KERNEL is named
 * once, not once per call. */
const struct sum_kernels *sum_chosen(void);

/* sum_best's choice for want (the value of PBOX_KERNEL, may be NULL),
 * with the warning to show in warn ("" if none) instead of on stderr. */
const struct sum_kernels *sum_pick(const char *want, char *warn, size_t warnlen);

/* The named variant, or NULL if unknown or not supported by this CPU. */
const struct sum_kernels *sum_by_name(const char *name);

/* PS mode (engine): n >= 1 sources of count 16-bit elements (WIRE_F16 or
 * WIRE_BF16) summed into binary32 dst in rank order, not rounded back (the
 * NaN rule of the kernels); and count binary32 values rounded to dtype
 * (WIRE_F32: copied). Scalar, the same on every CPU. */
void sum_widen(float *dst, const void *const *src, unsigned n, size_t count, unsigned dtype);
void sum_narrow(void *dst, const float *src, size_t count, unsigned dtype);

/* Scalar conversions, the reference for every variant. */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);     /* round to nearest even */
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);     /* round to nearest even */

#endif
