/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_local_data.h - the inputs of the host-local tests' programs
 * (host_local_prog.c, host_local_ps.c): a value per (rank, element,
 * call) with fractional bits, so the order of the additions shows in a
 * sum, the same in every process.
 */
#ifndef PBOX_TESTS_HOST_LOCAL_DATA_H
#define PBOX_TESTS_HOST_LOCAL_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t hl_mix(uint32_t a, uint32_t b, uint32_t c)
{
	uint64_t x = ((uint64_t)a << 42) ^ ((uint64_t)b << 12) ^ c ^ 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (uint32_t)x;
}

/* rank r's value at element i of call k, in (-13.7, 13.7) */
static inline float hl_value(int r, size_t i, int k)
{
	return (float)((int)(hl_mix((uint32_t)r, (uint32_t)i, (uint32_t)k) % 20001u) - 10000) *
	       0.00137f;
}

static inline float hl_f_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t hl_u_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* f rounded to bf16, to nearest even (finite values only here) */
static inline uint16_t hl_to_bf16(float f)
{
	uint32_t u = hl_u_of(f);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float hl_from_bf16(uint16_t b)
{
	return hl_f_of((uint32_t)b << 16);
}

#endif
