/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ckpt_restore.c - a restore's checkpoint is read off the control
 * thread (issue 44.4; control/ckpt_load.h, control/ckpt_restore.h): while
 * a key's file takes seconds to read, other RPCs are answered at once; the
 * ranks declaring the key meanwhile all wait for that one read and all
 * get the same answer (the restored weights and step, or the same error);
 * a read past --checkpoint-timeout-ms fails every waiting declaration
 * with ETIMEDOUT naming the file; a rank that disconnects meanwhile
 * leaves no answer behind. A slow disk is made by wrapping ckpt_read at
 * link time (-Wl,--wrap): it sleeps delay_ms first and counts the reads.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/rpc_client.h"
#include "control/ckpt_file.h"
#include "control/ckpt_load.h"
#include "control/ckpt_restore.h"
#include "control/ckpt_worker.h"
#include "control/ps_ckpt.h"
#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define SECRET "0123456789abcdef-rest"
#define N 1000

static unsigned delay_ms, reads;

int __real_ckpt_read(int dfd, const char *dir, uint32_t key, uint64_t max,
		     const struct box_keepalive *ka, uint8_t **buf, size_t *len, char *err,
		     size_t errlen);
int __wrap_ckpt_read(int dfd, const char *dir, uint32_t key, uint64_t max,
		     const struct box_keepalive *ka, uint8_t **buf, size_t *len, char *err,
		     size_t errlen)
{
	unsigned d = __atomic_load_n(&delay_ms, __ATOMIC_RELAXED);

	__atomic_add_fetch(&reads, 1, __ATOMIC_RELAXED);
	if (d)
		usleep(d * 1000u);
	return __real_ckpt_read(dfd, dir, key, max, ka, buf, len, err, errlen);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static int op_call(struct box_inproc *b, const char *method, json_t *p, json_t **r,
		   struct rpc_error *e)
{
	struct rpc_client *c;
	int rc;

	assert_int_equal(rpc_client_connect(b->addr, 2000, &c, e), 0);
	json_object_set_new(p, "secret", json_string(SECRET));
	rc = rpc_client_call(c, method, p, 20000, r, e);
	json_decref(p);
	rpc_client_close(c);
	return rc;
}

static void sgd(pbox_optim *opt)
{
	pbox_optim_init(opt, PBOX_OPTIM_SGD);
	opt->lr = 0.5;
}

/* A box with a checkpoint of job "src"'s key 1 (N weights of 1, two SGD
 * steps of gradient 1: 0 at step 2) in dir. */
static struct box_inproc *box_with_checkpoint(const char *dir)
{
	struct box_inproc *b = box_inproc_new(1);
	float w[N], got[N], g[N];
	struct rpc_error e;
	pbox_client *c;
	pbox_optim opt;
	pbox_opts o;
	json_t *r;

	snprintf(b->f->box.cfg.operator_secret, sizeof(b->f->box.cfg.operator_secret), "%s",
		 SECRET);
	b->f->box.cfg.operator_secret_len = (uint32_t)strlen(SECRET);
	box_inproc_start(b);
	pbox_opts_init(&o);
	o.timeout_ms = 10000;
	assert_int_equal(pbox_connect(b->addr, "src", 0, 1, &o, &c), 0);
	sgd(&opt);
	for (int i = 0; i < N; i++)
		w[i] = g[i] = 1.0f;
	assert_int_equal(pbox_declare_optimizer(c, 1, N, PBOX_F32, &opt), 0);
	assert_int_equal(pbox_ps_init(c, 1, w, got), 0);
	for (int s = 0; s < 2; s++)
		assert_int_equal(pbox_push_pull(c, 1, g, got, N, PBOX_F32), 0);
	assert_true(got[0] == 0.0f);
	assert_int_equal(op_call(b, "job_save", json_pack("{s:s, s:s}", "job", "src", "dir", dir),
				 &r, &e), 0);
	json_decref(r);
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	return b;
}

struct decl {
	pbox_client *c;
	uint64_t count;
	int rc;
	long ms;
	char msg[512];
};

/* The box's part of a declaration's error (libpbox names the rank first). */
static const char *box_part(const char *msg)
{
	const char *p = strstr(msg, "key_declare: ");
	return p ? p : msg;
}

struct init {
	pbox_client *c;
	int rank;
	float w[N], got[N];
	int rc;
};

static void *init_main(void *arg)
{
	struct init *in = arg;

	for (int i = 0; i < N; i++)
		in->w[i] = 9.0f;   /* rank's own: the checkpoint's win */
	in->rc = pbox_ps_init(in->c, 1, in->rank == 0 ? in->w : NULL, in->got);
	return NULL;
}

static void *declare_main(void *arg)
{
	struct decl *d = arg;
	pbox_optim opt;
	long t0 = now_ms();

	sgd(&opt);
	d->rc = pbox_declare_optimizer(d->c, 1, d->count, PBOX_F32, &opt);
	d->ms = now_ms() - t0;
	snprintf(d->msg, sizeof(d->msg), "%s", d->rc ? pbox_last_error(d->c) : "");
	return NULL;
}

/* Job "dst" (world 2) restoring from dir; both ranks connected. */
static void restoring_job(struct box_inproc *b, const char *dir, pbox_client *c[2])
{
	struct rpc_error e;
	pbox_opts o;
	json_t *r;

	assert_int_equal(op_call(b, "job_create", json_pack("{s:s, s:i, s:s}", "job", "dst",
							     "world", 2, "restore", dir), &r, &e), 0);
	json_decref(r);
	pbox_opts_init(&o);
	o.timeout_ms = 10000;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pbox_connect(b->addr, "dst", i, 2, &o, &c[i]), 0);
}

