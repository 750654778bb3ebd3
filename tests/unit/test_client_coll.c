/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_coll.c - broadcast, allgather, reduce_scatter and barrier end
 * to end (libpbox against the in-process box of pboxd's own control plane
 * and engines, box_inproc.h): four ranks, slices that do not fill their
 * last segment, f32 and f16, with and without lost pushes and results.
 * Broadcast and allgather deliver the owners' bytes exactly (-0, NaN
 * payloads and denormals included); reduce_scatter gives each rank its
 * slice of the rank-ordered sum and nothing else; only owners send data
 * (counted in bytes); misuse is refused by name.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include/pbox.h"
#include "tests/unit/box_inproc.h"
#include "tests/unit/dtype_io.h"

#define WORLD 4
#define N     1000   /* elements per rank: 3 segments of 352 f32 at MTU 1500, the last short */
#define BN    5000   /* broadcast elements */
#define STEPS 3

struct run {
	const char *job;
	pbox_dtype dt;
	uint16_t bc[WORLD][STEPS][BN];   /* results as raw bits (f16: low half) */
	uint32_t bc32[WORLD][STEPS][BN];
	uint32_t ag[WORLD][STEPS][WORLD * N];
	uint32_t rs[WORLD][STEPS][N];
	int rc[WORLD];
	char err[WORLD][256];
	pbox_stats st[WORLD];
};

struct worker {
	struct run *run;
	pbox_client *c;
	int rank;
};

/* Bits of element i of rank r's data at a step: special values included
 * (-0, a NaN with a payload, a denormal, infinities). */
static uint32_t bits32(int rank, int step, size_t i)
{
	switch ((i + (size_t)rank + (size_t)step) % 11) {
	case 0: return 0x80000000u;               /* -0 */
	case 1: return 0x7FC01234u;               /* a quiet NaN with a payload */
	case 2: return 0x00000001u;               /* the smallest denormal */
	default: {
		float v = (float)((int)((i * 31 + (size_t)step * 7 + (size_t)rank * 3) % 2001) - 1000);
		v = (i + (size_t)rank) % 3 ? v * 1e6f : v * 1e-3f;
		uint32_t u;
		memcpy(&u, &v, sizeof(u));
		return u;
	}
	}
}

static uint16_t bits16(int rank, int step, size_t i)
{
	switch ((i + (size_t)rank + (size_t)step) % 11) {
	case 0: return 0x8000u;                    /* -0 */
	case 1: return 0x7E55u;                    /* a NaN with a payload */
	case 2: return 0x0001u;                    /* a denormal */
	default: return (uint16_t)(0x3C00u + (uint16_t)((i * 7 + (size_t)rank * 5 + (size_t)step) % 0x0C00));
	}
}

/* A finite value for sums (reduce_scatter), rank r, step s, element i. */
static float addend(int rank, int step, size_t i)
{
	float v = (float)((int)((i * 13 + (size_t)step * 5 + (size_t)rank * 7) % 601) - 300);
	return (i + (size_t)rank) % 4 ? v / 8.0f : v * 1e5f;
}

