/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sparse.c - the records of sparse keys (common/sparse.h): the
 * smallest form is chosen, every form round-trips (encode, parse, check,
 * scatter, add), zero values are absent but -0 is kept, and the checks
 * refuse what docs/protocol.md "Sparse keys" forbids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/drops.h"
#include "common/sparse.h"
#include "common/sum.h"
#include "common/wire.h"

#define LEN 2208u /* f32 elements of a sparse segment at MTU 9000 */

/* Segments 0-3 of *ctx elements each (LEN when ctx is NULL). */
static uint32_t len_of(const void *ctx, uint32_t seg)
{
	return seg >= 4 ? 0 : ctx ? *(const uint32_t *)ctx : LEN;
}

static void form__smallest_by_density(void **state)
{
	(void)state;
	assert_int_equal(sparse_seg_elems(8896, 4), LEN);
	assert_int_equal(sparse_seg_elems(1408, 4), 336);
	assert_int_equal(sparse_seg_elems(64, 4), 0);
	/* 6.25% is where IDX stops winning for f32, 97% where DENSE starts */
	assert_int_equal(sparse_best_form(0, LEN, 4), SPARSE_IDX);
	assert_int_equal(sparse_best_form(22, LEN, 4), SPARSE_IDX);
	assert_int_equal(sparse_best_form(LEN / 20, LEN, 4), SPARSE_IDX);
	assert_int_equal(sparse_best_form(LEN / 10, LEN, 4), SPARSE_BITMAP);
	assert_int_equal(sparse_best_form(LEN / 2, LEN, 4), SPARSE_BITMAP);
	assert_int_equal(sparse_best_form(LEN, LEN, 4), SPARSE_DENSE);
	assert_int_equal(sparse_body_bytes(SPARSE_IDX, 3, LEN, 4), 8 + 12);
	assert_int_equal(sparse_body_bytes(SPARSE_IDX, 3, LEN, 2), 8 + 8);
	assert_int_equal(sparse_body_bytes(SPARSE_BITMAP, 1, LEN, 4), LEN / 8 + 4);
	assert_int_equal(sparse_body_bytes(SPARSE_DENSE, 7, 7, 2), 16);
	assert_true(sparse_rec_max(LEN, 4) <= 8896);
}

/* Encode x densely, parse and check it, scatter and compare; returns the form. */
static unsigned round_trip(const float *x, uint32_t len)
{
	uint8_t rec[SPARSE_REC_HDR + LEN * 4 + 4];
	float back[LEN], acc[LEN];
	struct sparse_rec r;
	size_t bytes = sparse_encode_dense(rec, 2, x, len, 4);

	assert_int_equal(sparse_rec_parse(rec, bytes, 4, len_of, &len, &r), 0);
	assert_int_equal(r.bytes, bytes);
	assert_int_equal(r.seg, 2);
	assert_int_equal(sparse_rec_check(&r, len, 4), 0);
	memset(back, 0x7f, sizeof(back));
	sparse_rec_scatter(back, &r, 4, len);
	assert_memory_equal(back, x, len * 4);
	memset(acc, 0, sizeof(acc));
	sparse_rec_add(acc, &r, WIRE_F32, len);
	for (uint32_t i = 0; i < len; i++)
		assert_true(acc[i] == x[i]);
	return r.form;
}

static void encode__every_form_round_trips(void **state)
{
	static float x[LEN];
	(void)state;
	srand(3);
	for (int d = 0; d <= 100; d += 1) {
		memset(x, 0, sizeof(x));
		for (uint32_t i = 0; i < LEN; i++)
			if ((uint32_t)rand() % 100 < (uint32_t)d)
				x[i] = (float)(rand() % 1000 - 500) / 3.0f;
		unsigned form = round_trip(x, LEN);
		if (d == 0 || d == 1)
			assert_int_equal(form, SPARSE_IDX);
		if (d == 30)
			assert_int_equal(form, SPARSE_BITMAP);
	}
	memset(x, 0, sizeof(x));
	x[LEN - 1] = -0.0f; /* not zero bits: kept */
	assert_int_equal(round_trip(x, LEN), SPARSE_IDX);
	for (uint32_t i = 0; i < LEN; i++)
		x[i] = 1.0f;
	assert_int_equal(round_trip(x, LEN), SPARSE_DENSE);
	assert_int_equal(round_trip(x, 7), SPARSE_DENSE);     /* a short segment */
	x[3] = 0;
	round_trip(x, 33);                                     /* bitmap tail word */
}

