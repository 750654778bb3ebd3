/*
 * test_client_loop.c - libpbox end to end over loopback against the
 * in-test box (client_fakebox.h): exact sums for every dtype and awkward
 * sizes over several rounds, loss of pushes and results repaired by
 * retransmission, many keys in flight, and every failure path a user can
 * meet (timeout, abort by notification or by ERROR packet, lost control
 * connection, size mismatches) with the message it must carry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/unit/client_fakebox.h"
#include "include/pbox.h"

struct worker {
	pbox_client *c;
	int rank, iters, nkeys;
	pbox_dtype dtype;
	size_t count;
	int rc;
	size_t wrong;
};

static int value(int rank, size_t i, int it)
{
	return (int)((i * 3 + (size_t)rank * 5 + (size_t)it) % 9) - 4;
}

static void put(void *buf, pbox_dtype t, size_t i, float v)
{
	if (t == PBOX_F32)
		((float *)buf)[i] = v;
	else
		((uint16_t *)buf)[i] = t == PBOX_F16 ? float_to_half(v) : float_to_bf16(v);
}

static float get(const void *buf, pbox_dtype t, size_t i)
{
	if (t == PBOX_F32)
		return ((const float *)buf)[i];
	uint16_t h = ((const uint16_t *)buf)[i];
	return t == PBOX_F16 ? half_to_float(h) : bf16_to_float(h);
}

/* Each iteration: fill, reduce nkeys slices at once, check every element. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t esz = w->dtype == PBOX_F32 ? 4 : 2;
	char *buf = malloc(w->count * esz);
	pbox_req *req[16];

	for (int it = 0; it < w->iters && w->rc == 0; it++) {
		for (size_t i = 0; i < w->count; i++)
			put(buf, w->dtype, i, (float)value(w->rank, i, it));
		size_t per = w->count / (size_t)w->nkeys;
		for (int k = 0; k < w->nkeys && w->rc == 0; k++) {
			size_t n = k == w->nkeys - 1 ? w->count - per * (size_t)k : per;
			w->rc = pbox_iallreduce(w->c, 100 + (uint32_t)k, buf + per * (size_t)k * esz,
						n, w->dtype, &req[k]);
		}
		for (int k = 0; k < w->nkeys; k++) {
			int rc = pbox_wait(req[k]);
			if (w->rc == 0)
				w->rc = rc;
		}
		for (size_t i = 0; w->rc == 0 && i < w->count; i++)
			if (get(buf, w->dtype, i) != (float)(value(0, i, it) + value(1, i, it)))
				w->wrong++;
	}
	free(buf);
	return NULL;
}

/* Run two ranks against b; returns the workers' results in w[]. */
static void run_pair(struct fakebox *b, const pbox_opts *o, pbox_dtype t, size_t count,
		     int iters, int nkeys, struct worker w[2])
{
	char addr[64];
	pthread_t th[2];

	fakebox_addr(b, addr, sizeof(addr));
	for (int r = 0; r < 2; r++) {
		w[r] = (struct worker){ .rank = r, .iters = iters, .nkeys = nkeys, .dtype = t,
					.count = count };
		assert_int_equal(pbox_connect(addr, "pair", r, 2, o, &w[r].c), 0);
	}
	for (int r = 0; r < 2; r++)
		pthread_create(&th[r], NULL, worker_main, &w[r]);
	for (int r = 0; r < 2; r++)
		pthread_join(th[r], NULL);
}

static void close_pair(struct worker w[2])
{
	for (int r = 0; r < 2; r++) {
		if (w[r].rc)
			print_error("rank %d: %s: %s\n", r, pbox_strerror(w[r].rc),
				    pbox_last_error(w[r].c));
		pbox_close(w[r].c);
	}
}

static void sum__two_ranks_every_dtype_and_size(void **state)
{
	const size_t sizes[] = { 1, 2, 351, 352, 353, 703, 705, 1000, 100003 };
	const pbox_dtype types[] = { PBOX_F32, PBOX_F16, PBOX_BF16 };

	(void)state;
	for (size_t ti = 0; ti < 3; ti++) {
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			struct fakebox b;
			struct worker w[2];
			fakebox_init(&b);
			fakebox_start(&b);
			run_pair(&b, NULL, types[ti], sizes[si], 3, 1, w);
			assert_int_equal(w[0].rc, 0);
			assert_int_equal(w[1].rc, 0);
			assert_int_equal(w[0].wrong + w[1].wrong, 0);
			pbox_stats st;
			pbox_get_stats(w[0].c, &st);
			assert_int_equal(st.calls, 3);
			assert_int_equal(st.bad_packets, 0);
			close_pair(w);
			fakebox_stop(&b);
			assert_int_equal(b.leaves, 2);
		}
	}
}

