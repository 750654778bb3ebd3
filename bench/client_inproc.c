/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client_inproc.c - libpbox's host path, timed without root or a network:
 * WORLD ranks (threads, one client each) sum host buffers with
 * pbox_allreduce through the in-process box of the unit tests
 * (tests/unit/box_inproc.h: pboxd's control plane and engines behind UDP
 * sockets on 127.0.0.1). One line per size: the median over REPS of the
 * mean time per call (rank 0's clock, ITERS calls after a warm-up call,
 * all ranks released together by a barrier) and the bytes per second one
 * rank's buffer moved (algbw, as pbox-perf). Small sizes show the per-call
 * cost of libpbox (submission, progress thread, completion), large ones its
 * per-segment cost; both share the machine's cores with the box threads,
 * so compare figures from the same machine and load only (docs/gpu.md
 * keeps the before/after figures of the GPU work this way).
 *
 * usage: client_inproc [--world W] [--lcores L] [--iters I] [--reps R]
 *                      [--dtype f32|f16|bf16] [SIZE ...]   (bytes; K, M suffixes)
 * defaults: world 2, lcores 1, iters 50, reps 5, f32, sizes 4K 64K 1M 8M.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define MAX_WORLD 8
#define MAX_SIZES 16
#define MAX_REPS  31

struct bench {
	int world, iters, reps, nsizes;
	pbox_dtype dt;
	size_t bytes[MAX_SIZES];
	pthread_barrier_t bar;
	double us[MAX_SIZES][MAX_REPS];   /* rank 0: mean per call */
	int rc;
};

struct rank {
	struct bench *b;
	pbox_client *c;
	int rank;
};

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'K' || *end == 'k')
		v *= 1024;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024;
	return v > 0 ? (size_t)v : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void *rank_main(void *arg)
{
	struct rank *rk = arg;
	struct bench *b = rk->b;
	size_t esz = b->dt == PBOX_F32 ? 4 : 2;

	for (int s = 0; s < b->nsizes; s++) {
		size_t n = b->bytes[s] / esz;
		uint8_t *buf = calloc(n, esz);
		uint32_t key = (uint32_t)s;
		if (!buf)
			abort();
		for (int rep = 0; rep < b->reps; rep++) {
			int rc = pbox_allreduce(rk->c, key, buf, n, b->dt); /* warm-up */
			pthread_barrier_wait(&b->bar);
			uint64_t t0 = clock_ns();
			for (int i = 0; rc == 0 && i < b->iters; i++)
				rc = pbox_allreduce(rk->c, key, buf, n, b->dt);
			uint64_t t1 = clock_ns();
			if (rc < 0) {
				fprintf(stderr, "client_inproc: rank %d: %s\n", rk->rank,
					pbox_last_error(rk->c));
				b->rc = rc;
				exit(1);
			}
			if (rk->rank == 0)
				b->us[s][rep] = (double)(t1 - t0) / 1e3 / b->iters;
			pthread_barrier_wait(&b->bar);
		}
		free(buf);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct bench b = { .world = 2, .iters = 50, .reps = 5, .dt = PBOX_F32 };
	unsigned lcores = 1;
	static const size_t def[] = { 4 << 10, 64 << 10, 1 << 20, 8 << 20 };

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--world") && v)
			b.world = atoi(argv[++i]);
		else if (!strcmp(a, "--lcores") && v)
			lcores = (unsigned)atoi(argv[++i]);
		else if (!strcmp(a, "--iters") && v)
			b.iters = atoi(argv[++i]);
		else if (!strcmp(a, "--reps") && v)
			b.reps = atoi(argv[++i]);
		else if (!strcmp(a, "--dtype") && v) {
			i++;
			b.dt = !strcmp(v, "f16") ? PBOX_F16 : !strcmp(v, "bf16") ? PBOX_BF16 : PBOX_F32;
		} else if (a[0] != '-' && b.nsizes < MAX_SIZES && parse_size(a))
			b.bytes[b.nsizes++] = parse_size(a);
		else {
			fprintf(stderr, "usage: client_inproc [--world W] [--lcores L] [--iters I] "
				"[--reps R] [--dtype f32|f16|bf16] [SIZE ...]\n");
			return 2;
		}
	}
	if (b.world < 1 || b.world > MAX_WORLD || b.iters < 1 || b.reps < 1 ||
	    b.reps > MAX_REPS || lcores < 1 || lcores > BI_MAX_EPS) {
		fprintf(stderr, "client_inproc: world 1..%d, lcores 1..%d, reps 1..%d\n",
			MAX_WORLD, BI_MAX_EPS, MAX_REPS);
		return 2;
	}
	if (b.nsizes == 0)
		for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++)
			b.bytes[b.nsizes++] = def[i];

	struct box_inproc *box = box_inproc_new(lcores);
	box->f->box.cfg.max_job_bytes = box->f->box.cfg.default_job_bytes = 512ull << 20;
	box_inproc_start(box);
	struct rank rk[MAX_WORLD];
	pthread_t th[MAX_WORLD];
	pbox_opts o;
	pbox_opts_init(&o);
	o.mtu = 1500;
	pthread_barrier_init(&b.bar, NULL, (unsigned)b.world);
	for (int k = 0; k < b.world; k++) {
		rk[k] = (struct rank){ .b = &b, .rank = k };
		if (pbox_connect(box->addr, "bench", k, b.world, &o, &rk[k].c) < 0) {
			fprintf(stderr, "client_inproc: connect: %s\n", pbox_last_error(rk[k].c));
			return 1;
		}
	}
	for (int k = 0; k < b.world; k++)
		pthread_create(&th[k], NULL, rank_main, &rk[k]);
	for (int k = 0; k < b.world; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < b.world; k++)
		pbox_close(rk[k].c);
	box_inproc_free(box);

	printf("# client_inproc: world %d, %u box lcore(s), %s, %d calls x %d reps, "
	       "median of the reps (min .. max)\n", b.world, lcores,
	       b.dt == PBOX_F32 ? "f32" : b.dt == PBOX_F16 ? "f16" : "bf16", b.iters, b.reps);
	printf("%12s %12s %10s %20s\n", "bytes", "us/call", "GB/s", "us range");
	for (int s = 0; s < b.nsizes; s++) {
		qsort(b.us[s], (size_t)b.reps, sizeof(double), cmp_double);
		double med = b.us[s][b.reps / 2];
		printf("%12zu %12.1f %10.3f %9.1f .. %8.1f\n", b.bytes[s], med,
		       (double)b.bytes[s] / med / 1e3, b.us[s][0], b.us[s][b.reps - 1]);
	}
	return b.rc ? 1 : 0;
}
