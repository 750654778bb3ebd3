/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * finite.c - finite_all_f32 on the baseline x86-64 (SSE2: 4 lanes, two
 * vectors per iteration, GCC's vector extension; a wider type is split
 * and spilled to the stack there, 4x slower) and the pick of the variant.
 */
#include "common/finite.h"

typedef uint32_t finite_u32x4 __attribute__((vector_size(16)));

static int all_base(const void *p, size_t n)
{
	const uint8_t *b = p;
	finite_u32x4 a0 = { 0 }, a1 = { 0 };
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		finite_u32x4 b0, b1;
		memcpy(&b0, b + 4 * i, sizeof(b0));
		memcpy(&b1, b + 4 * (i + 4), sizeof(b1));
		a0 |= (b0 & 0x7f800000u) + 0x00800000u;
		a1 |= (b1 & 0x7f800000u) + 0x00800000u;
	}
	a0 |= a1;
	uint32_t bad = a0[0] | a0[1] | a0[2] | a0[3];
	for (; i < n; i++) {
		uint32_t v;
		memcpy(&v, b + 4 * i, sizeof(v));
		bad |= finite_bad_bits(v);
	}
	return !(bad & 0x80000000u);
}

int finite_all_f32_variant(const void *p, size_t n, int avx2)
{
	return avx2 ? finite_all_f32_avx2(p, n) : all_base(p, n);
}

int finite_all_f32(const void *p, size_t n)
{
	return finite_all_f32_variant(p, n, __builtin_cpu_supports("avx2"));
}