/* Two ranks through a lossy fake box (every drop_push-th PUSH and
 * drop_result-th RESULT lost, 0 = none): every call exact, and rank 0's
 * counters in *st after `calls` calls, retransmissions on both sides. */
static void run_lossy_exact(pbox_opts *o, uint32_t segs_per_chunk, unsigned drop_push,
			    unsigned drop_result, size_t count, int iters, int nkeys,
			    pbox_stats *st)
{
	struct fakebox b;
	struct worker w[2];

	fakebox_init(&b);
	if (segs_per_chunk)
		b.segs_per_chunk = segs_per_chunk;
	b.drop_push_every = drop_push;
	b.drop_result_every = drop_result;
	fakebox_start(&b);
	run_pair(&b, o, PBOX_F32, count, iters, nkeys, w);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_int_equal(w[0].wrong + w[1].wrong, 0);
	pbox_get_stats(w[0].c, st);
	assert_int_equal(st->calls, (uint64_t)iters * (uint64_t)nkeys);
	assert_int_equal(st->bad_packets, 0);
	assert_true(st->retransmits > 0);
	close_pair(w);
	fakebox_stop(&b);
	assert_true(b.retx_pushes > 0);
}

static void loss__pushes_and_results_dropped_sums_stay_exact(void **state)
{
	pbox_opts o;
	pbox_stats st;

	(void)state;
	pbox_opts_init(&o);
	o.rto_ms = 5;
	o.window = 32;
	run_lossy_exact(&o, 0, 7, 5, 20000, 4, 1, &st);
	assert_int_equal(st.gso_sends, 0); /* offload is off by default */
}

/* pbox_opts.udp_offload: runs of a chunk's segments leave as UDP GSO sends
 * (loopback cuts them for the fake box's plain socket); sums stay exact,
 * with loss and retransmission in the mix. */
static void offload__gso_runs_exact(void **state)
{
	pbox_opts o;
	pbox_stats st;

	(void)state;
	pbox_opts_init(&o);
	o.udp_offload = 1;
	o.rto_ms = 5;
	run_lossy_exact(&o, 23, 11, 0, 300001, 3, 2, &st);
	assert_true(st.gso_sends > 0);
}

static void keys__many_in_flight_small_window(void **state)
{
	struct fakebox b;
	struct worker w[2];
	pbox_opts o;

	(void)state;
	pbox_opts_init(&o);
	o.window = 8;
	fakebox_init(&b);
	fakebox_start(&b);
	run_pair(&b, &o, PBOX_BF16, 50001, 3, 12, w);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_int_equal(w[0].wrong + w[1].wrong, 0);
	close_pair(w);
	fakebox_stop(&b);
	assert_int_equal(b.declares, 2 * 12);
}

/* One rank of world 1 against a box with knobs; returns the client. */
static pbox_client *solo(struct fakebox *b, uint32_t timeout_ms)
{
	char addr[64];
	pbox_client *c;
	pbox_opts o;

	pbox_opts_init(&o);
	o.timeout_ms = timeout_ms;
	o.rto_ms = 5;
	b->world = 1;
	fakebox_start(b);
	assert_int_equal(pbox_connect(fakebox_addr(b, addr, sizeof(addr)), "solo", 0, 1, &o, &c), 0);
	return c;
}

static void timeout__silent_box_names_missing_segments(void **state)
{
	struct fakebox b;
	float x[1000] = { 0 };
	struct timespec t0, t1;

	(void)state;
	fakebox_init(&b);
	b.silent = 1;
	pbox_client *c = solo(&b, 300);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pbox_allreduce(c, 3, x, 1000, PBOX_F32), PBOX_ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(dt >= 0.29 && dt < 1.5);
	assert_string_equal(pbox_last_error(c), "job 'solo' rank 0 key 3 round 1: no new result "
			    "for 300 ms; 3 of 3 segments missing, the first is 0");
	pbox_stats st;
	pbox_get_stats(c, &st);
	assert_true(st.retransmits > 3);
	pbox_close(c);
	fakebox_stop(&b);
}

