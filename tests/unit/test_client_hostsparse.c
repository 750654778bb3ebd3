/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_hostsparse.c - the host level's own calls and its sparse
 * and top-k calls (client/ops/host.c) against the in-process box
 * (box_inproc.h), ranks as threads with pbox_opts.local_rank/local_world:
 *   - pbox_topk_reset on every rank of a 2 x 2 job clears each part's
 *     residual: a call of zeros after it sums to zero, where a key not
 *     reset sends what the first call left;
 *   - the ranks of a host calling a key as top-k and as an allreduce fail
 *     with PBOX_EINVAL naming both calls;
 *   - pbox_host_layout gives each rank its place (0 of 1 without the host
 *     level); pbox_allreduce_host without it leaves the buffer as it is;
 *     NULL arguments and a bad dtype are refused with their reason;
 *     a sparse call's unsorted indices are refused before anything is
 *     sent, through the host level as on a flat client.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define N 5000

static pbox_client *connect_as(const char *addr, const char *job, int rank, int world, int L)
{
	pbox_opts o;
	pbox_client *c = NULL;

	pbox_opts_init(&o);
	o.timeout_ms = 10000;
	o.mtu = 1500;
	o.local_world = (uint32_t)L;
	o.local_rank = (uint32_t)(rank % L);
	int rc = pbox_connect(addr, job, rank, world, &o, &c);
	if (rc < 0)
		print_error("rank %d: pbox_connect: %s\n", rank, c ? pbox_last_error(c) : "");
	assert_int_equal(rc, 0);
	return c;
}

struct hjob { const char *addr, *name; int world, L; void *(*fn)(void *); };
struct rankarg { const struct hjob *job; int rank; int rc; char err[512]; float out[2][N]; };

static void run(const struct hjob *j, struct rankarg *a)
{
	pthread_t th[8];

	for (int r = 0; r < j->world; r++) {
		a[r].job = j;
		a[r].rank = r;
		pthread_create(&th[r], NULL, j->fn, &a[r]);
	}
	for (int r = 0; r < j->world; r++)
		pthread_join(th[r], NULL);
}

/* ---- pbox_topk_reset through the host level ---- */

static void *reset_main(void *arg)
{
	struct rankarg *a = arg;
	pbox_client *c = connect_as(a->job->addr, a->job->name, a->rank, a->job->world, a->job->L);
	pbox_topk_opts t;
	float *g = malloc(N * sizeof(float));
	int rc = 0;

	pbox_topk_opts_init(&t);
	t.density = 0.05;
	for (uint32_t key = 5; key <= 6 && rc == 0; key++) {
		for (size_t i = 0; i < N; i++)
			g[i] = (float)((i * 31 + (size_t)a->rank * 7) % 97) - 48.0f;
		rc = pbox_allreduce_topk(c, key, g, N, PBOX_F32, &t);   /* leaves a residual */
		if (rc == 0 && key == 5)
			rc = pbox_topk_reset(c, key);
		memset(g, 0, N * sizeof(float));
		if (rc == 0)
			rc = pbox_allreduce_topk(c, key, g, N, PBOX_F32, &t);
		memcpy(a->out[key - 5], g, N * sizeof(float));
	}
	a->rc = rc;
	if (rc < 0)
		snprintf(a->err, sizeof(a->err), "%s", pbox_last_error(c));
	free(g);
	pbox_close(c);
	return NULL;
}

