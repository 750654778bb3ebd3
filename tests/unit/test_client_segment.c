/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_segment.c - unit tests of libpbox's layout math
 * (client/core/segment.c): segment and chunk counts, short last segments, odd
 * 16-bit counts, huge counts, checks of box-supplied layouts, the window
 * slot pool, RTO back-off and the result bitmap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/core/segment.h"
#include "include/pbox.h"
#include "common/wire.h"

#define SEG1500 1408u /* seg_bytes for a 1500-byte MTU */

static void elems_of__dtypes_and_bad_sizes(void **state)
{
	(void)state;
	assert_int_equal(seg_elems_of(SEG1500, WIRE_F32), 352);
	assert_int_equal(seg_elems_of(SEG1500, WIRE_F16), 704);
	assert_int_equal(seg_elems_of(SEG1500, WIRE_BF16), 704);
	assert_int_equal(seg_elems_of(8896, WIRE_F32), 2224);
	assert_int_equal(seg_elems_of(SEG1500, 3), 0);
	assert_int_equal(seg_elems_of(0, WIRE_F32), 0);
	assert_int_equal(seg_elems_of(1406, WIRE_F32), 0);
}

static void nsegs__count_one_exact_and_one_over(void **state)
{
	(void)state;
	assert_int_equal(seg_nsegs(1, 352), 1);
	assert_int_equal(seg_nsegs(352, 352), 1);
	assert_int_equal(seg_nsegs(352 * 3, 352), 3);
	assert_int_equal(seg_nsegs(352 * 3 + 1, 352), 4);
	assert_int_equal(seg_nsegs(0, 352), 0);
	assert_int_equal(seg_nsegs(10, 0), 0);
}

static void len__last_segment_short(void **state)
{
	struct seg_layout l = { .count = 1000, .elem = 4, .seg_elems = 352, .nsegs = 3 };

	(void)state;
	assert_int_equal(seg_first(&l, 2), 704);
	assert_int_equal(seg_len(&l, 0), 352);
	assert_int_equal(seg_len(&l, 1), 352);
	assert_int_equal(seg_len(&l, 2), 1000 - 704);
}

static void len__count_one(void **state)
{
	struct seg_layout l = { .count = 1, .elem = 4, .seg_elems = 352, .nsegs = 1 };

	(void)state;
	assert_int_equal(seg_len(&l, 0), 1);
}

static void len__f16_odd_count(void **state)
{
	uint32_t se = seg_elems_of(SEG1500, WIRE_F16);
	struct seg_layout l = { .count = 705, .elem = 2, .seg_elems = se,
				.nsegs = (uint32_t)seg_nsegs(705, se) };

	(void)state;
	assert_int_equal(l.nsegs, 2);
	assert_int_equal(seg_len(&l, 0), 704);
	assert_int_equal(seg_len(&l, 1), 1);
	/* 3 f16 elements: one segment of 3, 6 payload bytes */
	l.count = 3;
	assert_int_equal(seg_nsegs(3, se), 1);
	assert_int_equal(seg_len(&l, 0) * l.elem, 6);
}

static void len__exact_multiple_has_no_short_segment(void **state)
{
	struct seg_layout l = { .count = 352 * 4, .elem = 4, .seg_elems = 352, .nsegs = 4 };

	(void)state;
	assert_int_equal(seg_len(&l, 3), 352);
}

static void count_check__zero_bad_dtype_overflow(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(seg_count_check(0, WIRE_F32, SEG1500, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "count is 0"));
	assert_int_equal(seg_count_check(10, 9, SEG1500, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "dtype"));
	assert_int_equal(seg_count_check(SIZE_MAX / 2, WIRE_F32, SEG1500, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "overflows"));
	assert_int_equal(seg_count_check(1, WIRE_F32, 0, err, sizeof(err)), PBOX_EINVAL);
}

static void count_check__huge_counts_and_segment_index_limit(void **state)
{
	char err[256];
	size_t max_ok = (size_t)UINT32_MAX * 352; /* exactly 2^32 - 1 segments */

	(void)state;
	assert_int_equal(seg_count_check(max_ok, WIRE_F32, SEG1500, err, sizeof(err)), 0);
	assert_int_equal(seg_count_check(max_ok + 1, WIRE_F32, SEG1500, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "2^32"));
	assert_int_equal(seg_count_check(64u << 20, WIRE_BF16, SEG1500, err, sizeof(err)), 0);
	assert_int_equal(seg_nsegs((uint64_t)1 << 40, 352), 3123612579ull);
}