static void abort__notification_fails_pending_and_later_calls(void **state)
{
	struct fakebox b;
	float x[1000] = { 0 };

	(void)state;
	fakebox_init(&b);
	b.abort_after_pushes = 1;
	pbox_client *c = solo(&b, 5000);
	assert_int_equal(pbox_allreduce(c, 1, x, 1000, PBOX_F32), PBOX_EABORTED);
	assert_string_equal(pbox_last_error(c), "job 'solo' aborted: rank 1 lost");
	assert_int_equal(pbox_allreduce(c, 2, x, 10, PBOX_F32), PBOX_EABORTED);
	assert_string_equal(pbox_last_error(c), "job 'solo' aborted: rank 1 lost");
	pbox_close(c);
	fakebox_stop(&b);
}

static void abort__error_packets_without_notification(void **state)
{
	struct fakebox b;
	float x[1000] = { 0 };

	(void)state;
	fakebox_init(&b);
	b.abort_after_pushes = 1;
	b.abort_quietly = 1;
	pbox_client *c = solo(&b, 5000);
	assert_int_equal(pbox_allreduce(c, 1, x, 1000, PBOX_F32), PBOX_EABORTED);
	assert_non_null(strstr(pbox_last_error(c), "job 'solo' (id 65) was aborted"));
	pbox_close(c);
	fakebox_stop(&b);
	assert_true(b.errors_sent > 0);
}

static void closed__control_connection_lost(void **state)
{
	struct fakebox b;
	float x[1000] = { 0 };
	char want[128];

	(void)state;
	fakebox_init(&b);
	b.silent = 1;
	b.close_after_pushes = 1;
	pbox_client *c = solo(&b, 5000);
	assert_int_equal(pbox_allreduce(c, 1, x, 1000, PBOX_F32), PBOX_ECLOSED);
	snprintf(want, sizeof(want), "lost the control connection to box 127.0.0.1:%u",
		 b.ctrl_port);
	assert_string_equal(pbox_last_error(c), want);
	assert_int_equal(pbox_allreduce(c, 2, x, 10, PBOX_F32), PBOX_ECLOSED);
	pbox_close(c);
	fakebox_stop(&b);
}

static void declare__local_size_change_rejected(void **state)
{
	struct fakebox b;
	float x[1000] = { 0 };

	(void)state;
	fakebox_init(&b);
	pbox_client *c = solo(&b, 5000);
	assert_int_equal(pbox_allreduce(c, 4, x, 1000, PBOX_F32), 0);
	assert_int_equal(pbox_allreduce(c, 4, x, 999, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "key 4: declared with 1000 f32 elements, "
						   "this call has 999 f32"));
	assert_int_equal(pbox_allreduce(c, 4, x, 1000, PBOX_F32), 0);
	pbox_close(c);
	fakebox_stop(&b);
}

static void declare__size_mismatch_between_ranks(void **state)
{
	struct fakebox b;
	char addr[64];
	pbox_client *c0, *c1;
	pbox_opts o;
	float x[20] = { 0 };
	float y[20] = { 0 };
	pbox_req *r0;

	(void)state;
	pbox_opts_init(&o);
	o.timeout_ms = 300;
	fakebox_init(&b);
	fakebox_start(&b);
	fakebox_addr(&b, addr, sizeof(addr));
	assert_int_equal(pbox_connect(addr, "mm", 0, 2, &o, &c0), 0);
	assert_int_equal(pbox_connect(addr, "mm", 1, 2, &o, &c1), 0);
	assert_int_equal(pbox_iallreduce(c0, 5, x, 10, PBOX_F32, &r0), 0);
	usleep(50000); /* let rank 0 declare first */
	assert_int_equal(pbox_allreduce(c1, 5, y, 20, PBOX_F32), PBOX_EREJECTED);
	assert_string_equal(pbox_last_error(c1), "job 'mm' rank 1 key 5: key_declare: key 5: "
			    "count 20 differs from the declared 10");
	assert_int_equal(pbox_wait(r0), PBOX_ETIMEDOUT);
	pbox_close(c0);
	pbox_close(c1);
	fakebox_stop(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sum__two_ranks_every_dtype_and_size),
		cmocka_unit_test(loss__pushes_and_results_dropped_sums_stay_exact),
		cmocka_unit_test(offload__gso_runs_exact),
		cmocka_unit_test(keys__many_in_flight_small_window),
		cmocka_unit_test(timeout__silent_box_names_missing_segments),
		cmocka_unit_test(abort__notification_fails_pending_and_later_calls),
		cmocka_unit_test(abort__error_packets_without_notification),
		cmocka_unit_test(closed__control_connection_lost),
		cmocka_unit_test(declare__local_size_change_rejected),
		cmocka_unit_test(declare__size_mismatch_between_ranks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
