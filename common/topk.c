/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk.c - top-k selection by magnitude (common/topk.h): the variant
 * choice, the scalar kernels, the threshold search and the exact
 * reference.
 *
 * The search is MSTopK's bisection, done on the bit patterns of the
 * magnitudes (for non-negative floats the order of the patterns is the
 * order of the values, so the bisection is exact, handles infinities and
 * halves the range in every step whatever the scale of the gradient), with
 * TOPK_MAX_THRESH thresholds counted per pass: a pass narrows the range
 * ninefold. It runs first on a sample (TOPK_SAMPLE_BLOCKS blocks spread
 * over x, in cache), whose threshold the one streaming pass then uses;
 * only when that pass keeps a count outside the band does it run over the
 * whole array.
 *
 * The search reaches the array only through struct topk_steps
 * (topk_select_steps): here the CPU kernels, in the GPU library device
 * kernels. The search itself, on the sample, always runs here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/elem.h"
#include "common/sum.h"
#include "common/topk_impl.h"

#define FULL_PASSES   12                       /* whole-array bisection passes */
#define SAMPLE_PASSES 16
#define SAMPLE_PRECISE 600.0   /* of the k in the sample: 3 sigma within k/8: one pass */
#define INF_BITS      0x7f800000u              /* the largest magnitude (a NaN's too) */
#define ABOVE_INF     0x7f800001u              /* a pattern no magnitude reaches (a NaN) */

/* ---- the scalar variant, the reference of the others ---- */

static void count_scalar(const float *x, size_t n, const float *t, unsigned nt,
			 uint64_t *counts)
{
	for (unsigned j = 0; j < nt; j++)
		counts[j] = 0;
	topk_count_tail(x, 0, n, t, nt, counts);
}

static size_t pass_scalar(float *x, float *g, size_t n, float t, uint32_t *idx, float *val,
			  size_t cap, unsigned flags)
{
	return topk_pass_tail(x, g, 0, n, t, idx, val, cap, flags, 0);
}

const struct topk_kernels topk_kernels_scalar = {
	.name = "scalar",
	.count = count_scalar,
	.pass = pass_scalar,
};

/* ---- the variant of this CPU: the sum kernels' choice (same ISAs) ---- */

const struct topk_kernels *topk_by_name(const char *name)
{
	static const struct topk_kernels *const all[] = {
		&topk_kernels_avx512, &topk_kernels_avx2, &topk_kernels_scalar };

	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(all[i]->name, name) == 0)
			return sum_by_name(name) && (all[i] != &topk_kernels_avx512 ||
						    __builtin_cpu_supports("avx512dq")) ? all[i] : NULL;
	return NULL;
}

const struct topk_kernels *topk_best(void)
{
	const struct topk_kernels *k = topk_by_name(sum_chosen()->name);

	return k ? k : &topk_kernels_scalar;
}

/* ---- the search ---- */

/* Counts of |x[i]| >= t[j] over the array being searched: a step of
 * struct topk_steps, or the CPU kernels over the sample (count_sample). */
typedef int (*count_fn)(void *ctx, const float *t, unsigned nt, uint64_t *counts);

/* Thresholds lo < hi (bit patterns): count(lo) > want_max or lo == 0,
 * count(hi) < want_min or hi == ABOVE_INF. */
struct bracket {
	uint32_t lo, hi;
	uint64_t clo, chi;
};

/*
 * Bisect b until a threshold's count falls in [kmin, kmax]: 1 and *t,
 * *c; 0 once the bracket cannot be split or the passes ran out; a
 * negative errno if a count failed.
 */