static void chunks__count_and_endpoint_of_segment(void **state)
{
	uint16_t eps[5] = { 0, 1, 0, 1, 2 };
	struct seg_layout l = { .count = 100 * 352, .elem = 4, .seg_elems = 352, .nsegs = 100,
				.segs_per_chunk = 23, .nchunks = 5, .chunk_ep = eps };

	(void)state;
	assert_int_equal(seg_nchunks(100, 23), 5);
	assert_int_equal(seg_nchunks(92, 23), 4);
	assert_int_equal(seg_nchunks(1, 23), 1);
	assert_int_equal(seg_nchunks(5, 0), 0);
	assert_int_equal(seg_endpoint(&l, 0), 0);
	assert_int_equal(seg_endpoint(&l, 22), 0);
	assert_int_equal(seg_endpoint(&l, 23), 1);
	assert_int_equal(seg_endpoint(&l, 99), 2);
}

static struct seg_layout good_layout(uint16_t *eps)
{
	return (struct seg_layout){ .count = 1000, .elem = 4, .seg_elems = 352, .nsegs = 3,
				    .segs_per_chunk = 2, .nchunks = 2, .chunk_ep = eps };
}

static void layout_check__accepts_consistent(void **state)
{
	uint16_t eps[2] = { 0, 1 };
	struct seg_layout l = good_layout(eps);
	char err[256] = "";

	(void)state;
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F32, SEG1500, 2, err, sizeof(err)), 0);
}

static void layout_check__names_each_inconsistency(void **state)
{
	uint16_t eps[2] = { 0, 1 };
	struct seg_layout l;
	char err[256];

	(void)state;
	l = good_layout(eps);
	assert_int_equal(seg_layout_check(&l, 999, WIRE_F32, SEG1500, 2, err, sizeof(err)), PBOX_EPROTO);
	assert_non_null(strstr(err, "count"));
	l = good_layout(eps);
	l.seg_elems = 350;
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F32, SEG1500, 2, err, sizeof(err)), PBOX_EPROTO);
	assert_non_null(strstr(err, "seg_elems"));
	l = good_layout(eps);
	l.nsegs = 4;
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F32, SEG1500, 2, err, sizeof(err)), PBOX_EPROTO);
	assert_non_null(strstr(err, "nsegs"));
	l = good_layout(eps);
	l.nchunks = 1;
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F32, SEG1500, 2, err, sizeof(err)), PBOX_EPROTO);
	assert_non_null(strstr(err, "chunks"));
	l = good_layout(eps);
	l.segs_per_chunk = 0;
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F32, SEG1500, 2, err, sizeof(err)), PBOX_EPROTO);
	l = good_layout(eps);
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F32, SEG1500, 1, err, sizeof(err)), PBOX_EPROTO);
	assert_non_null(strstr(err, "endpoint 1 of 1"));
	l = good_layout(eps);
	assert_int_equal(seg_layout_check(&l, 1000, WIRE_F16, SEG1500, 2, err, sizeof(err)), PBOX_EPROTO);
}

static void rto__doubles_and_caps(void **state)
{
	(void)state;
	assert_int_equal(seg_rto_backoff(20, 0, 1000), 20);
	assert_int_equal(seg_rto_backoff(20, 1, 1000), 40);
	assert_int_equal(seg_rto_backoff(20, 2, 1000), 80);
	assert_int_equal(seg_rto_backoff(20, 5, 1000), 640);
	assert_int_equal(seg_rto_backoff(20, 6, 1000), 1000);
	assert_int_equal(seg_rto_backoff(20, 4000000000u, 1000), 1000);
	assert_int_equal(seg_rto_backoff(5000, 0, 1000), 1000);
}

static void rtt__first_sample_sets_srtt_and_half_var(void **state)
{
	struct rtt_est e;

	(void)state;
	rtt_init(&e, 20000, 2000, 1000000);
	assert_int_equal(e.rto_us, 20000); /* initial, before any sample */
	assert_int_equal(e.nsamples, 0);
	rtt_sample(&e, 1000);
	assert_int_equal(e.srtt_us, 1000);
	assert_int_equal(e.rttvar_us, 500);
	assert_int_equal(e.rto_us, 3000); /* 1000 + 4 * 500 */
	assert_int_equal(e.nsamples, 1);
}

