/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topk.c - top-k selection (common/topk.h): the count stays within
 * k +- k/8 on normal, heavy-tailed, layered, tied and NaN-laden inputs;
 * indices increase and values are x[idx]; nothing left out is larger than
 * anything kept except inside the final band (against topk_exact, itself
 * checked against a sort); error feedback leaves exactly what was not
 * sent; every variant returns the scalar one's entries.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/topk.h"

#define BIG (300 * 1000) /* above the 64 Ki sample: the sampled path */

static const char *const variants[] = { "scalar", "avx2", "avx512" };

static unsigned seed = 1;

static float uni(void)
{
	seed = seed * 1103515245u + 12345u;
	return (float)(seed >> 8) / 16777216.0f - 0.5f;
}

static float normal(void)
{
	return uni() + uni() + uni() + uni();
}

enum shape { NORMAL, HEAVY, LAYERED, TIED, ZEROS, NANS, NSHAPES };

static void make(float *x, size_t n, enum shape s)
{
	for (size_t i = 0; i < n; i++) {
		float v = normal();
		switch (s) {
		case HEAVY: v = v * v * v * v * v; break;              /* most tiny, a few huge */
		case LAYERED: v *= powf(1000.0f, (float)(i * 5 / n)); break; /* 5 layers */
		case TIED: v = (float)((int)(i % 7) - 3); break;       /* 7 values only */
		case ZEROS: v = i % 10 ? 0.0f : v; break;
		case NANS: v = i % 3 ? v : NAN; break;
		default: break;
		}
		x[i] = v;
	}
}

/* The rules of topk.h on one selection. */
static void check(const float *x, size_t n, size_t k, const uint32_t *idx, const float *val,
		  size_t m)
{
	size_t numbers = 0;
	for (size_t i = 0; i < n; i++)
		numbers += !isnan(x[i]);
	if (k >= n)
		assert_int_equal(m, n);
	else if (numbers >= k - k / 8)
		assert_true(m >= k - k / 8 && m <= k + k / 8);
	else
		assert_int_equal(m, numbers);
	for (size_t j = 0; j < m; j++) {
		assert_true(idx[j] < n);
		if (j)
			assert_true(idx[j] > idx[j - 1]);
		assert_memory_equal(&val[j], &x[idx[j]], sizeof(float));
		if (k < n)
			assert_false(isnan(val[j]));
	}
}

static void select__count_within_the_band_on_every_shape(void **state)
{
	static float x[BIG];
	static uint32_t idx[TOPK_MAX(BIG)];
	static float val[TOPK_MAX(BIG)];
	static const size_t ns[] = { 1, 2, 10, 1000, 70000, BIG };
	static const double ds[] = { 0.001, 0.01, 0.1, 0.5 };
	(void)state;

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (int s = 0; s < NSHAPES; s++) {
			make(x, ns[a], (enum shape)s);
			for (size_t b = 0; b < sizeof(ds) / sizeof(ds[0]); b++) {
				size_t k = (size_t)(ds[b] * (double)ns[a]) + 1;
				size_t m = topk_select(NULL, x, ns[a], k, idx, val);
				check(x, ns[a], k, idx, val, m);
			}
			check(x, ns[a], ns[a], idx, val, topk_select(NULL, x, ns[a], ns[a], idx, val));
			assert_int_equal(topk_select(NULL, x, ns[a], 0, idx, val), 0);
			if (ns[a] > 1)
				check(x, ns[a], ns[a] - 1, idx, val,
				      topk_select(NULL, x, ns[a], ns[a] - 1, idx, val));
		}
}

static void select__only_the_band_differs_from_exact(void **state)
{
	static float x[BIG];
	static uint32_t idx[TOPK_MAX(BIG)], ref[BIG];
	static float val[TOPK_MAX(BIG)], rval[BIG];
	static uint8_t in[BIG];
	(void)state;

	for (int s = NORMAL; s <= LAYERED; s++) {
		make(x, BIG, (enum shape)s);
		size_t k = BIG / 100;
		size_t m = topk_select(NULL, x, BIG, k, idx, val);
		size_t r = topk_exact(x, BIG, k, ref, rval);
		assert_int_equal(r, k);
		/* the smallest kept magnitude bounds every one left out */
		float lo = INFINITY;
		memset(in, 0, sizeof(in));
		for (size_t j = 0; j < m; j++) {
			in[idx[j]] = 1;
			lo = fminf(lo, fabsf(val[j]));
		}
		for (size_t i = 0; i < BIG; i++)
			if (!in[i])
				assert_true(fabsf(x[i]) <= lo);
		/* recall of the exact top k */
		size_t hit = 0;
		for (size_t j = 0; j < r; j++)
			hit += in[ref[j]];
		assert_true(hit >= (m < k ? m : k) * 95 / 100);
	}
}