static int search(count_fn count, void *ctx, uint64_t kmin, uint64_t kmax, struct bracket *b,
		  int passes, float *t, uint64_t *c)
{
	for (int p = 0; p < passes && b->hi - b->lo > 1; p++) {
		uint32_t tb[TOPK_MAX_THRESH];
		float tf[TOPK_MAX_THRESH];
		uint64_t cnt[TOPK_MAX_THRESH];
		uint64_t span = b->hi - b->lo;
		unsigned nt = 0;
		int rc;
		for (unsigned j = 1; j <= TOPK_MAX_THRESH; j++) {
			uint32_t v = b->lo + (uint32_t)(span * j / (TOPK_MAX_THRESH + 1));
			if (v > b->lo && v < b->hi && (nt == 0 || v > tb[nt - 1])) {
				tb[nt] = v;
				tf[nt++] = elem_bits_f32(v);
			}
		}
		if (nt == 0) { /* span 2..: the middle one */
			tb[0] = b->lo + 1;
			tf[0] = elem_bits_f32(tb[0]);
			nt = 1;
		}
		if ((rc = count(ctx, tf, nt, cnt)) < 0)
			return rc;
		for (unsigned j = 0; j < nt; j++) {
			if (cnt[j] >= kmin && cnt[j] <= kmax) {
				*t = tf[j];
				*c = cnt[j];
				return 1;
			}
			if (cnt[j] > kmax) {
				b->lo = tb[j];
				b->clo = cnt[j];
			} else if (tb[j] < b->hi) {
				b->hi = tb[j];
				b->chi = cnt[j];
				break; /* counts only fall further */
			}
		}
	}
	return 0;
}

/* The sample in host memory, counted by the CPU kernels. */
struct sample {
	const struct topk_kernels *kk;
	const float *s;
	size_t n;
};

static int count_sample(void *ctx, const float *t, unsigned nt, uint64_t *counts)
{
	const struct sample *sm = ctx;

	sm->kk->count(sm->s, sm->n, t, nt, counts);
	return 0;
}

/* Thresholds from the sample of x (+ g) (st->sample: TOPK_SAMPLE_BLOCKS
 * blocks spread evenly over x), searched in cache: *t for about k of n,
 * and *lo, *hi (bit patterns) for three standard deviations of the
 * sample's count above and below; *want, the sample's expected count of
 * the k. 0, or a negative errno from the sample step. */
static int sample_thresholds(const struct topk_kernels *kk, const struct topk_steps *st,
			     void *ctx, size_t n, size_t k, float *s, float *t, uint32_t *lo,
			     uint32_t *hi, double *want)
{
	struct sample sm = { .kk = kk, .s = s, .n = TOPK_SAMPLE_MAX };
	size_t ns = TOPK_SAMPLE_MAX;
	int rc = st->sample(ctx, s);

	if (rc < 0)
		return rc;
	*want = (double)k * (double)ns / (double)n;
	double dev = 3 * sqrt(*want) + 2;
	uint64_t w = *want < 1 ? 1 : (uint64_t)*want;
	uint64_t wlo = *want > dev ? (uint64_t)(*want - dev) : 1, whi = (uint64_t)(*want + dev);
	struct bracket b = { .lo = 0, .hi = ABOVE_INF, .clo = ns, .chi = 0 };
	float tt;
	uint64_t c;

	*t = search(count_sample, &sm, w - w / 64, w + w / 64, &b, SAMPLE_PASSES, &tt, &c) ? tt
	     : elem_bits_f32(b.lo);
	b = (struct bracket){ .lo = 0, .hi = ABOVE_INF, .clo = ns, .chi = 0 };
	*lo = search(count_sample, &sm, whi, whi + whi / 16, &b, SAMPLE_PASSES, &tt, &c)
	      ? elem_f32_bits(tt) : b.lo;
	b = (struct bracket){ .lo = 0, .hi = ABOVE_INF, .clo = ns, .chi = 0 };
	*hi = search(count_sample, &sm, wlo - wlo / 16, wlo, &b, SAMPLE_PASSES, &tt, &c)
	      ? elem_f32_bits(tt) : b.hi;
	return 0;
}

/* One count pass of TOPK_MAX_THRESH thresholds from lo to hi (bit
 * patterns, both included): 1 and *t, *c if one falls in [kmin, kmax];
 * else 0 with *b the bracket the counts show; a negative errno if the
 * count failed. */