static void hostsparse__topk_reset(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	struct rankarg a[4];

	box_inproc_start(b);
	memset(a, 0, sizeof(a));
	run(&(struct hjob){ b->addr, "hsreset", 4, 2, reset_main }, a);
	for (int r = 0; r < 4; r++) {
		if (a[r].rc)
			print_error("rank %d: %s (%s)\n", r, pbox_strerror(a[r].rc), a[r].err);
		assert_int_equal(a[r].rc, 0);
		size_t left = 0;
		for (size_t i = 0; i < N; i++) {
			assert_true(a[r].out[0][i] == 0.0f);   /* reset: nothing left to send */
			left += a[r].out[1][i] != 0.0f;
		}
		/* not reset: the residual's largest 5% of each part (2 hosts) */
		assert_true(left > N / 40 && left <= 2 * (N / 20 + N / 160 + 4));
		assert_memory_equal(a[r].out[1], a[0].out[1], N * sizeof(float));
	}
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* ---- members of a host calling one key two ways ---- */

static void *mismatch_main(void *arg)
{
	struct rankarg *a = arg;
	pbox_client *c = connect_as(a->job->addr, a->job->name, a->rank, a->job->world, a->job->L);
	float *g = calloc(N, sizeof(float));
	pbox_topk_opts t;

	pbox_topk_opts_init(&t);
	a->rc = a->rank == 0 ? pbox_allreduce_topk(c, 7, g, N, PBOX_F32, &t)
			     : pbox_allreduce(c, 7, g, N, PBOX_F32);
	snprintf(a->err, sizeof(a->err), "%s", pbox_last_error(c));
	free(g);
	pbox_close(c);
	return NULL;
}

static void hostsparse__mismatch_named(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	struct rankarg a[2];

	box_inproc_start(b);
	memset(a, 0, sizeof(a));
	run(&(struct hjob){ b->addr, "hsmis", 2, 2, mismatch_main }, a);
	for (int r = 0; r < 2; r++) {
		assert_true(a[r].rc == PBOX_EINVAL || a[r].rc == PBOX_EABORTED);
		if (!strstr(a[r].err, "a top-k call (f32)") || !strstr(a[r].err, "an allreduce (f32)"))
			print_error("rank %d: %s\n", r, a[r].err);
		assert_non_null(strstr(a[r].err, "a top-k call (f32)"));
		assert_non_null(strstr(a[r].err, "an allreduce (f32)"));
	}
	assert_true(a[0].rc == PBOX_EINVAL || a[1].rc == PBOX_EINVAL);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* ---- the host level's own calls, and bad input ---- */

static void *layout_main(void *arg)
{
	struct rankarg *a = arg;
	pbox_client *c = connect_as(a->job->addr, a->job->name, a->rank, a->job->world, a->job->L);
	uint32_t lr = 9, lw = 9, idx[2] = { 3, 1 };
	float v[2] = { 1, 2 }, out[4];
	int rc = pbox_host_layout(c, &lr, &lw);

	assert_int_equal(rc, 0);
	assert_int_equal(lr, (uint32_t)(a->rank % a->job->L));
	assert_int_equal(lw, (uint32_t)a->job->L);
	assert_int_equal(pbox_host_layout(c, NULL, &lw), PBOX_EINVAL);
	assert_int_equal(pbox_allreduce_host(c, 1, NULL, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "NULL"));
	assert_int_equal(pbox_allreduce_host(c, 1, out, 4, (pbox_dtype)77), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "unknown dtype"));
	assert_int_equal(pbox_allreduce_sparse(c, 2, 4, PBOX_F32, idx, v, 2, out), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "increase strictly"));
	/* a host sum: the host's ranks' values in local rank order */
	float h[4];
	for (int i = 0; i < 4; i++)
		h[i] = (float)(a->rank * 10 + i);
	a->rc = pbox_allreduce_host(c, 3, h, 4, PBOX_F32);
	memcpy(a->out[0], h, sizeof(h));
	pbox_close(c);
	return NULL;
}

static void hostsparse__layout_and_input(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	struct rankarg a[4];

	box_inproc_start(b);
	memset(a, 0, sizeof(a));
	run(&(struct hjob){ b->addr, "hslay", 4, 2, layout_main }, a);
	for (int r = 0; r < 4; r++) {
		assert_int_equal(a[r].rc, 0);
		int h = r / 2;
		for (int i = 0; i < 4; i++)   /* (2h * 10 + i) + ((2h + 1) * 10 + i) */
			assert_true(a[r].out[0][i] == (float)(40 * h + 10 + 2 * i));
	}
	/* without the host level: 0 of 1, the buffer left as it is */
	pbox_client *c = connect_as(b->addr, "hsflat", 0, 1, 1);
	uint32_t lr = 9, lw = 9;
	float buf[3] = { 1.5f, -2, 3 };
	assert_int_equal(pbox_host_layout(c, &lr, &lw), 0);
	assert_int_equal(lr, 0);
	assert_int_equal(lw, 1);
	assert_int_equal(pbox_allreduce_host(c, 4, buf, 3, PBOX_F32), 0);
	assert_true(buf[0] == 1.5f && buf[1] == -2 && buf[2] == 3);
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hostsparse__topk_reset),
		cmocka_unit_test(hostsparse__mismatch_named),
		cmocka_unit_test(hostsparse__layout_and_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
