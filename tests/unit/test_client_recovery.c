/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_recovery.c - unit tests of libpbox's recovery logic
 * (client/xfer/recovery.c): the send-order list, RACK's loss rule and the AIMD
 * window with DCTCP-style marks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "client/xfer/recovery.h"

#define MS 1000000ull

static void list_order(const struct sendq *q, const uint32_t *want, unsigned n)
{
	unsigned k = 0;
	for (uint32_t i = sendq_first(q); i != SENDQ_NIL; i = sendq_next(q, i)) {
		assert_true(k < n);
		assert_int_equal(i, want[k++]);
	}
	assert_int_equal(k, n);
}

static void sendq__push_moves_to_tail_and_remove_unlinks(void **state)
{
	(void)state;
	struct sendq q;
	assert_int_equal(sendq_init(&q, 8), 0);
	list_order(&q, NULL, 0);
	for (uint32_t i = 0; i < 4; i++)
		sendq_push(&q, i);
	list_order(&q, (const uint32_t[]){ 0, 1, 2, 3 }, 4);
	sendq_push(&q, 1);                       /* resent: now the newest */
	list_order(&q, (const uint32_t[]){ 0, 2, 3, 1 }, 4);
	sendq_remove(&q, 0);                     /* head */
	sendq_remove(&q, 1);                     /* tail */
	sendq_remove(&q, 7);                     /* not on it: nothing */
	list_order(&q, (const uint32_t[]){ 2, 3 }, 2);
	sendq_remove(&q, 2);
	sendq_remove(&q, 3);
	list_order(&q, NULL, 0);
	sendq_push(&q, 5);
	list_order(&q, (const uint32_t[]){ 5 }, 1);
	sendq_free(&q);
}

static void rack__lost_only_when_overtaken_and_overdue(void **state)
{
	(void)state;
	struct rack r = { 0 };

	/* nothing delivered yet: nothing is lost */
	assert_false(100 * MS >= rack_due(&r, 0, MS, 0));
	/* segment sent at 10 ms delivered at 12 ms: rtt 2 ms */
	rack_on_delivery(&r, 10 * MS, 12 * MS);
	assert_true(r.xmit_ns == 10 * MS && r.rtt_ns == 2 * MS);
	/* one sent at 9 ms: lost once 9 + max(2, srtt 1) + reo 0.5 = 11.5 ms */
	assert_false(11 * MS >= rack_due(&r, 9 * MS, MS, MS / 2));
	assert_true(11 * MS + MS / 2 >= rack_due(&r, 9 * MS, MS, MS / 2));
	/* the smoothed round trip, when longer, is what counts */
	assert_false(11 * MS + MS / 2 >= rack_due(&r, 9 * MS, 4 * MS, MS / 2));
	/* sent at or after the delivered one: never */
	assert_false(50 * MS >= rack_due(&r, 10 * MS, MS, 0));
	/* an older delivery does not move the reference back */
	rack_on_delivery(&r, 5 * MS, 13 * MS);
	assert_true(r.xmit_ns == 10 * MS);
}

static void rack__timer_for_the_overtaken(void **state)
{
	(void)state;
	struct rack r = { 0 };

	/* nothing delivered: no segment is overtaken, no timer */
	assert_true(rack_due(&r, 5 * MS, MS, 0) == UINT64_MAX);
	rack_on_delivery(&r, 10 * MS, 11 * MS);
	/* sent at 9 ms: lost at 9 + max(rtt 1, srtt 2) + reo 0.5 ms, the time
	 * of its RACK timer (the tail of a call: nothing later to tell) */
	assert_true(rack_due(&r, 9 * MS, 2 * MS, MS / 2) == 11 * MS + MS / 2);
	assert_false(11 * MS >= rack_due(&r, 9 * MS, 2 * MS, MS / 2));
	assert_true(11 * MS + MS / 2 >= rack_due(&r, 9 * MS, 2 * MS, MS / 2));
	assert_true(rack_due(&r, 10 * MS, 2 * MS, 0) == UINT64_MAX);
}

static void rack__waited_result_lost_after_a_later_completion(void **state)
{
	(void)state;
	struct rack r = { 0 };
	const uint64_t reo = MS / 4;

	/* segment A first sent at 1 ms, WAIT at 3 ms: nothing completed */
	uint64_t wait_a = rack_wait_seq(&r);
	assert_true(rack_wait_due(&r, 1 * MS, wait_a, reo) == UINT64_MAX);
	/* B, first sent at 2 ms, completed at 2.5 ms, before A's WAIT came:
	 * it says nothing of the ranks A waits for */
	rack_on_order(&r, 2 * MS, 2 * MS + MS / 2);
	wait_a = rack_wait_seq(&r);
	assert_true(rack_wait_due(&r, 1 * MS, wait_a, reo) == UINT64_MAX);
	/* C, first sent at 4 ms, completes at 20 ms (the late rank came): A's
	 * RESULT is due by 20.25 ms */
	rack_on_order(&r, 4 * MS, 20 * MS);
	assert_true(rack_wait_due(&r, 1 * MS, wait_a, reo) == 20 * MS + reo);
	/* a segment first sent after C is not overtaken by it */
	assert_true(rack_wait_due(&r, 5 * MS, wait_a, reo) == UINT64_MAX);
	/* an earlier segment's completion (a retransmission's) does not move
	 * the reference back */
	rack_on_order(&r, 1 * MS, 21 * MS);
	assert_true(r.order_ns == 4 * MS && r.order_at_ns == 20 * MS);
	/* a WAIT after C's completion waits for the next one */
	assert_true(rack_wait_due(&r, 1 * MS, rack_wait_seq(&r), reo) == UINT64_MAX);
}

