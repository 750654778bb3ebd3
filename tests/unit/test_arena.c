/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_arena.c - a job's memory blocks (control/arena.c): first fit,
 * merging with both neighbours, the top coming down, what fits, and a
 * random run checked against a byte map (no block overlaps another, used
 * bytes always add up, everything freed returns the arena to its start).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/arena.h"

static void arena__bump_then_reserved(void **state)
{
	struct arena a;
	uint64_t off;
	(void)state;

	arena_init(&a, 1000, 100);
	assert_int_equal(a.used, 100);
	assert_int_equal(arena_alloc(&a, 300, &off), 0);
	assert_int_equal(off, 100);
	assert_int_equal(arena_alloc(&a, 600, &off), 0);
	assert_int_equal(off, 400);
	assert_int_equal(arena_alloc(&a, 1, &off), -ENOSPC);
	assert_int_equal(arena_alloc(&a, 0, &off), -EINVAL);
	assert_int_equal(arena_largest(&a), 0);
	assert_int_equal(a.used, 1000);
	arena_fini(&a);
}

static void arena__first_fit_and_merge(void **state)
{
	struct arena a;
	uint64_t o[5];
	(void)state;

	arena_init(&a, 1000, 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(arena_alloc(&a, 100, &o[i]), 0);
		assert_int_equal(o[i], 100 * i);
	}
	/* holes at 100 and 300: a block of 100 goes to the first */
	assert_int_equal(arena_free(&a, o[1], 100), 0);
	assert_int_equal(arena_free(&a, o[3], 100), 0);
	assert_int_equal(a.nfree, 2);
	assert_int_equal(a.used, 300);
	assert_int_equal(arena_largest(&a), 500); /* the untouched top */
	uint64_t x;
	assert_int_equal(arena_alloc(&a, 50, &x), 0);
	assert_int_equal(x, 100);
	assert_int_equal(arena_alloc(&a, 100, &x), 0);
	assert_int_equal(x, 300); /* 50 left at 150 is too small */
	assert_int_equal(arena_free(&a, 300, 100), 0);
	assert_int_equal(arena_free(&a, 100, 50), 0);
	/* free 200..300: merges 100..200 and 300..400 into one block */
	assert_int_equal(arena_free(&a, o[2], 100), 0);
	assert_int_equal(a.nfree, 1);
	assert_int_equal(a.free[0].off, 100);
	assert_int_equal(a.free[0].len, 300);
	/* the last block goes: everything from 100 is the top again */
	assert_int_equal(arena_free(&a, o[4], 100), 0);
	assert_int_equal(a.nfree, 0);
	assert_int_equal(a.top, 100);
	assert_int_equal(a.used, 100);
	assert_int_equal(arena_largest(&a), 900);
	arena_fini(&a);
}

/* Random allocations and frees against a map of who owns each byte. */
static void arena__random_against_map(void **state)
{
	enum { SIZE = 4096, N = 64 };
	struct arena a;
	uint8_t owner[SIZE];
	uint64_t off[N], len[N];
	int live[N] = { 0 };
	unsigned seed = 7;
	(void)state;

	memset(owner, 0, sizeof(owner));
	arena_init(&a, SIZE, 0);
	for (int step = 0; step < 20000; step++) {
		int i = (int)(rand_r(&seed) % N);
		if (live[i]) {
			for (uint64_t b = off[i]; b < off[i] + len[i]; b++) {
				assert_int_equal(owner[b], i + 1);
				owner[b] = 0;
			}
			assert_int_equal(arena_free(&a, off[i], len[i]), 0);
			live[i] = 0;
		} else {
			len[i] = 1 + rand_r(&seed) % 200;
			uint64_t big = arena_largest(&a);
			int rc = arena_alloc(&a, len[i], &off[i]);
			assert_int_equal(rc, len[i] <= big ? 0 : -ENOSPC);
			if (rc < 0)
				continue;
			assert_true(off[i] + len[i] <= SIZE);
			for (uint64_t b = off[i]; b < off[i] + len[i]; b++) {
				assert_int_equal(owner[b], 0);
				owner[b] = (uint8_t)(i + 1);
			}
			live[i] = 1;
		}
		uint64_t used = 0;
		for (int b = 0; b < SIZE; b++)
			used += owner[b] != 0;
		assert_int_equal(a.used, used);
		for (uint32_t f = 0; f + 1 < a.nfree; f++) /* sorted, never adjacent */
			assert_true(a.free[f].off + a.free[f].len < a.free[f + 1].off);
		if (a.nfree)
			assert_true(a.free[a.nfree - 1].off + a.free[a.nfree - 1].len < a.top);
	}
	for (int i = 0; i < N; i++)
		if (live[i])
			assert_int_equal(arena_free(&a, off[i], len[i]), 0);
	assert_int_equal(a.used, 0);
	assert_int_equal(a.top, 0);
	assert_int_equal(a.nfree, 0);
	arena_fini(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arena__bump_then_reserved),
		cmocka_unit_test(arena__first_fit_and_merge),
		cmocka_unit_test(arena__random_against_map),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
