/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_nonfinite.c - PS gradients with a NaN or an Inf end to end
 * (libpbox against the in-process box of pboxd's control plane and
 * engines, box_inproc.h), per job policy (docs/protocol.md "Non-finite
 * gradients"): skip keeps the weights, the call succeeds and the client
 * counts the skipped segments; abort (the default) ends the call and the
 * job with a reason naming the rank and key, the weights untouched; pass
 * steps anyway. job_status reports the policy and counts. A checkpoint
 * whose weights are not finite is refused at restore, naming where;
 * ps_state_finite on its own names each array.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/jobs_nonfinite.h"
#include "control/ps_ckpt.h"
#include "control/ps_finite.h"
#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define N   300   /* one segment of fp32 weights */
#define KEY 3

static float w1[N], g1[N], gbad[N], got[N];

static void fill(float *a, size_t n, float v)
{
	for (size_t i = 0; i < n; i++)
		a[i] = v;
}

/* A one-rank job with policy nf (0: the default) and an SGD key (lr 0.5)
 * of N weights, all 1. */
static struct box_inproc *one_rank(const char *job, uint32_t nf, pbox_client **c)
{
	struct box_inproc *b = box_inproc_new(1);
	pbox_opts o;
	pbox_optim opt;

	box_inproc_start(b);
	pbox_opts_init(&o);
	o.timeout_ms = 5000;
	o.nonfinite = nf;
	assert_int_equal(pbox_connect(b->addr, job, 0, 1, &o, c), 0);
	pbox_optim_init(&opt, PBOX_OPTIM_SGD);
	opt.lr = 0.5;
	fill(w1, N, 1.0f);
	fill(g1, N, 1.0f);
	fill(gbad, N, 1.0f);
	assert_int_equal(pbox_declare_optimizer(*c, KEY, N, PBOX_F32, &opt), 0);
	assert_int_equal(pbox_ps_init(*c, KEY, w1, got), 0);
	return b;
}

static uint64_t skipped(pbox_client *c)
{
	pbox_stats s;
	assert_int_equal(pbox_get_stats(c, &s), 0);
	return s.ps_skipped;
}

struct nf_arg {
	const char *job;
	int found;
	unsigned policy;
	struct job_nonfinite n;
	uint64_t rank0;
	char reason[192];
};

static void nf_fn(struct box_inproc *b, void *arg)
{
	struct nf_arg *a = arg;
	const struct job *j = jobs_find(b->f->box.jobs, a->job);

	a->found = j != NULL;
	if (!j)
		return;
	a->policy = j->nonfinite;
	jobs_nonfinite_counts(b->f->box.jobs, j, &a->n);
	a->rank0 = jobs_rank_nonfinite(b->f->box.jobs, j, 0);
	snprintf(a->reason, sizeof(a->reason), "%s", j->reason);
}

static void skip__weights_kept_call_succeeds_counted(void **state)
{
	pbox_client *c;
	struct box_inproc *b = one_rank("nfskip", PBOX_NONFINITE_SKIP, &c);
	struct nf_arg a = { .job = "nfskip" };

	(void)state;
	gbad[17] = NAN;
	assert_int_equal(pbox_push_pull(c, KEY, gbad, got, N, PBOX_F32), 0);
	for (size_t i = 0; i < N; i++)
		assert_true(got[i] == 1.0f);
	assert_int_equal(skipped(c), 1);
	gbad[17] = -INFINITY;
	assert_int_equal(pbox_push_pull(c, KEY, gbad, got, N, PBOX_F32), 0);
	assert_true(got[0] == 1.0f && got[17] == 1.0f);
	assert_int_equal(skipped(c), 2);
	/* a finite step steps from the kept weights */
	assert_int_equal(pbox_push_pull(c, KEY, g1, got, N, PBOX_F32), 0);
	for (size_t i = 0; i < N; i++)
		assert_true(got[i] == 0.5f);
	assert_int_equal(skipped(c), 2);
	box_inproc_call(b, nf_fn, &a);
	assert_true(a.found);
	assert_int_equal(a.policy, ENGINE_NF_SKIP);
	assert_int_equal(a.n.rounds, 2);
	assert_int_equal(a.n.skipped, 2);
	assert_int_equal(a.rank0, 2);
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
}

/* No policy given: abort. */
static void abort_default__call_fails_naming_rank_and_key(void **state)
{
	pbox_client *c;
	struct box_inproc *b = one_rank("nfabort", 0, &c);
	struct nf_arg a = { .job = "nfabort" };

	(void)state;
	gbad[5] = NAN;
	fill(got, N, 7.0f);
	assert_int_equal(pbox_push_pull(c, KEY, gbad, got, N, PBOX_F32), PBOX_EABORTED);
	const char *e = pbox_last_error(c);
	assert_non_null(strstr(e, "rank 0 sent a NaN or Inf gradient for key 3"));
	assert_non_null(strstr(e, "nonfinite policy is abort"));
	assert_int_equal(skipped(c), 0);
	box_inproc_call(b, nf_fn, &a);
	assert_true(a.found);
	assert_int_equal(a.policy, ENGINE_NF_ABORT);
	assert_int_equal(a.n.rounds, 1);
	assert_int_equal(a.n.skipped, 0);
	assert_non_null(strstr(a.reason, "rank 0 sent a NaN or Inf gradient for key 3 "
				      "(segment 0 round 2)"));
	pbox_close(c);
	box_inproc_stop(b);
	box_inproc_free(b);
}

struct ckpt_arg {
	const char *job, *dir;
	int rc;
	char err[512];
};

static void save_fn(struct box_inproc *b, void *arg)
{
	struct ckpt_arg *a = arg;
	const struct job *j = jobs_find(b->f->box.jobs, a->job);
	struct ps_ckpt_saved saved[4];
	uint32_t n = 0;

	a->rc = j ? ps_ckpt_save_job(j, a->dir, NULL, saved, &n, a->err, sizeof(a->err)) :
		    -ENOENT;
}

static void create_restore_fn(struct box_inproc *b, void *arg)
{
	struct ckpt_arg *a = arg;
	const struct job *j;

	a->rc = jobs_create(b->f->box.jobs, a->job, 1, 0, 0, 1, &j, a->err, sizeof(a->err));
	if (a->rc == 0)
		a->rc = jobs_set_restore(b->f->box.jobs, j, a->dir, a->err, sizeof(a->err));
}

/* pass steps the NaN into the weights (as before the policy); saved, that
 * state is refused at restore, naming the key, the array and the element. */
static void pass__nan_stepped_in__its_checkpoint_refused(void **state)
{
	pbox_client *c;
	struct box_inproc *b = one_rank("nfpass", PBOX_NONFINITE_PASS, &c);
	char dir[] = "/tmp/pbox-nf-XXXXXX", path[512];
	struct ckpt_arg a = { .job = "nfpass" };
	pbox_optim opt;

	(void)state;
	gbad[9] = INFINITY;
	assert_int_equal(pbox_push_pull(c, KEY, gbad, got, N, PBOX_F32), 0);
	assert_true(isinf(got[9]) && got[9] < 0);   /* 1 - 0.5 * inf */
	assert_true(got[8] == 0.5f);
	assert_int_equal(skipped(c), 0);
	assert_non_null(mkdtemp(dir));
	a.dir = dir;
	box_inproc_call(b, save_fn, &a);
	assert_int_equal(a.rc, 0);
	pbox_close(c);

	a = (struct ckpt_arg){ .job = "nfrest", .dir = dir };
	box_inproc_call(b, create_restore_fn, &a);
	assert_int_equal(a.rc, 0);
	pbox_opts o;
	pbox_opts_init(&o);
	o.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "nfrest", 0, 1, &o, &c), 0);
	pbox_optim_init(&opt, PBOX_OPTIM_SGD);
	opt.lr = 0.5;
	assert_true(pbox_declare_optimizer(c, KEY, N, PBOX_F32, &opt) < 0);
	const char *e = pbox_last_error(c);
	assert_non_null(strstr(e, "job nfrest key 3: the checkpoint"));
	assert_non_null(strstr(e, "its weights[9] is -inf"));
	assert_non_null(strstr(e, "not restored"));
	pbox_close(c);
	snprintf(path, sizeof(path), "%s/key-%u.pboxckpt", dir, KEY);
	unlink(path);
	rmdir(dir);
	box_inproc_stop(b);
	box_inproc_free(b);
}