static void encode__entries_match_dense(void **state)
{
	static float x[LEN];
	uint32_t idx[LEN];
	float val[LEN];
	uint8_t a[SPARSE_REC_HDR + LEN * 4 + 4], b[sizeof(a)];
	(void)state;
	srand(5);
	for (int d = 1; d <= 100; d += 3) {
		uint32_t n = 0;
		memset(x, 0, sizeof(x));
		for (uint32_t i = 0; i < LEN; i++)
			if ((uint32_t)rand() % 100 < (uint32_t)d) {
				x[i] = (float)(rand() % 999 + 1);
				idx[n] = 1000 + i; /* global indices, base 1000 */
				val[n++] = x[i];
			}
		size_t na = sparse_encode_dense(a, 1, x, LEN, 4);
		size_t nb = sparse_encode_entries(b, 1, idx, 1000, val, n, LEN, 4);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
	}
}

static void encode__f16_sum_rounds_once(void **state)
{
	uint16_t x[2][40], out[40];
	uint8_t rec[2][SPARSE_REC_HDR + 40 * 2 + 4];
	float acc[40] = { 0 };
	uint32_t len = 40;
	(void)state;
	for (int i = 0; i < 40; i++) {
		x[0][i] = i % 3 ? float_to_half(1.0f + (float)i / 1024.0f) : 0;
		x[1][i] = i % 5 ? float_to_half(1.0f / 2048.0f) : 0;
	}
	for (int r = 0; r < 2; r++) {
		struct sparse_rec sr;
		size_t n = sparse_encode_dense(rec[r], 0, x[r], 40, 2);
		assert_int_equal(sparse_rec_parse(rec[r], n, 2, len_of, &len, &sr), 0);
		assert_int_equal(sparse_rec_check(&sr, 40, 2), 0);
		sparse_rec_add(acc, &sr, WIRE_F16, 40);
	}
	sparse_sum_round(out, acc, 40, WIRE_F16);
	for (int i = 0; i < 40; i++)
		assert_int_equal(out[i], float_to_half(half_to_float(x[0][i]) +
						       half_to_float(x[1][i])));
	acc[0] = __builtin_nanf("0x123"); /* a NaN sum comes out canonical */
	sparse_sum_round(out, acc, 1, WIRE_F16);
	assert_int_equal(out[0], 0x7e00);
}

static void check__refuses_bad_bodies(void **state)
{
	uint8_t rec[64];
	struct sparse_rec r;
	uint16_t n;
	(void)state;

	/* IDX with indices 5, 5 */
	memset(rec, 0, sizeof(rec));
	n = 2;
	memcpy(rec + 4, &n, 2);
	rec[8] = 5;
	rec[10] = 5;
	assert_int_equal(sparse_rec_parse(rec, 8 + 4 + 8, 4, len_of, NULL, &r), 0);
	assert_int_equal(sparse_rec_check(&r, LEN, 4), -DROP_BAD_SPARSE);
	rec[10] = 6;
	assert_int_equal(sparse_rec_check(&r, LEN, 4), 0);
	assert_int_equal(sparse_rec_check(&r, 6, 4), -DROP_BAD_SPARSE); /* 6 >= len */
	/* a nonzero pad after an odd count of indices */
	n = 1;
	memcpy(rec + 4, &n, 2);
	rec[10] = 1;
	assert_int_equal(sparse_rec_parse(rec, 8 + 4 + 4, 4, len_of, NULL, &r), 0);
	assert_int_equal(sparse_rec_check(&r, LEN, 4), -DROP_BAD_SPARSE);
	/* bitmap bits past the segment's length */
	memset(rec, 0, sizeof(rec));
	n = 1;
	memcpy(rec + 4, &n, 2);
	rec[6] = SPARSE_BITMAP;
	rec[8 + 4] = 0x01; /* bit 32 of a 33-element segment: fine */
	uint32_t len33 = 33;
	assert_int_equal(sparse_rec_parse(rec, 8 + 8 + 4, 4, len_of, &len33, &r), 0);
	assert_int_equal(sparse_rec_check(&r, 33, 4), 0);
	rec[8 + 4] = 0x02; /* bit 33: past it */
	assert_int_equal(sparse_rec_check(&r, 33, 4), -DROP_BAD_SPARSE);
	/* headers: unknown segment, n above the length, short */
	memset(rec, 0, sizeof(rec));
	rec[0] = 9;
	assert_int_equal(sparse_rec_parse(rec, 8, 4, len_of, NULL, &r), -DROP_BAD_SPARSE);
	rec[0] = 0;
	n = LEN + 1;
	memcpy(rec + 4, &n, 2);
	assert_int_equal(sparse_rec_parse(rec, 64, 4, len_of, NULL, &r), -DROP_BAD_SPARSE);
	assert_int_equal(sparse_rec_parse(rec, 7, 4, len_of, NULL, &r), -DROP_BAD_SPARSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(form__smallest_by_density),
		cmocka_unit_test(encode__every_form_round_trips),
		cmocka_unit_test(encode__entries_match_dense),
		cmocka_unit_test(encode__f16_sum_rounds_once),
		cmocka_unit_test(check__refuses_bad_bodies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