static int probe(count_fn count, void *ctx, size_t n, uint32_t lo, uint32_t hi, uint64_t kmin,
		 uint64_t kmax, struct bracket *b, float *t, uint64_t *c)
{
	float tf[TOPK_MAX_THRESH];
	uint32_t tb[TOPK_MAX_THRESH];
	uint64_t cnt[TOPK_MAX_THRESH];
	int rc;

	if (hi <= lo)
		hi = lo + 1;
	for (unsigned j = 0; j < TOPK_MAX_THRESH; j++) {
		tb[j] = lo + (uint32_t)((uint64_t)(hi - lo) * j / (TOPK_MAX_THRESH - 1));
		if (tb[j] > INF_BITS) /* counted thresholds are magnitudes (topk.h) */
			tb[j] = INF_BITS;
		tf[j] = elem_bits_f32(tb[j]);
	}
	if ((rc = count(ctx, tf, TOPK_MAX_THRESH, cnt)) < 0)
		return rc;
	*b = (struct bracket){ .lo = 0, .hi = ABOVE_INF, .clo = n, .chi = 0 };
	for (unsigned j = 0; j < TOPK_MAX_THRESH; j++) {
		if (cnt[j] >= kmin && cnt[j] <= kmax) {
			*t = tf[j];
			*c = cnt[j];
			return 1;
		}
		if (cnt[j] > kmax && tb[j] >= b->lo) {
			b->lo = tb[j];
			b->clo = cnt[j];
		} else if (cnt[j] < kmin && tb[j] < b->hi) {
			b->hi = tb[j];
			b->chi = cnt[j];
		}
	}
	return 0;
}

/* The selection of topk_select / topk_select_ef, over any array st
 * reaches: x is updated with g (if any) by the first pass, never
 * otherwise. A sample whose share of the k is large enough
 * (SAMPLE_PRECISE: its count is then within a few percent) gives the
 * threshold of the one pass; a smaller share gives a range, which one
 * count pass narrows before the selection. */
int topk_select_steps(const struct topk_kernels *kk, const struct topk_steps *st, void *ctx,
		      size_t n, size_t k, int has_g, size_t *m)
{
	size_t kmin = k - k / 8, kmax = k + k / 8;
	struct bracket b = { .lo = 0, .hi = ABOVE_INF, .clo = n, .chi = 0 };
	float t = 0;
	uint64_t c;
	int rc;
	float *s = n > TOPK_SAMPLE_MAX ? malloc(TOPK_SAMPLE_MAX * sizeof(float)) : NULL;

	if (!kk)
		kk = topk_best();
	if (s) {
		uint32_t lo, hi;
		double want;
		rc = sample_thresholds(kk, st, ctx, n, k, s, &t, &lo, &hi, &want);
		free(s);
		if (rc < 0)
			return rc;
		if (want >= SAMPLE_PRECISE) {
			if ((rc = st->pass(ctx, has_g, t, kmax, m)) < 0)
				return rc;
			if (*m >= kmin && *m <= kmax)
				return 0;
			if (*m > kmax)
				b = (struct bracket){ .lo = elem_f32_bits(t), .hi = ABOVE_INF, .clo = *m };
			else
				b = (struct bracket){ .lo = 0, .hi = elem_f32_bits(t), .clo = n, .chi = *m };
		} else {
			if (has_g && (rc = st->add(ctx)) < 0)
				return rc;
			rc = probe(st->count, ctx, n, lo, hi, kmin, kmax, &b, &t, &c);
			if (rc != 0)
				return rc < 0 ? rc : st->pass(ctx, 0, t, kmax, m);
		}
	} else if (has_g && (rc = st->add(ctx)) < 0) {
		return rc;
	}
	rc = search(st->count, ctx, kmin, kmax, &b, FULL_PASSES, &t, &c);
	if (rc != 0)
		return rc < 0 ? rc : st->pass(ctx, 0, t, kmax, m);
	return st->take(ctx, elem_bits_f32(b.lo), elem_bits_f32(b.hi), k - b.chi, k, m);
}

