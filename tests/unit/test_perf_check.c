/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_perf_check.c - pbox-perf --check's data (tools/pbox_perf.c fill()
 * and verify()): a correct sum passes in every dtype; a sum delivered to
 * the wrong place (two segments swapped), a stale one (the previous
 * iteration's, world 8) or one missing a rank's part is caught.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define main pbox_perf_main
#include "tools/pbox_perf.c"
#undef main
#include "tools/perf_blast.c"
#include "tools/perf_sparse.c"

#define N (4 * 352)   /* four segments of 1408 B of f32 */

/* The sum of ranks [0, world) of iteration it, except skip (-1: none). */
static void sum_into(float *out, int world, int it, int skip)
{
	static float tmp[N];

	memset(out, 0, N * sizeof(float));
	for (int r = 0; r < world; r++) {
		if (r == skip)
			continue;
		fill(tmp, PBOX_F32, N, r, it);
		for (size_t i = 0; i < N; i++)
			out[i] += tmp[i];
	}
}

static void right_sum__passes(void **state)
{
	static float f[N];
	static uint16_t h[N];

	(void)state;
	for (int world = 1; world <= 64; world *= 4) {
		sum_into(f, world, 5, -1);
		assert_int_equal(verify(f, PBOX_F32, N, world, 5, 0, N * 4), 0);
		for (size_t i = 0; i < N; i++)
			h[i] = int_to_f16((int)f[i]);
		assert_int_equal(verify(h, PBOX_F16, N, world, 5, 0, N * 2), 0);
		for (size_t i = 0; i < N; i++)
			h[i] = float_bits_to_bf16(f[i]);
		assert_int_equal(verify(h, PBOX_BF16, N, world, 5, 0, N * 2), 0);
	}
}

static void misplaced_stale_or_lost__caught(void **state)
{
	static float good[N], bad[N];

	(void)state;
	sum_into(good, 2, 5, -1);
	memcpy(bad, good, sizeof(bad));
	memcpy(bad + 352, good + 2 * 352, 352 * sizeof(float));
	memcpy(bad + 2 * 352, good + 352, 352 * sizeof(float));
	assert_true(verify(bad, PBOX_F32, N, 2, 5, 0, N * 4) > 0);
	sum_into(bad, 8, 4, -1);            /* the previous iteration's */
	assert_true(verify(bad, PBOX_F32, N, 8, 5, 0, N * 4) > 0);
	sum_into(bad, 8, 5, 7);             /* rank 7's part lost */
	assert_true(verify(bad, PBOX_F32, N, 8, 5, 0, N * 4) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(right_sum__passes),
		cmocka_unit_test(misplaced_stale_or_lost__caught),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
