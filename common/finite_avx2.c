/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * finite_avx2.c - finite_all_f32 compiled for AVX2 (common/Makefile.inc):
 * 8 lanes to a vector, two vectors per iteration; the answer of the
 * baseline's (finite.c; tests/unit/test_engine_ps.c compares them).
 */
#include "common/finite.h"

typedef uint32_t finite_u32x8 __attribute__((vector_size(32)));

int finite_all_f32_avx2(const void *p, size_t n)
{
	const uint8_t *b = p;
	finite_u32x8 a0 = { 0 }, a1 = { 0 };
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		finite_u32x8 b0, b1;
		memcpy(&b0, b + 4 * i, sizeof(b0));
		memcpy(&b1, b + 4 * (i + 8), sizeof(b1));
		a0 |= (b0 & 0x7f800000u) + 0x00800000u;
		a1 |= (b1 & 0x7f800000u) + 0x00800000u;
	}
	a0 |= a1;
	uint32_t bad = 0;
	for (unsigned l = 0; l < 8; l++)
		bad |= a0[l];
	for (; i < n; i++) {
		uint32_t v;
		memcpy(&v, b + 4 * i, sizeof(v));
		bad |= finite_bad_bits(v);
	}
	return !(bad & 0x80000000u);
}