static void fill(void *buf, pbox_dtype dt, size_t n, int rank, int step, size_t first)
{
	for (size_t i = 0; i < n; i++) {
		if (dt == PBOX_F32) {
			uint32_t u = bits32(rank, step, first + i);
			memcpy((uint8_t *)buf + 4 * i, &u, 4);
		} else {
			uint16_t u = bits16(rank, step, first + i);
			memcpy((uint8_t *)buf + 2 * i, &u, 2);
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct run *r = wk->run;
	static __thread uint8_t bc[BN * 4], in[WORLD * N * 4], out[WORLD * N * 4];
	size_t esz = r->dt == PBOX_F32 ? 4 : 2;
	int rc = 0;

	for (int s = 0; rc == 0 && s < STEPS; s++) {
		int root = (s + 2) % WORLD;
		memset(bc, 0xA5, sizeof(bc)); /* what non-roots had is overwritten */
		if (wk->rank == root)
			fill(bc, r->dt, BN, root, s, 0);
		rc = pbox_broadcast(wk->c, 10 + (uint32_t)root, bc, BN, r->dt, root);
		for (size_t i = 0; rc == 0 && i < BN; i++) {
			if (esz == 4)
				memcpy(&r->bc32[wk->rank][s][i], bc + 4 * i, 4);
			else
				memcpy(&r->bc[wk->rank][s][i], bc + 2 * i, 2);
		}
		if (rc)
			break;
		/* allgather, odd steps in place (in = out + rank * N) */
		memset(out, 0x5A, sizeof(out));
		uint8_t *src = s % 2 ? out + (size_t)wk->rank * N * esz : in;
		fill(src, r->dt, N, wk->rank, s, 0);
		rc = pbox_allgather(wk->c, 20, src, out, N, r->dt);
		for (size_t i = 0; rc == 0 && i < (size_t)WORLD * N; i++) {
			r->ag[wk->rank][s][i] = 0;
			memcpy(&r->ag[wk->rank][s][i], out + esz * i, esz);
		}
		if (rc)
			break;
		/* reduce_scatter of finite values */
		for (size_t i = 0; i < (size_t)WORLD * N; i++)
			put(in, r->dt, i, addend(wk->rank, s, i));
		memset(out, 0x77, N * esz);
		rc = pbox_reduce_scatter(wk->c, 30, in, out, N, r->dt);
		for (size_t i = 0; rc == 0 && i < N; i++) {
			r->rs[wk->rank][s][i] = 0;
			memcpy(&r->rs[wk->rank][s][i], out + esz * i, esz);
		}
		if (rc == 0)
			rc = pbox_barrier(wk->c, 40);
	}
	r->rc[wk->rank] = rc;
	if (rc < 0)
		snprintf(r->err[wk->rank], sizeof(r->err[0]), "%s", pbox_last_error(wk->c));
	pbox_get_stats(wk->c, &r->st[wk->rank]);
	return NULL;
}

static void run_ranks(struct box_inproc *b, struct run *r)
{
	struct worker wk[WORLD];
	pthread_t th[WORLD];
	pbox_opts opts;

	pbox_opts_init(&opts);
	opts.timeout_ms = 20000;
	opts.mtu = 1500;
	for (int k = 0; k < WORLD; k++) {
		wk[k] = (struct worker){ .run = r, .rank = k };
		assert_int_equal(pbox_connect(b->addr, r->job, k, WORLD, &opts, &wk[k].c), 0);
	}
	for (int k = 0; k < WORLD; k++)
		pthread_create(&th[k], NULL, worker_main, &wk[k]);
	for (int k = 0; k < WORLD; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < WORLD; k++) {
		pbox_close(wk[k].c);
		if (r->rc[k])
			print_error("rank %d: %s (%s)\n", k, pbox_strerror(r->rc[k]), r->err[k]);
	}
	for (int k = 0; k < WORLD; k++)
		assert_int_equal(r->rc[k], 0);
}

/* Every rank holds the owners' bits and its slice of the rank-ordered sum. */
static void check_results(const struct run *r)
{
	for (int s = 0; s < STEPS; s++) {
		int root = (s + 2) % WORLD;
		for (int k = 0; k < WORLD; k++) {
			for (size_t i = 0; i < BN; i++) {
				if (r->dt == PBOX_F32)
					assert_int_equal(r->bc32[k][s][i], bits32(root, s, i));
				else
					assert_int_equal(r->bc[k][s][i], bits16(root, s, i));
			}
			for (size_t i = 0; i < (size_t)WORLD * N; i++) {
				int owner = (int)(i / N);
				uint32_t want = r->dt == PBOX_F32 ? bits32(owner, s, i % N)
								  : bits16(owner, s, i % N);
				assert_int_equal(r->ag[k][s][i], want);
			}
			for (size_t i = 0; i < N; i++) {
				size_t e = (size_t)k * N + i;
				/* the inputs as sent (rounded to the dtype), summed in
				 * rank order in binary32, rounded once */
				uint8_t one[4] = { 0 }, want[4] = { 0 };
				float acc = 0;
				for (int q = 0; q < WORLD; q++) {
					put(one, r->dt, 0, addend(q, s, e));
					acc = q ? acc + get(one, r->dt, 0) : get(one, r->dt, 0);
				}
				put(want, r->dt, 0, acc);
				uint32_t w = 0;
				memcpy(&w, want, r->dt == PBOX_F32 ? 4 : 2);
				assert_int_equal(r->rs[k][s][i], w);
			}
		}
	}
}

static void coll__exact_f32(void **state)
{
	static struct run r = { .job = "coll32", .dt = PBOX_F32 };
	(void)state;
	struct box_inproc *b = box_inproc_new(2);
	box_inproc_start(b);
	run_ranks(b, &r);
	box_inproc_stop(b);
	check_results(&r);
	/* non-roots and non-owners send queries only: a broadcast of BN f32
	 * and an allgather of N per rank cost each rank about its own data,
	 * plus what it sent again (a loaded machine delays results past the
	 * RTO: each retransmission at most a segment) */
	for (int k = 0; k < WORLD; k++) {
		uint64_t own = (uint64_t)STEPS * (N * 4 + (uint64_t)WORLD * N * 4 /* rs */ + 4) +
			       (uint64_t)BN * 4 * (k == 2 || k == 3 || k == 0 ? 1 : 0) +
			       r.st[k].retransmits * r.st[k].seg_bytes;
		uint64_t headers = r.st[k].pkts_sent * 40;
		if (r.st[k].bytes_sent > own + headers)
			print_error("rank %d: %llu bytes sent, %llu of data, %llu packets\n", k,
				    (unsigned long long)r.st[k].bytes_sent, (unsigned long long)own,
				    (unsigned long long)r.st[k].pkts_sent);
		assert_true(r.st[k].bytes_sent <= own + headers);
	}
	assert_int_equal(box_inproc_drops(b, DROP_BAD_COUNT), 0);
	box_inproc_free(b);
}

static void coll__exact_f16_under_loss(void **state)
{
	static struct run r = { .job = "coll16", .dt = PBOX_F16 };
	(void)state;
	struct box_inproc *b = box_inproc_new(2);
	atomic_store(&b->drop_push_every, 7);
	atomic_store(&b->drop_result_every, 5);
	atomic_store(&b->drop_random, 1);
	box_inproc_start(b);
	run_ranks(b, &r);
	box_inproc_stop(b);
	check_results(&r);
	assert_true(box_inproc_engine_totals(b).dup_done > 0); /* results were lost */
	box_inproc_free(b);
}

struct misuse {
	pbox_client *c;
	int rank;
	int rc[4];
	char err[4][256];
};

static void *misuse_main(void *arg)
{
	struct misuse *m = arg;
	float buf[64] = { 0 }, out[64 * 2];

	/* a key declared for broadcast (root 0) used by an allreduce */
	m->rc[0] = pbox_broadcast(m->c, 1, buf, 64, PBOX_F32, 0);
	m->rc[1] = pbox_allreduce(m->c, 1, buf, 64, PBOX_F32);
	snprintf(m->err[1], sizeof(m->err[1]), "%s", pbox_last_error(m->c));
	/* the two ranks disagree on what key 2 is */
	m->rc[2] = m->rank == 0 ? pbox_allgather(m->c, 2, buf, out, 64, PBOX_F32)
				: pbox_reduce_scatter(m->c, 2, out, buf, 64, PBOX_F32);
	snprintf(m->err[2], sizeof(m->err[2]), "%s", pbox_last_error(m->c));
	m->rc[3] = pbox_broadcast(m->c, 3, buf, 64, PBOX_F32, 2);
	snprintf(m->err[3], sizeof(m->err[3]), "%s", pbox_last_error(m->c));
	return NULL;
}

static void coll__misuse_named(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	struct misuse m[2];
	pthread_t th[2];
	pbox_opts opts;

	pbox_opts_init(&opts);
	opts.timeout_ms = 2000; /* the rank whose key 2 was accepted waits in vain */
	opts.mtu = 1500;
	box_inproc_start(b);
	for (int k = 0; k < 2; k++) {
		m[k] = (struct misuse){ .rank = k };
		assert_int_equal(pbox_connect(b->addr, "misuse", k, 2, &opts, &m[k].c), 0);
	}
	for (int k = 0; k < 2; k++)
		pthread_create(&th[k], NULL, misuse_main, &m[k]);
	for (int k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(m[k].rc[0], 0);
		assert_int_equal(m[k].rc[1], PBOX_EINVAL);
		assert_non_null(strstr(m[k].err[1], "declared for broadcast"));
		assert_int_equal(m[k].rc[3], PBOX_EINVAL);
		assert_non_null(strstr(m[k].err[3], "root 2 is not a rank"));
	}
	/* the second declaration of key 2 is refused, naming both ranks' */
	int refused = m[0].rc[2] == PBOX_EREJECTED ? 0 : 1;
	assert_int_equal(m[refused].rc[2], PBOX_EREJECTED);
	/* its round never completes: its own timeout or the job's (the box's
	 * abort, naming the rank) ends it, whichever comes first */
	assert_true(m[1 - refused].rc[2] == PBOX_EABORTED ||
		    m[1 - refused].rc[2] == PBOX_ETIMEDOUT);
	assert_non_null(strstr(m[refused].err[2], "declared it for"));
	float x[4] = { 0 };
	assert_int_equal(pbox_allgather(m[0].c, 5, NULL, x, 2, PBOX_F32), PBOX_EINVAL);
	assert_int_equal(pbox_reduce_scatter(m[0].c, 5, x, x, 0, PBOX_F32), PBOX_EINVAL);
	for (int k = 0; k < 2; k++)
		pbox_close(m[k].c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(coll__exact_f32),
		cmocka_unit_test(coll__exact_f16_under_loss),
		cmocka_unit_test(coll__misuse_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