/* ---- the steps on the CPU ---- */

struct cpu_array {
	const struct topk_kernels *kk;
	float *x;
	float *g;        /* only read unless flags has TOPK_CLEAR_G */
	size_t n;
	uint32_t *idx;
	float *val;
	unsigned flags;  /* TOPK_ZERO_KEPT (error feedback), TOPK_CLEAR_G */
	size_t kmin;     /* a pass keeping fewer is not the last: undo its clearing */
	int zeroed;      /* the entries returned are cleared in x already */
};

static int cpu_sample(void *ctx, float *s)
{
	const struct cpu_array *a = ctx;
	size_t stride = topk_sample_stride(a->n), ns = 0;

	for (size_t blk = 0; blk < TOPK_SAMPLE_BLOCKS; blk++) {
		size_t off = stride * blk;
		for (size_t i = 0; i < TOPK_SAMPLE_BLOCK; i++)
			s[ns++] = a->g ? elem_topk_add(a->x[off + i], a->g[off + i]) : a->x[off + i];
	}
	return 0;
}

/* The add alone is the variant's pass with nothing to store (cap 0):
 * its vector add and NaN rule. */
static int cpu_add(void *ctx)
{
	const struct cpu_array *a = ctx;

	a->kk->pass(a->x, a->g, a->n, INFINITY, NULL, NULL, 0, a->flags & TOPK_CLEAR_G);
	return 0;
}

static int cpu_count(void *ctx, const float *t, unsigned nt, uint64_t *counts)
{
	const struct cpu_array *a = ctx;

	a->kk->count(a->x, a->n, t, nt, counts);
	return 0;
}

/* With TOPK_ZERO_KEPT the pass clears what it keeps, in the same sweep
 * (a clearing afterwards is a cache miss per entry); a pass whose count
 * falls outside [kmin, cap] is not the selection, so its clearing is
 * undone from the values it stored. */
static int cpu_pass(void *ctx, int add_g, float t, size_t cap, size_t *m)
{
	struct cpu_array *a = ctx;
	int zero = (a->flags & TOPK_ZERO_KEPT) != 0;

	*m = a->kk->pass(a->x, add_g ? a->g : NULL, a->n, t, a->idx, a->val, cap, a->flags);
	a->zeroed = zero && *m >= a->kmin && *m <= cap;
	if (zero && !a->zeroed)
		for (size_t j = 0; j < (*m < cap ? *m : cap); j++)
			a->x[a->idx[j]] = a->val[j];
	return 0;
}

/* Exactly k: every magnitude >= hi, then the first band ones in
 * [lo, hi) in index order. */
static int cpu_take(void *ctx, float lo, float hi, size_t band, size_t k, size_t *m)
{
	struct cpu_array *a = ctx;
	size_t j = 0;

	for (size_t i = 0; i < a->n && j < k; i++) {
		int cls = elem_topk_class(a->x[i], lo, hi);
		if (cls == 2 || (cls == 1 && band && band--)) {
			a->idx[j] = (uint32_t)i;
			a->val[j++] = a->x[i];
			if (a->flags & TOPK_ZERO_KEPT)
				a->x[i] = 0;
		}
	}
	*m = j;
	a->zeroed = (a->flags & TOPK_ZERO_KEPT) != 0;
	return 0;
}

static const struct topk_steps cpu_steps = {
	.sample = cpu_sample,
	.add = cpu_add,
	.count = cpu_count,
	.pass = cpu_pass,
	.take = cpu_take,
};

/* With TOPK_ZERO_KEPT, the m entries returned are 0 in x afterwards;
 * with TOPK_CLEAR_G, g is all 0. */
static size_t select_from(const struct topk_kernels *kk, float *x, float *g, size_t n,
			  size_t k, uint32_t *idx, float *val, unsigned flags)
{
	struct cpu_array a = { .kk = kk, .x = x, .g = g, .n = n, .idx = idx, .val = val,
			       .flags = flags, .kmin = k - k / 8 };
	size_t m = 0;

	topk_select_steps(kk, &cpu_steps, &a, n, k, g != NULL, &m); /* never fails */
	if ((flags & TOPK_ZERO_KEPT) && !a.zeroed)
		for (size_t j = 0; j < m; j++)
			x[idx[j]] = 0;
	return m;
}

