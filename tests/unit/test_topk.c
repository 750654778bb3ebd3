/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topk.c - top-k selection (common/topk.h): the count stays within
 * k +- k/8 on normal, heavy-tailed, layered, tied and NaN-laden inputs;
 * indices increase and values are x[idx]; NaNs go first, as +inf, and
 * error feedback sends every one of them and leaves e + g's NaNs
 * canonical; nothing left out is larger than
 * anything kept except inside the final band (against topk_exact, itself
 * checked against a sort); error feedback leaves exactly what was not
 * sent (also when the gradient is moved: topk_select_ef_move clears
 * it); every variant returns the scalar one's entries; the search driven
 * through struct topk_steps by a model of the GPU library's kernels
 * (tile-wise counts, a prefix sum and an in-tile compaction, in any tile
 * order) selects what topk_select_ef selects, and a failing step ends it
 * with its error; the variant is picked once, a bad PBOX_KERNEL named
 * once.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/elem.h"
#include "common/topk.h"

#define BIG (300 * 1000) /* above the 64 Ki sample: the sampled path */

static const char *const variants[] = { "scalar", "avx2", "avx512" };

static unsigned seed = 1;

static float uni(void)
{
	seed = seed * 1103515245u + 12345u;
	return (float)(seed >> 8) / 16777216.0f - 0.5f;
}

static float normal(void)
{
	return uni() + uni() + uni() + uni();
}

enum shape { NORMAL, HEAVY, LAYERED, TIED, ZEROS, NANS, NSHAPES };

static void make(float *x, size_t n, enum shape s)
{
	for (size_t i = 0; i < n; i++) {
		float v = normal();
		switch (s) {
		case HEAVY: v = v * v * v * v * v; break;              /* most tiny, a few huge */
		case LAYERED: v *= powf(1000.0f, (float)(i * 5 / n)); break; /* 5 layers */
		case TIED: v = (float)((int)(i % 7) - 3); break;       /* 7 values only */
		case ZEROS: v = i % 10 ? 0.0f : v; break;
		case NANS: /* NaNs of both signs and many payloads (x86's add keeps one) */
			if (i % 3 == 0)
				v = elem_bits_f32((uint32_t)(i & 1) << 31 | 0x7fc00000u |
						  (uint32_t)(i * 2654435761u >> 10));
			break;
		default: break;
		}
		x[i] = v;
	}
}

/* The rules of topk.h on one selection: NaNs and infinities ("top")
 * are the largest magnitudes, so all of them are kept if m allows, and
 * nothing else if not. */
static void check(const float *x, size_t n, size_t k, const uint32_t *idx, const float *val,
		  size_t m)
{
	size_t top = 0, kept_top = 0;
	for (size_t i = 0; i < n; i++)
		top += !isfinite(x[i]);
	if (k >= n)
		assert_int_equal(m, n);
	else
		assert_true(m >= k - k / 8 && m <= k + k / 8);
	for (size_t j = 0; j < m; j++) {
		assert_true(idx[j] < n);
		if (j)
			assert_true(idx[j] > idx[j - 1]);
		assert_memory_equal(&val[j], &x[idx[j]], sizeof(float));
		kept_top += !isfinite(val[j]);
	}
	assert_int_equal(kept_top, top < m ? top : m);
}

static void select__count_within_the_band_on_every_shape(void **state)
{
	static float x[BIG];
	static uint32_t idx[TOPK_MAX(BIG)];
	static float val[TOPK_MAX(BIG)];
	static const size_t ns[] = { 1, 2, 10, 1000, 70000, BIG };
	static const double ds[] = { 0.001, 0.01, 0.1, 0.5 };
	(void)state;

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (int s = 0; s < NSHAPES; s++) {
			make(x, ns[a], (enum shape)s);
			for (size_t b = 0; b < sizeof(ds) / sizeof(ds[0]); b++) {
				size_t k = (size_t)(ds[b] * (double)ns[a]) + 1;
				size_t m = topk_select(NULL, x, ns[a], k, idx, val);
				check(x, ns[a], k, idx, val, m);
			}
			check(x, ns[a], ns[a], idx, val, topk_select(NULL, x, ns[a], ns[a], idx, val));
			assert_int_equal(topk_select(NULL, x, ns[a], 0, idx, val), 0);
			if (ns[a] > 1)
				check(x, ns[a], ns[a] - 1, idx, val,
				      topk_select(NULL, x, ns[a], ns[a] - 1, idx, val));
		}
}

