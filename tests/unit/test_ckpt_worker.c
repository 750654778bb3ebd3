/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ckpt_worker.c - job_save's files are written off the control thread
 * (control/ckpt_worker.h; issue 44.4): while a save's files take seconds,
 * other RPCs are answered at once, the save is answered when they are
 * written, at --checkpoint-timeout-ms with a named ETIMEDOUT, and a second
 * save meanwhile gets a named EBUSY. A slow disk is made by wrapping
 * ps_ckpt_write_set at link time (-Wl,--wrap): it sleeps delay_ms first.
 * Also --checkpoint-dir: a job's periodic save lands in DIR/<job>/ and a
 * job created again with the same name and world restores from it, its
 * key_declare answering the restored step; one of another world is
 * refused, naming the file.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/rpc_client.h"
#include "control/ckpt_worker.h"
#include "control/ps_ckpt.h"
#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define SECRET "0123456789abcdef-ckpt"

static unsigned delay_ms;

int __real_ps_ckpt_write_set(const struct ps_ckpt_set *set, const char *dir,
			     const struct box_keepalive *ka, char *err, size_t errlen);
int __wrap_ps_ckpt_write_set(const struct ps_ckpt_set *set, const char *dir,
			     const struct box_keepalive *ka, char *err, size_t errlen)
{
	unsigned d = __atomic_load_n(&delay_ms, __ATOMIC_RELAXED);

	if (d)
		usleep(d * 1000u);
	return __real_ps_ckpt_write_set(set, dir, ka, err, errlen);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static struct box_inproc *box_with_secret(void)
{
	struct box_inproc *b = box_inproc_new(1);

	snprintf(b->f->box.cfg.operator_secret, sizeof(b->f->box.cfg.operator_secret), "%s",
		 SECRET);
	b->f->box.cfg.operator_secret_len = (uint32_t)strlen(SECRET);
	return b;
}

/* An SGD key of n weights, all v, its init round run. */
static void sgd_key(pbox_client *c, uint32_t key, size_t n, float v)
{
	float *w = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
	pbox_optim opt;

	for (size_t i = 0; i < n; i++)
		w[i] = v;
	pbox_optim_init(&opt, PBOX_OPTIM_SGD);
	opt.lr = 0.5;
	assert_int_equal(pbox_declare_optimizer(c, key, n, PBOX_F32, &opt), 0);
	assert_int_equal(pbox_ps_init(c, key, w, got), 0);
	free(w);
	free(got);
}

struct save {
	const char *addr, *job, *dir;
	int rc;
	long ms;
	struct rpc_error e;
	json_t *result;
};

static void *save_main(void *arg)
{
	struct save *s = arg;
	struct rpc_client *c;
	long t0 = now_ms();

	assert_int_equal(rpc_client_connect(s->addr, 2000, &c, &s->e), 0);
	json_t *p = json_pack("{s:s, s:s, s:s}", "job", s->job, "dir", s->dir, "secret", SECRET);
	s->rc = rpc_client_call(c, "job_save", p, 20000, &s->result, &s->e);
	json_decref(p);
	s->ms = now_ms() - t0;
	rpc_client_close(c);
	return NULL;
}

static void set_timeout_fn(struct box_inproc *b, void *arg)
{
	b->f->box.cfg.checkpoint_timeout_ms = *(unsigned *)arg;
}

/* job_save of a 1.5 s write: box_status on another connection is answered
 * in well under 1.5 s meanwhile (before, the control thread wrote the
 * files itself and answered nothing until done); the save answers after
 * the write with its keys and bytes. With a 400 ms bound: -ETIMEDOUT at
 * about 400 ms, naming job and directory; a second save meanwhile is
 * -EBUSY naming the one in flight; after the write ends a save works. */
static void save__off_the_control_thread__bounded__one_at_a_time(void **state)
{
	char dir[] = "/tmp/pbox-ckw-XXXXXX", path[512];
	struct box_inproc *b = box_with_secret();
	struct rpc_client *probe;
	struct rpc_error e;
	pbox_client *c;
	pbox_opts o;
	pthread_t th;
	json_t *r;
	long worst = 0;

	(void)state;
	alarm(60);
	assert_non_null(mkdtemp(dir));
	box_inproc_start(b);
	pbox_opts_init(&o);
	assert_int_equal(pbox_connect(b->addr, "slow", 0, 1, &o, &c), 0);
	sgd_key(c, 1, 1000, 1.0f);
	assert_int_equal(rpc_client_connect(b->addr, 2000, &probe, &e), 0);

	__atomic_store_n(&delay_ms, 1500, __ATOMIC_RELAXED);
	struct save s = { .addr = b->addr, .job = "slow", .dir = dir };
	pthread_create(&th, NULL, save_main, &s);
	usleep(200 * 1000);
	for (int i = 0; i < 10; i++) {
		long t0 = now_ms();
		json_t *p = json_pack("{s:s}", "secret", SECRET);
		int rc = rpc_client_call(probe, "box_status", p, 5000, &r, &e);
		json_decref(p);
		if (rc)
			print_message("box_status: %d %s\n", e.code, e.message);
		assert_int_equal(rc, 0);
		json_decref(r);
		long d = now_ms() - t0;
		worst = d > worst ? d : worst;
		usleep(50 * 1000);
	}
	pthread_join(th, NULL);
	print_message("box_status during a 1.5 s save: worst %ld ms; the save took %ld ms\n",
		      worst, s.ms);
	assert_true(worst < 500);
	assert_int_equal(s.rc, 0);
	assert_true(s.ms >= 1500);
	assert_int_equal(json_integer_value(json_object_get(s.result, "bytes")), 104 + 4 + 4000);
	json_decref(s.result);
	ps_ckpt_path(path, sizeof(path), dir, 1);
	assert_int_equal(access(path, F_OK), 0);

	unsigned bound = 400;
	box_inproc_call(b, set_timeout_fn, &bound);
	s = (struct save){ .addr = b->addr, .job = "slow", .dir = dir };
	pthread_create(&th, NULL, save_main, &s);
	pthread_join(th, NULL);
	assert_int_equal(s.rc, -EREMOTEIO);
	assert_int_equal(s.e.code, -ETIMEDOUT);
	assert_non_null(strstr(s.e.message, "job slow: the checkpoint into"));
	assert_non_null(strstr(s.e.message, "did not finish within 400 ms"));
	assert_true(s.ms >= 400 && s.ms < 1400);
	s = (struct save){ .addr = b->addr, .job = "slow", .dir = dir };
	save_main(&s);
	assert_int_equal(s.rc, -EREMOTEIO);
	assert_int_equal(s.e.code, -EBUSY);
	assert_non_null(strstr(s.e.message, "a checkpoint of job slow into"));
	__atomic_store_n(&delay_ms, 0, __ATOMIC_RELAXED);
	usleep(1500 * 1000);   /* the timed-out write ends */
	s = (struct save){ .addr = b->addr, .job = "slow", .dir = dir };
	save_main(&s);
	assert_int_equal(s.rc, 0);
	json_decref(s.result);

	rpc_client_close(probe);
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
	unlink(path);
	rmdir(dir);
	alarm(0);
}

/* --checkpoint-dir DIR --checkpoint-every 1: a job that stepped is saved
 * into DIR/<job>/ (weights after its steps); the box's job gone (as after
 * a restart), a job created again with the same name and world starts
 * from it, key_declare answering restored and the step; the same name
 * with another world is refused naming the file and the worlds. */
static void periodic__saved_into_dir_job__restored_by_name_and_world(void **state)
{
	enum { N = 64 };
	char dir[] = "/tmp/pbox-cka-XXXXXX", path[600];
	struct box_inproc *b = box_inproc_new(1);
	float g[N], got[N], w[N];
	pbox_client *c, *c2[2];
	pbox_opts o;

	(void)state;
	alarm(60);
	assert_non_null(mkdtemp(dir));
	snprintf(b->f->box.cfg.checkpoint_dir, sizeof(b->f->box.cfg.checkpoint_dir), "%s", dir);
	b->f->box.cfg.checkpoint_every_s = 1;
	box_inproc_start(b);
	pbox_opts_init(&o);
	o.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "auto-1", 0, 1, &o, &c), 0);
	sgd_key(c, 3, N, 1.0f);
	for (int i = 0; i < N; i++)
		g[i] = 1.0f;
	for (int step = 0; step < 4; step++)
		assert_int_equal(pbox_push_pull(c, 3, g, got, N, PBOX_F32), 0);
	assert_true(got[0] == 1.0f - 4 * 0.5f);   /* -1 */
	snprintf(path, sizeof(path), "%s/auto-1/key-3.pboxckpt", dir);
	struct stat st;
	int seen = 0;
	for (int t = 0; t < 40 && !seen; t++) {   /* within 4 s */
		usleep(100 * 1000);
		seen = stat(path, &st) == 0;
	}
	assert_true(seen);
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));   /* the job is gone */

	/* the same name and world: from the checkpoint, at step 4 */
	assert_int_equal(pbox_connect(b->addr, "auto-1", 0, 1, &o, &c), 0);
	pbox_optim opt;
	pbox_optim_init(&opt, PBOX_OPTIM_SGD);
	opt.lr = 0.5;
	assert_int_equal(pbox_declare_optimizer(c, 3, N, PBOX_F32, &opt), 0);
	for (int i = 0; i < N; i++)
		w[i] = 9.0f;   /* rank 0's: the checkpoint's win */
	assert_int_equal(pbox_ps_init(c, 3, w, got), 0);
	assert_true(got[0] == -1.0f && got[N - 1] == -1.0f);
	uint64_t steps = 0;
	assert_int_equal(pbox_ps_read(c, 3, PBOX_PS_WEIGHTS, got, N, &steps), 0);
	assert_int_equal(steps, 4);
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));

	/* the same name, world 2: refused, naming the file */
	assert_int_equal(pbox_connect(b->addr, "auto-1", 0, 2, &o, &c2[0]), 0);
	assert_int_equal(pbox_connect(b->addr, "auto-1", 1, 2, &o, &c2[1]), 0);
	assert_int_equal(pbox_declare_optimizer(c2[0], 3, N, PBOX_F32, &opt), PBOX_EREJECTED);
	assert_non_null(strstr(pbox_last_error(c2[0]), "key-3.pboxckpt is of another world: "
						       "1 ranks, not 2"));
	pbox_close(c2[0]);
	pbox_close(c2[1]);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
	unlink(path);
	snprintf(path, sizeof(path), "%s/auto-1", dir);
	rmdir(path);
	rmdir(dir);
	alarm(0);
}

