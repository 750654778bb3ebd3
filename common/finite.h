/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * finite.h - is every element of an array finite (no NaN, no +-Inf)? For
 * PS mode's non-finite policy (docs/protocol.md "Non-finite gradients"):
 * the engine checks each summed gradient before the optimizer step, and
 * the control plane checks a checkpoint before it restores it.
 *
 * Rules: pure, no globals; bit tests on the encodings (an element is not
 * finite when its exponent field is all ones), so the answer does not
 * depend on the FPU's modes, and the f32 loop is branch-free integer ORs,
 * eight lanes at a time. Loads go through memcpy: sources may be
 * 2-byte aligned only (held payloads, engine.h).
 */
#ifndef PBOX_FINITE_H
#define PBOX_FINITE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/wire.h"

/* Eight lanes at a time (GCC's vector extension: SSE2 pairs on the
 * baseline, one AVX2 register where the unit is built for it). */
typedef uint32_t finite_u32x8 __attribute__((vector_size(32)));

/* 1 if all n fp32 values at p are finite, else 0. Per completed PS round:
 * one pass, no early exit (a non-finite value is the rare case). An
 * exponent of all ones (0x7f800000) plus 0x00800000 carries into bit 31. */
static inline int finite_all_f32(const float *p, size_t n)
{
	finite_u32x8 acc = { 0 };
	uint32_t bad = 0;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		finite_u32x8 b;
		memcpy(&b, &p[i], sizeof(b));
		acc |= (b & 0x7f800000u) + 0x00800000u;
	}
	for (unsigned l = 0; l < 8; l++)
		bad |= acc[l];
	for (; i < n; i++) {
		uint32_t b;
		memcpy(&b, &p[i], sizeof(b));
		bad |= (b & 0x7f800000u) + 0x00800000u;
	}
	return !(bad & 0x80000000u);
}

/* Index of the first non-finite element of the n values of dtype (enum
 * wire_dtype) at p, or n when all are finite. Scalar: for the rare path
 * (naming the offender) and for checks off the data path. */
static inline size_t finite_first(const void *p, size_t n, unsigned dtype)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		if (dtype == WIRE_F32) {
			uint32_t v;
			memcpy(&v, b + 4 * i, sizeof(v));
			if ((v & 0x7f800000u) == 0x7f800000u)
				return i;
		} else {
			uint16_t v;
			memcpy(&v, b + 2 * i, sizeof(v));
			uint16_t e = dtype == WIRE_F16 ? 0x7c00u : 0x7f80u; /* bf16 */
			if ((v & e) == e)
				return i;
		}
	}
	return n;
}

#endif
