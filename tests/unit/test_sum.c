/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sum.c - the N-way sum kernels and the scalar conversions: every SIMD
 * variant gives the scalar reference's exact bits (NaN, Inf, subnormals and
 * -0 included), the reference sums in rank order and rounds once, the
 * conversions round to nearest even and treat NaNs as F16C does, every
 * variant's f16 and bf16 sums of all 65536 patterns equal a binary64
 * reference and match torch 1.13's results, and variant selection
 * (sum_best, sum_by_name, PBOX_KERNEL) works.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cpuid.h>
#include <math.h>
#include <immintrin.h>

#include "common/sum.h"

#define MAX_SRC 16

static const size_t counts[] = { 0, 1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 4097 };
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static const char *const dtype_names[WIRE_NDTYPES] = { "f32", "f16", "bf16" };

/* ---- small helpers ---------------------------------------------------- */

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

enum fill { FILL_BITS, FILL_VALUES };

/* Any bit pattern, with NaNs (quiet and signalling, both signs, random
 * payloads), infinities, zeros and subnormals much more often than chance. */
static uint32_t rand_f32_bits(uint64_t *s)
{
	uint64_t r = rng_next(s);
	uint32_t sign = (uint32_t)(r >> 63) << 31, pay = (uint32_t)(r >> 8) & 0x7fffffu;

	switch (r & 15) {
	case 0: return sign | 0x7f800000u | (pay ? pay : 1);     /* NaN */
	case 1: return sign | 0x7f800000u;                       /* Inf */
	case 2: return sign;                                     /* +-0 */
	case 3: case 4: return sign | pay;                       /* subnormal */
	case 5: return sign | 0x7f7fffffu;                       /* max */
	default: return (uint32_t)(r >> 32);
	}
}

static uint16_t rand_16_bits(uint64_t *s, uint16_t exp_mask, uint16_t quiet)
{
	uint64_t r = rng_next(s);
	uint16_t sign = (uint16_t)((r >> 63) << 15), pay = (uint16_t)((r >> 8) & ~(exp_mask | 0x8000u));

	switch (r & 15) {
	case 0: return (uint16_t)(sign | exp_mask | (pay ? pay : quiet)); /* NaN */
	case 1: return (uint16_t)(sign | exp_mask);                       /* Inf */
	case 2: return sign;                                              /* +-0 */
	case 3: case 4: return (uint16_t)(sign | pay);                    /* subnormal */
	default: return (uint16_t)(r >> 32);
	}
}

/* Ordinary values: f32 with exponents in [-20, 20]; halves and bf16 drawn
 * from the middle of their exponent range so partial sums stay finite. */
static uint32_t rand_f32_value(uint64_t *s)
{
	uint64_t r = rng_next(s);
	uint32_t exp = 127 - 20 + (uint32_t)(r % 41);
	return (uint32_t)((r >> 63) << 31) | (exp << 23) | ((uint32_t)(r >> 16) & 0x7fffffu);
}

static uint16_t rand_f16_value(uint64_t *s)
{
	uint64_t r = rng_next(s);
	uint16_t exp = (uint16_t)(5 + r % 20);
	return (uint16_t)(((r >> 63) << 15) | (exp << 10) | ((r >> 16) & 0x3ffu));
}

static uint16_t rand_bf16_value(uint64_t *s)
{
	uint64_t r = rng_next(s);
	uint16_t exp = (uint16_t)(127 - 20 + r % 41);
	return (uint16_t)(((r >> 63) << 15) | (exp << 7) | ((r >> 16) & 0x7fu));
}

static void fill(void *buf, unsigned dtype, size_t count, enum fill how, uint64_t *s)
{
	for (size_t i = 0; i < count; i++) {
		if (dtype == WIRE_F32) {
			uint32_t v = how == FILL_BITS ? rand_f32_bits(s) : rand_f32_value(s);
			memcpy((char *)buf + 4 * i, &v, 4);
		} else {
			uint16_t v;
			if (dtype == WIRE_F16)
				v = how == FILL_BITS ? rand_16_bits(s, 0x7c00u, 0x200u) : rand_f16_value(s);
			else
				v = how == FILL_BITS ? rand_16_bits(s, 0x7f80u, 0x40u) : rand_bf16_value(s);
			memcpy((char *)buf + 2 * i, &v, 2);
		}
	}
}

/* Sources of exactly count elements (so ASan sees any over-read), each
 * shifted by a different number of elements from malloc's alignment. */
struct srcs {
	void *base[MAX_SRC];
	const void *p[MAX_SRC];
};

static void srcs_alloc(struct srcs *s, unsigned dtype, size_t count, enum fill how, uint64_t *rng)
{
	size_t es = wire_dtype_size(dtype);

	for (unsigned k = 0; k < MAX_SRC; k++) {
		size_t shift = (k % 5) * es;
		size_t bytes = shift + count * es;
		s->base[k] = malloc(bytes ? bytes : 1);
		assert_non_null(s->base[k]);
		s->p[k] = (char *)s->base[k] + shift;
		fill((char *)s->base[k] + shift, dtype, count, how, rng);
	}
}

static void srcs_free(struct srcs *s)
{
	for (unsigned k = 0; k < MAX_SRC; k++)
		free(s->base[k]);
}

/* Skip (with the reason) when this CPU cannot run the named variant. */
static const struct sum_kernels *need_variant(const char *name)
{
	const struct sum_kernels *k = sum_by_name(name);

	if (k == NULL) {
		print_message("[  SKIPPED ] variant %s: this CPU lacks %s\n", name,
			      strcmp(name, "avx2") == 0 ? "AVX2 + F16C" :
			      "AVX-512 F/BW/VL + F16C");
		skip();
	}
	return k;
}

static int cpu_has_f16c(void)
{
	unsigned a, b, c, d;

	__builtin_cpu_init();
	return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static void need_f16c(void)
{
	if (!cpu_has_f16c()) {
		print_message("[  SKIPPED ] needs F16C (vcvtph2ps/vcvtps2ph) to compare with\n");
		skip();
	}
}

__attribute__((target("f16c"))) static uint16_t hw_f2h(float f)
{
	return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0);
}