static void select__only_the_band_differs_from_exact(void **state)
{
	static float x[BIG];
	static uint32_t idx[TOPK_MAX(BIG)], ref[BIG];
	static float val[TOPK_MAX(BIG)], rval[BIG];
	static uint8_t in[BIG];
	(void)state;

	for (int s = NORMAL; s <= LAYERED; s++) {
		make(x, BIG, (enum shape)s);
		size_t k = BIG / 100;
		size_t m = topk_select(NULL, x, BIG, k, idx, val);
		size_t r = topk_exact(x, BIG, k, ref, rval);
		assert_int_equal(r, k);
		/* the smallest kept magnitude bounds every one left out */
		float lo = INFINITY;
		memset(in, 0, sizeof(in));
		for (size_t j = 0; j < m; j++) {
			in[idx[j]] = 1;
			lo = fminf(lo, fabsf(val[j]));
		}
		for (size_t i = 0; i < BIG; i++)
			if (!in[i])
				assert_true(fabsf(x[i]) <= lo);
		/* recall of the exact top k */
		size_t hit = 0;
		for (size_t j = 0; j < r; j++)
			hit += in[ref[j]];
		assert_true(hit >= (m < k ? m : k) * 95 / 100);
	}
}

static int cmp_desc(const void *a, const void *b)
{
	float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
	return x > y ? -1 : x < y;
}

static void exact__matches_a_sort(void **state)
{
	float x[3000], s[3000], val[3000];
	uint32_t idx[3000];
	(void)state;
	make(x, 3000, NORMAL);
	x[5] = x[6] = 100.0f; /* a tie: the lower index first */
	memcpy(s, x, sizeof(x));
	qsort(s, 3000, sizeof(float), cmp_desc);
	size_t m = topk_exact(x, 3000, 40, idx, val);
	assert_int_equal(m, 40);
	float kth = fabsf(s[39]);
	for (size_t j = 0; j < m; j++) {
		assert_true(fabsf(val[j]) >= kth);
		if (j)
			assert_true(idx[j] > idx[j - 1]);
	}
	assert_int_equal(topk_exact(x, 3000, 1, idx, val), 1);
	assert_int_equal(idx[0], 5);
}

/* Every shape of e and g and three densities, so the one-pass selection,
 * the passes outside the band (whose clearing of e is undone) and the
 * exact take for ties all run: e keeps exactly what was not sent, and
 * the entries are topk_select's on e + g. */
static void ef__residual_keeps_what_was_not_sent(void **state)
{
	static float e[BIG], e0[BIG], g[BIG], sum[BIG], e2[BIG], g2[BIG],
		val[TOPK_MAX(BIG / 10)], rval[TOPK_MAX(BIG / 10)];
	static uint32_t idx[TOPK_MAX(BIG / 10)], ridx[TOPK_MAX(BIG / 10)];
	static const size_t per[] = { 1000, 100, 10 };
	(void)state;

	for (int s = 0; s < NSHAPES; s++)
		for (size_t d = 0; d < sizeof(per) / sizeof(per[0]); d++) {
			make(e, BIG, (enum shape)s);
			make(g, BIG, (enum shape)((s + 2) % NSHAPES));
			memcpy(e0, e, sizeof(e));
			for (size_t i = 0; i < BIG; i++)
				sum[i] = elem_topk_add(e0[i], g[i]);
			size_t k = BIG / per[d];
			size_t rm = topk_select(NULL, sum, BIG, k, ridx, rval);
			/* _move: the same, and g cleared */
			memcpy(e2, e0, sizeof(e2));
			memcpy(g2, g, sizeof(g2));
			size_t m = topk_select_ef_move(NULL, e2, g2, BIG, k, idx, val);
			assert_int_equal(m, rm);
			for (size_t i = 0; i < BIG; i++)
				assert_true(g2[i] == 0.0f);
			m = topk_select_ef(NULL, e, g, BIG, k, idx, val);
			assert_memory_equal(e2, e, sizeof(e));
			assert_int_equal(m, rm);
			assert_memory_equal(idx, ridx, m * sizeof(*idx));
			assert_memory_equal(val, rval, m * sizeof(*val));
			size_t j = 0;
			for (size_t i = 0; i < BIG; i++) {
				if (j < m && idx[j] == i) {
					assert_memory_equal(&val[j], &sum[i], sizeof(float));
					assert_true(e[i] == 0.0f);
					j++;
				} else {
					assert_memory_equal(&e[i], &sum[i], sizeof(float));
				}
			}
			assert_int_equal(j, m);
		}
	/* without g: a selection from e as it is */
	make(e, BIG, NORMAL);
	size_t k = BIG / 100;
	size_t m = topk_select_ef(NULL, e, NULL, BIG, k, idx, val);
	assert_true(m >= k - k / 8 && m <= k + k / 8);
	for (size_t j = 0; j < m; j++)
		assert_true(e[idx[j]] == 0.0f);
}

