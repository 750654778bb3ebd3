/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_impl.h - what the top-k kernel variants share (common/topk.h): the
 * per-element rule and the variant tables. Private to common/topk*.c.
 *
 * Magnitudes are compared as floats (elem_topk_mag(x) >= t, a NaN's
 * magnitude +inf's: elem_topk_keep of common/elem.h, which the device
 * kernels share; the vector variants compare "not less than, unordered",
 * the same for the thresholds 0 <= t <= inf they are given), and e + g is
 * elem_topk_add (a NaN sum canonical), so every variant agrees with the
 * scalar one on every input, bit for bit.
 */
#ifndef PBOX_TOPK_IMPL_H
#define PBOX_TOPK_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/elem.h"
#include "common/topk.h"

extern const struct topk_kernels topk_kernels_scalar;
extern const struct topk_kernels topk_kernels_avx2;
extern const struct topk_kernels topk_kernels_avx512;

/* The scalar tail of every variant's count: elements [from, n). */
static inline void topk_count_tail(const float *x, size_t from, size_t n, const float *t,
				   unsigned nt, uint64_t *counts)
{
	for (size_t i = from; i < n; i++)
		for (unsigned j = 0; j < nt; j++)
			counts[j] += elem_topk_keep(x[i], t[j]);
}

/* The scalar tail of every variant's pass: elements [from, n), m entries
 * passed so far; returns the new m. */
static inline size_t topk_pass_tail(float *x, float *g, size_t from, size_t n, float t,
				    uint32_t *idx, float *val, size_t cap, unsigned flags, size_t m)
{
	for (size_t i = from; i < n; i++) {
		float v = g ? elem_topk_add(x[i], g[i]) : x[i];
		if (g) {
			x[i] = v;
			if (flags & TOPK_CLEAR_G)
				g[i] = 0;
		}
		if (elem_topk_keep(v, t)) {
			if (m < cap) {
				idx[m] = (uint32_t)i;
				val[m] = v;
				if (flags & TOPK_ZERO_KEPT)
					x[i] = 0;
			}
			m++;
		}
	}
	return m;
}

#endif