__attribute__((target("f16c"))) static float hw_h2f(uint16_t h)
{
	return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* ---- every variant vs the scalar reference ---------------------------- */

/* One variant, one dtype, one fill: n = 1..16 x every count, bitwise,
 * and no byte written past dst[count - 1]. */
static void check_variant(const char *name, unsigned dtype, enum fill how)
{
	const struct sum_kernels *ref = sum_by_name("scalar");
	const struct sum_kernels *k = need_variant(name);
	size_t es = wire_dtype_size(dtype);
	uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)dtype << 32) ^ how;

	assert_non_null(ref);
	for (size_t c = 0; c < NCOUNTS; c++) {
		size_t count = counts[c];
		struct srcs s;
		srcs_alloc(&s, dtype, count, how, &rng);
		unsigned char *want = malloc(count * es + 64);
		unsigned char *got = malloc(count * es + 64 + 1);
		assert_non_null(want);
		assert_non_null(got);
		for (unsigned n = 1; n <= MAX_SRC; n++) {
			memset(want, 0xA5, count * es + 64);
			memset(got, 0xA5, count * es + 64 + 1);
			ref->fn[dtype](want, s.p, n, count);
			/* dst misaligned by one element too */
			k->fn[dtype](got + es, s.p, n, count);
			if (memcmp(want, got + es, count * es) != 0) {
				for (size_t i = 0; i < count * es; i++)
					if (want[i] != got[es + i])
						fail_msg("%s %s n=%u count=%zu: byte %zu is %02x, scalar %02x",
							 name, dtype_names[dtype], n, count, i,
							 got[es + i], want[i]);
			}
			assert_int_equal(got[0], 0xA5);
			for (size_t i = es + count * es; i < count * es + 64 + 1; i++)
				assert_int_equal(got[i], 0xA5);
		}
		free(want);
		free(got);
		srcs_free(&s);
	}
}

#define VARIANT_TEST(fn, var, dt, how)                                          \
	static void fn(void **state) { (void)state; check_variant(var, dt, how); }

VARIANT_TEST(sum_f32__avx2_matches_scalar_random_bits, "avx2", WIRE_F32, FILL_BITS)
VARIANT_TEST(sum_f32__avx2_matches_scalar_random_values, "avx2", WIRE_F32, FILL_VALUES)
VARIANT_TEST(sum_f16__avx2_matches_scalar_random_bits, "avx2", WIRE_F16, FILL_BITS)
VARIANT_TEST(sum_f16__avx2_matches_scalar_random_values, "avx2", WIRE_F16, FILL_VALUES)
VARIANT_TEST(sum_bf16__avx2_matches_scalar_random_bits, "avx2", WIRE_BF16, FILL_BITS)
VARIANT_TEST(sum_bf16__avx2_matches_scalar_random_values, "avx2", WIRE_BF16, FILL_VALUES)
VARIANT_TEST(sum_f32__avx512_matches_scalar_random_bits, "avx512", WIRE_F32, FILL_BITS)
VARIANT_TEST(sum_f32__avx512_matches_scalar_random_values, "avx512", WIRE_F32, FILL_VALUES)
VARIANT_TEST(sum_f16__avx512_matches_scalar_random_bits, "avx512", WIRE_F16, FILL_BITS)
VARIANT_TEST(sum_f16__avx512_matches_scalar_random_values, "avx512", WIRE_F16, FILL_VALUES)
VARIANT_TEST(sum_bf16__avx512_matches_scalar_random_bits, "avx512", WIRE_BF16, FILL_BITS)
VARIANT_TEST(sum_bf16__avx512_matches_scalar_random_values, "avx512", WIRE_BF16, FILL_VALUES)

/* ---- the reference's semantics --------------------------------------- */

static const char *const all_variants[] = { "scalar", "avx2", "avx512" };
#define NVARIANTS (sizeof(all_variants) / sizeof(all_variants[0]))

typedef void check_fn(const char *name, const void *dst, size_t count, const void *ctx);

/* Run every available variant on count elements of n sources, then check
 * its output (ctx is passed through to check). */
static void run_each(unsigned dtype, const void *const *src, unsigned n, size_t count,
		     check_fn *check, const void *ctx)
{
	unsigned char dst[64 * 4];

	for (size_t v = 0; v < NVARIANTS; v++) {
		const struct sum_kernels *k = sum_by_name(all_variants[v]);
		if (k == NULL) {
			print_message("note: variant %s not checked, CPU lacks it\n", all_variants[v]);
			continue;
		}
		memset(dst, 0xA5, sizeof(dst));
		k->fn[dtype](dst, src, n, count);
		check(all_variants[v], dst, count, ctx);
	}
}

static float f32_at(const void *p, size_t i)
{
	float f;
	memcpy(&f, (const char *)p + 4 * i, 4);
	return f;
}

static uint16_t u16_at(const void *p, size_t i)
{
	uint16_t h;
	memcpy(&h, (const char *)p + 2 * i, 2);
	return h;
}

/* ((1e8 + 1) - 1e8) is 0 in binary32 but ((1e8 - 1e8) + 1) is 1. */
static void check_rank_order(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	(void)name;
	assert_int_equal(count, 2);
	assert_true(f32_at(dst, 0) == 0.0f);
	assert_true(f32_at(dst, 1) == 1.0f);
}

static void sum_f32__adds_in_rank_order(void **state)
{
	(void)state;
	float a[2] = { 1e8f, 1e8f }, b[2] = { 1.0f, -1e8f }, c[2] = { -1e8f, 1.0f };
	const void *src[3] = { a, b, c };

	run_each(WIRE_F32, src, 3, 2, check_rank_order, NULL);
}

/* 1 + 2^-11 + 2^-11 is 1 + 2^-10 in binary32 (0x3c01); rounding to half
 * after each add would give 1.0 twice (ties to even). Same for bf16. */
static void check_f16_once(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	(void)name;
	assert_int_equal(count, 1);
	assert_int_equal(u16_at(dst, 0), 0x3c01);
}

static void check_bf16_once(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	(void)name;
	assert_int_equal(count, 1);
	assert_int_equal(u16_at(dst, 0), 0x3f81);
}

static void sum_f16__rounds_once_at_the_end(void **state)
{
	(void)state;
	uint16_t one = 0x3c00, tiny = 0x1000; /* 1.0, 2^-11 */
	const void *src[3] = { &one, &tiny, &tiny };

	run_each(WIRE_F16, src, 3, 1, check_f16_once, NULL);
}

static void sum_bf16__rounds_once_at_the_end(void **state)
{
	(void)state;
	uint16_t one = 0x3f80, tiny = 0x3b80; /* 1.0, 2^-8 */
	const void *src[3] = { &one, &tiny, &tiny };

	run_each(WIRE_BF16, src, 3, 1, check_bf16_once, NULL);
}