/* A NaN is +inf's magnitude: a few are all sent at once, more than k
 * leave by k each call in index order, and error feedback keeps none
 * (with the old rule, "NaN never passes", each stayed in the residual for
 * good). e + g's NaNs are canonical on every variant, whatever the
 * payload of g's. */
static void nan__sent_first_and_none_left_behind(void **state)
{
	static float e[BIG], g[BIG], val[TOPK_MAX(BIG / 100)];
	static uint32_t idx[TOPK_MAX(BIG / 100)];
	static const size_t ns[] = { 1000, BIG };
	(void)state;

	for (int v = 0; v < 3; v++) {
		const struct topk_kernels *kk = topk_by_name(variants[v]);
		if (!kk)
			continue;
		for (size_t a = 0; a < 2; a++)
			for (int many = 0; many < 2; many++) {
				size_t n = ns[a], k = n / 100, nn = many ? 3 * k : 5, sent = 0;
				make(g, n, NORMAL);
				memset(e, 0, n * sizeof(float));
				for (size_t q = 0; q < nn; q++)
					g[q * (n / nn)] = elem_bits_f32(0xffc00000u | (uint32_t)q);
				for (int call = 0; call < (many ? 3 : 1); call++) {
					size_t m = topk_select_ef(kk, e, call ? NULL : g, n, k, idx, val);
					size_t nan = 0;
					for (size_t j = 0; j < m; j++)
						if (isnan(val[j])) {
							assert_int_equal(elem_f32_bits(val[j]), ELEM_CANON_NAN);
							assert_int_equal(idx[j] % (n / nn), 0);
							nan++;
						}
					/* the NaNs first: all that fit */
					assert_int_equal(nan, nn - sent < m ? nn - sent : m);
					if (many)
						assert_int_equal(m, k);
					sent += nan;
				}
				assert_int_equal(sent, nn);
				for (size_t i = 0; i < n; i++)
					assert_false(isnan(e[i]));
			}
	}
}