/* ---- the snapshot copied a piece per poll (ps_ckpt_cut) ---- */

struct cut_arg {
	const char *job;
	bool patient;
	size_t budget;
	struct ps_ckpt_cut *cut;
	struct ps_ckpt_set set;
	int rc;
	char err[512];
};

static void cut_begin_fn(struct box_inproc *b, void *arg)
{
	struct cut_arg *a = arg;

	a->rc = ps_ckpt_cut_begin(jobs_find(b->f->box.jobs, a->job), a->patient, &a->cut,
				  a->err, sizeof(a->err));
}

static void cut_step_fn(struct box_inproc *b, void *arg)
{
	struct cut_arg *a = arg;

	a->rc = ps_ckpt_cut_step(jobs_find(b->f->box.jobs, a->job), a->cut, a->budget, a->err,
				 sizeof(a->err));
	if (a->rc == 0)
		ps_ckpt_cut_take(a->cut, &a->set);
}

/* Step the cut with budget until it ends (a round open: again 10 ms
 * later, 50 times at most): its last return. */
static int cut_finish(struct box_inproc *b, struct cut_arg *a, size_t budget)
{
	a->budget = budget;
	for (int t = 0; t < 50; t++) {
		box_inproc_call(b, cut_step_fn, a);
		if (a->rc != 1)
			return a->rc;
		usleep(10 * 1000);
	}
	return a->rc;
}

