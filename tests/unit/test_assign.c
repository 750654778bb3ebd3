/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_assign.c - key geometry and chunk balancing (control/assign.c):
 * exact segment and chunk counts, balance within one chunk, determinism,
 * load carried across keys and given back.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/assign.h"
#include "common/wire.h"

static void spread(const uint64_t *load, unsigned n, uint64_t *min, uint64_t *max)
{
	*min = UINT64_MAX;
	*max = 0;
	for (unsigned i = 0; i < n; i++) {
		if (load[i] < *min)
			*min = load[i];
		if (load[i] > *max)
			*max = load[i];
	}
}

static void geom__exact_counts(void **state)
{
	struct assign_geom g;
	(void)state;

	/* docs/rpc.md's example: 1e6 f32 at 1408-byte segments */
	assert_int_equal(assign_geom(1000000, WIRE_F32, 1408, 32768, &g), 0);
	assert_int_equal(g.seg_elems, 352);
	assert_int_equal(g.nsegs, 2841);
	assert_int_equal(g.segs_per_chunk, 23);
	assert_int_equal(g.nchunks, 124);
	assert_int_equal(assign_chunk_bytes(&g, 0), 23 * 1408);
	/* last chunk: 2841 - 123*23 = 12 segments, the last one short */
	assert_int_equal(assign_chunk_bytes(&g, 123), (1000000 - 123ull * 23 * 352) * 4);
	assert_int_equal(assign_chunk_bytes(&g, 124), 0);

	/* chunk smaller than a segment: one segment per chunk */
	assert_int_equal(assign_geom(1000, WIRE_F16, 8896, 4096, &g), 0);
	assert_int_equal(g.segs_per_chunk, 1);
	assert_int_equal(g.seg_elems, 4448);
	assert_int_equal(g.nsegs, 1);
	assert_int_equal(g.nchunks, 1);

	/* exact multiple */
	assert_int_equal(assign_geom(352 * 46, WIRE_F32, 1408, 32768, &g), 0);
	assert_int_equal(g.nsegs, 46);
	assert_int_equal(g.nchunks, 2);
	assert_int_equal(assign_chunk_bytes(&g, 1), 23 * 1408);
}

static void geom__rejects_bad_input(void **state)
{
	struct assign_geom g;
	(void)state;

	assert_int_equal(assign_geom(0, WIRE_F32, 1408, 32768, &g), -EINVAL);
	assert_int_equal(assign_geom(10, 9, 1408, 32768, &g), -EINVAL);
	assert_int_equal(assign_geom(10, WIRE_F32, 0, 32768, &g), -EINVAL);
	assert_int_equal(assign_geom(10, WIRE_F32, 100, 32768, &g), -EINVAL);
	/* 2^32 segments or more */
	assert_int_equal(assign_geom(1ull << 40, WIRE_F32, 64, 32768, &g), -EINVAL);
}

static void geom__huge_count_does_not_wrap(void **state)
{
	struct assign_geom g;
	(void)state;

	/* count + seg_elems - 1 must not wrap to a handful of segments */
	assert_int_equal(assign_geom(UINT64_MAX, WIRE_F32, 64, 32768, &g), -EINVAL);
	assert_int_equal(assign_geom(UINT64_MAX - 3, WIRE_F32, 64, 32768, &g), -EINVAL);
}