static void variants__same_entries_as_scalar(void **state)
{
	static float x[BIG], e[3][BIG], val[3][TOPK_MAX(BIG / 10)], pv[2][77];
	static uint32_t idx[3][TOPK_MAX(BIG / 10)], pi[2][77];
	(void)state;
	const struct topk_kernels *ref = topk_by_name("scalar");
	assert_non_null(ref);
	assert_non_null(topk_best());
	assert_null(topk_by_name("sse9"));

	for (int s = 0; s < NSHAPES; s++) {
		make(x, BIG, (enum shape)s);
		size_t m[3] = { 0 };
		for (int v = 0; v < 3; v++) {
			const struct topk_kernels *kk = topk_by_name(variants[v]);
			if (!kk) {
				print_message("variant %s: not on this CPU\n", variants[v]);
				continue;
			}
			memset(e[v], 0, sizeof(e[v]));
			m[v] = topk_select_ef(kk, e[v], x, BIG, BIG / 100, idx[v], val[v]);
			if (v == 0)
				continue;
			assert_int_equal(m[v], m[0]);
			assert_memory_equal(idx[v], idx[0], m[0] * sizeof(uint32_t));
			assert_memory_equal(val[v], val[0], m[0] * sizeof(float));
			assert_memory_equal(e[v], e[0], sizeof(e[0]));
			/* the kernels alone: counts and a capped pass */
			float t[3] = { 0.1f, 1.0f, INFINITY };
			uint64_t c0[3], c1[3];
			ref->count(x, BIG - 3, t, 3, c0);
			kk->count(x, BIG - 3, t, 3, c1);
			assert_memory_equal(c0, c1, sizeof(c0));
			size_t p0 = ref->pass(e[0], NULL, BIG - 5, 0.5f, pi[0], pv[0], 77, 0);
			size_t p1 = kk->pass(e[0], NULL, BIG - 5, 0.5f, pi[1], pv[1], 77, 0);
			assert_int_equal(p0, p1);
			assert_memory_equal(pi[1], pi[0], (p0 < 77 ? p0 : 77) * sizeof(uint32_t));
			assert_memory_equal(pv[1], pv[0], (p0 < 77 ? p0 : 77) * sizeof(float));
			/* with g, clearing g and the kept entries of x */
			static float xa[2][BIG], ga[2][BIG];
			const struct topk_kernels *pk[2] = { ref, kk };
			make(xa[0], BIG, NORMAL);
			memcpy(xa[1], xa[0], sizeof(xa[0]));
			for (int w = 0; w < 2; w++) {
				memcpy(ga[w], x, sizeof(x));
				p0 = pk[w]->pass(xa[w], ga[w], BIG - 5, 1.0f, pi[w], pv[w], 77,
						 TOPK_ZERO_KEPT | TOPK_CLEAR_G);
				if (w)
					assert_int_equal(p0, p1);
				p1 = p0;
				for (size_t i = 0; i < BIG - 5; i++)
					assert_true(ga[w][i] == 0.0f);
				assert_memory_equal(&ga[w][BIG - 5], &x[BIG - 5], 5 * sizeof(float));
			}
			assert_memory_equal(xa[1], xa[0], sizeof(xa[0]));
			assert_memory_equal(pi[1], pi[0], (p0 < 77 ? p0 : 77) * sizeof(uint32_t));
			assert_memory_equal(pv[1], pv[0], (p0 < 77 ? p0 : 77) * sizeof(float));
		}
	}
}

/* ---- the steps as the GPU library takes them (gpu/topk.cu) ---- */

#define TILE 2048 /* a thread block's elements */

/* The array "on the device", and a step that fails when calls reaches
 * fail_at (0: none). */
struct model {
	float *x;
	const float *g;
	size_t n;
	uint32_t *idx;
	float *val;
	unsigned calls, fail_at;
	unsigned *seen; /* per path taken (enum path), or NULL */
};

/* The paths of topk_select_steps, as the steps see them. */
enum path { P_SAMPLE, P_ADD, P_FUSED_PASS, P_TAKE, NPATHS };

static void model_saw(struct model *md, enum path p)
{
	if (md->seen)
		md->seen[p]++;
}

static int model_call(struct model *md)
{
	return ++md->calls == md->fail_at ? -EIO : 0;
}

static int model_sample(void *ctx, float *s)
{
	struct model *md = ctx;
	size_t stride = topk_sample_stride(md->n);

	for (size_t b = 0; b < TOPK_SAMPLE_BLOCKS; b++)
		for (size_t i = 0; i < TOPK_SAMPLE_BLOCK; i++) {
			size_t o = b * stride + i;
			s[b * TOPK_SAMPLE_BLOCK + i] = md->g ? elem_topk_add(md->x[o], md->g[o])
							     : md->x[o];
		}
	model_saw(md, P_SAMPLE);
	return model_call(md);
}

static int model_add(void *ctx)
{
	struct model *md = ctx;

	for (size_t i = 0; i < md->n; i++)
		md->x[i] = elem_topk_add(md->x[i], md->g[i]);
	model_saw(md, P_ADD);
	return model_call(md);
}

