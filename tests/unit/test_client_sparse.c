/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_sparse.c - sparse keys end to end (libpbox against the
 * in-process box of pboxd's own control plane and engines, box_inproc.h):
 * four ranks call pbox_allreduce_sparse with entries of every density
 * (none, a few, most, all) and get the dense sum bit for bit equal to a
 * reference summed in rank order from +0, with and without lost pushes
 * and results; pbox_allreduce_topk with error feedback sends exactly what
 * the selection (common/topk.h) takes from gradient + residual (and
 * momentum), so the reference replays it; hierarchical top-k (two hosts
 * of two ranks: the host's sum through shared memory, the leader's
 * selection from it, empty contributions from the others) replays the
 * same way; a density naming a whole number of entries sends that many;
 * and the bad input is refused with named errors, a host group whose
 * member never comes and a rank that changes its place in it included,
 * without a refused call holding the key to its size, and a bad
 * PBOX_KERNEL named once, not at every call.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/sparse.h"
#include "common/topk.h"
#include "include/pbox.h"
#include "tests/unit/box_inproc.h"
#include "tests/unit/dtype_io.h"

#define WORLD 4
#define COUNT 20000 /* 60 sparse segments of 336 f32 at MTU 1500 */
#define STEPS 4

struct run {
	const char *job;
	pbox_dtype dt;
	int topk;                    /* pbox_allreduce_topk instead of _sparse */
	double density;
	double momentum;             /* top-k's momentum correction (0: none) */
	uint32_t local;              /* hierarchical top-k: ranks per host (0: flat) */
	float res[WORLD][STEPS][COUNT];
	int rc[WORLD];
	char err[WORLD][256];
	pbox_stats st[WORLD];
};

struct worker {
	struct run *run;
	pbox_client *c;
	int rank;
};

/* Rank r's dense contribution at a step: density per rank and step, from
 * nothing to everything; values whose sum depends on the order. */
static float value(int rank, int step, size_t i)
{
	static const unsigned every[WORLD][STEPS] = {
		{ 0, 1, 97, 3 }, { 5, 0, 1, 2 }, { 1, 13, 0, 50 }, { 400, 2, 7, 0 } };
	unsigned e = every[rank][step];
	if (e == 0 || (i * 2654435761u + (unsigned)rank * 977u) % e != 0)
		return 0.0f;
	float v = (float)((int)((i * 31 + (unsigned)step * 7 + (unsigned)rank) % 2001) - 1000);
	return (i + (unsigned)rank) % 3 ? v * 1e6f : v * 1e-3f;
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct run *r = wk->run;
	static __thread uint32_t idx[COUNT];
	static __thread float val[COUNT], g[COUNT];
	pbox_topk_opts o;
	int rc = 0;

	pbox_topk_opts_init(&o);
	o.density = r->density;
	o.momentum = r->momentum;
	if (r->local) {
		o.local_size = r->local;
		o.local_rank = (uint32_t)wk->rank % r->local;
	}
	for (int s = 0; rc == 0 && s < STEPS; s++) {
		if (r->topk) {
			for (size_t i = 0; i < COUNT; i++)
				g[i] = (float)((int)((i * 7 + (size_t)wk->rank * 13 + (size_t)s * 5) % 101) - 50) / 8.0f;
			rc = pbox_allreduce_topk(wk->c, 3, g, COUNT, PBOX_F32, &o);
			memcpy(r->res[wk->rank][s], g, sizeof(g));
			continue;
		}
		size_t n = 0;
		for (size_t i = 0; i < COUNT; i++) {
			float v = value(wk->rank, s, i);
			if (v != 0.0f) {
				idx[n] = (uint32_t)i;
				val[n++] = v;
			}
		}
		rc = pbox_allreduce_sparse(wk->c, 3, COUNT, PBOX_F32, idx, val, n,
					   r->res[wk->rank][s]);
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

/* Every rank's every sum equals the rank-ordered one from +0, bit for bit. */
static void check_sums(const struct run *r)
{
	for (int s = 0; s < STEPS; s++)
		for (size_t i = 0; i < COUNT; i++) {
			float acc = 0.0f;
			for (int k = 0; k < WORLD; k++)
				acc += value(k, s, i);
			for (int k = 0; k < WORLD; k++)
				assert_memory_equal(&r->res[k][s][i], &acc, sizeof(acc));
		}
}

static void sparse__exact_every_density(void **state)
{
	static struct run r = { .job = "sparse", .dt = PBOX_F32 };
	(void)state;
	struct box_inproc *b = box_inproc_new(2);
	box_inproc_start(b);
	run_ranks(b, &r);
	check_sums(&r);
	/* few entries, few bytes: rank 0's first call sent nothing but the
	 * 60 empty records, in a handful of packets */
	assert_true(r.st[0].sparse_entries > 0);
	box_inproc_stop(b);
	assert_int_equal(box_inproc_drops(b, DROP_BAD_SPARSE), 0);
	assert_int_equal(box_inproc_engine_totals(b).completes, (uint64_t)60 * STEPS);
	box_inproc_free(b);
}

static void sparse__exact_under_loss(void **state)
{
	static struct run r = { .job = "sparseloss", .dt = PBOX_F32 };
	(void)state;
	struct box_inproc *b = box_inproc_new(2);
	atomic_store(&b->drop_push_every, 7);
	atomic_store(&b->drop_result_every, 5);
	atomic_store(&b->drop_random, 1);
	box_inproc_start(b);
	run_ranks(b, &r);
	check_sums(&r);
	box_inproc_stop(b);
	assert_true(box_inproc_engine_totals(b).dup_done > 0); /* results were lost */
	assert_int_equal(box_inproc_engine_totals(b).completes, (uint64_t)60 * STEPS);
	box_inproc_free(b);
}

/* The reference of a top-k run: every rank's selection replayed on its
 * own residual (and momentum), the sent entries summed in rank order
 * from +0. Hierarchical: each host's ranks' gradients summed in rank order
 * (the sum kernels: from the first, not from +0), the leader's selection
 * from that with its residual; the others add nothing. */
static void topk_run_and_replay(struct run *r)
{
	static float e[WORLD][COUNT], u[WORLD][COUNT], sum[COUNT], g[COUNT], val[TOPK_MAX(COUNT)];
	static uint32_t idx[TOPK_MAX(COUNT)];
	struct box_inproc *b = box_inproc_new(1);
	box_inproc_start(b);
	run_ranks(b, r);
	memset(e, 0, sizeof(e));
	memset(u, 0, sizeof(u));
	size_t k = (size_t)(0.01 * COUNT + 0.999);
	for (int s = 0; s < STEPS; s++) {
		memset(sum, 0, sizeof(sum));
		uint32_t per = r->local ? r->local : 1;
		for (int rk = 0; rk < WORLD; rk += (int)per) {
			for (size_t i = 0; i < COUNT; i++) {
				g[i] = 0;
				for (uint32_t j = 0; j < per; j++) {
					float v = (float)((int)((i * 7 + (size_t)(rk + (int)j) * 13 +
								 (size_t)s * 5) % 101) - 50) / 8.0f;
					g[i] = j ? g[i] + v : v;
				}
				if (r->momentum > 0)
					g[i] = u[rk][i] = (float)r->momentum * u[rk][i] + g[i];
			}
			size_t m = topk_select_ef(topk_best(), e[rk], g, COUNT, k, idx, val);
			for (size_t j = 0; r->momentum > 0 && j < m; j++)
				u[rk][idx[j]] = 0;
			assert_true(m >= k - k / 8 && m <= k + k / 8);
			for (size_t j = 0; j < m; j++)
				sum[idx[j]] += val[j];
		}
		for (int rk = 0; rk < WORLD; rk++)
			assert_memory_equal(r->res[rk][s], sum, sizeof(sum));
	}
	/* about 1% of the entries (and 60 record headers) went out per call;
	 * hierarchical: from the leaders only */
	assert_true(r->st[0].sparse_entries >= STEPS * (k - k / 8) &&
		    r->st[0].sparse_entries <= STEPS * (k + k / 8));
	if (r->local)
		assert_int_equal(r->st[1].sparse_entries, 0);
	box_inproc_stop(b);
	box_inproc_free(b);
}

static void topk__error_feedback_sends_what_the_selection_takes(void **state)
{
	static struct run r = { .job = "topk", .dt = PBOX_F32, .topk = 1, .density = 0.01 };
	(void)state;
	topk_run_and_replay(&r);
}

static void topk__momentum_correction_sends_what_the_model_takes(void **state)
{
	static struct run r = { .job = "topkmom", .dt = PBOX_F32, .topk = 1, .density = 0.01,
				.momentum = 0.9 };
	(void)state;
	topk_run_and_replay(&r);
}

static void topk__hierarchical_sums_each_host_first(void **state)
{
	static struct run r = { .job = "topkhier", .dt = PBOX_F32, .topk = 1, .density = 0.01,
				.local = 2 };
	(void)state;
	topk_run_and_replay(&r);
}

static void topk__hierarchical_with_momentum(void **state)
{
	static struct run r = { .job = "topkhiermom", .dt = PBOX_F32, .topk = 1,
				.density = 0.01, .momentum = 0.9, .local = 2 };
	(void)state;
	topk_run_and_replay(&r);
}

/* Bad hierarchical options are refused before anything is shared; a
 * leader whose member never comes times out naming it, and the key's
 * group is broken from then on. */
static void bad__hierarchical_named_errors(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c0, *c1;
	pbox_opts opts;
	pbox_topk_opts o;
	static float g[COUNT];

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 300;
	assert_int_equal(pbox_connect(b->addr, "hierbad", 0, 2, &opts, &c0), 0);
	assert_int_equal(pbox_connect(b->addr, "hierbad", 1, 2, &opts, &c1), 0);
	pbox_topk_opts_init(&o);
	o.local_size = 2;
	o.local_rank = 2;
	assert_int_equal(pbox_allreduce_topk(c0, 1, g, COUNT, PBOX_F32, &o), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c0), "local_rank 2"));
	o.local_rank = 1;   /* rank 0 as local rank 1: the host would start at rank -1 */
	assert_int_equal(pbox_allreduce_topk(c0, 1, g, COUNT, PBOX_F32, &o), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c0), "outside the world"));
	o.local_rank = 0;
	o.local_size = 3;
	assert_int_equal(pbox_allreduce_topk(c0, 1, g, COUNT, PBOX_F32, &o), PBOX_EINVAL);
	o.local_size = PBOX_TOPK_LOCAL_MAX + 1;
	assert_int_equal(pbox_allreduce_topk(c0, 1, g, COUNT, PBOX_F32, &o), PBOX_EINVAL);
	/* rank 1 never calls: the leader gives up, names it, gets its gradient back */
	o.local_size = 2;
	for (size_t i = 0; i < COUNT; i++)
		g[i] = (float)i;
	assert_int_equal(pbox_allreduce_topk(c0, 1, g, COUNT, PBOX_F32, &o), PBOX_ETIMEDOUT);
	assert_non_null(strstr(pbox_last_error(c0), "local ranks 1 (rank 1)"));
	for (size_t i = 0; i < COUNT; i++)
		assert_float_equal(g[i], (float)i, 0);
	/* ... and the group is broken: rank 1 comes too late and fails at once */
	o.local_rank = 1;
	assert_int_equal(pbox_allreduce_topk(c1, 1, g, COUNT, PBOX_F32, &o), PBOX_EABORTED);
	assert_non_null(strstr(pbox_last_error(c1), "broke"));
	/* a key keeps its first call's local_size */
	o.local_size = 1;
	o.local_rank = 0;
	assert_int_equal(pbox_allreduce_topk(c1, 1, g, COUNT, PBOX_F32, &o), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c1), "first call had 2"));
	pbox_close(c0);
	pbox_close(c1);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* A half-precision top-k key whose selected value is sent as an infinity
 * (an infinite gradient, as in a mixed-precision overflow step, or a
 * residual grown past the wire dtype's range) keeps no residual for it:
 * inf - inf left a NaN there (then never selected again, so the element
 * was lost for good; now it would poison the next step's sum). Later
 * steps send it again. */
static void topk__infinity_sent_leaves_no_residual(void **state)
{
	(void)state;
	enum { N = 1000 };
	static uint16_t g[N];
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	pbox_topk_opts o;
	const pbox_dtype dts[2] = { PBOX_F16, PBOX_BF16 };

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "infres", 0, 1, &opts, &c), 0);
	pbox_topk_opts_init(&o);
	for (int d = 0; d < 2; d++) {
		uint32_t key = 10 + (uint32_t)d;
		o.density = 2.0 / N;   /* k = 2 */
		for (int step = 0; step < 4; step++) {
			for (size_t i = 0; i < N; i++)
				put(g, dts[d], i, 0.0f);
			put(g, dts[d], 0, step == 0 ? INFINITY : 1000.0f);
			put(g, dts[d], 5, 1.0f);
			assert_int_equal(pbox_allreduce_topk(c, key, g, N, dts[d], &o), 0);
			if (step == 0)
				assert_true(isinf(get(g, dts[d], 0)));
			else
				assert_float_equal(get(g, dts[d], 0), 1000.0f, 0);
		}
	}
	/* f16: 40000 twice, the residual 80000 goes out as inf; then 1000 */
	o.density = 1.0 / N;   /* k = 1 */
	for (int step = 0; step < 5; step++) {
		for (size_t i = 0; i < N; i++)
			put(g, PBOX_F16, i, 0.0f);
		if (step == 0) {
			put(g, PBOX_F16, 0, 40000.0f);
			put(g, PBOX_F16, 1, 60000.0f);   /* sent first */
		} else if (step == 1) {
			put(g, PBOX_F16, 0, 40000.0f);
		} else {
			put(g, PBOX_F16, 0, 1000.0f);
			put(g, PBOX_F16, 5, 1.0f);
		}
		assert_int_equal(pbox_allreduce_topk(c, 12, g, N, PBOX_F16, &o), 0);
		if (step == 1)
			assert_true(isinf(get(g, PBOX_F16, 0)) && get(g, PBOX_F16, 0) > 0);
		if (step >= 2)
			assert_float_equal(get(g, PBOX_F16, 0), 1000.0f, 0);
	}
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* A NaN gradient entry counts as the largest magnitude: it is sent, the
 * sum shows it (GradScaler sees it and skips the step, as with a dense
 * allreduce), and it leaves nothing in the residual, so the next step's
 * value of that entry arrives whole. Before, a NaN was never selected and
 * stayed in the residual for good: the sum showed 0 there, then and
 * after. More NaNs than k leave by k a step, in index order. */
static void topk__nan_is_sent_and_leaves_no_residual(void **state)
{
	(void)state;
	enum { N = 1000 };
	static uint16_t h[N];
	static float f[N];
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	pbox_topk_opts o;

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "nanres", 0, 1, &opts, &c), 0);
	pbox_topk_opts_init(&o);
	o.density = 2.0 / N;   /* k = 2 */
	for (int d = 0; d < 2; d++)
		for (int step = 0; step < 3; step++) {
			void *g = d ? (void *)h : (void *)f;
			pbox_dtype dt = d ? PBOX_F16 : PBOX_F32;
			for (size_t i = 0; i < N; i++)
				put(g, dt, i, 0.0f);
			put(g, dt, 0, step == 0 ? NAN : 1000.0f);
			put(g, dt, 5, 1.0f);
			assert_int_equal(pbox_allreduce_topk(c, 20 + (uint32_t)d, g, N, dt, &o), 0);
			if (step == 0)
				assert_true(isnan(get(g, dt, 0)));
			else
				assert_float_equal(get(g, dt, 0), 1000.0f, 0);
		}
	/* three NaNs, k = 1: one a step, the first index first */
	o.density = 1.0 / N;
	for (int step = 0; step < 4; step++) {
		for (size_t i = 0; i < N; i++)
			f[i] = 0.0f;
		if (step == 0)
			f[3] = f[7] = f[9] = NAN;
		f[1] = 1.0f;
		assert_int_equal(pbox_allreduce_topk(c, 22, f, N, PBOX_F32, &o), 0);
		for (size_t i = 0; i < N; i++)
			if (isnan(f[i]))
				assert_int_equal(i, step == 0 ? 3 : step == 1 ? 7 : 9);
		if (step < 3)
			assert_true(isnan(f[step == 0 ? 3 : step == 1 ? 7 : 9]));
		else
			assert_float_equal(f[1], 4.0f, 0);   /* its four steps, kept back till now */
	}
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* A rank's place in its host group is the key's first call's: a later
 * call naming another local_rank is refused before it touches the group.
 * Before, rank 1 (a member of rank 0's group) calling as a leader waited
 * in that group, then selected from a host sum only leaders get: NULL
 * (SIGSEGV without error feedback). Three ranks: 0 and 1 a host, 2 flat. */
struct lr_call {
	pbox_client *c;
	uint32_t local_rank, local_size;
	float g[1000];
	int rc;
};

static void *lr_main(void *arg)
{
	struct lr_call *a = arg;
	pbox_topk_opts o;

	pbox_topk_opts_init(&o);
	o.density = 0.1;
	o.local_rank = a->local_rank;
	o.local_size = a->local_size;
	for (size_t i = 0; i < 1000; i++)
		a->g[i] = (float)(i % 17);
	a->rc = pbox_allreduce_topk(a->c, 1, a->g, 1000, PBOX_F32, &o);
	return NULL;
}

static void bad__hierarchical_local_rank_is_fixed_per_key(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	static struct lr_call a[3] = { { .local_rank = 0, .local_size = 2 },
				       { .local_rank = 1, .local_size = 2 },
				       { .local_rank = 0, .local_size = 1 } };
	pthread_t th[3];
	pbox_opts opts;

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 500;
	for (int r = 0; r < 3; r++)
		assert_int_equal(pbox_connect(b->addr, "lrfixed", r, 3, &opts, &a[r].c), 0);
	for (int r = 0; r < 3; r++)
		pthread_create(&th[r], NULL, lr_main, &a[r]);
	for (int r = 0; r < 3; r++)
		pthread_join(th[r], NULL);
	for (int r = 0; r < 3; r++)
		assert_int_equal(a[r].rc, 0);
	/* rank 1 now says it leads ranks 1..2 (valid on its own) */
	a[1].local_rank = 0;
	lr_main(&a[1]);
	assert_int_equal(a[1].rc, PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(a[1].c), "local_rank 0, but the key's first "
						     "call had 1"));
	for (size_t i = 0; i < 1000; i++)   /* refused before the gradient was taken */
		assert_float_equal(a[1].g[i], (float)(i % 17), 0);
	for (int r = 0; r < 3; r++)
		pbox_close(a[r].c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* A top-k call refused for another call in flight on the key leaves no
 * top-k state: the key's size stays open for the next call. Before, the
 * refused call's state (its size) stayed, and every top-k call of the
 * key's real size was refused with EINVAL ("the key has 200 elements"
 * for a key of 100) until the key was released. A first call that the
 * key's declaration refuses does leave a state of its size: the refusal
 * of the right size then says so and how to clear it. */
static void topk__a_refused_call_does_not_hold_the_key(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	pbox_req *r;
	static float out[100], g[200];
	uint32_t idx[1] = { 3 }, key = 1;
	float v[1] = { 1 };

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 5000;
	opts.rto_ms = 20;
	assert_int_equal(pbox_connect(b->addr, "topkheld", 0, 1, &opts, &c), 0);
	atomic_store(&b->silent, 1);   /* the sparse call stays in flight */
	assert_int_equal(pbox_iallreduce_sparse(c, key, 100, PBOX_F32, idx, v, 1, out, &r), 0);
	assert_int_equal(pbox_allreduce_topk(c, key, g, 200, PBOX_F32, NULL), PBOX_EBUSY);
	atomic_store(&b->silent, 0);
	assert_int_equal(pbox_wait(r), 0);
	assert_float_equal(out[3], 1.0f, 0);
	assert_int_equal(pbox_allreduce_topk(c, key, g, 100, PBOX_F32, NULL), 0);
	/* a fresh key whose first top-k call the declaration refuses */
	key = 2;
	assert_int_equal(pbox_allreduce_sparse(c, key, 100, PBOX_F32, idx, v, 1, out), 0);
	assert_int_equal(pbox_allreduce_topk(c, key, g, 200, PBOX_F32, NULL), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "declared with 100"));
	assert_int_equal(pbox_allreduce_topk(c, key, g, 100, PBOX_F32, NULL), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "top-k state of the key is for 200 f32 "
						  "elements (its first pbox_allreduce_topk call's)"));
	assert_non_null(strstr(pbox_last_error(c), "pbox_release_keys"));
	assert_int_equal(pbox_release_keys(c, &key, 1), 0);
	assert_int_equal(pbox_allreduce_topk(c, key, g, 100, PBOX_F32, NULL), 0);
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* k is the fewest entries whose share of the key reaches the density:
 * density 0.07 of 100 elements sends 7 (below 8 the selection is exact),
 * not ceil(0.07 * 100) = ceil(7.000000000000001) = 8. */
