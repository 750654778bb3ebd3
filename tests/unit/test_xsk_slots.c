/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_xsk_slots.c - the shared UMEM's tx slot pool
 * (client/transport/xsk_slots.c), as several AF_XDP sockets use it: each
 * takes slots, sends frames of one or more descriptors from them, and the
 * one completion ring gives the descriptors back in any socket's order.
 *
 * The rules under test: a slot is free again exactly when the last of its
 * descriptors completes, whoever reaps; no slot is handed to two sockets
 * at once; a completion naming no slot in flight (outside the range, or
 * twice) is counted and changes nothing; after everything completes every
 * slot is free once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/transport/xsk_slots.h"
#include "include/pbox.h"

#define CHUNK 4096u
#define BASE  (16u * CHUNK)        /* slots follow 16 rx chunks */

/* Every slot is free, once. */
static void all_free_once(const struct xsk_slots *s)
{
	uint8_t *seen = calloc(s->nslots, 1);

	assert_non_null(seen);
	assert_int_equal(s->nfree, s->nslots);
	for (uint32_t i = 0; i < s->nfree; i++) {
		assert_true(s->free[i] < s->nslots);
		assert_int_equal(seen[s->free[i]]++, 0);
		assert_int_equal(s->pending[s->free[i]], 0);
	}
	free(seen);
}

static void take__never_the_same_slot_twice(void **state)
{
	struct xsk_slots s;
	uint32_t a[8], b[8], c[8];

	(void)state;
	assert_int_equal(xsk_slots_init(&s, BASE, CHUNK, 12), 0);
	assert_int_equal(xsk_slots_take(&s, a, 8), 8);    /* socket A */
	assert_int_equal(xsk_slots_take(&s, b, 8), 4);    /* socket B gets what is left */
	assert_int_equal(xsk_slots_take(&s, c, 8), 0);
	uint8_t seen[12] = { 0 };
	for (int i = 0; i < 8; i++)
		seen[a[i]]++;
	for (int i = 0; i < 4; i++)
		seen[b[i]]++;
	for (int i = 0; i < 12; i++)
		assert_int_equal(seen[i], 1);
	assert_int_equal(xsk_slots_addr(&s, 0), BASE);
	assert_int_equal(xsk_slots_addr(&s, 5), BASE + 5 * CHUNK);
	xsk_slots_give(&s, a, 8);                          /* never sent */
	xsk_slots_give(&s, b, 4);
	all_free_once(&s);
	xsk_slots_fini(&s);
}

/* Jumbo slots (3 chunks): frames of 1 to 3 descriptors from two
 * sockets, completed interleaved and in pieces by either. */
static void complete__a_slot_frees_with_its_last_descriptor(void **state)
{
	struct xsk_slots s;
	uint32_t a[2], b[2];

	(void)state;
	assert_int_equal(xsk_slots_init(&s, BASE, 3 * CHUNK, 4), 0);
	assert_int_equal(xsk_slots_take(&s, a, 2), 2);
	assert_int_equal(xsk_slots_take(&s, b, 2), 2);
	xsk_slots_sent(&s, a[0], 3);
	xsk_slots_sent(&s, a[1], 1);
	xsk_slots_sent(&s, b[0], 2);
	xsk_slots_sent(&s, b[1], 3);
	uint64_t a0 = xsk_slots_addr(&s, a[0]), a1 = xsk_slots_addr(&s, a[1]);
	uint64_t b0 = xsk_slots_addr(&s, b[0]), b1 = xsk_slots_addr(&s, b[1]);
	/* the completion ring, as B's reap sees it: A's and B's interleaved */
	uint64_t first[] = { a0, b0, a0 + CHUNK, b1, a1 };
	xsk_slots_complete(&s, first, 5);
	assert_int_equal(s.nfree, 1);                      /* a[1]: its only one */
	assert_int_equal(s.free[0], a[1]);
	assert_int_equal(s.pending[a[0]], 1);
	assert_int_equal(s.pending[b[0]], 1);
	assert_int_equal(s.pending[b[1]], 2);
	/* ... and A's reap the rest */
	uint64_t rest[] = { b0 + CHUNK, a0 + 2 * CHUNK, b1 + CHUNK, b1 + 2 * CHUNK };
	xsk_slots_complete(&s, rest, 4);
	assert_int_equal(s.stray, 0);
	all_free_once(&s);
	xsk_slots_fini(&s);
}

static void complete__strays_counted_and_ignored(void **state)
{
	struct xsk_slots s;
	uint32_t a[1];

	(void)state;
	assert_int_equal(xsk_slots_init(&s, BASE, CHUNK, 4), 0);
	assert_int_equal(xsk_slots_take(&s, a, 1), 1);
	xsk_slots_sent(&s, a[0], 1);
	uint64_t addr = xsk_slots_addr(&s, a[0]);
	uint64_t bad[] = { 0, BASE - CHUNK,               /* rx chunks */
			   BASE + 4 * CHUNK,                /* past the last slot */
			   xsk_slots_addr(&s, (a[0] + 1) % 4), /* a free slot */
			   addr, addr };                    /* the second: twice */
	xsk_slots_complete(&s, bad, 6);
	assert_int_equal(s.stray, 5);
	all_free_once(&s);
	xsk_slots_fini(&s);
}

/* Many rounds of two sockets: each takes up to a burst, sends frames of
 * 1-3 descriptors, and the completions come back shuffled, reaped in
 * random batches; nothing is lost or duplicated. */
static void rounds__nothing_lost(void **state)
{
	enum { NSLOTS = 64, MAXD = 3 * NSLOTS };
	struct xsk_slots s;
	uint64_t ring[MAXD];
	uint32_t held[NSLOTS];
	unsigned seed = 7;

	(void)state;
	assert_int_equal(xsk_slots_init(&s, BASE, 3 * CHUNK, NSLOTS), 0);
	for (int round = 0; round < 500; round++) {
		uint32_t nring = 0;
		for (int sock = 0; sock < 2; sock++) {
			uint32_t want = (uint32_t)(rand_r(&seed) % 40), n = xsk_slots_take(&s, held, want);
			for (uint32_t i = 0; i < n; i++) {
				uint32_t nd = 1 + (uint32_t)(rand_r(&seed) % 3);
				xsk_slots_sent(&s, held[i], nd);
				for (uint32_t d = 0; d < nd; d++)
					ring[nring++] = xsk_slots_addr(&s, held[i]) + d * CHUNK;
			}
		}
		for (uint32_t i = nring; i > 1; i--) {        /* any order */
			uint32_t j = (uint32_t)(rand_r(&seed) % i);
			uint64_t t = ring[i - 1];
			ring[i - 1] = ring[j];
			ring[j] = t;
		}
		for (uint32_t done = 0; done < nring; ) {
			uint32_t k = 1 + (uint32_t)(rand_r(&seed) % 17);
			k = k < nring - done ? k : nring - done;
			xsk_slots_complete(&s, ring + done, k);
			done += k;
		}
		all_free_once(&s);
	}
	assert_int_equal(s.stray, 0);
	xsk_slots_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(take__never_the_same_slot_twice),
		cmocka_unit_test(complete__a_slot_frees_with_its_last_descriptor),
		cmocka_unit_test(complete__strays_counted_and_ignored),
		cmocka_unit_test(rounds__nothing_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