static void chunks__balanced_within_one_chunk(void **state)
{
	static const unsigned neps_list[] = { 1, 2, 3, 7, 8, 64 };
	static const uint64_t counts[] = { 1, 100, 352 * 23, 1000000, 25000000, 3333333 };
	(void)state;

	for (unsigned a = 0; a < sizeof(neps_list) / sizeof(neps_list[0]); a++) {
		for (unsigned b = 0; b < sizeof(counts) / sizeof(counts[0]); b++) {
			struct assign_geom g;
			uint64_t load[64] = { 0 }, mn, mx, total = 0;
			unsigned n = neps_list[a];
			assert_int_equal(assign_geom(counts[b], WIRE_F32, 1408, 32768, &g), 0);
			uint16_t *ep = malloc(g.nchunks * sizeof(*ep));
			assert_int_equal(assign_chunks(&g, load, n, ep), 0);
			for (uint32_t c = 0; c < g.nchunks; c++)
				assert_true(ep[c] < n);
			spread(load, n, &mn, &mx);
			for (unsigned i = 0; i < n; i++)
				total += load[i];
			assert_int_equal(total, counts[b] * 4);
			assert_true(mx - mn <= assign_chunk_bytes(&g, 0));
			free(ep);
		}
	}
}

static void chunks__deterministic_and_ties_lowest_index(void **state)
{
	struct assign_geom g;
	uint64_t l1[8] = { 0 }, l2[8] = { 0 };
	uint16_t e1[200], e2[200];
	(void)state;

	assert_int_equal(assign_geom(352 * 23 * 20, WIRE_F32, 1408, 32768, &g), 0);
	assert_int_equal(g.nchunks, 20);
	assert_int_equal(assign_chunks(&g, l1, 8, e1), 0);
	assert_int_equal(assign_chunks(&g, l2, 8, e2), 0);
	assert_memory_equal(e1, e2, g.nchunks * sizeof(e1[0]));
	assert_memory_equal(l1, l2, sizeof(l1));
	/* equal chunks from zero load: round-robin from endpoint 0 */
	for (uint32_t c = 0; c < g.nchunks; c++)
		assert_int_equal(e1[c], c % 8);
}

static void chunks__least_loaded_first(void **state)
{
	struct assign_geom g;
	uint64_t load[4] = { 1000, 10, 500, 10 };
	uint16_t ep[1];
	(void)state;

	assert_int_equal(assign_geom(16, WIRE_F32, 1408, 32768, &g), 0);
	assert_int_equal(assign_chunks(&g, load, 4, ep), 0);
	assert_int_equal(ep[0], 1);   /* tie 1 vs 3: lowest index */
	assert_int_equal(load[1], 10 + 64);
	assert_int_equal(assign_chunks(&g, load, 4, ep), 0);
	assert_int_equal(ep[0], 3);
}

static void chunks__small_keys_spread_across_keys(void **state)
{
	uint64_t load[8] = { 0 }, mn, mx;
	uint16_t ep[1];
	unsigned used[8] = { 0 };
	(void)state;

	for (int k = 0; k < 64; k++) {
		struct assign_geom g;
		assert_int_equal(assign_geom(100, WIRE_F32, 1408, 32768, &g), 0);
		assert_int_equal(assign_chunks(&g, load, 8, ep), 0);
		used[ep[0]]++;
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(used[i], 8);
	spread(load, 8, &mn, &mx);
	assert_int_equal(mn, mx);
}

static void release__gives_load_back(void **state)
{
	struct assign_geom g;
	uint64_t load[5] = { 0 };
	uint16_t *ep;
	(void)state;

	assert_int_equal(assign_geom(5000000, WIRE_BF16, 1408, 32768, &g), 0);
	ep = malloc(g.nchunks * sizeof(*ep));
	assert_int_equal(assign_chunks(&g, load, 5, ep), 0);
	assign_release(&g, load, 5, ep);
	for (int i = 0; i < 5; i++)
		assert_int_equal(load[i], 0);
	free(ep);
	assert_int_equal(assign_chunks(&g, load, 0, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(geom__exact_counts),
		cmocka_unit_test(geom__rejects_bad_input),
		cmocka_unit_test(geom__huge_count_does_not_wrap),
		cmocka_unit_test(chunks__balanced_within_one_chunk),
		cmocka_unit_test(chunks__deterministic_and_ties_lowest_index),
		cmocka_unit_test(chunks__least_loaded_first),
		cmocka_unit_test(chunks__small_keys_spread_across_keys),
		cmocka_unit_test(release__gives_load_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