/* Counts per tile, summed in reverse tile order (atomics: any order). */
static int model_count(void *ctx, const float *t, unsigned nt, uint64_t *counts)
{
	struct model *md = ctx;
	size_t ntiles = (md->n + TILE - 1) / TILE;

	memset(counts, 0, nt * sizeof(*counts));
	for (size_t b = ntiles; b-- > 0;)
		for (size_t i = b * TILE; i < md->n && i < (b + 1) * TILE; i++)
			for (unsigned j = 0; j < nt; j++)
				counts[j] += elem_topk_keep(md->x[i], t[j]);
	return model_call(md);
}

/* The compaction: per tile, how many are above hi and how many in the
 * band; exclusive prefix sums over the tiles; then each tile (in reverse
 * order here) places its selected entries from its offsets alone. */
static int model_select(struct model *md, float lo, float hi, size_t band, size_t cap, size_t *m)
{
	size_t ntiles = (md->n + TILE - 1) / TILE;
	uint64_t *above = calloc(ntiles + 1, sizeof(*above));
	uint64_t *inband = calloc(ntiles + 1, sizeof(*inband));

	assert_non_null(above);
	assert_non_null(inband);
	for (size_t b = 0; b < ntiles; b++)
		for (size_t i = b * TILE; i < md->n && i < (b + 1) * TILE; i++) {
			int cls = elem_topk_class(md->x[i], lo, hi);
			above[b] += cls == 2;
			inband[b] += cls == 1;
		}
	uint64_t sa = 0, sb = 0;
	for (size_t b = 0; b <= ntiles; b++) {
		uint64_t a = above[b], c = inband[b];
		above[b] = sa;
		inband[b] = sb;
		sa += a;
		sb += c;
	}
	for (size_t b = ntiles; b-- > 0;) {
		uint64_t lband = 0, lsel = 0;
		uint64_t base = above[b] + (inband[b] < band ? inband[b] : band);
		for (size_t i = b * TILE; i < md->n && i < (b + 1) * TILE; i++) {
			int cls = elem_topk_class(md->x[i], lo, hi);
			int sel = cls == 2 || (cls == 1 && inband[b] + lband < band);
			lband += cls == 1;
			if (sel && base + lsel < cap) {
				md->idx[base + lsel] = (uint32_t)i;
				md->val[base + lsel] = md->x[i];
			}
			lsel += sel;
		}
	}
	*m = above[ntiles] + (inband[ntiles] < band ? inband[ntiles] : band);
	free(above);
	free(inband);
	return model_call(md);
}

static int model_pass(void *ctx, int add_g, float t, size_t cap, size_t *m)
{
	struct model *md = ctx;

	if (add_g) {
		for (size_t i = 0; i < md->n; i++)
			md->x[i] = elem_topk_add(md->x[i], md->g[i]);
		model_saw(md, P_FUSED_PASS);
	}
	return model_select(md, t, t, 0, cap, m);
}

static int model_take(void *ctx, float lo, float hi, size_t band, size_t k, size_t *m)
{
	model_saw(ctx, P_TAKE);
	return model_select(ctx, lo, hi, band, k, m);
}

static const struct topk_steps model_steps = {
	.sample = model_sample,
	.add = model_add,
	.count = model_count,
	.pass = model_pass,
	.take = model_take,
};

/* Every path of the search: the sample's one pass (k of 1% and 10% of
 * 300 k), the sample's range and a probe (0.1%), the whole-array
 * bisection (70 k, 1000), the exact take (ties, and NaNs past kmax);
 * with and without g. m, idx, val and the residual, bit for bit. */
