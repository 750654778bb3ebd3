/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cast.c - cast_copy (common/cast.h), the CPU reference of the GPU
 * library's fused copies: every cast gives the bits of the sum code's
 * conversions (half_to_float, float_to_half, bf16_to_float,
 * float_to_bf16) for all 2^16 half and bf16 patterns and for millions of
 * f32 patterns (NaNs of both signs and any payload, infinities,
 * subnormals, -0, every rounding boundary and tie); a scaled cast equals
 * the double-rounded expectation computed here in binary64 (the exact
 * product rounded to binary32, then to the destination by nearbyint on its
 * grid); scale 1 with equal types is a memcpy (signalling NaNs kept).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/cast.h"
#include "common/sum.h"

#define BATCH 4096

static const char *const names[] = { "f32", "f16", "bf16" };

static uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* Patterns worth a look: specials, the half and bf16 rounding boundaries
 * and ties (from test_sum's cases), float subnormals. */
static const uint32_t special_f32[] = {
	0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
	0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
	0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu,
	0xffa12345u, 0xff802001u, 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x3f801000u,
	0x3f803000u, 0x3f801001u, 0x38800000u, 0x387fc000u, 0x387fe000u, 0x33800000u,
	0x33000000u, 0x33000001u, 0x33c00000u, 0x34200000u, 0x3f808000u, 0x3f818000u,
	0x3f808001u, 0x3f807fffu, 0x7f7f7fffu, 0x7f7f8000u, 0x00008000u, 0x00018000u,
	0x80010001u,
};
#define NSPECIAL (sizeof(special_f32) / sizeof(special_f32[0]))

/* The f32 test set, pattern j of it: the specials; then, for each sign
 * and exponent, mantissas on every 4096th step and their neighbours (the
 * half rounding boundaries and ties, and bf16's); then one in 1021 of all
 * 2^32 patterns; then random bits. */
#define GRID (2u * 256u * 2048u * 3u)
#define SPREAD (0x100000000ull / 1021u + 1u)
#define NF32 (NSPECIAL + GRID + SPREAD + 1000000u)

static uint32_t f32_pattern(size_t j, uint64_t *rng)
{
	if (j < NSPECIAL)
		return special_f32[j];
	j -= NSPECIAL;
	if (j < GRID) {
		uint32_t d = (uint32_t)(j % 3), m = (uint32_t)(j / 3 % 2048) << 12;
		uint32_t e = (uint32_t)(j / 3 / 2048 % 256), sign = (uint32_t)(j / 3 / 2048 / 256);
		return sign << 31 | e << 23 | ((m + d - 1) & 0x7fffffu);
	}
	j -= GRID;
	if (j < SPREAD)
		return (uint32_t)(j * 1021u);
	return (uint32_t)(rng_next(rng) >> 32);
}

/* ---- the binary64 expectation ----------------------------------------- */

/* v (finite) rounded to nearest even on the grid of a format with p
 * significand bits and minimum normal exponent emin, overflowing to
 * infinity at 2^(emax + 1). Exact in binary64: the quantum is a power of 2. */
static double round_to(double v, int p, int emin, int emax)
{
	int e;

	if (v == 0)
		return v;
	frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
	e -= 1;
	if (e < emin)
		e = emin;
	double q = ldexp(1.0, e - (p - 1));
	double r = nearbyint(v / q) * q;
	if (fabs(r) >= ldexp(1.0, emax + 1))
		return copysign(INFINITY, v);
	return r == 0 ? copysign(0.0, v) : r;
}

/* (dt) (x * scale) as cast_copy defines it, computed in binary64: the
 * product of two floats is exact there, rounded once to binary32 (the
 * conversion rounds to nearest even, subnormals included), then to dt. */
static double expect(float x, float scale, enum gpu_dtype dt)
{
	double p = scale == 1.0f ? (double)x : (double)(float)((double)x * (double)scale);

	if (isnan(p) || isinf(p) || dt == GPU_F32)
		return p;
	return dt == GPU_F16 ? round_to(p, 11, -14, 15) : round_to(p, 8, -126, 127);
}

/* Element i of a dt array as a float (exact; an f32 NaN's bits kept: it
 * never goes through a double, whose conversion would quiet it). */
static float widen(const void *p, enum gpu_dtype dt, size_t i)
{
	if (dt == GPU_F16)
		return half_to_float(((const uint16_t *)p)[i]);
	if (dt == GPU_BF16)
		return bf16_to_float(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}

static uint32_t bits(const void *p, enum gpu_dtype dt, size_t i)
{
	return dt == GPU_F32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}

/* The canonical NaN of a scaled cast, in dt. */
static uint32_t canon(enum gpu_dtype dt)
{
	return dt == GPU_F32 ? 0x7fc00000u : dt == GPU_F16 ? 0x7e00u : 0x7fc0u;
}

/* ---- the conversions: all patterns, bit for bit ------------------------ */

static void cast__f16_and_bf16_widen_like_sum_for_all_patterns(void **state)
{
	static uint16_t h[65536];
	static float f[65536];
	(void)state;

	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	cast_copy(f, GPU_F32, h, GPU_F16, 65536, 1.0f);
	for (uint32_t i = 0; i < 65536; i++)
		if (f2u(f[i]) != f2u(half_to_float(h[i])))
			fail_msg("f16 %04x -> %08x, half_to_float %08x", i, f2u(f[i]),
				 f2u(half_to_float(h[i])));
	cast_copy(f, GPU_F32, h, GPU_BF16, 65536, 1.0f);
	for (uint32_t i = 0; i < 65536; i++)
		if (f2u(f[i]) != f2u(bf16_to_float(h[i])))
			fail_msg("bf16 %04x -> %08x, bf16_to_float %08x", i, f2u(f[i]),
				 f2u(bf16_to_float(h[i])));
}

/* f16 <-> bf16 goes through binary32: each way, all 65536 patterns. */
static void cast__f16_bf16_both_ways_for_all_patterns(void **state)
{
	static uint16_t h[65536], o[65536];
	(void)state;

	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	cast_copy(o, GPU_BF16, h, GPU_F16, 65536, 1.0f);
	for (uint32_t i = 0; i < 65536; i++)
		if (o[i] != float_to_bf16(half_to_float(h[i])))
			fail_msg("f16 %04x -> bf16 %04x, want %04x", i, o[i],
				 float_to_bf16(half_to_float(h[i])));
	cast_copy(o, GPU_F16, h, GPU_BF16, 65536, 1.0f);
	for (uint32_t i = 0; i < 65536; i++)
		if (o[i] != float_to_half(bf16_to_float(h[i])))
			fail_msg("bf16 %04x -> f16 %04x, want %04x", i, o[i],
				 float_to_half(bf16_to_float(h[i])));
}

/* f32 -> f16 and f32 -> bf16 over the f32 test set: the sum code's bits,
 * and the binary64 expectation's value (NaNs: sign and top payload bits,
 * quieted, as elem.h says). */
static void cast__f32_narrows_like_sum_and_binary64(void **state)
{
	static float f[BATCH];
	static uint16_t h[BATCH], b[BATCH];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	(void)state;

	for (size_t base = 0; base < NF32; base += BATCH) {
		size_t n = NF32 - base < BATCH ? NF32 - base : BATCH;
		for (size_t i = 0; i < n; i++)
			f[i] = u2f(f32_pattern(base + i, &rng));
		cast_copy(h, GPU_F16, f, GPU_F32, n, 1.0f);
		cast_copy(b, GPU_BF16, f, GPU_F32, n, 1.0f);
		for (size_t i = 0; i < n; i++) {
			uint32_t u = f2u(f[i]);
			if (h[i] != float_to_half(f[i]))
				fail_msg("f32 %08x -> f16 %04x, float_to_half %04x", u, h[i],
					 float_to_half(f[i]));
			if (b[i] != float_to_bf16(f[i]))
				fail_msg("f32 %08x -> bf16 %04x, float_to_bf16 %04x", u, b[i],
					 float_to_bf16(f[i]));
			if (isnan(f[i])) {
				uint16_t wh = (uint16_t)((u >> 16 & 0x8000u) | 0x7e00u | (u >> 13 & 0x3ffu));
				uint16_t wb = (uint16_t)(u >> 16 | 0x40u);
				if (h[i] != wh || b[i] != wb)
					fail_msg("NaN %08x -> f16 %04x bf16 %04x, want %04x %04x",
						 u, h[i], b[i], wh, wb);
				continue;
			}
			double wh = expect(f[i], 1.0f, GPU_F16), wb = expect(f[i], 1.0f, GPU_BF16);
			double gh = widen(h, GPU_F16, i), gb = widen(b, GPU_BF16, i);
			if (gh != wh || signbit(gh) != signbit(wh))
				fail_msg("f32 %08x -> f16 %04x = %a, binary64 says %a", u, h[i], gh, wh);
			if (gb != wb || signbit(gb) != signbit(wb))
				fail_msg("f32 %08x -> bf16 %04x = %a, binary64 says %a", u, b[i], gb, wb);
		}
	}
}

/* Equal types and scale 1: the bytes come back as they were, signalling
 * NaNs included (a trip through binary32 would quiet an f16 one). */
static void cast__same_type_scale_one_is_memcpy(void **state)
{
	static uint32_t src[BATCH], dst[BATCH];
	uint64_t rng = 7;
	(void)state;

	for (size_t i = 0; i < BATCH; i++)
		src[i] = i < NSPECIAL ? special_f32[i] : (uint32_t)(rng_next(&rng) >> 32);
	src[1] = 0x7c017d01u; /* two f16 signalling NaNs */
	for (int dt = GPU_F32; dt <= GPU_BF16; dt++) {
		memset(dst, 0xa5, sizeof(dst));
		cast_copy(dst, (enum gpu_dtype)dt, src, (enum gpu_dtype)dt, BATCH - 1, 1.0f);
		size_t bytes = (BATCH - 1) * cast_size((enum gpu_dtype)dt);
		assert_memory_equal(dst, src, bytes);
		assert_int_equal(((uint8_t *)dst)[bytes], 0xa5); /* nothing past count */
	}
	memset(dst, 0xa5, sizeof(dst));
	cast_copy(dst, GPU_F16, src, GPU_F32, 0, 0.5f); /* count 0: nothing */
	cast_copy(dst, GPU_F32, src, GPU_F32, 0, 1.0f);
	assert_int_equal(dst[0], 0xa5a5a5a5u);
}

/* Every pair of types and a range of scales (exact ones that keep the
 * ties ties, inexact ones, underflow to subnormals, overflow, 0, -0, inf,
 * NaN), over the f32 set (and all half and bf16 patterns as sources):
 * the double-rounded binary64 value; NaN products canonical. */
static void check_scaled(const void *src, enum gpu_dtype sd, size_t n, float scale,
			 enum gpu_dtype dd, void *dst)
{
	cast_copy(dst, dd, src, sd, n, scale);
	for (size_t i = 0; i < n; i++) {
		float x = widen(src, sd, i);
		double want = expect(x, scale, dd), got = widen(dst, dd, i);
		if (isnan(want)) {
			/* scale 1: the conversion's NaN; else canonical */
			uint32_t w = scale != 1.0f ? canon(dd)
				   : dd == GPU_F32 ? f2u(x)
				   : dd == GPU_F16 ? float_to_half(x) : float_to_bf16(x);
			if (bits(dst, dd, i) != w)
				fail_msg("%s %08x * %a -> %s NaN %08x, want %08x", names[sd],
					 bits(src, sd, i), (double)scale, names[dd],
					 bits(dst, dd, i), w);
		} else if (got != want || signbit(got) != signbit(want)) {
			fail_msg("%s %08x * %a -> %s %08x = %a, binary64 says %a", names[sd],
				 bits(src, sd, i), (double)scale, names[dd], bits(dst, dd, i),
				 got, want);
		}
	}
}

static const float scales[] = {
	1.0f, 0.5f, 0.25f, 2.0f, -1.0f, 1.0f / 3.0f, 1.0f / 7.0f, -3.0f, 0x1.000002p0f,
	1e-30f, 1e30f, 0x1p-140f, 0.0f, -0.0f, INFINITY, NAN,
};
#define NSCALES (sizeof(scales) / sizeof(scales[0]))

static void cast__scaled_matches_double_rounding(void **state)
{
	static float f[BATCH];
	static uint16_t h[65536];
	static uint32_t out[65536];
	uint64_t rng = 0x1234567ull;
	(void)state;

	/* f32 sources: the specials, the boundary grid and random bits,
	 * one batch in every 16 (about 1.2 M values per scale and type) */
	for (size_t base = 0; base < NF32; base += 16 * BATCH) {
		size_t n = NF32 - base < BATCH ? NF32 - base : BATCH;
		for (size_t i = 0; i < n; i++)
			f[i] = u2f(f32_pattern(base + i, &rng));
		for (size_t s = 0; s < NSCALES; s++)
			for (int dd = GPU_F32; dd <= GPU_BF16; dd++)
				check_scaled(f, GPU_F32, n, scales[s], (enum gpu_dtype)dd, out);
	}
	/* f16 and bf16 sources: all patterns */
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	for (size_t s = 0; s < NSCALES; s++)
		for (int sd = GPU_F16; sd <= GPU_BF16; sd++)
			for (int dd = GPU_F32; dd <= GPU_BF16; dd++)
				if (sd != dd || scales[s] != 1.0f)
					check_scaled(h, (enum gpu_dtype)sd, 65536, scales[s],
						     (enum gpu_dtype)dd, out);
}

/* A few values by hand, so the rules read as numbers too. */
static void cast__known_values(void **state)
{
	float f[4] = { 3.0f, -0.0f, 65520.0f, 1e-8f };
	uint16_t h[4];
	float back[4];
	(void)state;

	cast_copy(h, GPU_F16, f, GPU_F32, 4, 0.5f);
	assert_int_equal(h[0], 0x3e00); /* 1.5 */
	assert_int_equal(h[1], 0x8000); /* -0 */
	assert_int_equal(h[2], 0x7800); /* 32760 -> 32768 (tie to even) */
	assert_int_equal(h[3], 0x0000); /* 5e-9 -> 0 (below 2^-25) */
	cast_copy(back, GPU_F32, h, GPU_F16, 2, 4.0f);
	assert_true(back[0] == 6.0f);
	assert_int_equal(f2u(back[1]), 0x80000000u);
	f[0] = INFINITY;
	cast_copy(h, GPU_BF16, f, GPU_F32, 1, 0.0f); /* inf * 0: canonical NaN */
	assert_int_equal(h[0], 0x7fc0);
	assert_int_equal(cast_size(GPU_F32), 4);
	assert_int_equal(cast_size(GPU_BF16), 2);
	assert_int_equal(cast_size((enum gpu_dtype)7), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cast__f16_and_bf16_widen_like_sum_for_all_patterns),
		cmocka_unit_test(cast__f16_bf16_both_ways_for_all_patterns),
		cmocka_unit_test(cast__f32_narrows_like_sum_and_binary64),
		cmocka_unit_test(cast__same_type_scale_one_is_memcpy),
		cmocka_unit_test(cast__scaled_matches_double_rounding),
		cmocka_unit_test(cast__known_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
