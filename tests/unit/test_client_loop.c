/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_loop.c - libpbox end to end over loopback against an
 * in-process box made of pboxd's own control plane and engines
 * (box_inproc.h): exact sums for every dtype and awkward sizes over
 * several rounds (each segment round completed exactly once on the box),
 * loss of pushes and results repaired by retransmission and the box's
 * shadow copies, many keys in flight, and every failure path a user can
 * meet (timeout, a lost rank, an abort known only from ERROR packets, the
 * box's stall watch, a lost control connection, size mismatches) with the
 * message it must carry; after each, the box has removed the job and
 * freed its memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common/rpc_client.h"
#include "tests/unit/box_inproc.h"
#include "include/pbox.h"
#include "tests/unit/dtype_io.h"

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
		int sent = 0;
		for (int k = 0; k < w->nkeys && w->rc == 0; k++) {
			size_t n = k == w->nkeys - 1 ? w->count - per * (size_t)k : per;
			w->rc = pbox_iallreduce(w->c, 100 + (uint32_t)k, buf + per * (size_t)k * esz,
						n, w->dtype, &req[k]);
			sent += w->rc == 0;
		}
		for (int k = 0; k < sent; k++) {
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

/* Segment rounds the box completes for run_pair's calls: nkeys slices of
 * count elements per iteration, 1408-byte segments. */
static uint64_t pair_rounds(pbox_dtype t, size_t count, int iters, int nkeys)
{
	size_t seg_elems = 1408 / (t == PBOX_F32 ? 4 : 2), per = count / (size_t)nkeys;
	uint64_t segs = 0;

	for (int k = 0; k < nkeys; k++) {
		size_t n = k == nkeys - 1 ? count - per * (size_t)k : per;
		segs += (n + seg_elems - 1) / seg_elems;
	}
	return segs * (uint64_t)iters;
}

/* A running box of two lcores; chunk_bytes 0: pboxd's default (32 KiB). */
static struct box_inproc *new_box(uint32_t chunk_bytes)
{
	struct box_inproc *b = box_inproc_new(2);

	if (chunk_bytes)
		b->f->box.cfg.chunk_bytes = chunk_bytes;
	box_inproc_start(b);
	return b;
}

/* Every client has closed: the box removed every job and freed its
 * memory, and the engines took every control message. Then stop it (its
 * counters may be read until box_inproc_free). */
static void stop_box(struct box_inproc *b)
{
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_stop(b);
	assert_int_equal(b->f->apply_errors, 0);
}

/* Run two ranks of job "pair" against b; the workers' results in w[]. */
static void run_pair(struct box_inproc *b, const pbox_opts *o, pbox_dtype t, size_t count,
		     int iters, int nkeys, struct worker w[2])
{
	pthread_t th[2];

	for (int r = 0; r < 2; r++) {
		w[r] = (struct worker){ .rank = r, .iters = iters, .nkeys = nkeys, .dtype = t,
					.count = count };
		assert_int_equal(pbox_connect(b->addr, "pair", r, 2, o, &w[r].c), 0);
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

/* One box for every case: each job is removed once both ranks leave, and
 * a new one of the same name admitted. */
static void sum__two_ranks_every_dtype_and_size(void **state)
{
	const size_t sizes[] = { 1, 2, 351, 352, 353, 703, 705, 1000, 100003 };
	const pbox_dtype types[] = { PBOX_F32, PBOX_F16, PBOX_BF16 };
	struct box_inproc *b = new_box(2 * 1408);
	uint64_t rounds = 0, retx = 0;

	(void)state;
	for (size_t ti = 0; ti < 3; ti++) {
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			struct worker w[2];
			run_pair(b, NULL, types[ti], sizes[si], 3, 1, w);
			for (int r = 0; r < 2; r++)
				if (w[r].rc)
					print_error("dtype %zu size %zu rank %d: %s\n", ti, sizes[si], r,
						    pbox_last_error(w[r].c));
			assert_int_equal(w[0].rc, 0);
			assert_int_equal(w[1].rc, 0);
			assert_int_equal(w[0].wrong + w[1].wrong, 0);
			pbox_stats st, st1;
			pbox_get_stats(w[0].c, &st);
			pbox_get_stats(w[1].c, &st1);
			retx += st.retransmits + st1.retransmits;
			assert_int_equal(st.calls, 3);
			assert_int_equal(st.bad_packets, 0);
			/* auto, box on this host: udp, and xdp said why not (lo is
			 * no Ethernet; as non-root: the capabilities) */
			assert_int_equal(st.transport, PBOX_TRANSPORT_UDP);
			const char *info = pbox_transport_info(w[0].c);
			assert_non_null(strstr(info, "udp (kernel UDP socket)"));
			assert_true(strstr(info, "xdp skipped: interface lo toward the box is not Ethernet") ||
				    strstr(info, "xdp skipped: needs CAP_NET_RAW"));
			close_pair(w);
			assert_true(box_inproc_idle(b, 2000));
			rounds += pair_rounds(types[ti], sizes[si], 3, 1);
		}
	}
	stop_box(b);
	struct engine_counters t = box_inproc_engine_totals(b);
	assert_int_equal(t.completes, rounds);     /* each segment round exactly once */
	assert_int_equal(t.pushes, 2 * rounds);    /* one contribution per rank */
	assert_true(t.held > 0);                   /* kept in their receive buffers */
	/* every job and key was installed before the PUSHes its answer let out:
	 * a PUSH of no job or key can only be a retransmission that arrived
	 * after its job ended (a loaded machine delays a result past the RTO,
	 * and the copy sent again outlives the job) */
	uint64_t stale = box_inproc_drops(b, DROP_NO_JOB) + box_inproc_drops(b, DROP_NO_KEY);
	if (stale > retx)
		print_error("%llu PUSHes of no job or key, %llu retransmissions\n",
			    (unsigned long long)stale, (unsigned long long)retx);
	assert_true(stale <= retx);
	box_inproc_free(b);
}

/* Two ranks through a lossy link (every drop_push-th datagram an lcore
 * receives and every drop_result-th RESULT it sends are lost, 0 = none):
 * every call exact, each segment round completed once, retransmissions
 * on both sides, lost RESULTs answered from the shadow copies; rank 0's
 * counters in *st. */
static void run_lossy_exact(pbox_opts *o, uint32_t chunk_bytes, unsigned drop_push,
			    unsigned drop_result, size_t count, int iters, int nkeys,
			    pbox_stats *st)
{
	struct box_inproc *b = box_inproc_new(2);
	struct worker w[2];

	if (chunk_bytes)
		b->f->box.cfg.chunk_bytes = chunk_bytes;
	b->drop_push_every = drop_push;
	b->drop_result_every = drop_result;
	box_inproc_start(b);
	run_pair(b, o, PBOX_F32, count, iters, nkeys, w);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_int_equal(w[0].wrong + w[1].wrong, 0);
	pbox_get_stats(w[0].c, st);
	assert_int_equal(st->calls, (uint64_t)iters * (uint64_t)nkeys);
	assert_int_equal(st->bad_packets, 0);
	assert_true(st->retransmits > 0);
	close_pair(w);
	stop_box(b);
	struct engine_counters t = box_inproc_engine_totals(b);
	assert_int_equal(t.completes, pair_rounds(PBOX_F32, count, iters, nkeys));
	assert_true(t.retx > 0);
	assert_true(b->lost > 0);
	if (drop_result)
		assert_true(t.dup_done > 0);
	box_inproc_free(b);
}

static void loss__pushes_and_results_dropped_sums_stay_exact(void **state)
{
	pbox_opts o;
	pbox_stats st;

	(void)state;
	pbox_opts_init(&o);
	o.rto_ms = 5;
	o.window = 32;
	run_lossy_exact(&o, 2 * 1408, 7, 5, 20000, 4, 1, &st);
	assert_int_equal(st.gso_sends, 0); /* offload is off by default */
}

/* pbox_opts.udp_offload: runs of a chunk's segments (23 per 32 KiB chunk)
 * leave as UDP GSO sends (loopback cuts them for the box's plain
 * sockets); sums stay exact, with loss and retransmission in the mix. */
static void offload__gso_runs_exact(void **state)
{
	pbox_opts o;
	pbox_stats st;

	(void)state;
	pbox_opts_init(&o);
	o.udp_offload = 1;
	o.rto_ms = 5;
	run_lossy_exact(&o, 0, 11, 0, 300001, 3, 2, &st);
	assert_true(st.gso_sends > 0);
}

/* Job "pair" has 12 keys, each declared by both ranks. */
static void check_twelve_keys(struct box_inproc *b, void *arg)
{
	const struct job *j = jobs_find(b->f->box.jobs, "pair");
	int *ok = arg;

	*ok = j && j->nkeys == 12;
	for (uint32_t i = 0; *ok && i < j->nkeys; i++)
		*ok = j->keys[i].declared.w[0] == 3 && j->keys[i].key == 100 + i;
}

static void keys__many_in_flight_small_window(void **state)
{
	struct box_inproc *b = new_box(2 * 1408);
	struct worker w[2];
	pbox_opts o;
	int ok = 0;

	(void)state;
	pbox_opts_init(&o);
	o.window = 8;
	run_pair(b, &o, PBOX_BF16, 50001, 3, 12, w);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, 0);
	assert_int_equal(w[0].wrong + w[1].wrong, 0);
	box_inproc_call(b, check_twelve_keys, &ok);
	assert_true(ok);
	close_pair(w);
	stop_box(b);
	assert_int_equal(box_inproc_engine_totals(b).completes, pair_rounds(PBOX_BF16, 50001, 3, 12));
	assert_int_equal(box_inproc_drops(b, DROP_NO_KEY), 0);
	box_inproc_free(b);
}

static pbox_opts opts_ms(uint32_t timeout_ms)
{
	pbox_opts o;

	pbox_opts_init(&o);
	o.timeout_ms = timeout_ms;
	o.rto_ms = 5;
	return o;
}

/* Rank `rank` of world `world` in job `job` of b. */
static pbox_client *member(struct box_inproc *b, const char *job, int rank, int world,
			   uint32_t timeout_ms)
{
	pbox_opts o = opts_ms(timeout_ms);
	pbox_client *c;

	assert_int_equal(pbox_connect(b->addr, job, rank, world, &o, &c), 0);
	return c;
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void timeout__silent_box_names_missing_segments(void **state)
{
	struct box_inproc *b = new_box(0);
	float x[1000] = { 0 };
	struct timespec t0;

	(void)state;
	b->silent = 1;
	pbox_client *c = member(b, "solo", 0, 1, 300);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pbox_allreduce(c, 3, x, 1000, PBOX_F32), PBOX_ETIMEDOUT);
	double dt = since(&t0);
	assert_true(dt >= 0.29 && dt < 1.5);
	assert_string_equal(pbox_last_error(c), "job 'solo' rank 0 key 3 round 1: no new result "
			    "for 300 ms; 3 of 3 segments missing, the first is 0");
	pbox_stats st;
	pbox_get_stats(c, &st);
	assert_true(st.retransmits > 3);
	pbox_close(c);
	stop_box(b);
	assert_true(b->lost > 3);                          /* every PUSH lost */
	assert_int_equal(box_inproc_engine_totals(b).pushes, 0);
	box_inproc_free(b);
}

/* A call queued behind a long one waits for window room while the long
 * one streams: it progresses as the calls ahead of it do, and does not
 * time out (it did after timeout_ms, though every result came in time). */
static void timeout__queued_call_waits_behind_a_long_one(void **state)
{
	struct box_inproc *b = new_box(0);
	size_t big = (size_t)56 << 20;   /* 224 MiB of f32 (the job may hold 256): many timeouts long */
	float *x = calloc(big, sizeof(float)), y[1000];
	pbox_req *ra, *rb;
	struct timespec t0;

	(void)state;
	assert_non_null(x);
	for (size_t i = 0; i < big; i += 4096)
		x[i] = 1.0f;
	for (int i = 0; i < 1000; i++)
		y[i] = (float)i;
	pbox_client *c = member(b, "queue", 0, 1, 100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pbox_iallreduce(c, 1, x, big, PBOX_F32, &ra), 0);
	assert_int_equal(pbox_iallreduce(c, 2, y, 1000, PBOX_F32, &rb), 0);
	int rc = pbox_wait(ra);
	if (rc)
		print_error("%s\n", pbox_last_error(c));
	assert_int_equal(rc, 0);
	double dt = since(&t0);
	assert_int_equal(pbox_wait(rb), 0);
	print_message("224 MiB call: %.2f s, the queued call's timeout 0.1 s\n", dt);
	assert_true(dt > 0.2);   /* else this case tests nothing */
	assert_true(x[4096] == 1.0f && x[4097] == 0.0f && y[999] == 999.0f);
	pbox_close(c);
	free(x);
	stop_box(b);
	box_inproc_free(b);
}

/* Rank 1 (a bare control connection) joins, then its connection closes
 * while rank 0 waits for it: the box aborts the job and tells rank 0 why. */
static void abort__lost_rank_notified_fails_pending_and_later_calls(void **state)
{
	struct box_inproc *b = new_box(0);
	struct rpc_client *r1;
	struct rpc_error e;
	json_t *res;
	float x[1000] = { 0 };
	pbox_req *req;

	(void)state;
	assert_int_equal(rpc_client_connect(b->addr, 2000, &r1, &e), 0);
	json_t *p = json_pack("{s:s, s:i, s:i, s:s, s:i}", "job", "lost", "rank", 1, "world", 2,
			      "data_ip", "127.0.0.1", "data_port", 9);
	assert_int_equal(rpc_client_call(r1, "job_join", p, 2000, &res, &e), 0);
	json_decref(p);
	json_decref(res);
	pbox_client *c = member(b, "lost", 0, 2, 5000);
	assert_int_equal(pbox_iallreduce(c, 1, x, 1000, PBOX_F32, &req), 0);
	assert_true(box_inproc_wait_seen(b, 3, 2000));    /* rank 0's 3 segments are in */
	rpc_client_close(r1);
	assert_int_equal(pbox_wait(req), PBOX_EABORTED);
	assert_string_equal(pbox_last_error(c), "job 'lost' aborted: rank 1 lost (control "
			    "connection closed)");
	assert_int_equal(pbox_allreduce(c, 2, x, 10, PBOX_F32), PBOX_EABORTED);
	assert_string_equal(pbox_last_error(c), "job 'lost' aborted: rank 1 lost (control "
			    "connection closed)");
	pbox_close(c);
	stop_box(b);
	box_inproc_free(b);
}

/* The job_aborted notification is lost: rank 0 learns of the operator's
 * abort from the ERROR packets answering its retransmissions. */
static void abort__error_packets_without_notification(void **state)
{
	struct box_inproc *b = new_box(0);
	float x[1000] = { 0 };
	char want[256];
	pbox_req *req;

	(void)state;
	b->quiet_aborts = 1;
	pbox_client *c0 = member(b, "quiet", 0, 2, 5000);
	pbox_client *c1 = member(b, "quiet", 1, 2, 5000);
	uint32_t id = box_inproc_job_id(b, "quiet");
	assert_int_not_equal(id, 0);
	assert_int_equal(pbox_iallreduce(c0, 1, x, 1000, PBOX_F32, &req), 0);
	assert_true(box_inproc_wait_seen(b, 3, 2000));
	assert_int_equal(box_inproc_abort(b, "quiet", "operator"), 0);
	assert_int_equal(pbox_wait(req), PBOX_EABORTED);
	snprintf(want, sizeof(want), "job 'quiet' (id %u) was aborted: the box answers rank 0's "
		 "packets with ERROR (job unknown or aborted) and sent no reason", id);
	assert_string_equal(pbox_last_error(c0), want);
	pbox_close(c0);
	pbox_close(c1);
	stop_box(b);
	assert_true(box_inproc_engine_totals(b).errors_sent > 0);
	box_inproc_free(b);
}

/* Rank 1 joined but never contributes: the box's stall watch aborts the
 * job after --stall-timeout-ms, naming rank 1 and an open round. */
static void abort__stalled_rank_named_by_box(void **state)
{
	struct box_inproc *b = box_inproc_new(2);
	float x[1000] = { 0 };
	struct timespec t0;

	(void)state;
	b->f->box.cfg.stall_timeout_ms = 200;
	box_inproc_start(b);
	pbox_client *c0 = member(b, "stall", 0, 2, 5000);
	pbox_client *c1 = member(b, "stall", 1, 2, 5000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pbox_allreduce(c0, 1, x, 1000, PBOX_F32), PBOX_EABORTED);
	double dt = since(&t0);
	assert_true(dt >= 0.2 && dt < 2.0);
	assert_non_null(strstr(pbox_last_error(c0), "job 'stall' aborted: rank 1 stalled: no "
						   "contribution for 0."));
	assert_non_null(strstr(pbox_last_error(c0), " round 1)"));
	pbox_close(c0);
	pbox_close(c1);
	stop_box(b);
	box_inproc_free(b);
}

/* The box's control thread is held up (a long job_save) while rank 1's
 * first call waits on its key_declare: the stall watch does not count
 * that time against rank 1, and the sum completes. */
static void stall_watch__control_thread_held_is_not_a_rank_stall(void **state)
{
	struct box_inproc *b = box_inproc_new(2);
	float x0[1000], x1[1000];
	struct bi_stall st;
	pbox_req *r0, *r1;

	(void)state;
	for (size_t i = 0; i < 1000; i++) {
		x0[i] = (float)i;
		x1[i] = 1.0f;
	}
	b->f->box.cfg.stall_timeout_ms = 800;
	box_inproc_start(b);
	pbox_client *c0 = member(b, "held", 0, 2, 10000);
	pbox_client *c1 = member(b, "held", 1, 2, 10000);
	assert_int_equal(pbox_iallreduce(c0, 1, x0, 1000, PBOX_F32, &r0), 0);
	assert_true(box_inproc_wait_seen(b, 3, 2000));    /* rank 0's 3 segments are in */
	box_inproc_stall_control(b, &st, 2000);
	assert_int_equal(pbox_iallreduce(c1, 1, x1, 1000, PBOX_F32, &r1), 0);
	box_inproc_stall_end(&st);
	assert_int_equal(pbox_wait(r1), 0);
	assert_int_equal(pbox_wait(r0), 0);
	for (size_t i = 0; i < 1000; i++)
		assert_true(x0[i] == (float)i + 1.0f && x1[i] == x0[i]);
	pbox_close(c0);
	pbox_close(c1);
	stop_box(b);
	box_inproc_free(b);
}

/* A key of many chunks: its key_declare answer (the chunk map) is longer
 * than a request line may be (64 KiB), and the client takes it. */
static void declare__chunk_map_longer_than_a_request_line(void **state)
{
	enum { N = 12 << 20 };   /* 48 MiB of f32 in 1408-byte chunks: ~36000 */
	struct box_inproc *b = new_box(64);
	float *x = malloc((size_t)N * sizeof(float));

	(void)state;
	assert_non_null(x);
	for (size_t i = 0; i < N; i++)
		x[i] = (float)(i % 1000);
	pbox_client *c = member(b, "bigmap", 0, 1, 20000);
	if (pbox_allreduce(c, 1, x, N, PBOX_F32) != 0)
		fail_msg("%s", pbox_last_error(c));
	for (size_t i = 0; i < N; i += 4099)
		assert_true(x[i] == (float)(i % 1000));
	pbox_close(c);
	free(x);
	stop_box(b);
	box_inproc_free(b);
}

/* The box's control plane goes away while a call waits (the data path
 * answers nothing) and does not come back: the client tries to rejoin for
 * its timeout (PBOX_RESUME, on by default), then the call fails
 * PBOX_ECLOSED naming the box and its tries, and so do later ones. */
static void closed__control_connection_lost(void **state)
{
	struct box_inproc *b = new_box(0);
	float x[1000] = { 0 };
	char want[128];
	pbox_req *req;

	(void)state;
	b->silent = 1;
	pbox_client *c = member(b, "solo", 0, 1, 1500);
	assert_int_equal(pbox_iallreduce(c, 1, x, 1000, PBOX_F32, &req), 0);
	assert_true(box_inproc_wait_seen(b, 1, 2000));
	box_inproc_drop_control(b);
	assert_int_equal(pbox_wait(req), PBOX_ECLOSED);
	snprintf(want, sizeof(want), "lost the control connection to box %s, and could not "
		 "rejoin the job after ", b->addr);
	assert_true(strncmp(pbox_last_error(c), want, strlen(want)) == 0);
	assert_non_null(strstr(pbox_last_error(c), "Connection refused"));
	assert_int_equal(pbox_allreduce(c, 2, x, 10, PBOX_F32), PBOX_ECLOSED);
	pbox_close(c);
	stop_box(b);       /* the lost session aborted the job; it was removed */
	box_inproc_free(b);
}

static void declare__local_size_change_rejected(void **state)
{
	struct box_inproc *b = new_box(0);
	float x[1000] = { 0 };

	(void)state;
	pbox_client *c = member(b, "solo", 0, 1, 5000);
	assert_int_equal(pbox_allreduce(c, 4, x, 1000, PBOX_F32), 0);
	assert_int_equal(pbox_allreduce(c, 4, x, 999, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "key 4: declared with 1000 f32 elements, "
						   "this call has 999 f32"));
	assert_int_equal(pbox_allreduce(c, 4, x, 1000, PBOX_F32), 0);
	pbox_close(c);
	stop_box(b);
	box_inproc_free(b);
}

static void declare__size_mismatch_between_ranks(void **state)
{
	struct box_inproc *b = new_box(0);
	float x[20] = { 0 };
	float y[20] = { 0 };
	pbox_req *r0;

	(void)state;
	pbox_client *c0 = member(b, "mm", 0, 2, 300);
	pbox_client *c1 = member(b, "mm", 1, 2, 300);
	assert_int_equal(pbox_iallreduce(c0, 5, x, 10, PBOX_F32, &r0), 0);
	assert_true(box_inproc_wait_seen(b, 1, 2000));    /* rank 0 declared first */
	assert_int_equal(pbox_allreduce(c1, 5, y, 20, PBOX_F32), PBOX_EREJECTED);
	assert_string_equal(pbox_last_error(c1), "job 'mm' rank 1 key 5: key_declare: job mm "
			    "key 5: rank 1 declares 20 f32 (80 bytes) but rank 0 declared 10 f32 "
			    "(40 bytes)");
	/* rank 0 waits for rank 1, which never contributes: the job's timeout
	 * (rank 0's 300 ms) ends it, naming rank 1, or rank 0's own (the same
	 * 300 ms: it asks the box 3 s longer only once a WAIT said whom it
	 * waits for) */
	int rc0 = pbox_wait(r0);
	if (rc0 == PBOX_EABORTED)
		assert_non_null(strstr(pbox_last_error(c0), "rank 1 stalled: no contribution for"));
	else
		assert_int_equal(rc0, PBOX_ETIMEDOUT);
	pbox_close(c0);
	pbox_close(c1);
	stop_box(b);
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sum__two_ranks_every_dtype_and_size),
		cmocka_unit_test(loss__pushes_and_results_dropped_sums_stay_exact),
		cmocka_unit_test(offload__gso_runs_exact),
		cmocka_unit_test(keys__many_in_flight_small_window),
		cmocka_unit_test(timeout__silent_box_names_missing_segments),
		cmocka_unit_test(timeout__queued_call_waits_behind_a_long_one),
		cmocka_unit_test(abort__lost_rank_notified_fails_pending_and_later_calls),
		cmocka_unit_test(abort__error_packets_without_notification),
		cmocka_unit_test(abort__stalled_rank_named_by_box),
		cmocka_unit_test(stall_watch__control_thread_held_is_not_a_rank_stall),
		cmocka_unit_test(declare__chunk_map_longer_than_a_request_line),
		cmocka_unit_test(closed__control_connection_lost),
		cmocka_unit_test(declare__local_size_change_rejected),
		cmocka_unit_test(declare__size_mismatch_between_ranks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