/* n >= 2: any NaN result is the canonical quiet NaN. Element 0: sNaN + 1,
 * 1: 1 + negative NaN with payload, 2: inf + -inf, 3: -0 + -0 (stays -0),
 * then 60 more of the first pattern to exercise the vector path. */

static void check_f32_nan(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < count; i++) {
		uint32_t want = i == 3 ? 0x80000000u : 0x7fc00000u, got = f2u(f32_at(dst, i));
		if (got != want)
			fail_msg("%s f32 element %zu: %08x, want %08x", name, i, got, want);
	}
}

static void check_f16_nan(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < count; i++) {
		uint16_t want = i == 3 ? 0x8000u : 0x7e00u, got = u16_at(dst, i);
		if (got != want)
			fail_msg("%s f16 element %zu: %04x, want %04x", name, i, got, want);
	}
}

static void check_bf16_nan(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < count; i++) {
		uint16_t want = i == 3 ? 0x8000u : 0x7fc0u, got = u16_at(dst, i);
		if (got != want)
			fail_msg("%s bf16 element %zu: %04x, want %04x", name, i, got, want);
	}
}

static void sum__nan_results_are_canonical(void **state)
{
	(void)state;
	uint32_t nan_a[64], nan_b[64];
	uint16_t nan_ha[64], nan_hb[64], nan_ba[64], nan_bb[64];

	for (size_t i = 0; i < 64; i++) {
		size_t p = i < 4 ? i : 0;
		static const uint32_t fa[4] = { 0x7f800001u, 0x3f800000u, 0x7f800000u, 0x80000000u };
		static const uint32_t fb[4] = { 0x3f800000u, 0xffc12345u, 0xff800000u, 0x80000000u };
		static const uint16_t ha[4] = { 0x7c01u, 0x3c00u, 0x7c00u, 0x8000u };
		static const uint16_t hb[4] = { 0x3c00u, 0xfe55u, 0xfc00u, 0x8000u };
		static const uint16_t ba[4] = { 0x7f81u, 0x3f80u, 0x7f80u, 0x8000u };
		static const uint16_t bb[4] = { 0x3f80u, 0xffd5u, 0xff80u, 0x8000u };
		nan_a[i] = fa[p], nan_b[i] = fb[p];
		nan_ha[i] = ha[p], nan_hb[i] = hb[p];
		nan_ba[i] = ba[p], nan_bb[i] = bb[p];
	}
	const void *f[2] = { nan_a, nan_b }, *h[2] = { nan_ha, nan_hb }, *b[2] = { nan_ba, nan_bb };

	run_each(WIRE_F32, f, 2, 64, check_f32_nan, NULL);
	run_each(WIRE_F16, h, 2, 64, check_f16_nan, NULL);
	run_each(WIRE_BF16, b, 2, 64, check_bf16_nan, NULL);
}

/* n == 1 is a copy: the input bits, signalling NaNs and payloads included. */
static void check_copy_f32(const char *name, const void *dst, size_t count, const void *ctx)
{
	if (memcmp(dst, ctx, count * 4) != 0)
		fail_msg("%s: n=1 f32 is not a bit copy", name);
}

static void check_copy_16(const char *name, const void *dst, size_t count, const void *ctx)
{
	if (memcmp(dst, ctx, count * 2) != 0)
		fail_msg("%s: n=1 16-bit is not a bit copy", name);
}

static void sum__one_source_copies_bits(void **state)
{
	(void)state;
	uint32_t f[40];
	uint16_t h[40];
	uint64_t rng = 42;

	for (size_t i = 0; i < 40; i++) {
		f[i] = rand_f32_bits(&rng);
		h[i] = (uint16_t)rand_16_bits(&rng, 0x7c00u, 0x200u);
	}
	f[0] = 0x7f800001u, f[1] = 0xffa00001u; /* signalling NaNs */
	h[0] = 0x7c01u, h[1] = 0x7f81u;         /* f16 and bf16 sNaN */
	const void *fs[1] = { f }, *hs[1] = { h };

	run_each(WIRE_F32, fs, 1, 40, check_copy_f32, f);
	run_each(WIRE_F16, hs, 1, 40, check_copy_16, h);
	run_each(WIRE_BF16, hs, 1, 40, check_copy_16, h);
}

/* count == 0 writes nothing, whatever n. */
static void check_untouched(const char *name, const void *dst, size_t count, const void *ctx)
{
	(void)ctx;
	(void)count;
	const unsigned char *d = dst;
	for (size_t i = 0; i < 64; i++)
		if (d[i] != 0xA5)
			fail_msg("%s: count=0 wrote byte %zu", name, i);
}

static void sum__count_zero_writes_nothing(void **state)
{
	(void)state;
	float a = 1.0f;
	const void *src[4] = { &a, &a, &a, &a };

	for (unsigned dt = 0; dt < WIRE_NDTYPES; dt++)
		for (unsigned n = 1; n <= 4; n++)
			run_each(dt, src, n, 0, check_untouched, NULL);
}

/* ---- conversions ------------------------------------------------------ */

/* Every half widens exactly and narrows back to itself; a signalling NaN
 * comes back quieted (quiet bit 0x200 set), as F16C does. */
static void half_to_float__all_values_round_trip(void **state)
{
	(void)state;
	for (uint32_t h = 0; h <= 0xffff; h++) {
		int snan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) && !(h & 0x200u);
		uint16_t want = (uint16_t)(snan ? h | 0x200u : h);
		uint16_t got = float_to_half(half_to_float((uint16_t)h));
		if (got != want)
			fail_msg("half %04x -> %08x -> %04x, want %04x", h,
				 f2u(half_to_float((uint16_t)h)), got, want);
	}
	assert_true(half_to_float(0x3c00) == 1.0f);
	assert_true(half_to_float(0x0001) == 0x1p-24f);
	assert_true(half_to_float(0x7bff) == 65504.0f);
	assert_int_equal(f2u(half_to_float(0x8000)), 0x80000000u);
}

/* half_to_float gives vcvtph2ps's bits for all 65536 halves. */
static void half_to_float__all_values_match_f16c(void **state)
{
	(void)state;
	need_f16c();
	for (uint32_t h = 0; h <= 0xffff; h++) {
		uint32_t want = f2u(hw_h2f((uint16_t)h)), got = f2u(half_to_float((uint16_t)h));
		if (got != want)
			fail_msg("half %04x: %08x, vcvtph2ps %08x", h, got, want);
	}
}