/* A save copied in pieces across polls: a round that completes between
 * two pieces (a step taken after the first quarter of the weights was
 * copied) must not leave a checkpoint of two rounds (a quarter at step
 * 1, the rest at step 2): a patient copy starts over and holds step 2
 * whole; an impatient one (periodic saves) is -EBUSY naming the key. */
static void save__copied_in_pieces__one_round_or_busy(void **state)
{
	enum { NW = 4096 };
	static float g[NW], got[NW];
	struct box_inproc *b = box_inproc_new(1);
	struct cut_arg a = { .job = "pieces", .patient = true };
	pbox_client *c;
	pbox_opts o;

	(void)state;
	alarm(60);
	box_inproc_start(b);
	pbox_opts_init(&o);
	assert_int_equal(pbox_connect(b->addr, "pieces", 0, 1, &o, &c), 0);
	sgd_key(c, 1, NW, 1.0f);
	for (int i = 0; i < NW; i++)
		g[i] = 1.0f;
	assert_int_equal(pbox_push_pull(c, 1, g, got, NW, PBOX_F32), 0);   /* 0.5 */

	box_inproc_call(b, cut_begin_fn, &a);
	assert_int_equal(a.rc, 0);
	a.budget = NW / 4 * sizeof(float);
	box_inproc_call(b, cut_step_fn, &a);
	assert_int_equal(a.rc, 1);   /* a quarter copied */
	assert_int_equal(pbox_push_pull(c, 1, g, got, NW, PBOX_F32), 0);   /* 0 */
	assert_int_equal(cut_finish(b, &a, 1u << 20), 0);
	assert_int_equal(a.set.n, 1);
	assert_int_equal(a.set.s[0].steps, 2);
	for (int i = 0; i < NW; i++)
		if (a.set.s[0].data[i] != 0.0f)
			fail_msg("weight %d is %g: the copy mixes two steps", i,
				 (double)a.set.s[0].data[i]);
	ps_ckpt_set_free(&a.set);
	ps_ckpt_cut_free(a.cut);

	a = (struct cut_arg){ .job = "pieces", .patient = false };
	box_inproc_call(b, cut_begin_fn, &a);
	assert_int_equal(a.rc, 0);
	a.budget = NW / 4 * sizeof(float);
	box_inproc_call(b, cut_step_fn, &a);
	assert_int_equal(a.rc, 1);
	assert_int_equal(pbox_push_pull(c, 1, g, got, NW, PBOX_F32), 0);   /* -0.5 */
	assert_int_equal(cut_finish(b, &a, 1u << 20), -EBUSY);
	assert_non_null(strstr(a.err, "job pieces: key 1 stepped while the job's keys were "
			       "copied"));
	ps_ckpt_cut_free(a.cut);

	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(save__off_the_control_thread__bounded__one_at_a_time),
		cmocka_unit_test(periodic__saved_into_dir_job__restored_by_name_and_world),
		cmocka_unit_test(save__copied_in_pieces__one_round_or_busy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