/* Both ranks declare key 1 (count) at once, each on its thread. */
static void declare_both(pbox_client *c[2], uint64_t count, struct decl d[2], pthread_t th[2])
{
	for (int i = 0; i < 2; i++) {
		d[i] = (struct decl){ .c = c[i], .count = count };
		pthread_create(&th[i], NULL, declare_main, &d[i]);
	}
}

static void count_waiting(struct box_inproc *b, void *arg)
{
	*(unsigned *)arg = ckpt_restore_waiting(ckpt_worker_restores(b->f->box.ckpt));
}

static void end_job(struct box_inproc *b, pbox_client *c[2])
{
	struct rpc_error e;
	json_t *r;

	for (int i = 0; i < 2; i++)
		if (c[i])
			pbox_close(c[i]);
	if (op_call(b, "job_abort", json_pack("{s:s, s:s}", "job", "dst", "reason", "test end"),
		    &r, &e) == 0)
		json_decref(r);
	assert_true(box_inproc_idle(b, 3000));
}

/* A 1.5 s read: box_status on another connection answers in well under
 * it (before, the control thread read the file itself and answered
 * nothing until done); both ranks' declarations wait for the one read
 * (one ckpt_read) and get the checkpoint's weights and step. */
static void restore__off_the_control_thread__one_read_for_all_ranks(void **state)
{
	char dir[] = "/tmp/pbox-rst-XXXXXX", path[512];
	struct box_inproc *b;
	struct rpc_client *probe;
	struct rpc_error e;
	pbox_client *c[2];
	struct decl d[2];
	pthread_t th[2];
	float got[N];
	long worst = 0;
	json_t *r;

	(void)state;
	alarm(60);
	assert_non_null(mkdtemp(dir));
	b = box_with_checkpoint(dir);
	restoring_job(b, dir, c);
	assert_int_equal(rpc_client_connect(b->addr, 2000, &probe, &e), 0);
	__atomic_store_n(&reads, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&delay_ms, 1500, __ATOMIC_RELAXED);
	declare_both(c, N, d, th);
	usleep(200 * 1000);
	for (int i = 0; i < 10; i++) {
		long t0 = now_ms();
		json_t *p = json_pack("{s:s}", "secret", SECRET);
		assert_int_equal(rpc_client_call(probe, "box_status", p, 5000, &r, &e), 0);
		json_decref(p);
		json_decref(r);
		worst = now_ms() - t0 > worst ? now_ms() - t0 : worst;
		usleep(50 * 1000);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	print_message("box_status during a 1.5 s restore read: worst %ld ms; declarations "
		      "took %ld and %ld ms (%s%s)\n", worst, d[0].ms, d[1].ms, d[0].msg, d[1].msg);
	assert_true(worst < 500);
	assert_int_equal(d[0].rc, 0);
	assert_int_equal(d[1].rc, 0);
	assert_true(d[0].ms >= 1400 && d[1].ms >= 1400);
	assert_int_equal(__atomic_load_n(&reads, __ATOMIC_RELAXED), 1);
	__atomic_store_n(&delay_ms, 0, __ATOMIC_RELAXED);
	static struct init in[2];
	for (int i = 0; i < 2; i++) {
		in[i].c = c[i];
		in[i].rank = i;
		pthread_create(&th[i], NULL, init_main, &in[i]);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(in[i].rc, 0);
		assert_true(in[i].got[0] == 0.0f && in[i].got[N - 1] == 0.0f);
	}
	uint64_t steps = 0;
	assert_int_equal(pbox_ps_read(c[0], 1, PBOX_PS_WEIGHTS, got, N, &steps), 0);
	assert_int_equal(steps, 2);
	rpc_client_close(probe);
	end_job(b, c);
	box_inproc_free(b);
	ps_ckpt_path(path, sizeof(path), dir, 1);
	unlink(path);
	rmdir(dir);
	alarm(0);
}

/* A failed read fails every waiting declaration with the same message (a
 * checkpoint of another count: the existing check); a read past
 * --checkpoint-timeout-ms fails both with ETIMEDOUT naming the file, and
 * the key can be declared again; a rank that disconnects while the read
 * runs leaves nothing waiting, and the other rank is told its job ended. */
static void restore__same_error_for_all__bounded__disconnect(void **state)
{
	char dir[] = "/tmp/pbox-rst-XXXXXX", path[512];
	struct box_inproc *b;
	pbox_client *c[2];
	struct decl d[2];
	pthread_t th[2];

	(void)state;
	alarm(60);
	assert_non_null(mkdtemp(dir));
	b = box_with_checkpoint(dir);
	ps_ckpt_path(path, sizeof(path), dir, 1);

	/* wrong shape: the same message for both */
	restoring_job(b, dir, c);
	__atomic_store_n(&reads, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&delay_ms, 300, __ATOMIC_RELAXED);
	declare_both(c, N / 2, d, th);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	print_message("wrong count: %d '%s' / %d '%s'\n", d[0].rc, d[0].msg, d[1].rc, d[1].msg);
	assert_int_equal(d[0].rc, PBOX_EREJECTED);
	assert_int_equal(d[1].rc, PBOX_EREJECTED);
	assert_non_null(strstr(d[0].msg, "key-1.pboxckpt"));
	assert_string_equal(box_part(d[0].msg), box_part(d[1].msg));
	assert_int_equal(__atomic_load_n(&reads, __ATOMIC_RELAXED), 1);

	/* a 1.5 s read with a 400 ms bound: ETIMEDOUT naming the file, for both */
	b->f->box.cfg.checkpoint_timeout_ms = 400;
	__atomic_store_n(&delay_ms, 1500, __ATOMIC_RELAXED);
	declare_both(c, N, d, th);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	print_message("timed out: %d '%s' after %ld ms\n", d[0].rc, d[0].msg, d[0].ms);
	assert_int_not_equal(d[0].rc, 0);
	assert_string_equal(box_part(d[0].msg), box_part(d[1].msg));
	assert_non_null(strstr(d[0].msg, path));
	assert_non_null(strstr(d[0].msg, "did not finish within 400 ms"));
	assert_true(d[0].ms >= 350 && d[0].ms < 1400);
	/* the key is declared again once the disk is fast */
	__atomic_store_n(&delay_ms, 0, __ATOMIC_RELAXED);
	b->f->box.cfg.checkpoint_timeout_ms = 0;
	usleep(1300 * 1000);   /* the timed-out read ends */
	declare_both(c, N, d, th);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(d[0].rc, 0);
	assert_int_equal(d[1].rc, 0);
	end_job(b, c);

	/* rank 1 goes while the read runs: no answer is left for it (ASan
	 * would see one sent to its freed connection), rank 0 is told */
	struct rpc_client *r1;
	struct rpc_error e;
	json_t *r;
	assert_int_equal(op_call(b, "job_create", json_pack("{s:s, s:i, s:s}", "job", "dst",
							     "world", 2, "restore", dir), &r, &e), 0);
	json_decref(r);
	pbox_opts o;
	pbox_opts_init(&o);
	o.timeout_ms = 10000;
	assert_int_equal(pbox_connect(b->addr, "dst", 0, 2, &o, &c[0]), 0);
	c[1] = NULL;
	assert_int_equal(rpc_client_connect(b->addr, 2000, &r1, &e), 0);
	json_t *jp = json_pack("{s:s, s:i, s:i, s:s, s:i}", "job", "dst", "rank", 1, "world", 2,
			       "data_ip", "127.0.0.1", "data_port", 9);
	assert_int_equal(rpc_client_call(r1, "job_join", jp, 2000, &r, &e), 0);
	json_decref(jp);
	json_int_t job_id = json_integer_value(json_object_get(r, "job_id"));
	json_decref(r);
	__atomic_store_n(&delay_ms, 800, __ATOMIC_RELAXED);
	d[0] = (struct decl){ .c = c[0], .count = N };
	pthread_create(&th[0], NULL, declare_main, &d[0]);
	json_t *p = json_pack("{s:I, s:i, s:i, s:i, s:s, s:{s:s, s:f}}", "job_id", job_id,
			      "rank", 1, "key", 1, "count", N, "dtype", "f32", "optimizer",
			      "name", "sgd", "momentum", 0.0);
	assert_int_not_equal(rpc_client_call(r1, "key_declare", p, 300, &r, &e), 0);
	json_decref(p);
	rpc_client_close(r1);   /* its declaration still waits for the read */
	pthread_join(th[0], NULL);
	print_message("rank 1 gone: rank 0 %d '%s'\n", d[0].rc, d[0].msg);
	assert_int_equal(d[0].rc, PBOX_EABORTED);
	__atomic_store_n(&delay_ms, 0, __ATOMIC_RELAXED);
	unsigned waiting = 1;
	box_inproc_call(b, count_waiting, &waiting);
	assert_int_equal(waiting, 0);
	end_job(b, c);
	usleep(1000 * 1000);   /* the read ends and lets go */
	assert_int_equal(ckpt_load_inflight(), 0);
	box_inproc_free(b);
	unlink(path);
	rmdir(dir);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(restore__off_the_control_thread__one_read_for_all_ranks),
		cmocka_unit_test(restore__same_error_for_all__bounded__disconnect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