struct f2h_case {
	uint32_t f;
	uint16_t h;
};

static const struct f2h_case f2h_cases[] = {
	{ 0x3f800000u, 0x3c00 }, /* 1.0 */
	{ 0x80000000u, 0x8000 }, /* -0 */
	{ 0x477fe000u, 0x7bff }, /* 65504, max half */
	{ 0x477fefffu, 0x7bff }, /* just below the overflow midpoint */
	{ 0x477ff000u, 0x7c00 }, /* 65520: tie between max and 2^16 -> inf */
	{ 0x501502f9u, 0x7c00 }, /* 1e10 -> inf */
	{ 0xff800000u, 0xfc00 }, /* -inf */
	{ 0x7f7fffffu, 0x7c00 }, /* FLT_MAX -> inf */
	{ 0x3f801000u, 0x3c00 }, /* 1 + 2^-11: tie, to even (down) */
	{ 0x3f803000u, 0x3c02 }, /* 1 + 3*2^-11: tie, to even (up) */
	{ 0x3f801001u, 0x3c01 }, /* just above the tie */
	{ 0x38800000u, 0x0400 }, /* 2^-14, smallest normal */
	{ 0x387fc000u, 0x03ff }, /* largest subnormal */
	{ 0x387fe000u, 0x0400 }, /* tie between it and 2^-14 -> even (up) */
	{ 0x33800000u, 0x0001 }, /* 2^-24, smallest subnormal */
	{ 0x33000000u, 0x0000 }, /* 2^-25: tie, to even (0) */
	{ 0x33000001u, 0x0001 }, /* just above it */
	{ 0x33c00000u, 0x0002 }, /* 3*2^-25: tie between 1 and 2 -> 2 */
	{ 0x34200000u, 0x0002 }, /* 5*2^-25: tie between 2 and 3 -> 2 */
	{ 0x00000001u, 0x0000 }, /* float subnormal -> 0 */
	{ 0x80000001u, 0x8000 }, /* -> -0 */
	{ 0x7fc00000u, 0x7e00 }, /* quiet NaN */
	{ 0x7f800001u, 0x7e00 }, /* signalling NaN: quieted, low payload lost */
	{ 0xff802001u, 0xfe01 }, /* sign and top payload bits kept */
	{ 0x7fffffffu, 0x7fff },
};

static void float_to_half__known_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(f2h_cases) / sizeof(f2h_cases[0]); i++) {
		uint16_t got = float_to_half(u2f(f2h_cases[i].f));
		if (got != f2h_cases[i].h)
			fail_msg("float %08x -> %04x, want %04x", f2h_cases[i].f, got, f2h_cases[i].h);
	}
}

/* float_to_half gives vcvtps2ph's bits: the known cases, every float of
 * the form (any exponent, a few mantissas around each half rounding
 * boundary), and 4M floats spread over all 2^32 patterns. */
static void check_f2h_hw(uint32_t u)
{
	uint16_t want = hw_f2h(u2f(u)), got = float_to_half(u2f(u));
	if (got != want)
		fail_msg("float %08x: %04x, vcvtps2ph %04x", u, got, want);
}

static void float_to_half__matches_f16c(void **state)
{
	(void)state;
	need_f16c();
	for (size_t i = 0; i < sizeof(f2h_cases) / sizeof(f2h_cases[0]); i++)
		check_f2h_hw(f2h_cases[i].f);
	for (uint32_t sign = 0; sign < 2; sign++)
		for (uint32_t e = 0; e < 256; e++)
			for (uint32_t m = 0; m < 0x800000u; m += 0x1000u)
				for (int d = -1; d <= 1; d++)
					check_f2h_hw(sign << 31 | e << 23 | ((m + (uint32_t)d) & 0x7fffffu));
	for (uint64_t u = 0; u <= 0xffffffffull; u += 1021)
		check_f2h_hw((uint32_t)u);
}

/* Every bf16 widens exactly and narrows back to itself; a signalling NaN
 * comes back quieted (0x40 set). */
static void bf16_to_float__all_values_round_trip(void **state)
{
	(void)state;
	for (uint32_t b = 0; b <= 0xffff; b++) {
		int snan = (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) && !(b & 0x40u);
		uint16_t want = (uint16_t)(snan ? b | 0x40u : b);
		assert_int_equal(f2u(bf16_to_float((uint16_t)b)), b << 16);
		uint16_t got = float_to_bf16(bf16_to_float((uint16_t)b));
		if (got != want)
			fail_msg("bf16 %04x -> %04x, want %04x", b, got, want);
	}
}

static const struct f2h_case f2b_cases[] = {
	{ 0x3f800000u, 0x3f80 }, /* 1.0 */
	{ 0x80000000u, 0x8000 }, /* -0 */
	{ 0x3f808000u, 0x3f80 }, /* tie, to even (down) */
	{ 0x3f818000u, 0x3f82 }, /* tie, to even (up) */
	{ 0x3f808001u, 0x3f81 }, /* just above the tie */
	{ 0x3f807fffu, 0x3f80 }, /* just below */
	{ 0x7f7f7fffu, 0x7f7f }, /* max bf16 */
	{ 0x7f7f8000u, 0x7f80 }, /* tie above max bf16 -> inf */
	{ 0x7f7fffffu, 0x7f80 }, /* FLT_MAX -> inf */
	{ 0xff800000u, 0xff80 }, /* -inf */
	{ 0x00008000u, 0x0000 }, /* subnormal tie, to even (0) */
	{ 0x00018000u, 0x0002 }, /* subnormal tie, to even (up) */
	{ 0x80010001u, 0x8001 }, /* negative subnormal, truncates */
	{ 0x007fffffu, 0x0080 }, /* largest subnormal rounds to min normal */
	{ 0x7fc00000u, 0x7fc0 }, /* quiet NaN */
	{ 0x7f800001u, 0x7fc0 }, /* signalling NaN, payload below bf16: quieted */
	{ 0xffa12345u, 0xffe1 }, /* sign and top payload bits kept, quieted */
	{ 0x7fffffffu, 0x7fff },
};

static void float_to_bf16__known_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(f2b_cases) / sizeof(f2b_cases[0]); i++) {
		uint16_t got = float_to_bf16(u2f(f2b_cases[i].f));
		if (got != f2b_cases[i].h)
			fail_msg("float %08x -> %04x, want %04x", f2b_cases[i].f, got, f2b_cases[i].h);
	}
}

