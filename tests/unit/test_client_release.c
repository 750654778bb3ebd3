/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_release.c - pbox_release_keys end to end (libpbox against the
 * in-process box of pboxd's own control plane and engines, box_inproc.h;
 * docs/rpc.md "key_release"): a job whose memory holds one key runs a
 * dozen keys of changing sizes through it (the same ids again, then new
 * ones), releasing each after use, with ranks releasing at different
 * times (the fast ones' declarations wait for the slow ones); sums stay
 * exact and the job's memory comes back to where it started. Misuse is refused by name: a key in flight, twice, an
 * unknown key, a re-declaration the other ranks never release. A key
 * declared again numbers its rounds on from the job's highest removed
 * round (a PS key's init round and Adam's steps start afresh).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define WORLD 3
#define N     262144  /* f32: 1 MiB per key */
#define ITERS 12

/* ---- the box's view ---- */

struct job_view {
	const char *name;
	int found;
	uint64_t used;
	uint32_t nkeys, removing, released_of_9;
	const char *state_of_9;
};

static void view_fn(struct box_inproc *b, void *arg)
{
	struct job_view *v = arg;
	const struct job *j = jobs_find(b->f->box.jobs, v->name);

	v->found = j != NULL;
	if (!j)
		return;
	v->used = j->mem.used;
	v->nkeys = j->nkeys;
	v->removing = j->keys_removing;
	const struct job_key *k = job_key_find(j, 9);
	v->state_of_9 = k ? job_key_state(k) : NULL;
	v->released_of_9 = k ? k->nreleased : 0;
}

static struct job_view view(struct box_inproc *b, const char *name)
{
	struct job_view v = { .name = name };

	box_inproc_call(b, view_fn, &v);
	return v;
}

/* Wait until the job holds no key (removals finish on the control tick). */
static struct job_view view_no_keys(struct box_inproc *b, const char *name)
{
	for (int i = 0; i < 500; i++) {
		struct job_view v = view(b, name);
		if (v.nkeys == 0)
			return v;
		usleep(2000);
	}
	return view(b, name);
}

/* ---- many keys through a small job ---- */

struct worker {
	pbox_client *c;
	int rank;
	int rc;
	char err[256];
	float *buf;
};

static float value(int rank, int it, size_t i)
{
	return (float)((int)((i * 7 + (size_t)it * 3 + (size_t)rank * 11) % 257) - 128);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int rc = 0;

	for (int it = 0; rc == 0 && it < ITERS; it++) {
		/* the same ids again with other sizes, then new ids */
		uint32_t key = it < ITERS / 2 ? 100 + (uint32_t)(it % 2) : 200 + (uint32_t)it;
		size_t n = N - 64 * (size_t)it;
		for (size_t i = 0; i < n; i++)
			w->buf[i] = value(w->rank, it, i);
		rc = pbox_allreduce(w->c, key, w->buf, n, PBOX_F32);
		for (size_t i = 0; rc == 0 && i < n; i++) {
			float want = (value(0, it, i) + value(1, it, i)) + value(2, it, i);
			if (w->buf[i] != want) {
				snprintf(w->err, sizeof(w->err), "iteration %d element %zu: %g, "
					 "not %g", it, i, (double)w->buf[i], (double)want);
				rc = -100;
			}
		}
		if (rc == 0 && it % 2)
			usleep((useconds_t)(w->rank * 4000)); /* rank 2 releases last */
		if (rc == 0)
			rc = pbox_release_keys(w->c, &key, 1);
	}
	w->rc = rc;
	if (rc < 0 && rc != -100)
		snprintf(w->err, sizeof(w->err), "%s", pbox_last_error(w->c));
	return NULL;
}

/* Engine memory a job of WORLD ranks reserves on this box (a probe job,
 * sized by pbox_opts.key_bytes: the engine's part plus that). */
static uint64_t reserved(struct box_inproc *b)
{
	pbox_opts o;
	pbox_client *c[WORLD];
	pbox_stats st;

	pbox_opts_init(&o);
	o.mtu = 1500;
	o.key_bytes = 5u << 20;
	for (int k = 0; k < WORLD; k++)
		assert_int_equal(pbox_connect(b->addr, "probe", k, WORLD, &o, &c[k]), 0);
	assert_int_equal(pbox_get_stats(c[1], &st), 0);
	assert_int_equal(st.key_bytes, 5u << 20);
	struct job_view v = view(b, "probe");
	for (int k = 0; k < WORLD; k++)
		pbox_close(c[k]);
	assert_true(v.found);
	return v.used;
}

static void release__keys_cycle_through_a_small_job(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(2);
	box_inproc_start(b);
	uint64_t base = reserved(b);
	struct worker w[WORLD];
	pthread_t th[WORLD];
	pbox_opts o;

	pbox_opts_init(&o);
	o.mtu = 1500;
	o.timeout_ms = 20000;
	/* room for one 1 MiB key (and its segment state), not two: a rank
	 * that declares the next key before the others released the last
	 * one waits for them (EBUSY, retried) */
	o.job_bytes = base + (uint64_t)N * 4 + (uint64_t)N;
	for (int k = 0; k < WORLD; k++) {
		w[k] = (struct worker){ .rank = k, .buf = malloc(N * sizeof(float)) };
		assert_int_equal(pbox_connect(b->addr, "cycle", k, WORLD, &o, &w[k].c), 0);
	}
	pbox_stats st;
	assert_int_equal(pbox_get_stats(w[2].c, &st), 0);
	assert_int_equal(st.key_bytes, o.job_bytes - base); /* what rank 0 reserved */
	for (int k = 0; k < WORLD; k++)
		pthread_create(&th[k], NULL, worker_main, &w[k]);
	for (int k = 0; k < WORLD; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < WORLD; k++)
		if (w[k].rc)
			print_error("rank %d: %d %s\n", k, w[k].rc, w[k].err);
	for (int k = 0; k < WORLD; k++)
		assert_int_equal(w[k].rc, 0);
	struct job_view v = view_no_keys(b, "cycle");
	assert_true(v.found);
	assert_int_equal(v.nkeys, 0);
	assert_int_equal(v.removing, 0);
	assert_int_equal(v.used, base);     /* every key's memory came back */
	for (int k = 0; k < WORLD; k++) {
		pbox_close(w[k].c);
		free(w[k].buf);
	}
	assert_true(box_inproc_idle(b, 5000));
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* ---- misuse ---- */

static void both(pbox_client *c[2], uint32_t key, float *x[2], size_t n, int expect)
{
	pbox_req *r[2];

	for (int k = 0; k < 2; k++)
		assert_int_equal(pbox_iallreduce(c[k], key, x[k], n, PBOX_F32, &r[k]), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(pbox_wait(r[k]), expect);
}

/* both() of i and 2i over n elements: each rank gets 3i. */
static void both_exact(pbox_client *c[2], uint32_t key, float *x[2], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		x[0][i] = (float)i;
		x[1][i] = 2.0f * (float)i;
	}
	both(c, key, x, n, 0);
	for (size_t i = 0; i < n; i++) {
		assert_true(x[0][i] == 3.0f * (float)i);
		assert_true(x[1][i] == 3.0f * (float)i);
	}
}

/* Ranks 0 and 1 of a job of 2 on a one-lcore box. */
static struct box_inproc *two_ranks(const char *job, int timeout_ms, pbox_client *c[2])
{
	struct box_inproc *b = box_inproc_new(1);
	pbox_opts o;

	box_inproc_start(b);
	pbox_opts_init(&o);
	o.mtu = 1500;
	o.timeout_ms = timeout_ms;
	for (int k = 0; k < 2; k++)
		assert_int_equal(pbox_connect(b->addr, job, k, 2, &o, &c[k]), 0);
	return b;
}

static void release__misuse_named(void **state)
{
	(void)state;
	pbox_client *c[2];
	struct box_inproc *b = two_ranks("misuse", 400, c);
	static float x0[1000], x1[1000];
	float *x[2] = { x0, x1 };
	uint32_t k9 = 9, k10 = 10, k555 = 555, dup[2] = { 9, 9 };

	assert_int_equal(pbox_release_keys(c[0], NULL, 1), PBOX_EINVAL);
	assert_int_equal(pbox_release_keys(c[0], &k9, 0), PBOX_EINVAL);
	assert_int_equal(pbox_release_keys(c[0], dup, 2), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c[0]), "named twice"));
	assert_int_equal(pbox_release_keys(c[0], &k555, 1), PBOX_EREJECTED);
	assert_non_null(strstr(pbox_last_error(c[0]), "has no key 555"));

	both(c, 9, x, 1000, 0);
	assert_int_equal(pbox_release_keys(c[0], &k9, 1), 0);
	assert_int_equal(pbox_release_keys(c[0], &k9, 1), PBOX_EREJECTED);
	assert_non_null(strstr(pbox_last_error(c[0]), "released it already"));
	struct job_view v = view(b, "misuse");
	assert_string_equal(v.state_of_9, "releasing");
	assert_int_equal(v.released_of_9, 1);

	/* a call in flight: its key cannot be released */
	pbox_req *r0, *r1;
	assert_int_equal(pbox_iallreduce(c[0], 10, x0, 500, PBOX_F32, &r0), 0);
	assert_int_equal(pbox_release_keys(c[0], &k10, 1), PBOX_EBUSY);
	assert_non_null(strstr(pbox_last_error(c[0]), "in flight"));
	assert_int_equal(pbox_iallreduce(c[1], 10, x1, 500, PBOX_F32, &r1), 0);
	assert_int_equal(pbox_wait(r0), 0);
	assert_int_equal(pbox_wait(r1), 0);

	/* rank 0 released key 9, rank 1 never does: rank 0's next use waits
	 * for it and times out saying so */
	assert_int_equal(pbox_allreduce(c[0], 9, x0, 700, PBOX_F32), PBOX_ETIMEDOUT);
	assert_non_null(strstr(pbox_last_error(c[0]), "still held by others"));
	/* rank 1 still uses the old key 9 alone: it has not released it */
	/* ... and once it releases, key 9 comes back with another size */
	assert_int_equal(pbox_release_keys(c[1], &k9, 1), 0);
	v = view(b, "misuse");
	for (int i = 0; i < 500 && v.state_of_9; i++) {
		usleep(2000);
		v = view(b, "misuse");
	}
	assert_null(v.state_of_9);            /* removed */
	both_exact(c, 9, x, 700);
	for (int k = 0; k < 2; k++)
		pbox_close(c[k]);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* ---- a key's lives: rounds go on across a release ---- */

struct life_view {
	const char *name;
	uint32_t key;
	int found;
	uint32_t round0, done0, hwm;
};

static void life_fn(struct box_inproc *b, void *arg)
{
	struct life_view *v = arg;
	const struct job *j = jobs_find(b->f->box.jobs, v->name);
	const struct job_key *k = j ? job_key_find(j, v->key) : NULL;

	v->hwm = j ? j->round_hwm : 0;
	v->found = k != NULL;
	v->round0 = k ? k->ek->round0 : 0;
	v->done0 = k ? k->ek->segs[0].done : 0;
}

static struct life_view life(struct box_inproc *b, const char *name, uint32_t key)
{
	struct life_view v = { .name = name, .key = key };

	box_inproc_call(b, life_fn, &v);
	return v;
}

/* Both ranks release key and the box removes it. */
static void release_both(struct box_inproc *b, pbox_client *c[2], const char *name,
			 uint32_t key)
{
	for (int k = 0; k < 2; k++)
		assert_int_equal(pbox_release_keys(c[k], &key, 1), 0);
	for (int i = 0; i < 500 && life(b, name, key).found; i++)
		usleep(2000);
	assert_false(life(b, name, key).found);
}

#define PSN 3000 /* PS key elements: several segments at MTU 1500 */

struct ps_rank {
	pbox_client *c;
	int rank;
	int rc;
	float w[PSN], g[PSN];
	uint64_t steps;
};

/* One life of a PS key 20 (Adam): declare, init from rank 0's weights,
 * two steps; w gets the weights after them, steps what the box counts. */
static void *ps_life(void *arg)
{
	struct ps_rank *p = arg;
	pbox_optim o;
	int rc;

	pbox_optim_init(&o, PBOX_OPTIM_ADAM);
	for (size_t i = 0; i < PSN; i++)
		p->w[i] = (float)((int)(i % 31) - 15) / 8.0f;
	rc = pbox_declare_optimizer(p->c, 20, PSN, PBOX_F32, &o);
	if (rc == 0)
		rc = pbox_ps_init(p->c, 20, p->rank == 0 ? p->w : NULL, p->w);
	for (int step = 0; rc == 0 && step < 2; step++) {
		for (size_t i = 0; i < PSN; i++)
			p->g[i] = (float)((int)((i * 3 + (size_t)step) % 17) - 8) *
				  (float)(p->rank + 1) / 16.0f;
		rc = pbox_push_pull(p->c, 20, p->g, p->w, PSN, PBOX_F32);
	}
	if (rc == 0)
		rc = pbox_ps_read(p->c, 20, PBOX_PS_WEIGHTS, p->g, PSN, &p->steps);
	p->rc = rc;
	return NULL;
}

static void ps_life_both(struct ps_rank p[2])
{
	pthread_t th[2];

	for (int k = 0; k < 2; k++)
		pthread_create(&th[k], NULL, ps_life, &p[k]);
	for (int k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < 2; k++)
		assert_int_equal(p[k].rc, 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(p[k].steps, 2);
}

static void release__declared_again_rounds_go_on(void **state)
{
	(void)state;
	pbox_client *c[2];
	struct box_inproc *b = two_ranks("lives", 5000, c);
	static float x0[1000], x1[1000];
	float *x[2] = { x0, x1 };

	/* life 1 of key 9: rounds 1..3 */
	for (int it = 0; it < 3; it++)
		both(c, 9, x, 1000, 0);
	struct life_view v = life(b, "lives", 9);
	assert_int_equal(v.round0, 0);
	assert_int_equal(v.done0, 3);
	assert_int_equal(v.hwm, 0);
	release_both(b, c, "lives", 9);
	assert_int_equal(life(b, "lives", 9).hwm, 4);   /* round 4 may have been pushed */

	/* life 2 starts at round 5: a delayed PUSH or RESULT of life 1's
	 * rounds 1..4 is stale on both sides (test_engine checks the box's
	 * drops); the sum is exact */
	both_exact(c, 9, x, 700);
	v = life(b, "lives", 9);
	assert_int_equal(v.round0, 4);
	assert_int_equal(v.done0, 5);

	/* a PS key's lives: the first starts at round 5 too, yet its init
	 * round is its first and Adam counts its steps from 1 again in the
	 * second: the weights are bit for bit the first life's */
	static struct ps_rank p1[2], p2[2];
	for (int k = 0; k < 2; k++) {
		p1[k] = (struct ps_rank){ .c = c[k], .rank = k };
		p2[k] = (struct ps_rank){ .c = c[k], .rank = k };
	}
	ps_life_both(p1);
	assert_int_equal(life(b, "lives", 20).round0, 4);
	release_both(b, c, "lives", 20);
	assert_int_equal(life(b, "lives", 20).hwm, 8);
	ps_life_both(p2);
	v = life(b, "lives", 20);
	assert_int_equal(v.round0, 8);
	assert_int_equal(v.done0, 11);
	for (int k = 0; k < 2; k++) {
		assert_memory_equal(p2[k].w, p1[k].w, sizeof(p1[k].w));
		assert_memory_equal(p2[k].g, p1[k].g, sizeof(p1[k].g));
	}
	for (int k = 0; k < 2; k++)
		pbox_close(c[k]);
	box_inproc_stop(b);
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(release__keys_cycle_through_a_small_job),
		cmocka_unit_test(release__misuse_named),
		cmocka_unit_test(release__declared_again_rounds_go_on),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
