/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * restart_prog.c - test_restart.sh's worker: one rank of a job that
 * trains through a pboxd restart (kill -9, started again), through the
 * public API only. Each step's input depends on the last step's result,
 * so a wrong or lost sum changes everything after it.
 *   restart_prog CONTROL JOB RANK WORLD dense STEPS N PROGRESS
 *       key 1, N floats: x = rank-dependent start; each step x =
 *       allreduce(x) / world * 0.5 + rank-dependent term; the digest is
 *       over every step's result (the same bits on every rank)
 *   restart_prog CONTROL JOB RANK WORLD ps STEPS N PROGRESS
 *       PS key 2, SGD with momentum, N weights; each step's gradient is a
 *       function of the weights and the rank only; a step that fails
 *       PBOX_EAGAIN (the box restarted) asks the box which step it
 *       restored (pbox_ps_read's steps), takes its weights (pbox_ps_init
 *       again) and replays from there; the digest is of the final weights
 *   restart_prog CONTROL JOB RANK WORLD topk STEPS N PROGRESS
 *       key 3, N floats, pbox_allreduce_topk at density 0.05 with error
 *       feedback, the input made from the last result as dense's; the
 *       digest is over every step's result; TOPK_PIECE=P in the
 *       environment: the N floats as pieces of P, each a top-k key of its
 *       own (100, 101, ...), as a fleet cuts a key into partitions
 * (test_fleet.sh runs the three over a fleet of boxes: CONTROL a list.)
 * STEP_MS in the environment: a pause after each step (ms).
 * PROGRESS: a file this rank rewrites with its step number after each
 * step. Prints "digest HEX", "rejoins R finals F", and for ps
 * "restored S" per restart. Exit 0, or 1 with the error on stderr.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pbox.h"

static int step_ms;   /* STEP_MS: a pause after each step (the box's saves) */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void progress(const char *path, int step)
{
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "%d\n", step);
		fclose(f);
		rename(tmp, path);
	}
}

static int fail(pbox_client *c, const char *what, int step)
{
	fprintf(stderr, "restart_prog: %s at step %d: %s\n", what, step,
		c ? pbox_last_error(c) : "");
	return 1;
}

static int dense(pbox_client *c, int rank, int world, int steps, size_t n, const char *prog,
		 int topk)
{
	pbox_topk_opts t;
	float *x = malloc(n * sizeof(float));
	uint64_t h = 0xcbf29ce484222325ull;

	const char *pe = getenv("TOPK_PIECE");
	size_t piece = pe ? strtoull(pe, NULL, 10) : 0;

	pbox_topk_opts_init(&t);
	t.density = 0.05;
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((rank + 1) * ((i % 97) + 1)) * 0.01f;
	for (int s = 0; s < steps; s++) {
		if (topk && piece) {
			for (size_t f = 0; f < n; f += piece)
				if (pbox_allreduce_topk(c, (uint32_t)(100 + f / piece), x + f,
							n - f < piece ? n - f : piece, PBOX_F32,
							&t) != 0)
					return fail(c, "allreduce_topk (a piece)", s);
		} else if ((topk ? pbox_allreduce_topk(c, 3, x, n, PBOX_F32, &t)
				 : pbox_allreduce(c, 1, x, n, PBOX_F32)) != 0)
			return fail(c, topk ? "allreduce_topk" : "allreduce", s);
		h = fnv(h, x, n * sizeof(float));
		for (size_t i = 0; i < n; i++)
			x[i] = x[i] / (float)world * 0.5f + (float)(rank + 1) * 0.001f * (float)(i % 13);
		progress(prog, s + 1);
	}
	printf("digest %016llx\n", (unsigned long long)h);
	free(x);
	return 0;
}

static int ps(pbox_client *c, int rank, int steps, size_t n, const char *prog)
{
	float *w = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
	pbox_optim o;
	uint64_t done = 0;

	pbox_optim_init(&o, PBOX_OPTIM_SGD);
	o.lr = 0.05;
	o.momentum = 0.9;
	for (size_t i = 0; i < n; i++)
		w[i] = (float)((i % 31) + 1) * 0.1f;
	if (pbox_declare_optimizer(c, 2, n, PBOX_F32, &o) != 0 ||
	    pbox_ps_init(c, 2, rank == 0 ? w : NULL, w) != 0)
		return fail(c, "declare/init", 0);
	for (int s = 0; s < steps; s++) {
		for (size_t i = 0; i < n; i++)
			g[i] = w[i] * 0.1f + (float)(rank + 1) * 0.001f;
		int rc = pbox_push_pull(c, 2, g, w, n, PBOX_F32);
		if (rc == PBOX_EAGAIN) {   /* the box restarted: replay from its step */
			if (pbox_ps_init(c, 2, rank == 0 ? w : NULL, w) != 0 ||
			    pbox_ps_read(c, 2, PBOX_PS_WEIGHTS, w, n, &done) != 0)
				return fail(c, "re-init after a restart", s);
			printf("restored %llu (at step %d)\n", (unsigned long long)done, s);
			fflush(stdout);
			if (done == 0 || (int)done > s + 1)   /* (the step in flight may be in it) */
				return fail(c, "the box restored no checkpoint of the key", s);
			s = (int)done - 1;
			continue;
		}
		if (rc != 0)
			return fail(c, "push_pull", s);
		progress(prog, s + 1);
		if (step_ms)
			usleep((useconds_t)step_ms * 1000);
	}
	printf("digest %016llx\n", (unsigned long long)fnv(0xcbf29ce484222325ull, w,
							  n * sizeof(float)));
	free(w);
	free(g);
	return 0;
}

int main(int argc, char **argv)
{
	pbox_client *c;
	pbox_opts opts;
	pbox_stats st;

	if (argc < 9)
		return fprintf(stderr, "usage: restart_prog CONTROL JOB RANK WORLD dense|ps|topk STEPS N "
			       "PROGRESS\n"), 2;
	int rank = atoi(argv[3]), world = atoi(argv[4]), steps = atoi(argv[6]);
	size_t n = strtoull(argv[7], NULL, 10);
	step_ms = getenv("STEP_MS") ? atoi(getenv("STEP_MS")) : 0;
	pbox_opts_init(&opts);
	if (!getenv("PBOX_TIMEOUT"))   /* (pbox_opts_init took it) */
		opts.timeout_ms = 60000;
	if (pbox_connect(argv[1], argv[2], rank, world, &opts, &c) != 0)
		return fail(c, "connect", 0);
	int rc = strcmp(argv[5], "ps") == 0 ? ps(c, rank, steps, n, argv[8])
					    : dense(c, rank, world, steps, n, argv[8],
						    strcmp(argv[5], "topk") == 0);
	pbox_get_stats(c, &st);
	printf("rejoins %llu finals %llu\n", (unsigned long long)st.rejoins,
	       (unsigned long long)st.finals_sent);
	pbox_close(c);
	return rc;
}
