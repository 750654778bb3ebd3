/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * many_ranks.c - test_many_ranks.sh's worker: WORLD ranks of one job in
 * one process, a thread and a client each (kernel UDP), through the
 * public API only.
 *   many_ranks CONTROL JOB WORLD CALLS COUNT [LOCAL]
 * With LOCAL, the ranks are WORLD / LOCAL hosts of LOCAL ranks each
 * (pbox_opts.local_rank = rank % LOCAL, local_world = LOCAL: the host
 * level, docs/architecture.md "The host level"). Every rank makes CALLS allreduces of COUNT floats; element i of rank r
 * is r + (i + call) % 7, so every sum is an integer below 2^24, exact in
 * float, and checked on every rank. Prints "ok WORLD ranks, CALLS calls of
 * COUNT floats in S s (connect T s)" and exits 0, or names the first rank
 * and element that differ (or the error) and exits 1.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pbox.h"

static const char *control, *job;
static int world, calls, local;
static size_t count;
static pthread_barrier_t bar;
static int failed;
static double t_connect;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *rank_main(void *arg)
{
	int rank = (int)(long)arg;
	pbox_opts opts;
	pbox_client *c = NULL;
	float *x = malloc(count * sizeof(float));

	pbox_opts_init(&opts);
	opts.timeout_ms = 60000;
	if (local > 1) {
		opts.local_rank = (uint32_t)(rank % local);
		opts.local_world = (uint32_t)local;
	}
	if (pbox_connect(control, job, rank, world, &opts, &c) != 0) {
		fprintf(stderr, "many_ranks: rank %d: connect: %s\n", rank,
			c ? pbox_last_error(c) : "");
		__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
	}
	pthread_barrier_wait(&bar);
	if (rank == 0)
		t_connect = now_s();
	/* world * (world - 1) / 2 plus world * ((i + call) % 7) */
	for (int k = 0; c && k < calls && !__atomic_load_n(&failed, __ATOMIC_RELAXED); k++) {
		for (size_t i = 0; i < count; i++)
			x[i] = (float)(rank + (int)((i + (size_t)k) % 7));
		if (pbox_allreduce(c, 1, x, count, PBOX_F32) != 0) {
			fprintf(stderr, "many_ranks: rank %d call %d: %s\n", rank, k,
				pbox_last_error(c));
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			break;
		}
		for (size_t i = 0; i < count; i++) {
			float want = (float)(world * (world - 1) / 2 +
					     world * (int)((i + (size_t)k) % 7));
			if (x[i] != want) {
				fprintf(stderr, "many_ranks: rank %d call %d element %zu: %g, "
					"not %g\n", rank, k, i, x[i], want);
				__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
				break;
			}
		}
	}
	pbox_close(c);
	free(x);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 6)
		return fprintf(stderr, "usage: many_ranks CONTROL JOB WORLD CALLS COUNT [LOCAL]\n"), 2;
	control = argv[1];
	job = argv[2];
	world = atoi(argv[3]);
	calls = atoi(argv[4]);
	count = strtoull(argv[5], NULL, 10);
	local = argc > 6 ? atoi(argv[6]) : 1;
	pthread_t *t = calloc((size_t)world, sizeof(*t));
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_barrier_init(&bar, NULL, (unsigned)world);
	double t0 = now_s();
	for (int r = 0; r < world; r++)
		if (pthread_create(&t[r], &attr, rank_main, (void *)(long)r) != 0) {
			fprintf(stderr, "many_ranks: cannot start thread %d\n", r);
			return 1;
		}
	for (int r = 0; r < world; r++)
		pthread_join(t[r], NULL);
	if (failed)
		return 1;
	char how[64] = "";
	if (local > 1)
		snprintf(how, sizeof(how), " (%d hosts of %d, host level)", world / local, local);
	printf("ok %d ranks%s, %d calls of %zu floats in %.2f s (connect %.2f s)\n", world, how,
	       calls, count, now_s() - t_connect, t_connect - t0);
	return 0;
}