/* ---- every 16-bit pattern against an independent reference ----------- */

/* A half's or bf16's value from its fields (binary64, exact), for the
 * reference below: no code of elem.h and no F16C. NaN for NaN patterns. */
static double ref_widen(uint16_t x, unsigned dtype)
{
	int f16 = dtype == WIRE_F16, mbits = f16 ? 10 : 7, bias = f16 ? 15 : 127;
	unsigned emax = f16 ? 0x1fu : 0xffu, e = (x & 0x7fffu) >> mbits;
	unsigned m = x & ((1u << mbits) - 1);
	double v;

	if (e == emax)
		v = m ? NAN : INFINITY;
	else
		v = e ? ldexp((double)((1u << mbits) | m), (int)e - bias - mbits)
		      : ldexp((double)m, 1 - bias - mbits);
	return x & 0x8000u ? -v : v;
}

/* Binary32 v (not NaN) rounded to nearest even to a half or bf16, by
 * binary64 arithmetic on its grid (overflow to inf at 2^(emax+1), ties of
 * subnormals to even, -0 kept): the bits. */
static uint16_t ref_narrow(float v, unsigned dtype)
{
	int f16 = dtype == WIRE_F16, p = f16 ? 11 : 8, emin = f16 ? -14 : -126;
	uint16_t sign = signbit(v) ? 0x8000u : 0, inf = f16 ? 0x7c00u : 0x7f80u;
	double a = fabs((double)v), q, r;
	int e;

	if (isinf(a))
		return sign | inf;
	if (a == 0)
		return sign;
	frexp(a, &e);
	e = e - 1 < emin ? emin : e - 1;
	q = ldexp(1.0, e - (p - 1));
	r = nearbyint(a / q) * q;
	if (r >= ldexp(1.0, f16 ? 16 : 128))
		return sign | inf;
	/* r = k * 2^(emin - p + 1) for subnormals, else normal: rebuild bits */
	frexp(r, &e);
	if (r == 0)
		return sign;
	if (e - 1 < emin)
		return sign | (uint16_t)(r / ldexp(1.0, emin - (p - 1)));
	return sign | (uint16_t)((unsigned)(e - 1 - emin + 1) << (p - 1)) |
	       (uint16_t)((unsigned)(r / ldexp(1.0, e - p)) & ((1u << (p - 1)) - 1));
}

/* All 65536 patterns as source 0, and the first 3 again (one element off
 * malloc's alignment, a count no vector width divides, so the vector
 * bodies, the tails and an unaligned dst all run), and each pair of edge values (b, c) as sources 1 and 2 (n = 2
 * and n = 3): every variant's bits equal the binary32 rank-order sum of
 * the exact values rounded once by ref_narrow; NaN sums canonical. */
struct edge_pair {
	uint16_t b, c;
};

static void check_all_patterns(unsigned dtype, const struct edge_pair *pairs, size_t npairs)
{
	const size_t count = 65536 + 3;
	uint16_t *a = malloc((count + 1) * 2), *b = malloc(count * 2), *c = malloc(count * 2);
	uint16_t *want = malloc(count * 2), *got = malloc((count + 1) * 2);
	uint16_t canon = dtype == WIRE_F16 ? 0x7e00u : 0x7fc0u;

	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_non_null(want);
	assert_non_null(got);
	for (size_t i = 0; i < count; i++)
		a[i + 1] = (uint16_t)i; /* every pattern, then 0, 1, 2 */
	for (size_t p = 0; p < npairs; p++) {
		for (size_t i = 0; i < count; i++)
			b[i] = pairs[p].b, c[i] = pairs[p].c;
		const void *src[3] = { a + 1, b, c };
		for (unsigned n = 2; n <= 3; n++) {
			for (size_t i = 0; i < count; i++) {
				float s = (float)ref_widen(a[i + 1], dtype);
				s += (float)ref_widen(b[i], dtype);
				if (n == 3)
					s += (float)ref_widen(c[i], dtype);
				want[i] = isnan(s) ? canon : ref_narrow(s, dtype);
			}
			for (size_t v = 0; v < NVARIANTS; v++) {
				const struct sum_kernels *k = sum_by_name(all_variants[v]);
				if (k == NULL)
					continue;
				k->fn[dtype](got + 1, src, n, count);
				for (size_t i = 0; i < count; i++)
					if (got[i + 1] != want[i])
						fail_msg("%s %s n=%u: %04x + %04x (+ %04x if n=3) -> %04x, "
							 "want %04x", all_variants[v], dtype_names[dtype],
							 n, a[i + 1], pairs[p].b, pairs[p].c, got[i + 1],
							 want[i]);
			}
		}
	}
	free(a);
	free(b);
	free(c);
	free(want);
	free(got);
}

static void sum_f16__all_patterns_match_binary64_reference(void **state)
{
	/* zeros, subnormals, the normal boundary, 1 and the ties around it
	 * (2^-11 is half an ulp of 1), max, inf, NaNs, ordinary values */
	static const struct edge_pair pairs[] = {
		{ 0x0000, 0x8000 }, { 0x8000, 0x8000 }, { 0x0001, 0x0001 }, { 0x8001, 0x0001 },
		{ 0x03ff, 0x0001 }, { 0x0400, 0x8001 }, { 0x3c00, 0xbc00 }, { 0x1000, 0x1000 },
		{ 0x9000, 0x0c00 }, { 0x7bff, 0x7bff }, { 0xfbff, 0x7800 }, { 0x7c00, 0xfc00 },
		{ 0xfc00, 0x3c00 }, { 0x7e00, 0x3c00 }, { 0x7c01, 0x0000 }, { 0x4248, 0xc0a3 },
		{ 0x2e66, 0x1401 }, { 0xd3ff, 0x4fff },
	};
	(void)state;
	check_all_patterns(WIRE_F16, pairs, sizeof(pairs) / sizeof(pairs[0]));
}