static int cmp_desc(const void *a, const void *b)
{
	float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
	return x > y ? -1 : x < y;
}

static void exact__matches_a_sort(void **state)
{
	float x[3000], s[3000], val[3000];
	uint32_t idx[3000];
	(void)state;
	make(x, 3000, NORMAL);
	x[5] = x[6] = 100.0f; /* a tie: the lower index first */
	memcpy(s, x, sizeof(x));
	qsort(s, 3000, sizeof(float), cmp_desc);
	size_t m = topk_exact(x, 3000, 40, idx, val);
	assert_int_equal(m, 40);
	float kth = fabsf(s[39]);
	for (size_t j = 0; j < m; j++) {
		assert_true(fabsf(val[j]) >= kth);
		if (j)
			assert_true(idx[j] > idx[j - 1]);
	}
	assert_int_equal(topk_exact(x, 3000, 1, idx, val), 1);
	assert_int_equal(idx[0], 5);
}

static void ef__residual_keeps_what_was_not_sent(void **state)
{
	static float e[BIG], e0[BIG], g[BIG], val[TOPK_MAX(BIG / 100)];
	static uint32_t idx[TOPK_MAX(BIG / 100)];
	(void)state;

	make(e, BIG, NORMAL);
	make(g, BIG, LAYERED);
	memcpy(e0, e, sizeof(e));
	size_t k = BIG / 100;
	size_t m = topk_select_ef(NULL, e, g, BIG, k, idx, val);
	assert_true(m >= k - k / 8 && m <= k + k / 8);
	size_t j = 0;
	for (size_t i = 0; i < BIG; i++) {
		float sum = e0[i] + g[i];
		if (j < m && idx[j] == i) {
			assert_memory_equal(&val[j], &sum, sizeof(float));
			assert_true(e[i] == 0.0f);
			j++;
		} else {
			assert_memory_equal(&e[i], &sum, sizeof(float));
		}
	}
	assert_int_equal(j, m);
	/* without g: a selection from e as it is */
	m = topk_select_ef(NULL, e, NULL, BIG, k, idx, val);
	assert_true(m >= k - k / 8 && m <= k + k / 8);
}

static void variants__same_entries_as_scalar(void **state)
{
	static float x[BIG], e[3][BIG], val[3][TOPK_MAX(BIG / 10)], pv[2][77];
	static uint32_t idx[3][TOPK_MAX(BIG / 10)], pi[2][77];
	(void)state;
	const struct topk_kernels *ref = topk_by_name("scalar");
	assert_non_null(ref);
	assert_non_null(topk_best());
	assert_null(topk_by_name("sse9"));

	for (int s = 0; s < NSHAPES; s++) {
		make(x, BIG, (enum shape)s);
		size_t m[3] = { 0 };
		for (int v = 0; v < 3; v++) {
			const struct topk_kernels *kk = topk_by_name(variants[v]);
			if (!kk) {
				print_message("variant %s: not on this CPU\n", variants[v]);
				continue;
			}
			memset(e[v], 0, sizeof(e[v]));
			m[v] = topk_select_ef(kk, e[v], x, BIG, BIG / 100, idx[v], val[v]);
			if (v == 0)
				continue;
			assert_int_equal(m[v], m[0]);
			assert_memory_equal(idx[v], idx[0], m[0] * sizeof(uint32_t));
			assert_memory_equal(val[v], val[0], m[0] * sizeof(float));
			assert_memory_equal(e[v], e[0], sizeof(e[0]));
			/* the kernels alone: counts and a capped pass */
			float t[3] = { 0.1f, 1.0f, INFINITY };
			uint64_t c0[3], c1[3];
			ref->count(x, BIG - 3, t, 3, c0);
			kk->count(x, BIG - 3, t, 3, c1);
			assert_memory_equal(c0, c1, sizeof(c0));
			size_t p0 = ref->pass(e[0], NULL, BIG - 5, 0.5f, pi[0], pv[0], 77, 0);
			size_t p1 = kk->pass(e[0], NULL, BIG - 5, 0.5f, pi[1], pv[1], 77, 0);
			assert_int_equal(p0, p1);
			assert_memory_equal(pi[1], pi[0], (p0 < 77 ? p0 : 77) * sizeof(uint32_t));
			assert_memory_equal(pv[1], pv[0], (p0 < 77 ? p0 : 77) * sizeof(float));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(select__count_within_the_band_on_every_shape),
		cmocka_unit_test(select__only_the_band_differs_from_exact),
		cmocka_unit_test(exact__matches_a_sort),
		cmocka_unit_test(ef__residual_keeps_what_was_not_sent),
		cmocka_unit_test(variants__same_entries_as_scalar),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
