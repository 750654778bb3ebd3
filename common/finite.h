/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * finite.h - is every element of an array finite (no NaN, no +-Inf)? For
 * PS mode's non-finite policy (docs/protocol.md "Non-finite gradients"):
 * the engine checks each summed gradient before the optimizer step, and
 * the control plane checks a checkpoint before it restores it.
 *
 * Rules: pure, no globals; bit tests on the encodings (an element is not
 * finite when its exponent field is all ones), so the answer does not
 * depend on the FPU's modes, and the f32 loop is branch-free integer ORs
 * on vectors (finite.c: 4 lanes, SSE2; finite_avx2.c: 8 lanes). Loads go through memcpy: sources may be
 * 2-byte aligned only (held payloads, engine.h).
 */
#ifndef PBOX_FINITE_H
#define PBOX_FINITE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/wire.h"

/* 1 if all n fp32 values at p (any alignment) are finite, else 0. Per completed PS round:
 * one pass, no early exit (a non-finite value is the rare case). The
 * AVX2 variant where the CPU has it (finite_avx2.c; the same answer). */
int finite_all_f32(const void *p, size_t n);

/* The variants: avx2 0 = the baseline build (SSE2), 1 = AVX2 (the CPU
 * must have it). */
int finite_all_f32_variant(const void *p, size_t n, int avx2);
int finite_all_f32_avx2(const void *p, size_t n);

/* One element's bits: bit 31 set when its exponent is all ones (NaN or
 * Inf): 0x7f800000 plus 0x00800000 carries into it. */
static inline uint32_t finite_bad_bits(uint32_t b)
{
	return (b & 0x7f800000u) + 0x00800000u;
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