static void sum_bf16__all_patterns_match_binary64_reference(void **state)
{
	/* as for f16; 0x3b80 (2^-8) is half an ulp of 1 */
	static const struct edge_pair pairs[] = {
		{ 0x0000, 0x8000 }, { 0x8000, 0x8000 }, { 0x0001, 0x0001 }, { 0x8001, 0x0001 },
		{ 0x007f, 0x0001 }, { 0x0080, 0x8001 }, { 0x3f80, 0xbf80 }, { 0x3b80, 0x3b80 },
		{ 0xbb80, 0x3b00 }, { 0x7f7f, 0x7f7f }, { 0xff7f, 0x7f00 }, { 0x7f80, 0xff80 },
		{ 0xff80, 0x3f80 }, { 0x7fc0, 0x3f80 }, { 0x7f81, 0x0000 }, { 0x4049, 0xc0a3 },
		{ 0x3dcd, 0x0081 }, { 0xd37f, 0x52ff },
	};
	(void)state;
	check_all_patterns(WIRE_BF16, pairs, sizeof(pairs) / sizeof(pairs[0]));
}

/* ---- PyTorch's results ------------------------------------------------ */

/* Four-way sums and what torch 1.13 (CPU) gives for them: x0.float() +
 * x1.float() + x2.float() + x3.float(), in that order, then .half() or
 * .bfloat16() (generated once with torch; no NaN results, as torch's NaN
 * bits are not pbox's). Rows: x0, x1, x2, x3, torch's result. Ties after
 * the binary32 sum, cancellations where the rank order matters, sums
 * around the overflow threshold, subnormal sums, signed zeros, infinities.
 */