static void topk__density_of_a_whole_number_of_entries_sends_that_many(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	pbox_topk_opts o;
	pbox_stats st;
	static float g[100];

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "topkwhole", 0, 1, &opts, &c), 0);
	pbox_topk_opts_init(&o);
	o.density = 0.07;
	for (int i = 0; i < 100; i++)
		g[i] = (float)(i + 1);
	assert_int_equal(pbox_allreduce_topk(c, 1, g, 100, PBOX_F32, &o), 0);
	for (int i = 0; i < 100; i++)   /* the 7 largest: 94..100 */
		assert_float_equal(g[i], i >= 93 ? (float)(i + 1) : 0.0f, 0);
	pbox_get_stats(c, &st);
	assert_int_equal(st.sparse_entries, 7);
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* Hierarchical top-k with a bad PBOX_KERNEL: each process names it once
 * (the box, the selection's kernel choice, the slices' sum kernel), not
 * once per call and rank (the slices' sum asked sum_best at every call:
 * a line on stderr per rank and step). */
static void topk__a_bad_pbox_kernel_is_named_once(void **state)
{
	static struct run r = { .job = "topkkern", .dt = PBOX_F32, .topk = 1, .density = 0.01,
				.local = 2 };
	FILE *err = tmpfile();
	int saved = dup(2), lines = 0;
	char line[512];
	(void)state;

	assert_non_null(err);
	assert_true(saved >= 0);
	setenv("PBOX_KERNEL", "nope", 1);
	fflush(stderr);
	dup2(fileno(err), 2);
	topk_run_and_replay(&r);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	unsetenv("PBOX_KERNEL");
	rewind(err);
	while (fgets(line, sizeof(line), err))
		lines += strstr(line, "PBOX_KERNEL=nope") != NULL;
	fclose(err);
	assert_true(lines <= 3);
}

