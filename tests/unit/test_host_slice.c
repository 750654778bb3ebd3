/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_host_slice.c - unit tests of the host level's pure rules
 * (client/ops/host_slice.c): the parts of a key (in order, covering it,
 * near-equal, aligned, empty only at the end of a small key) and the
 * layouts accepted and refused at connect, each with its named reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client/ops/host.h"

static void slice__parts_cover_the_key_in_order(void **state)
{
	(void)state;
	static const size_t counts[] = { 1, 255, 256, 257, 1000, 4096, 65537, 1u << 24,
					 (1u << 24) + 3 };
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		for (uint32_t L = 2; L <= PBOX_HOST_LOCAL_MAX; L++) {
			size_t next = 0, biggest = 0, smallest = (size_t)-1;
			for (uint32_t l = 0; l < L; l++) {
				size_t lo, hi;
				host_slice(counts[c], L, l, &lo, &hi);
				assert_int_equal(lo, next);          /* in order, no gap */
				assert_true(hi >= lo);
				if (hi > lo)                          /* aligned starts */
					assert_int_equal(lo % HOST_SLICE_ALIGN, 0);
				if (hi == lo)                         /* empty: only at the end */
					assert_int_equal(hi, counts[c]);
				biggest = hi - lo > biggest ? hi - lo : biggest;
				if (hi < counts[c])
					smallest = hi - lo < smallest ? hi - lo : smallest;
				next = hi;
			}
			assert_int_equal(next, counts[c]);           /* covered */
			/* near-equal: no full part exceeds another by more than an
			 * alignment unit */
			if (smallest != (size_t)-1)
				assert_true(biggest - smallest <= HOST_SLICE_ALIGN);
		}
	}
}

static void slice__large_key_spreads_over_every_rank(void **state)
{
	(void)state;
	size_t lo, hi;

	for (uint32_t l = 0; l < 8; l++) {
		host_slice(16u << 20, 8, l, &lo, &hi);
		assert_int_equal(hi - lo, 2u << 20);
		assert_int_equal(lo, (size_t)l << 21);
	}
	host_slice(100, 4, 0, &lo, &hi);   /* a small key: one part */
	assert_int_equal(lo, 0);
	assert_int_equal(hi, 100);
	host_slice(100, 4, 3, &lo, &hi);
	assert_int_equal(lo, hi);
}

static void layout__consecutive_ranks_form_a_host(void **state)
{
	(void)state;
	struct host_layout lay;
	char err[512];

	assert_int_equal(host_layout_of(5, 8, 1, 4, "job", &lay, err, sizeof(err)), 0);
	assert_int_equal(lay.local, 1);
	assert_int_equal(lay.local_world, 4);
	assert_int_equal(lay.host, 1);
	assert_int_equal(lay.hosts, 2);
	assert_int_equal(host_layout_of(1023, 1024, 7, 8, "j", &lay, err, sizeof(err)), 0);
	assert_int_equal(lay.host, 127);
	assert_int_equal(lay.hosts, 128);
}

static void layout__refusals_name_the_rank_and_reason(void **state)
{
	(void)state;
	struct host_layout lay;
	char err[512];
	char longname[64];

	assert_int_equal(host_layout_of(0, 6, 0, 4, "j", &lay, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "4 ranks per host do not divide the world of 6"));
	assert_int_equal(host_layout_of(2, 8, 0, 4, "j", &lay, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "rank 2 is local rank 2 of host 0"));
	assert_int_equal(host_layout_of(1, 8, 5, 4, "j", &lay, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "local rank 5 of 4"));
	assert_int_equal(host_layout_of(0, 130, 0, 65, "j", &lay, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "65 ranks per host, at most 64"));
	memset(longname, 'a', 57);
	longname[57] = '\0';
	assert_int_equal(host_layout_of(0, 2, 0, 2, longname, &lay, err, sizeof(err)),
			 PBOX_EINVAL);
	assert_non_null(strstr(err, "57 characters, at most 56"));
	longname[56] = '\0';
	assert_int_equal(host_layout_of(0, 2, 0, 2, longname, &lay, err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(slice__parts_cover_the_key_in_order),
		cmocka_unit_test(slice__large_key_spreads_over_every_rank),
		cmocka_unit_test(layout__consecutive_ranks_form_a_host),
		cmocka_unit_test(layout__refusals_name_the_rank_and_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