/* f16: 18 of these differ from rounding after every add */
static const uint16_t torch_f16[][5] = {
	{ 0xb000, 0x0800, 0x1200, 0x1000, 0xafea }, { 0x77ff, 0x5bff, 0xc7ff, 0x47ff, 0x7807 },
	{ 0x8021, 0x0198, 0x8128, 0x0236, 0x0285 }, { 0x7a00, 0x3c02, 0xfa00, 0x9400, 0x3bfe },
	{ 0x0000, 0x0000, 0x3c00, 0x8000, 0x3c00 }, { 0x5bbf, 0xcbbc, 0x2ce0, 0x4491, 0x5b68 },
	{ 0xbc00, 0x8800, 0x1600, 0x0e00, 0xbbfc }, { 0xfbff, 0x63ff, 0x4fff, 0x47ff, 0xfbde },
	{ 0x81e0, 0x8077, 0x01e6, 0x00ab, 0x003a }, { 0x5000, 0x3c01, 0xd000, 0x0000, 0x3c01 },
	{ 0x8000, 0x8000, 0x3c00, 0xbc00, 0x0000 }, { 0x1db9, 0xb450, 0x5802, 0x9a24, 0x5800 },
	{ 0x4000, 0x0e00, 0x9000, 0x8800, 0x4000 }, { 0xfbff, 0x63ff, 0xc7ff, 0x47ff, 0xfbdf },
	{ 0x00c8, 0x81bd, 0x80d2, 0x011a, 0x80ad }, { 0x7800, 0x3c02, 0xf800, 0x9800, 0x3bfc },
	{ 0x8000, 0x8000, 0x8000, 0x0000, 0x0000 }, { 0xcddc, 0xc27e, 0x47b9, 0x3ddf, 0xcc60 },
	{ 0x4800, 0x8c00, 0x9000, 0x0e00, 0x4800 }, { 0xfbff, 0x67ff, 0xcfff, 0x47ff, 0xfbc0 },
	{ 0x81ab, 0x011d, 0x00da, 0x8183, 0x8137 }, { 0x6000, 0x3c02, 0xe000, 0x9800, 0x3c00 },
	{ 0x8000, 0x8000, 0x7c00, 0xbc00, 0x7c00 }, { 0x3d8a, 0x9ea7, 0xbe0c, 0xb65f, 0xb841 },
	{ 0xc800, 0x0c00, 0x0800, 0x8c00, 0xc800 }, { 0x7bff, 0x57ff, 0xd7ff, 0x4bff, 0x7bff },
	{ 0x01fd, 0x8012, 0x0172, 0x80e7, 0x0276 }, { 0x6000, 0x3c01, 0xe000, 0x0000, 0x3c01 },
	{ 0x0000, 0x8000, 0x3c00, 0x0000, 0x3c00 }, { 0x4863, 0xad88, 0x2a18, 0xb8bc, 0x4812 },
	{ 0xb800, 0x8c00, 0x1600, 0x1200, 0xb7f8 }, { 0x77ff, 0x67ff, 0x5bff, 0x4fff, 0x7848 },
	{ 0x00c1, 0x806f, 0x80cc, 0x0182, 0x0108 }, { 0x5e00, 0x3c03, 0xde00, 0x9800, 0x3c01 },
	{ 0x8000, 0x0000, 0x8000, 0x8000, 0x0000 }, { 0x9472, 0x2026, 0xa55f, 0x2a4b, 0x2881 },
	{ 0xc800, 0x9000, 0x1000, 0x1200, 0xc800 }, { 0xfbff, 0x63ff, 0x53ff, 0x47ff, 0xfbdd },
	{ 0x001f, 0x01a9, 0x0126, 0x00cf, 0x03bd }, { 0x6200, 0x3c00, 0xe200, 0x9a00, 0x3bfa },
	{ 0x8000, 0x8000, 0x7c00, 0xbc00, 0x7c00 }, { 0xbdda, 0x3b75, 0x2294, 0xced9, 0xcefa },
	{ 0x4000, 0x1000, 0x0c00, 0x1600, 0x4001 }, { 0x77ff, 0x57ff, 0xdbff, 0x4fff, 0x77f9 },
	{ 0x002b, 0x0037, 0x0008, 0x01b2, 0x021c }, { 0x5f00, 0x3c00, 0xdf00, 0x9400, 0x3bfe },
	{ 0x0000, 0x0000, 0x8000, 0x8000, 0x0000 }, { 0x3c63, 0x1960, 0x1e5d, 0x2af2, 0x3ca4 },
	{ 0x4000, 0x1200, 0x0e00, 0x1600, 0x4001 }, { 0x77ff, 0x63ff, 0xd7ff, 0x4bff, 0x781c },
	{ 0x812d, 0x801d, 0x006c, 0x817c, 0x825a }, { 0x6c00, 0x3c00, 0xec00, 0x1800, 0x3c02 },
	{ 0x0000, 0x0000, 0x3c00, 0x8000, 0x3c00 }, { 0xd71e, 0x3945, 0xb920, 0xa8fb, 0xd71e },
	{ 0x4000, 0x0c00, 0x9000, 0x1200, 0x4000 }, { 0x77ff, 0x57ff, 0x4bff, 0x3fff, 0x7804 },
	{ 0x8018, 0x0126, 0x8054, 0x8256, 0x819c }, { 0x5400, 0x3c02, 0xd400, 0x9800, 0x3c00 },
	{ 0x8000, 0x8000, 0x7c00, 0x8000, 0x7c00 }, { 0x2121, 0xb4eb, 0xb85f, 0xa15c, 0xbad5 },
	{ 0x4400, 0x8c00, 0x1200, 0x8800, 0x4400 }, { 0x7bff, 0x53ff, 0xdbff, 0x53ff, 0x7bfb },
	{ 0x8173, 0x80ce, 0x0081, 0x8233, 0x83f3 }, { 0x7900, 0x3c03, 0xf900, 0x0000, 0x3c04 },
	{ 0x0000, 0x8000, 0x8000, 0x0000, 0x0000 }, { 0xb215, 0x9d86, 0xb25c, 0xab6f, 0xb73c },
	{ 0x3000, 0x0e00, 0x1200, 0x1000, 0x300d },
};
/* bf16: 19 of these differ from rounding after every add */
static const uint16_t torch_bf16[][5] = {
	{ 0x4100, 0xbb80, 0x3a80, 0xbb80, 0x4100 }, { 0x7eff, 0x79ff, 0xfa7f, 0x77ff, 0x7eff },
	{ 0x0180, 0x0140, 0x0146, 0x8120, 0x01f3 }, { 0x4620, 0x3f81, 0xc620, 0xbcc0, 0x3f7c },
	{ 0x8000, 0x0000, 0x7f80, 0x0000, 0x7f80 }, { 0xbcf3, 0xbf80, 0xbea0, 0xc153, 0xc168 },
	{ 0xbf00, 0xbb00, 0x3b00, 0x3b00, 0xbeff }, { 0xff7f, 0x7bff, 0x797f, 0x77ff, 0xff7d },
	{ 0x0182, 0x80a4, 0x0182, 0x0102, 0x020e }, { 0x4200, 0x3f82, 0xc200, 0xbc80, 0x3f80 },
	{ 0x0000, 0x8000, 0x3f80, 0xbf80, 0x0000 }, { 0xc00f, 0xbe3a, 0x3fd7, 0x4213, 0x4210 },
	{ 0x3e00, 0xba80, 0xbb80, 0x3b80, 0x3dfe }, { 0xff7f, 0x7c7f, 0x78ff, 0x787f, 0xff7b },
	{ 0x8050, 0x0035, 0x812c, 0x0190, 0x00cd }, { 0x5500, 0x3f80, 0xd500, 0xbcc0, 0xbcc0 },
	{ 0x0000, 0x8000, 0x7f80, 0x8000, 0x7f80 }, { 0x3d53, 0x3b4e, 0x3ee1, 0x3c7c, 0x3f02 },
	{ 0x4000, 0x3a80, 0xbb80, 0x3c40, 0x4001 }, { 0xff7f, 0x7b7f, 0xfa7f, 0x7a7f, 0xff7e },
	{ 0x0144, 0x014f, 0x8011, 0x0194, 0x022d }, { 0x59c0, 0x3f82, 0xd9c0, 0x0000, 0x0000 },
	{ 0x8000, 0x0000, 0x8000, 0x8000, 0x0000 }, { 0x4276, 0x417f, 0xbad8, 0x3bfc, 0x429b },
	{ 0x3f00, 0x3b00, 0xbb80, 0xbb00, 0x3efe }, { 0x7eff, 0x79ff, 0x7a7f, 0x78ff, 0x7f00 },
	{ 0x811e, 0x011a, 0x018d, 0x0188, 0x020a }, { 0x4f80, 0x3f83, 0xcf80, 0x3c00, 0x3c00 },
	{ 0x8000, 0x8000, 0x8000, 0x8000, 0x8000 }, { 0x41bd, 0xc05a, 0x3e04, 0xbb9f, 0x41a3 },
	{ 0x4080, 0xbb80, 0x3b40, 0x3c40, 0x4080 }, { 0x7eff, 0x7a7f, 0xf97f, 0x7a7f, 0x7f00 },
	{ 0x0160, 0x0015, 0x816c, 0x007b, 0x0078 }, { 0x4600, 0x3f82, 0xc600, 0x0000, 0x3f82 },
	{ 0x8000, 0x0000, 0x8000, 0x8000, 0x0000 }, { 0xba16, 0xc0de, 0x4202, 0xbfd0, 0x41bf },
	{ 0xc080, 0x3b80, 0x3b40, 0x3a80, 0xc080 }, { 0x7f7f, 0x7c7f, 0x797f, 0x797f, 0x7f80 },
	{ 0x0162, 0x8181, 0x80e8, 0x8061, 0x8144 }, { 0x4b80, 0x3f82, 0xcb80, 0xbc00, 0x3fff },
	{ 0x8000, 0x0000, 0x3f80, 0xbf80, 0x0000 }, { 0x3e16, 0xc1ed, 0x431b, 0xbc2d, 0x42fb },
	{ 0x4080, 0x3b40, 0x3a80, 0x3c40, 0x4080 }, { 0x7eff, 0x7cff, 0x78ff, 0x797f, 0x7f08 },
	{ 0x013c, 0x0154, 0x80a9, 0x812a, 0x0112 }, { 0x45a0, 0x3f80, 0xc5a0, 0xbcc0, 0x3f7a },
	{ 0x8000, 0x0000, 0x8000, 0x8000, 0x0000 }, { 0x4333, 0x3e11, 0xc311, 0xbf3d, 0x4206 },
	{ 0xbf80, 0x3b40, 0x3b40, 0xbb00, 0xbf7f }, { 0x7eff, 0x7b7f, 0x7b7f, 0x797f, 0x7f02 },
	{ 0x0055, 0x0156, 0x8073, 0x815c, 0x802a }, { 0x5280, 0x3f80, 0xd280, 0x0000, 0x0000 },
	{ 0x8000, 0x8000, 0x8000, 0xbf80, 0xbf80 }, { 0xc0e7, 0xb95a, 0x3b97, 0xbe4e, 0xc0ed },
	{ 0x4100, 0x3b40, 0x3b00, 0xba80, 0x4100 }, { 0x7f7f, 0x7a7f, 0x797f, 0x78ff, 0x7f7f },
	{ 0x0156, 0x8190, 0x00c3, 0x00c8, 0x00f7 }, { 0x5500, 0x3f81, 0xd500, 0x3cc0, 0x3cc0 },
	{ 0x0000, 0x8000, 0x3f80, 0x8000, 0x3f80 }, { 0xbb01, 0x423c, 0xbd55, 0xc15d, 0x4205 },
	{ 0x3f80, 0x3a80, 0x3b40, 0xbb00, 0x3f80 }, { 0x7f7f, 0x7a7f, 0x78ff, 0x77ff, 0x7f7f },
	{ 0x014a, 0x8120, 0x818d, 0x001f, 0x8160 }, { 0x4880, 0x3f80, 0xc880, 0x0000, 0x3f80 },
	{ 0x0000, 0x0000, 0x8000, 0x0000, 0x0000 }, { 0xc1f7, 0xbedd, 0x3bd3, 0x3a73, 0xc1fa },
	{ 0xbe80, 0xbb00, 0xba80, 0x3b80, 0xbe7f },
};