size_t topk_select(const struct topk_kernels *kk, const float *x, size_t n, size_t k,
		   uint32_t *idx, float *val)
{
	if (!kk)
		kk = topk_best();
	if (k >= n) {
		for (size_t i = 0; i < n; i++) {
			idx[i] = (uint32_t)i;
			val[i] = x[i];
		}
		return n;
	}
	if (k == 0)
		return 0;
	/* without g, x is only read */
	return select_from(kk, (float *)x, NULL, n, k, idx, val, 0);
}

static size_t select_ef(const struct topk_kernels *kk, float *e, float *g, size_t n, size_t k,
			uint32_t *idx, float *val, unsigned flags)
{
	size_t m;

	if (!kk)
		kk = topk_best();
	if (k < n && k > 0)
		return select_from(kk, e, g, n, k, idx, val, TOPK_ZERO_KEPT | flags);
	if (g)   /* all or nothing: the sum, then every entry or none */
		cpu_add(&(struct cpu_array){ .kk = kk, .x = e, .g = g, .n = n, .flags = flags });
	m = topk_select(kk, e, n, k, idx, val);
	for (size_t j = 0; j < m; j++)
		e[idx[j]] = 0;
	return m;
}

size_t topk_select_ef(const struct topk_kernels *kk, float *e, const float *g, size_t n,
		      size_t k, uint32_t *idx, float *val)
{
	/* without TOPK_CLEAR_G, g is only read */
	return select_ef(kk, e, (float *)g, n, k, idx, val, 0);
}

size_t topk_select_ef_move(const struct topk_kernels *kk, float *e, float *g, size_t n,
			   size_t k, uint32_t *idx, float *val)
{
	return select_ef(kk, e, g, n, k, idx, val, g ? TOPK_CLEAR_G : 0);
}

/* ---- the exact reference ---- */

/* Order key: larger is kept first, a NaN as +inf (elem_topk_keep), then
 * the lower index first among equal magnitudes. */
static inline uint64_t exact_key(const float *x, size_t i)
{
	uint32_t a = elem_f32_bits(x[i]) & 0x7fffffffu;
	uint64_t mag = a > INF_BITS ? INF_BITS : a;
	return mag << 32 | (uint32_t)~(uint32_t)i;
}

/* Partially order keys[0..n) (distinct) so that the k largest come
 * first: quickselect, Hoare's partition around the middle key. */
static void select_largest(uint64_t *keys, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	while (lo < hi) {
		uint64_t pivot = keys[lo + (hi - lo) / 2];
		size_t i = lo - 1, j = hi + 1;
		for (;;) { /* larger keys to the left */
			do
				i++;
			while (keys[i] > pivot);
			do
				j--;
			while (keys[j] < pivot);
			if (i >= j)
				break;
			uint64_t tmp = keys[i];
			keys[i] = keys[j];
			keys[j] = tmp;
		}
		if (k - 1 <= j)
			hi = j;
		else
			lo = j + 1;
	}
}

static int by_index(const void *a, const void *b)
{
	uint32_t x = ~(uint32_t)*(const uint64_t *)a, y = ~(uint32_t)*(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

size_t topk_exact(const float *x, size_t n, size_t k, uint32_t *idx, float *val)
{
	uint64_t *keys;

	if (k > n)
		k = n;
	if (k == 0)
		return 0;
	keys = malloc(n * sizeof(*keys));
	if (!keys) {
		errno = ENOMEM;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		keys[i] = exact_key(x, i);
	select_largest(keys, n, k);
	qsort(keys, k, sizeof(*keys), by_index);
	for (size_t j = 0; j < k; j++) {
		idx[j] = ~(uint32_t)keys[j];
		val[j] = x[idx[j]];
	}
	free(keys);
	return k;
}