/* Each array named by torch's name, the first bad element found. */
static void ps_state_finite__names_array_and_element(void **state)
{
	static float w[70], m[70], v[70];
	const void *arr[3] = { w, m, v };
	char err[256];

	(void)state;
	fill(w, 70, 1.0f);
	fill(m, 70, 0.0f);
	fill(v, 70, 2.0f);
	assert_int_equal(ps_state_finite(arr, 3, 70, OPTIM_ADAM, "k", err, sizeof(err)), 0);
	v[69] = NAN;
	v[68] = INFINITY;
	assert_int_equal(ps_state_finite(arr, 3, 70, OPTIM_ADAM, "k", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "k: its exp_avg_sq[68] is inf"));
	m[0] = -INFINITY;
	assert_int_equal(ps_state_finite(arr, 2, 70, OPTIM_SGD, "k", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "k: its momentum_buffer[0] is -inf"));
	w[33] = NAN;
	assert_int_equal(ps_state_finite(arr, 1, 70, OPTIM_SGD, "k", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "k: its weights[33] is NaN"));
	/* a file's image: arrays at any byte offset */
	static uint8_t img[1 + 70 * 4];
	const void *one[1] = { img + 1 };
	fill(w, 70, 1.0f);
	memcpy(img + 1, w, sizeof(w));
	assert_int_equal(ps_state_finite(one, 1, 70, OPTIM_SGD, "k", err, sizeof(err)), 0);
	w[69] = -INFINITY;
	memcpy(img + 1, w, sizeof(w));
	assert_int_equal(ps_state_finite(one, 1, 70, OPTIM_SGD, "k", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "k: its weights[69] is -inf"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(skip__weights_kept_call_succeeds_counted),
		cmocka_unit_test(abort_default__call_fails_naming_rank_and_key),
		cmocka_unit_test(pass__nan_stepped_in__its_checkpoint_refused),
		cmocka_unit_test(ps_state_finite__names_array_and_element),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