static void rtt__smooths_per_rfc6298(void **state)
{
	struct rtt_est e;

	(void)state;
	rtt_init(&e, 20000, 100, 1000000);
	rtt_sample(&e, 8000);              /* srtt 8000, var 4000 */
	rtt_sample(&e, 16000);             /* var 3/4*4000 + 1/4*8000 = 5000; srtt 9000 */
	assert_int_equal(e.rttvar_us, 5000);
	assert_int_equal(e.srtt_us, 9000);
	assert_int_equal(e.rto_us, 29000);
	for (int i = 0; i < 200; i++)      /* steady 1 ms: converges, var -> 0 */
		rtt_sample(&e, 1000);
	assert_true(e.srtt_us >= 1000 && e.srtt_us <= 1010);
	assert_true(e.rttvar_us <= 10);
}

/* RFC 6298 5.5: each backoff doubles the timeout up to its cap; the next
 * sample sets it from the round trip again. */
static void rtt__backoff_doubles_until_a_sample(void **state)
{
	struct rtt_est e;

	(void)state;
	rtt_init(&e, 20000, 100, 100000);
	rtt_backoff(&e);
	assert_int_equal(e.rto_us, 40000);
	rtt_backoff(&e);
	rtt_backoff(&e);
	assert_int_equal(e.rto_us, 100000);   /* capped */
	rtt_sample(&e, 60000);
	assert_int_equal(e.rto_us, 100000);   /* 60 ms + 4 x 30 ms, capped */
	for (int i = 0; i < 100; i++)
		rtt_sample(&e, 30000);
	assert_int_equal(e.rto_us, 60000);    /* twice the steady round trip */
}

/* A steady round trip gives rttvar -> 0: the timeout stays at least twice
 * srtt, so the tail of an allreduce's round trips (the wait for the last
 * rank) is not taken for loss. */
static void rtt__at_least_twice_srtt(void **state)
{
	struct rtt_est e;

	(void)state;
	rtt_init(&e, 20000, 100, 1000000);
	for (int i = 0; i < 200; i++)
		rtt_sample(&e, 10000);
	assert_int_equal(e.srtt_us, 10000);
	assert_int_equal(e.rttvar_us, 0);
	assert_int_equal(e.rto_us, 20000);
}

static void rtt__clamped_to_min_and_max(void **state)
{
	struct rtt_est e;

	(void)state;
	rtt_init(&e, 20000, 2000, 1000000);
	for (int i = 0; i < 100; i++)
		rtt_sample(&e, 50);        /* 50 us: a fast loopback */
	assert_int_equal(e.rto_us, 2000);
	rtt_sample(&e, UINT32_MAX);        /* absurd sample: capped, no overflow */
	assert_int_equal(e.rto_us, 1000000);
	rtt_init(&e, 5000000, 2000, 1000000); /* initial above the cap */
	assert_int_equal(e.rto_us, 1000000);
	rtt_init(&e, 0, 2000, 1000000);
	assert_int_equal(e.rto_us, 2000);
}

static void bdp__window_is_twice_rate_times_min_rtt(void **state)
{
	struct bdp_est b;

	(void)state;
	bdp_init(&b);
	assert_int_equal(bdp_window(&b, 1408, 32, 128), 128); /* nothing known: the cap */
	/* 100 MB/s: 1408 bytes every 14.08 us, round trips 300 us (min 200) */
	uint64_t t = 1000000;
	for (int i = 0; i < 2000; i++, t += 14)
		bdp_on_result(&b, t, 1400, i == 500 ? 200 : 300, 300);
	assert_int_equal(b.min_rtt_us, 200);
	assert_true(b.nrate >= 8);
	/* 2 x 100 MB/s x 200 us = 40 KB = 29 segments of 1408 -> floor 32 */
	assert_int_equal(bdp_window(&b, 1408, 32, 128), 32);
	assert_int_equal(bdp_window(&b, 1408, 8, 128), 29);
	assert_int_equal(bdp_window(&b, 1408, 64, 16), 16); /* a cap below the floor wins */
	/* 10x the rate: 290 segments, capped */
	for (int i = 0; i < 20000; i++, t += 1)
		bdp_on_result(&b, t, 1400, 300, 300);
	assert_int_equal(bdp_window(&b, 1408, 32, 128), 128);
}