static void check_torch(unsigned dtype, const uint16_t (*rows)[5], size_t count)
{
	uint16_t x[4][70], got[71];
	const void *src[4] = { x[0], x[1] + 1, x[2], x[3] + 1 }; /* two unaligned */

	assert_true(count <= 69);
	for (size_t i = 0; i < count; i++)
		for (unsigned k = 0; k < 4; k++)
			x[k][i + (k & 1)] = rows[i][k];
	for (size_t v = 0; v < NVARIANTS; v++) {
		const struct sum_kernels *k = sum_by_name(all_variants[v]);
		if (k == NULL)
			continue;
		k->fn[dtype](got + 1, src, 4, count);
		for (size_t i = 0; i < count; i++)
			if (got[i + 1] != rows[i][4])
				fail_msg("%s %s row %zu: %04x + %04x + %04x + %04x -> %04x, torch %04x",
					 all_variants[v], dtype_names[dtype], i, rows[i][0],
					 rows[i][1], rows[i][2], rows[i][3], got[i + 1], rows[i][4]);
	}
}

static void sum_f16__matches_torch(void **state)
{
	(void)state;
	check_torch(WIRE_F16, torch_f16, sizeof(torch_f16) / sizeof(torch_f16[0]));
}

static void sum_bf16__matches_torch(void **state)
{
	(void)state;
	check_torch(WIRE_BF16, torch_bf16, sizeof(torch_bf16) / sizeof(torch_bf16[0]));
}

/* ---- selection -------------------------------------------------------- */

static void sum_by_name__unknown_is_null(void **state)
{
	(void)state;
	assert_null(sum_by_name("nope"));
	assert_null(sum_by_name(""));
	assert_null(sum_by_name(NULL));
	assert_null(sum_by_name("AVX2"));
	const struct sum_kernels *k = sum_by_name("scalar");
	assert_non_null(k);
	assert_string_equal(k->name, "scalar");
	for (unsigned dt = 0; dt < WIRE_NDTYPES; dt++)
		assert_non_null(k->fn[dt]);
}

static void sum_by_name__known_variants_are_complete(void **state)
{
	(void)state;
	for (size_t v = 0; v < NVARIANTS; v++) {
		const struct sum_kernels *k = sum_by_name(all_variants[v]);
		if (k == NULL)
			continue;
		assert_string_equal(k->name, all_variants[v]);
		for (unsigned dt = 0; dt < WIRE_NDTYPES; dt++)
			assert_non_null(k->fn[dt]);
	}
}

/* Without PBOX_KERNEL the fastest supported variant; with it the forced
 * one; an unknown name is ignored. */
static void sum_best__env_override(void **state)
{
	(void)state;
	const char *fastest = sum_by_name("avx512") ? "avx512" : sum_by_name("avx2") ? "avx2" : "scalar";

	unsetenv("PBOX_KERNEL");
	assert_string_equal(sum_best()->name, fastest);
	for (size_t v = 0; v < NVARIANTS; v++) {
		if (sum_by_name(all_variants[v]) == NULL)
			continue;
		setenv("PBOX_KERNEL", all_variants[v], 1);
		assert_string_equal(sum_best()->name, all_variants[v]);
	}
	setenv("PBOX_KERNEL", "nope", 1);
	assert_string_equal(sum_best()->name, fastest);
	unsetenv("PBOX_KERNEL");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sum_f32__avx2_matches_scalar_random_bits),
		cmocka_unit_test(sum_f32__avx2_matches_scalar_random_values),
		cmocka_unit_test(sum_f16__avx2_matches_scalar_random_bits),
		cmocka_unit_test(sum_f16__avx2_matches_scalar_random_values),
		cmocka_unit_test(sum_bf16__avx2_matches_scalar_random_bits),
		cmocka_unit_test(sum_bf16__avx2_matches_scalar_random_values),
		cmocka_unit_test(sum_f32__avx512_matches_scalar_random_bits),
		cmocka_unit_test(sum_f32__avx512_matches_scalar_random_values),
		cmocka_unit_test(sum_f16__avx512_matches_scalar_random_bits),
		cmocka_unit_test(sum_f16__avx512_matches_scalar_random_values),
		cmocka_unit_test(sum_bf16__avx512_matches_scalar_random_bits),
		cmocka_unit_test(sum_bf16__avx512_matches_scalar_random_values),
		cmocka_unit_test(sum_f32__adds_in_rank_order),
		cmocka_unit_test(sum_f16__rounds_once_at_the_end),
		cmocka_unit_test(sum_bf16__rounds_once_at_the_end),
		cmocka_unit_test(sum__nan_results_are_canonical),
		cmocka_unit_test(sum__one_source_copies_bits),
		cmocka_unit_test(sum__count_zero_writes_nothing),
		cmocka_unit_test(half_to_float__all_values_round_trip),
		cmocka_unit_test(half_to_float__all_values_match_f16c),
		cmocka_unit_test(float_to_half__known_cases),
		cmocka_unit_test(float_to_half__matches_f16c),
		cmocka_unit_test(bf16_to_float__all_values_round_trip),
		cmocka_unit_test(float_to_bf16__known_cases),
		cmocka_unit_test(sum_f16__all_patterns_match_binary64_reference),
		cmocka_unit_test(sum_bf16__all_patterns_match_binary64_reference),
		cmocka_unit_test(sum_f16__matches_torch),
		cmocka_unit_test(sum_bf16__matches_torch),
		cmocka_unit_test(sum_by_name__unknown_is_null),
		cmocka_unit_test(sum_by_name__known_variants_are_complete),
		cmocka_unit_test(sum_best__env_override),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
