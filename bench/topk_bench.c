/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_bench.c - top-k selection (common/topk.h) on the CPU, side by side
 * in one run: topk_select with the best kernels and the scalar ones,
 * topk_select_ef (the add of error feedback fused into the pass), the
 * exact quickselect (topk_exact) and a full sort of the magnitudes
 * (qsort), on 1 Mi .. 64 Mi normal-like floats in layers of different
 * scales, at densities 0.1%, 1%, 10%. Median ms of the repetitions; a
 * markdown table on stdout (docs/performance.md "Top-k selection").
 *
 *   build/bench/topk_bench [--quick]   (--quick: up to 16 Mi, 1 repetition
 *                                       of the slow references)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/topk.h"

#define REPS 5

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static int cmp_mag(const void *a, const void *b)
{
	float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
	return x > y ? -1 : x < y;
}

/* Normal-like values (four uniforms) in 8 layers 10x apart in scale. */
static void fill(float *x, size_t n)
{
	unsigned s = 12345;
	for (size_t i = 0; i < n; i++) {
		float a = 0;
		for (int q = 0; q < 4; q++) {
			s = s * 1103515245u + 12345u;
			a += (float)(s >> 8) / 16777216.0f - 0.5f;
		}
		x[i] = a * powf(10.0f, (float)(i * 8 / n) - 4);
	}
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	size_t maxn = quick ? (size_t)16 << 20 : (size_t)64 << 20;
	static const double dens[] = { 0.001, 0.01, 0.1 };
	const struct topk_kernels *best = topk_best(), *scalar = topk_by_name("scalar");
	float *x = malloc(maxn * sizeof(float)), *e = malloc(maxn * sizeof(float));
	float *s = malloc(maxn * sizeof(float));
	uint32_t *idx = malloc(TOPK_MAX(maxn / 10) * sizeof(uint32_t));
	float *val = malloc(TOPK_MAX(maxn / 10) * sizeof(float));

	if (!x || !e || !s || !idx || !val) {
		fprintf(stderr, "topk_bench: out of memory\n");
		return 1;
	}
	printf("| floats | density | %s ms | scalar ms | %s + error feedback ms | exact ms | "
	       "full sort ms | entries | sort / %s |\n|---|---|---|---|---|---|---|---|---|\n",
	       best->name, best->name, best->name);
	for (size_t n = (size_t)1 << 20; n <= maxn; n *= 4) {
		fill(x, n);
		/* the full sort does not depend on k: once per size */
		int slow = quick || n >= ((size_t)16 << 20) ? 1 : 3;
		double ts[REPS];
		for (int r = 0; r < slow; r++) {
			memcpy(s, x, n * sizeof(float));
			double t0 = now_ms();
			qsort(s, n, sizeof(float), cmp_mag);
			ts[r] = now_ms() - t0;
		}
		double tsort = median(ts, slow);
		for (size_t d = 0; d < sizeof(dens) / sizeof(dens[0]); d++) {
			size_t k = (size_t)(dens[d] * (double)n), m = 0;
			double tb[REPS], tsc[REPS], tef[REPS], tex[REPS];
			for (int r = 0; r < REPS; r++) {
				double t0 = now_ms();
				m = topk_select(best, x, n, k, idx, val);
				tb[r] = now_ms() - t0;
				t0 = now_ms();
				topk_select(scalar, x, n, k, idx, val);
				tsc[r] = now_ms() - t0;
				memset(e, 0, n * sizeof(float));
				t0 = now_ms();
				topk_select_ef(best, e, x, n, k, idx, val);
				tef[r] = now_ms() - t0;
			}
			for (int r = 0; r < slow; r++) {
				double t0 = now_ms();
				topk_exact(x, n, k, idx, val);
				tex[r] = now_ms() - t0;
			}
			double b = median(tb, REPS);
			printf("| %zu Mi | %g%% | %.2f | %.2f | %.2f | %.1f | %.1f | %zu | %.0f |\n",
			       n >> 20, dens[d] * 100, b, median(tsc, REPS), median(tef, REPS),
			       median(tex, slow), tsort, m, tsort / b);
			fflush(stdout);
		}
	}
	free(x);
	free(e);
	free(s);
	free(idx);
	free(val);
	return 0;
}
