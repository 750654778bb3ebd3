/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_prog.c - test_checkpoint.sh's worker: one rank (world 1) of a job
 * with an SGD PS key 1 of 1000 weights (lr 0.5, initial weights 1, every
 * gradient 1), through the public API only.
 *   ckpt_prog CONTROL JOB train FLAGFILE   3 steps (weights -0.5), prints
 *       "TRAINED", holds the job until FLAGFILE exists (60 s at most)
 *   ckpt_prog CONTROL JOB resume            the key restored: weights -0.5
 *       and 3 steps before any step (rank 0's weights 9 ignored), then a
 *       4th step gives -1; prints "JOINED" once joined, "DECLARED in MS"
 *       once key_declare (the restore's read) is answered, then "RESUMED 3"
 *   ckpt_prog CONTROL JOB refused TEXT      the declaration is refused with
 *       an error containing TEXT, within 5 s; prints it
 * CKPT_N in the environment sets the weights' count (default 1000; the
 * job then reserves 3 * 4 * CKPT_N bytes more than the box's default).
 * Exit 0 when all holds, 1 otherwise (with what differed on stderr).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pbox.h"

static size_t N = 1000;

static int fail(pbox_client *c, const char *what)
{
	fprintf(stderr, "ckpt_prog: %s: %s\n", what, c ? pbox_last_error(c) : "");
	return 1;
}

static int all(const float *v, float want)
{
	for (size_t i = 0; i < N; i++)
		if (v[i] != want)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	float *w, *g, *out;
	pbox_client *c;
	pbox_optim o;
	pbox_opts opts;
	uint64_t steps = 0;

	if (argc < 4)
		return fprintf(stderr, "usage: ckpt_prog CONTROL JOB train|resume|refused [ARG]\n"), 2;
	const char *phase = argv[3], *arg = argc > 4 ? argv[4] : "";
	if (getenv("CKPT_N"))
		N = strtoull(getenv("CKPT_N"), NULL, 10);
	w = malloc(N * sizeof(float));
	g = malloc(N * sizeof(float));
	out = malloc(N * sizeof(float));
	if (!w || !g || !out)
		return fail(NULL, "out of memory");
	pbox_opts_init(&opts);
	opts.timeout_ms = 30000;
	if (getenv("CKPT_N"))
		opts.job_bytes = (256ull << 20) + 3 * 4 * (uint64_t)N;
	if (pbox_connect(argv[1], argv[2], 0, 1, &opts, &c) != 0)
		return fail(NULL, "connect");
	if (strcmp(phase, "resume") == 0) {   /* ckpt_latency.sh: the declaration starts */
		printf("JOINED\n");
		fflush(stdout);
	}
	pbox_optim_init(&o, PBOX_OPTIM_SGD);
	o.lr = 0.5;
	for (size_t i = 0; i < N; i++) {
		w[i] = strcmp(phase, "train") == 0 ? 1.0f : 9.0f;
		g[i] = 1.0f;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = pbox_declare_optimizer(c, 1, N, PBOX_F32, &o);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long declare_ms = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (strcmp(phase, "resume") == 0) {   /* ckpt_latency.sh: the restore ended */
		printf("DECLARED in %ld ms\n", declare_ms);
		fflush(stdout);
	}
	if (strcmp(phase, "refused") == 0) {
		if (rc == 0 || !strstr(pbox_last_error(c), arg))
			return fail(c, "declaration not refused as expected");
		printf("REFUSED: %s\n", pbox_last_error(c));
		pbox_close(c);
		return 0;
	}
	if (rc != 0 || pbox_ps_init(c, 1, w, out) != 0)
		return fail(c, "declare/init");
	if (strcmp(phase, "train") == 0) {
		for (int s = 0; s < 3; s++)
			if (pbox_push_pull(c, 1, g, out, N, PBOX_F32) != 0)
				return fail(c, "step");
		if (!all(out, -0.5f))
			return fail(c, "weights after 3 steps are not -0.5");
		printf("TRAINED\n");
		fflush(stdout);
		for (int t = 0; t < 600 && access(arg, F_OK) != 0; t++)
			usleep(100 * 1000);
		pbox_close(c);
		return 0;
	}
	if (!all(out, -0.5f))
		return fail(c, "the restored weights are not the checkpoint's (-0.5)");
	if (pbox_ps_read(c, 1, PBOX_PS_WEIGHTS, out, N, &steps) != 0 || steps != 3)
		return fail(c, "restored steps are not 3");
	if (pbox_push_pull(c, 1, g, out, N, PBOX_F32) != 0 || !all(out, -1.0f))
		return fail(c, "the 4th step does not give -1");
	printf("RESUMED %llu (key_declare with the restore: %ld ms)\n", (unsigned long long)steps,
	       declare_ms);
	pbox_close(c);
	return 0;
}