/* A WAIT and a later segment's RESULT taken in one receive burst carry the
 * same time; what came first decides (by time alone, a RESULT right after
 * the WAIT was taken for one before it, and the waited segment's lost
 * RESULT waited for the WAIT's pacing, up to a second). */
static void rack__wait_and_completion_in_one_burst(void **state)
{
	(void)state;
	struct rack r = { 0 };
	const uint64_t reo = MS / 4, burst = 30 * MS;

	/* WAIT for A (first sent at 1 ms), then C's RESULT (first sent at
	 * 4 ms), both stamped 30 ms: A's RESULT is due by 30.25 ms */
	uint64_t wait_a = rack_wait_seq(&r);
	rack_on_order(&r, 4 * MS, burst);
	assert_true(rack_wait_due(&r, 1 * MS, wait_a, reo) == burst + reo);

	/* C's RESULT, then the WAIT for A, in one burst: C may have completed
	 * before the WAIT was sent, so it says nothing yet */
	struct rack r2 = { 0 };
	rack_on_order(&r2, 4 * MS, burst);
	wait_a = rack_wait_seq(&r2);
	assert_true(rack_wait_due(&r2, 1 * MS, wait_a, reo) == UINT64_MAX);
}

static void aimd__additive_increase_and_floor(void **state)
{
	(void)state;
	struct aimd a;

	aimd_init(&a, 64, 1024);
	assert_int_equal(aimd_window(&a), 1024);
	assert_true(aimd_decrease(&a, 10 * MS, MS, AIMD_BETA_LOSS));
	assert_int_equal(aimd_window(&a), 716);
	/* once per round trip */
	assert_false(aimd_decrease(&a, 10 * MS + MS / 2, MS, AIMD_BETA_LOSS));
	for (int i = 0; i < 20; i++)
		aimd_decrease(&a, (20 + 2 * (uint64_t)i) * MS, MS, AIMD_BETA_LOSS);
	assert_int_equal(aimd_window(&a), 64);
	/* +1 segment per window of results */
	for (int i = 0; i < 64; i++)
		aimd_on_result(&a, 100 * MS, 0, false);
	assert_int_equal(aimd_window(&a), 65);
}

static void aimd__marks_trim_in_proportion(void **state)
{
	(void)state;
	struct aimd a;
	uint64_t t = 0;

	/* every result marked, round trip after round trip: alpha -> 1, halving */
	aimd_init(&a, 16, 1000);
	for (int rt = 0; rt < 200; rt++) {
		t += MS;
		aimd_on_result(&a, t, MS, true);
	}
	assert_true(a.alpha > AIMD_ALPHA_ONE * 99 / 100);
	assert_int_equal(aimd_window(&a), 16);
	/* one result in 100 marked: alpha stays near 1%, the window is trimmed
	 * by a fraction of a percent per round trip */
	aimd_init(&a, 16, 1000);
	for (int rt = 0; rt < 10; rt++)
		for (int i = 0; i < 100; i++) {
			t += MS / 100;
			aimd_on_result(&a, t, MS, i == 50);
		}
	assert_true(a.alpha > 0 && a.alpha < AIMD_ALPHA_ONE / 100);
	assert_true(aimd_window(&a) > 970 && aimd_window(&a) < 1000);
}

static void aimd__loss_decreases_only_past_half_a_window(void **state)
{
	(void)state;
	struct aimd a;

	aimd_init(&a, 64, 200);
	assert_false(aimd_on_loss(&a, 10 * MS, MS, 50));
	assert_false(aimd_on_loss(&a, 10 * MS + 10, MS, 50));   /* 100 of 200 */
	assert_true(aimd_on_loss(&a, 10 * MS + 20, MS, 1));     /* 101: heavy */
	assert_int_equal(aimd_window(&a), 140);
	/* a new round trip starts counting afresh */
	assert_false(aimd_on_loss(&a, 12 * MS, MS, 60));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sendq__push_moves_to_tail_and_remove_unlinks),
		cmocka_unit_test(rack__lost_only_when_overtaken_and_overdue),
		cmocka_unit_test(rack__timer_for_the_overtaken),
		cmocka_unit_test(rack__waited_result_lost_after_a_later_completion),
		cmocka_unit_test(rack__wait_and_completion_in_one_burst),
		cmocka_unit_test(aimd__additive_increase_and_floor),
		cmocka_unit_test(aimd__marks_trim_in_proportion),
		cmocka_unit_test(aimd__loss_decreases_only_past_half_a_window),
	};
	return cmocka_run_group_tests_name("client_recovery", tests, NULL, NULL);
}