static void steps__model_of_the_device_selects_what_select_ef_does(void **state)
{
	static float x[BIG], g[BIG], e0[BIG], e1[BIG], v0[TOPK_MAX(BIG)], v1[TOPK_MAX(BIG)];
	static uint32_t i0[TOPK_MAX(BIG)], i1[TOPK_MAX(BIG)];
	static const size_t ns[] = { 1000, 70000, BIG };
	static const double ds[] = { 0.001, 0.01, 0.1, 0.9 };
	unsigned runs = 0, seen[NPATHS] = { 0 };
	(void)state;

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (int s = 0; s < NSHAPES; s++) {
			size_t n = ns[a];
			make(x, n, (enum shape)s);
			make(g, n, (enum shape)((s + 1) % NSHAPES));
			for (size_t d = 0; d < sizeof(ds) / sizeof(ds[0]); d++)
				for (int with_g = 0; with_g < 2; with_g++) {
					size_t k = (size_t)(ds[d] * (double)n) + 1, m1 = 0;
					memcpy(e0, x, n * sizeof(float));
					memcpy(e1, x, n * sizeof(float));
					size_t m0 = topk_select_ef(NULL, e0, with_g ? g : NULL, n, k, i0, v0);
					struct model md = { .x = e1, .g = with_g ? g : NULL, .n = n,
							    .idx = i1, .val = v1, .seen = seen };
					assert_int_equal(topk_select_steps(NULL, &model_steps, &md, n, k,
									   with_g, &m1), 0);
					for (size_t j = 0; j < m1; j++)
						e1[i1[j]] = 0;
					assert_int_equal(m1, m0);
					assert_memory_equal(i1, i0, m0 * sizeof(uint32_t));
					assert_memory_equal(v1, v0, m0 * sizeof(float));
					assert_memory_equal(e1, e0, n * sizeof(float));
					runs++;
				}
		}
	assert_int_equal(runs, 3 * NSHAPES * 4 * 2);
	for (int p = 0; p < NPATHS; p++)
		if (!seen[p])
			fail_msg("path %d never taken", p);
}

/* A step that fails ends the search with its error, whichever it is. */
static void steps__a_failing_step_ends_the_search(void **state)
{
	static float x[BIG], g[BIG], val[TOPK_MAX(BIG / 100)];
	static uint32_t idx[TOPK_MAX(BIG / 100)];
	(void)state;

	make(g, BIG, LAYERED);
	for (unsigned at = 1; at <= 4; at++) {
		make(x, BIG, HEAVY);
		struct model md = { .x = x, .g = g, .n = BIG, .idx = idx, .val = val, .fail_at = at };
		size_t m = 0;
		int rc = topk_select_steps(NULL, &model_steps, &md, BIG, BIG / 1000, 1, &m);
		if (md.calls >= at)
			assert_int_equal(rc, -EIO);
		else
			assert_int_equal(rc, 0);
	}
}

/* Lines of the file f that contain what. */
static int lines_with(FILE *f, const char *what)
{
	char line[512];
	int n = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	return n;
}

/* topk_best picks the variant once per process: a bad PBOX_KERNEL is
 * named on stderr once, not on every selection (sum_best warned at
 * each call: a line per top-k call and key). The choice is stable and
 * supported. */
static void best__a_bad_pbox_kernel_is_named_once(void **state)
{
	(void)state;
	static float x[1000];
	uint32_t idx[TOPK_MAX(10)];
	float val[TOPK_MAX(10)];
	FILE *err = tmpfile();
	int saved = dup(2);
	const struct topk_kernels *first;

	assert_non_null(err);
	assert_true(saved >= 0);
	make(x, 1000, NORMAL);
	setenv("PBOX_KERNEL", "nope", 1);
	fflush(stderr);
	dup2(fileno(err), 2);
	first = topk_best();
	for (int i = 0; i < 5; i++) {
		assert_ptr_equal(topk_best(), first);
		topk_select(NULL, x, 1000, 10, idx, val);
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	unsetenv("PBOX_KERNEL");
	assert_true(lines_with(err, "PBOX_KERNEL=nope") <= 1);
	assert_ptr_equal(topk_by_name(first->name), first);
	fclose(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(select__count_within_the_band_on_every_shape),
		cmocka_unit_test(select__only_the_band_differs_from_exact),
		cmocka_unit_test(exact__matches_a_sort),
		cmocka_unit_test(ef__residual_keeps_what_was_not_sent),
		cmocka_unit_test(nan__sent_first_and_none_left_behind),
		cmocka_unit_test(variants__same_entries_as_scalar),
		cmocka_unit_test(steps__model_of_the_device_selects_what_select_ef_does),
		cmocka_unit_test(steps__a_failing_step_ends_the_search),
		cmocka_unit_test(best__a_bad_pbox_kernel_is_named_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