static void bad__named_errors(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	float out[100], v[3] = { 1, 2, 3 };
	uint32_t unsorted[3] = { 1, 5, 4 }, repeated[3] = { 1, 1, 4 }, outside[3] = { 1, 2, 100 };
	pbox_topk_opts o;

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "bad", 0, 1, &opts, &c), 0);
	assert_int_equal(pbox_allreduce_sparse(c, 1, 100, PBOX_F32, unsorted, v, 3, out), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "increase strictly"));
	assert_int_equal(pbox_allreduce_sparse(c, 1, 100, PBOX_F32, repeated, v, 3, out), PBOX_EINVAL);
	assert_int_equal(pbox_allreduce_sparse(c, 1, 100, PBOX_F32, outside, v, 3, out), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "outside"));
	assert_int_equal(pbox_allreduce_sparse(c, 1, 100, PBOX_F32, NULL, v, 3, out), PBOX_EINVAL);
	assert_int_equal(pbox_allreduce_sparse(c, 1, 2, PBOX_F32, unsorted, v, 3, out), PBOX_EINVAL);
	pbox_topk_opts_init(&o);
	o.density = 0;
	assert_int_equal(pbox_allreduce_topk(c, 2, out, 100, PBOX_F32, &o), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "density"));
	o.density = 1.5;
	assert_int_equal(pbox_allreduce_topk(c, 2, out, 100, PBOX_F32, &o), PBOX_EINVAL);
	o.density = 0.5;
	o.momentum = 1.0;
	assert_int_equal(pbox_allreduce_topk(c, 2, out, 100, PBOX_F32, &o), PBOX_EINVAL);
	/* a sparse key stays sparse, a dense one dense */
	assert_int_equal(pbox_allreduce_sparse(c, 1, 100, PBOX_F32, unsorted, v, 2, out), 0);
	assert_float_equal(out[1], 1.0f, 0);
	assert_float_equal(out[5], 2.0f, 0);
	assert_int_equal(pbox_allreduce(c, 1, out, 100, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "sparse key"));
	assert_int_equal(pbox_allreduce(c, 4, out, 100, PBOX_F32), 0);
	assert_int_equal(pbox_allreduce_sparse(c, 4, 100, PBOX_F32, unsorted, v, 2, out), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "dense key"));
	assert_int_equal(pbox_topk_reset(c, 77), PBOX_EINVAL);
	/* density 1 is the dense sum; then another size on the key is refused */
	o.density = 1;
	o.momentum = 0;
	for (int i = 0; i < 100; i++)
		out[i] = (float)i;
	assert_int_equal(pbox_allreduce_topk(c, 5, out, 100, PBOX_F32, &o), 0);
	for (int i = 0; i < 100; i++)
		assert_float_equal(out[i], (float)i, 0);
	assert_int_equal(pbox_allreduce_topk(c, 5, out, 50, PBOX_F32, &o), PBOX_EINVAL);
	assert_int_equal(pbox_topk_reset(c, 5), 0);
	/* a released key is declared afresh: another size is fine, and what
	 * its earlier life left unsent (the residual) is gone with it */
	uint32_t k5 = 5, k7 = 7;
	assert_int_equal(pbox_release_keys(c, &k5, 1), 0);
	assert_int_equal(pbox_allreduce_topk(c, 5, out, 50, PBOX_F32, &o), 0);
	float again[100], fresh[100];
	o.density = 0.5;
	for (int i = 0; i < 100; i++)
		out[i] = (float)i;          /* sends 50..99, keeps 0..49 */
	assert_int_equal(pbox_allreduce_topk(c, 7, out, 100, PBOX_F32, &o), 0);
	assert_int_equal(pbox_release_keys(c, &k7, 1), 0);
	for (int i = 0; i < 100; i++)
		again[i] = fresh[i] = (float)(i % 7) * 0.25f;
	assert_int_equal(pbox_allreduce_topk(c, 7, again, 100, PBOX_F32, &o), 0);
	assert_int_equal(pbox_allreduce_topk(c, 8, fresh, 100, PBOX_F32, &o), 0);
	assert_memory_equal(again, fresh, sizeof(fresh));
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sparse__exact_every_density),
		cmocka_unit_test(sparse__exact_under_loss),
		cmocka_unit_test(topk__error_feedback_sends_what_the_selection_takes),
		cmocka_unit_test(topk__momentum_correction_sends_what_the_model_takes),
		cmocka_unit_test(topk__hierarchical_sums_each_host_first),
		cmocka_unit_test(topk__hierarchical_with_momentum),
		cmocka_unit_test(bad__hierarchical_named_errors),
		cmocka_unit_test(topk__infinity_sent_leaves_no_residual),
		cmocka_unit_test(topk__nan_is_sent_and_leaves_no_residual),
		cmocka_unit_test(bad__named_errors),
		cmocka_unit_test(topk__a_bad_pbox_kernel_is_named_once),
		cmocka_unit_test(bad__hierarchical_local_rank_is_fixed_per_key),
		cmocka_unit_test(topk__a_refused_call_does_not_hold_the_key),
		cmocka_unit_test(topk__density_of_a_whole_number_of_entries_sends_that_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
