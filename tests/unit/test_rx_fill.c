/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rx_fill.c - when a data lcore's rx queues stand (dataplane/rx_fill.h:
 * the congestion that marks results CE and holds NACKs back).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dataplane/rx_fill.h"

#define BURST 32

static void fill__a_run_of_full_bursts_stands_until_one_under_half(void **state)
{
	(void)state;
	struct rx_fill f = { 0 };

	for (int i = 0; i < RX_FILL_RUN - 1; i++)
		rx_fill_note(&f, 0, BURST, BURST);
	assert_false(rx_fill_standing(&f));
	rx_fill_note(&f, 0, BURST, BURST);
	assert_true(rx_fill_standing(&f));
	/* a burst at least half full neither ends nor restarts the run */
	rx_fill_note(&f, 0, BURST / 2, BURST);
	assert_true(rx_fill_standing(&f));
	for (int i = 0; i < 1000; i++)
		rx_fill_note(&f, 0, BURST, BURST);
	assert_true(rx_fill_standing(&f));
	rx_fill_note(&f, 0, BURST / 2 - 1, BURST);
	assert_false(rx_fill_standing(&f));
	/* the run starts again from nothing */
	for (int i = 0; i < RX_FILL_RUN - 1; i++)
		rx_fill_note(&f, 0, BURST, BURST);
	assert_false(rx_fill_standing(&f));
}

/* An lcore owning the queues of two ports, one flooded and one idle, polls
 * them in turn: the idle queue's empty bursts do not end the busy one's
 * run (with one run counter for the lcore it never reached 16). */
static void fill__busy_queue_beside_an_idle_one_stands(void **state)
{
	(void)state;
	struct rx_fill f = { 0 };

	for (int i = 0; i < RX_FILL_RUN - 1; i++) {
		rx_fill_note(&f, 0, 0, BURST);
		rx_fill_note(&f, 1, BURST, BURST);
		rx_fill_note(&f, 2, 3, BURST);
	}
	assert_false(rx_fill_standing(&f));
	rx_fill_note(&f, 0, 0, BURST);
	rx_fill_note(&f, 1, BURST, BURST);
	assert_true(rx_fill_standing(&f));
	rx_fill_note(&f, 31, 0, BURST);
	assert_true(rx_fill_standing(&f));
	rx_fill_note(&f, 1, 0, BURST);
	assert_false(rx_fill_standing(&f));
}

/* Two busy queues stand together when their runs add up to 16 bursts (as
 * much waiting for the lcore as one queue's 16), and each one's run ends
 * on its own. */
static void fill__runs_of_several_queues_add_up(void **state)
{
	(void)state;
	struct rx_fill f = { 0 };

	for (int i = 0; i < RX_FILL_RUN / 2 - 1; i++) {
		rx_fill_note(&f, 0, BURST, BURST);
		rx_fill_note(&f, 5, BURST, BURST);
	}
	assert_false(rx_fill_standing(&f));
	rx_fill_note(&f, 0, BURST, BURST);
	assert_false(rx_fill_standing(&f));
	rx_fill_note(&f, 5, BURST, BURST);
	assert_true(rx_fill_standing(&f));
	/* queue 5's run ends: queue 0's 8 alone do not stand */
	rx_fill_note(&f, 5, 1, BURST);
	assert_false(rx_fill_standing(&f));
	/* a run counts at most 16 bursts: a long one on queue 0 ended leaves
	 * nothing behind */
	for (int i = 0; i < 100; i++)
		rx_fill_note(&f, 0, BURST, BURST);
	assert_true(rx_fill_standing(&f));
	rx_fill_note(&f, 0, 0, BURST);
	assert_false(rx_fill_standing(&f));
	assert_int_equal(f.total, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fill__a_run_of_full_bursts_stands_until_one_under_half),
		cmocka_unit_test(fill__busy_queue_beside_an_idle_one_stands),
		cmocka_unit_test(fill__runs_of_several_queues_add_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
