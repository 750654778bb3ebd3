/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_local_ps.c - one rank of a host-local job's PS key
 * (test_host_local.sh, docs/architecture.md "The host level").
 *
 *   host_local_ps CONTROL JOB RANK WORLD L COUNT STEPS
 *
 * SGD with momentum on the box, f32 gradients that depend on (rank,
 * element, step). Every rank: pbox_ps_init (rank 0's weights), STEPS
 * pbox_push_pull through the host level, then pbox_ps_read (the weights
 * and the steps), then host 0's ranks pbox_ps_write new weights and every
 * rank reads them back. The reference: local rank 0 of each host also
 * joins "<JOB>r", a job of one rank per host with the host level off,
 * whose PS key (the same optimizer, mean_over = WORLD) gets the host's
 * sum in local rank order: the weights must be the same bits at every
 * step. The first step is also checked against w - lr * sum / WORLD (a
 * mean over the hosts would be off by L). Prints "digest <hex>" and "ok".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbox.h"
#include "host_local_data.h"


static float input(int r, size_t i, int k)
{
	return hl_value(r, i, k);
}

#define KEY 3

static int fail(pbox_client *c, const char *what, int rc)
{
	fprintf(stderr, "%s: %s: %s\n", what, pbox_strerror(rc), c ? pbox_last_error(c) : "");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: %s CONTROL JOB RANK WORLD L COUNT STEPS\n", argv[0]);
		return 2;
	}
	const char *control = argv[1], *job = argv[2];
	int rank = atoi(argv[3]), world = atoi(argv[4]), L = atoi(argv[5]);
	size_t count = strtoull(argv[6], NULL, 10);
	int steps = atoi(argv[7]), host = rank / L, hosts = world / L, local = rank % L;
	pbox_opts o;
	pbox_optim opt;
	pbox_client *c, *ref = NULL;
	char refjob[80];
	int rc;

	pbox_opts_init(&o);
	o.local_world = (uint32_t)L;
	o.local_rank = (uint32_t)local;
	if ((rc = pbox_connect(control, job, rank, world, &o, &c)) < 0)
		return fail(c, "connect", rc);
	pbox_optim_init(&opt, PBOX_OPTIM_SGD);
	opt.lr = 0.05;
	opt.momentum = 0.9;
	if ((rc = pbox_declare_optimizer(c, KEY, count, PBOX_F32, &opt)) < 0)
		return fail(c, "declare", rc);
	if (local == 0) {
		pbox_opts ro;
		pbox_opts_init(&ro);
		ro.local_world = 1;
		snprintf(refjob, sizeof(refjob), "%sr", job);
		if ((rc = pbox_connect(control, refjob, host, hosts, &ro, &ref)) < 0)
			return fail(ref, "connect the reference", rc);
		pbox_optim ropt = opt;
		ropt.mean_over = (uint32_t)world;
		if ((rc = pbox_declare_optimizer(ref, KEY, count, PBOX_F32, &ropt)) < 0)
			return fail(ref, "declare the reference", rc);
	}
	float *w0 = malloc(count * 4), *w = malloc(count * 4), *wr = malloc(count * 4);
	float *g = malloc(count * 4), *hs = malloc(count * 4), *sum = malloc(count * 4);
	for (size_t i = 0; i < count; i++)
		w0[i] = input(999, i, 0);
	if ((rc = pbox_ps_init(c, KEY, rank == 0 ? w0 : NULL, w)) < 0)
		return fail(c, "ps_init", rc);
	if (memcmp(w, w0, count * 4)) {
		fprintf(stderr, "ps_init: the weights back are not rank 0's\n");
		return 1;
	}
	if (ref && (rc = pbox_ps_init(ref, KEY, host == 0 ? w0 : NULL, wr)) < 0)
		return fail(ref, "ps_init of the reference", rc);
	for (int s = 0; s < steps; s++) {
		for (size_t i = 0; i < count; i++) {
			g[i] = input(rank, i, s + 1);
			float t = input(host * L, i, s + 1);
			for (int l = 1; l < L; l++)
				t += input(host * L + l, i, s + 1);
			hs[i] = t;
			float a = 0;
			for (int h = 0; h < hosts; h++) {
				float u = input(h * L, i, s + 1);
				for (int l = 1; l < L; l++)
					u += input(h * L + l, i, s + 1);
				a = h ? a + u : u;
			}
			sum[i] = a;
		}
		if ((rc = pbox_push_pull(c, KEY, g, w, count, PBOX_F32)) < 0)
			return fail(c, "push_pull", rc);
		if (ref) {
			if ((rc = pbox_push_pull(ref, KEY, hs, wr, count, PBOX_F32)) < 0)
				return fail(ref, "push_pull of the reference", rc);
			for (size_t i = 0; i < count; i++)
				if (memcmp(&w[i], &wr[i], 4)) {
					fprintf(stderr, "step %d element %zu: %a, the reference %a\n", s,
						i, w[i], wr[i]);
					return 1;
				}
		}
		for (size_t i = 0; s == 0 && i < count; i++) {
			float want = w0[i] - 0.05f * (sum[i] / (float)world);
			if (fabsf(w[i] - want) > 1e-5f * (1 + fabsf(want))) {
				fprintf(stderr, "step 0 element %zu: %g, want about %g (the mean over "
					"%d ranks)\n", i, w[i], want, world);
				return 1;
			}
		}
	}
	/* every local rank reads: the weights and the steps */
	uint64_t got_steps = 0;
	if ((rc = pbox_ps_read(c, KEY, PBOX_PS_WEIGHTS, wr, count, &got_steps)) < 0)
		return fail(c, "ps_read", rc);
	if (memcmp(wr, w, count * 4) || got_steps != (uint64_t)steps) {
		fprintf(stderr, "ps_read: %s, steps %llu (want %d)\n", memcmp(wr, w, count * 4) ?
			"other weights" : "the weights", (unsigned long long)got_steps, steps);
		return 1;
	}
	/* host 0's ranks write new weights; all read them after a barrier */
	for (size_t i = 0; i < count; i++)
		g[i] = w[i] + 1.0f;
	if (host == 0 && (rc = pbox_ps_write(c, KEY, PBOX_PS_WEIGHTS, g, count)) < 0)
		return fail(c, "ps_write", rc);
	if ((rc = pbox_barrier(c, 77)) < 0)
		return fail(c, "barrier", rc);
	if ((rc = pbox_ps_read(c, KEY, PBOX_PS_WEIGHTS, wr, count, NULL)) < 0)
		return fail(c, "ps_read after the write", rc);
	if (memcmp(wr, g, count * 4)) {
		fprintf(stderr, "ps_read after ps_write: not the weights written\n");
		return 1;
	}
	uint64_t digest = 1469598103934665603ull;
	for (size_t i = 0; i < count; i++) {
		uint32_t u;
		memcpy(&u, &w[i], 4);
		digest = (digest ^ u) * 1099511628211ull;
	}
	printf("digest %016llx\nok %d\n", (unsigned long long)digest, steps);
	pbox_close(ref);
	pbox_close(c);
	return 0;
}
