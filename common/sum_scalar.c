/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum_scalar.c - the reference sum kernels: portable C, one element at a
 * time, additions in rank order in binary32 and one rounding at the end.
 * The SIMD variants must give these exact bits (sum_impl.h has the rules).
 */
#include "common/sum_impl.h"

static void sum_f32_scalar(void *dst, const void *const *src, unsigned n, size_t count)
{
	float *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = 0; i < count; i++)
		d[i] = sum_f32_elem(src, n, i);
}

static void sum_f16_scalar(void *dst, const void *const *src, unsigned n, size_t count)
{
	uint16_t *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = 0; i < count; i++)
		d[i] = sum_f16_elem(src, n, i);
}

static void sum_bf16_scalar(void *dst, const void *const *src, unsigned n, size_t count)
{
	uint16_t *d = dst;

	if (sum_trivial(dst, src, n, count, sizeof(*d)))
		return;
	for (size_t i = 0; i < count; i++)
		d[i] = sum_bf16_elem(src, n, i);
}

const struct sum_kernels sum_kernels_scalar = {
	.name = "scalar",
	.fn = {
		[WIRE_F32] = sum_f32_scalar,
		[WIRE_F16] = sum_f16_scalar,
		[WIRE_BF16] = sum_bf16_scalar,
	},
};