static void bdp__min_rtt_expires_and_idle_keeps_max_rate(void **state)
{
	struct bdp_est b;

	(void)state;
	bdp_init(&b);
	uint64_t t = 1000000;
	for (int i = 0; i < 1000; i++, t += 10)
		bdp_on_result(&b, t, 1000, 100, 100);
	uint32_t w = bdp_window(&b, 1000, 1, 100000);
	assert_int_equal(w, 20); /* 2 x 100 MB/s x 100 us / 1000 B */
	t += 5000000;            /* idle 5 s: one slow interval, the max holds */
	bdp_on_result(&b, t, 1000, 0, 100);
	assert_int_equal(bdp_window(&b, 1000, 1, 100000), w);
	t += BDP_RTT_WINDOW_US;  /* the old minimum expires: 500 us now */
	bdp_on_result(&b, t, 1000, 500, 500);
	assert_int_equal(b.min_rtt_us, 500);
}

static void window__take_until_full_then_put(void **state)
{
	struct seg_window w;
	uint32_t a = UINT32_MAX, b = UINT32_MAX, c = UINT32_MAX, d = UINT32_MAX;

	(void)state;
	assert_int_equal(seg_window_init(&w, 3), 0);
	assert_int_equal(seg_window_inflight(&w), 0);
	assert_true(seg_window_take(&w, &a));
	assert_true(seg_window_take(&w, &b));
	assert_true(seg_window_take(&w, &c));
	assert_int_equal(a, 0);
	assert_true(a != b && b != c && a != c && a < 3 && b < 3 && c < 3);
	assert_int_equal(seg_window_inflight(&w), 3);
	assert_false(seg_window_take(&w, &d));
	seg_window_put(&w, b);
	assert_int_equal(seg_window_inflight(&w), 2);
	assert_true(seg_window_take(&w, &d));
	assert_int_equal(d, b);
	seg_window_free(&w);
}

static void window__zero_capacity_fails(void **state)
{
	struct seg_window w;

	(void)state;
	assert_int_equal(seg_window_init(&w, 0), PBOX_EINVAL);
}

static void bitmap__first_clear(void **state)
{
	uint64_t bm[3] = { 0 };

	(void)state;
	assert_int_equal(seg_bitmap_words(1), 1);
	assert_int_equal(seg_bitmap_words(64), 1);
	assert_int_equal(seg_bitmap_words(65), 2);
	assert_int_equal(seg_bitmap_first_clear(bm, 130), 0);
	for (uint32_t s = 0; s < 130; s++)
		if (s != 129)
			seg_bit_set(bm, s);
	assert_true(seg_bit(bm, 128));
	assert_false(seg_bit(bm, 129));
	assert_int_equal(seg_bitmap_first_clear(bm, 130), 129);
	seg_bit_set(bm, 129);
	assert_int_equal(seg_bitmap_first_clear(bm, 130), 130);
	uint64_t full = UINT64_MAX;
	assert_int_equal(seg_bitmap_first_clear(&full, 64), 64);
	uint64_t low = 0x7; /* nsegs 3, all set; bits above are garbage-free */
	assert_int_equal(seg_bitmap_first_clear(&low, 3), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(elems_of__dtypes_and_bad_sizes),
		cmocka_unit_test(nsegs__count_one_exact_and_one_over),
		cmocka_unit_test(len__last_segment_short),
		cmocka_unit_test(len__count_one),
		cmocka_unit_test(len__f16_odd_count),
		cmocka_unit_test(len__exact_multiple_has_no_short_segment),
		cmocka_unit_test(count_check__zero_bad_dtype_overflow),
		cmocka_unit_test(count_check__huge_counts_and_segment_index_limit),
		cmocka_unit_test(chunks__count_and_endpoint_of_segment),
		cmocka_unit_test(layout_check__accepts_consistent),
		cmocka_unit_test(layout_check__names_each_inconsistency),
		cmocka_unit_test(rto__doubles_and_caps),
		cmocka_unit_test(rtt__first_sample_sets_srtt_and_half_var),
		cmocka_unit_test(rtt__smooths_per_rfc6298),
		cmocka_unit_test(rtt__backoff_doubles_until_a_sample),
		cmocka_unit_test(rtt__at_least_twice_srtt),
		cmocka_unit_test(rtt__clamped_to_min_and_max),
		cmocka_unit_test(bdp__window_is_twice_rate_times_min_rtt),
		cmocka_unit_test(bdp__min_rtt_expires_and_idle_keeps_max_rate),
		cmocka_unit_test(window__take_until_full_then_put),
		cmocka_unit_test(window__zero_capacity_fails),
		cmocka_unit_test(bitmap__first_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
