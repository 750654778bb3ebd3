/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk.h - top-k selection by magnitude for sparse gradients (the
 * worker's side of a sparse key: docs/protocol.md "Sparse keys").
 *
 * topk_select adapts MSTopK (Shi et al., MLSys'21: a threshold on |x|
 * found by bisection over a few streaming passes, no sort) to the CPU:
 *   1. A sample (256 blocks of 256 floats spread evenly over x, so the
 *      same input always gives the same output) yields a first threshold
 *      t by MSTopK's bisection on the sample's magnitudes. (Arrays of
 *      64 Ki floats or fewer skip to step 3.)
 *   2. One streaming pass keeps every entry with |x[i]| >= t, in index
 *      order (with error feedback, the same pass first adds the gradient
 *      into the residual: topk_select_ef).
 *   3. If that pass kept fewer than k - k/8 or more than k + k/8 entries,
 *      MSTopK's bisection runs over the whole of x, counting several
 *      thresholds per pass, until a threshold's count falls inside that
 *      band; if ties leave no such threshold (many equal magnitudes), it
 *      takes exactly k: every entry above the band's upper threshold,
 *      then the first ones of the band in index order.
 * So it returns m entries, k - k/8 <= m <= k + k/8 (m = n when k >= n),
 * indices strictly increasing, every kept magnitude >= every left-out
 * one's except within the final band. Infinities are the largest
 * magnitudes, and a NaN's magnitude is +inf's: NaNs are selected first
 * (with the infinities, in index order when there are more than k), so
 * error feedback sends them on and every rank's sum shows them, as a
 * dense sum does. With error feedback, e + g is canonical when NaN
 * (0x7fc00000: the device's add returns another NaN than x86's).
 *
 * The passes have AVX2 and AVX-512 variants beside the scalar reference,
 * picked at run time like the sum kernels (PBOX_KERNEL forces one); every
 * variant returns the same entries as the scalar one.
 * The search bisects the magnitudes' bit patterns (topk.c). One
 * allocation per call (the 256 KiB sample); thread-safe (no state:
 * topk_best follows sum_chosen, made once per process).
 *
 * The decisions (thresholds, bands, when to stop) are made by one piece
 * of C, topk_select_steps, which reaches the array only through the steps
 * of struct topk_steps: topk_select and topk_select_ef drive it with the
 * CPU kernels below, the GPU library (gpu/topk_ef.c) with device kernels, so
 * both select the same entries from the same input.
 */
#ifndef PBOX_TOPK_H
#define PBOX_TOPK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Entries topk_select may return for k: what idx and val must hold. */
#define TOPK_MAX(k) ((k) + (k) / 8 + 1)

struct topk_kernels {
	const char *name;   /* "scalar", "avx2", "avx512" */
	/* Count, for each of nt thresholds t[j] (nt <= TOPK_MAX_THRESH,
	 * 0 <= t[j] <= +inf, as every t of these kernels and of struct
	 * topk_steps' count and pass), the entries of x with |x[i]| >= t[j]
	 * (elem_topk_keep) into counts[j]. */
	void (*count)(const float *x, size_t n, const float *t, unsigned nt,
		      uint64_t *counts);
	/* The selection pass: if g is not NULL, first x[i] += g[i]
	 * (elem_topk_add; stored; with TOPK_CLEAR_G also g[i] = 0); then
	 * every i with |x[i]| >= t is
	 * kept: idx[m] = i, val[m] = x[i] while m < cap, and, with
	 * TOPK_ZERO_KEPT, x[i] = 0 for the ones stored. Returns how many
	 * entries passed the threshold (may exceed cap: then only the first
	 * cap were stored and zeroed). */
	size_t (*pass)(float *x, float *g, size_t n, float t, uint32_t *idx, float *val,
		       size_t cap, unsigned flags);
};

#define TOPK_ZERO_KEPT 1u   /* pass: clear the kept entries of x */
#define TOPK_CLEAR_G   2u   /* pass: clear g as it is added into x */

#define TOPK_MAX_THRESH 8

/* The sample of step 1 (arrays of more than TOPK_SAMPLE_MAX floats):
 * TOPK_SAMPLE_BLOCKS blocks of TOPK_SAMPLE_BLOCK floats, block b starting
 * at x[b * topk_sample_stride(n)]. */
#define TOPK_SAMPLE_BLOCKS 256
#define TOPK_SAMPLE_BLOCK  256
#define TOPK_SAMPLE_MAX    (TOPK_SAMPLE_BLOCKS * TOPK_SAMPLE_BLOCK)

static inline size_t topk_sample_stride(size_t n)
{
	return (n - TOPK_SAMPLE_BLOCK) / (TOPK_SAMPLE_BLOCKS - 1);
}

/* The k of a density: the fewest entries whose share k / n (a binary64
 * quotient, as the density is a binary64) is at least density in (0, 1],
 * at most n. ceil(density * n) alone is one too many wherever the density
 * names a whole number of entries but the product lies above it (0.07 *
 * 100 is 7.000000000000001: 8), and never fewer. The client, pbox-perf's
 * replay and the tests' references take k from here. */
static inline size_t topk_k_of_density(double density, size_t n)
{
	size_t k = (size_t)ceil(density * (double)n);

	if (k > 1 && (double)(k - 1) / (double)n >= density)
		k--;
	return k > n ? n : k;
}

/* The fastest variant this CPU supports (PBOX_KERNEL=scalar|avx2|avx512
 * forces one, as for the sum kernels): the one of sum_chosen's name, so
 * the environment is read, and a bad PBOX_KERNEL named, once per process. */
const struct topk_kernels *topk_best(void);
/* The named variant, or NULL if unknown or not supported by this CPU. */
const struct topk_kernels *topk_by_name(const char *name);

/*
 * Select about k of the n <= UINT32_MAX entries of x by magnitude (the
 * rules above) into idx/val (TOPK_MAX(k) entries each). Returns m.
 * kk NULL: topk_best().
 */
size_t topk_select(const struct topk_kernels *kk, const float *x, size_t n, size_t k,
		   uint32_t *idx, float *val);

/*
 * Error feedback: e += g (stored), then select from e as topk_select does
 * and set e[i] = 0 for every selected i, so e keeps what was not sent.
 * g may be NULL (select from e as it is). Returns m.
 */
size_t topk_select_ef(const struct topk_kernels *kk, float *e, const float *g, size_t n,
		      size_t k, uint32_t *idx, float *val);

/*
 * topk_select_ef that also leaves g all zero, its values moved into e
 * (cleared in the sweep that adds them, where g's lines are in cache):
 * for a caller whose g is the buffer the result will overwrite, a pass
 * fewer than clearing it afterwards.
 */
size_t topk_select_ef_move(const struct topk_kernels *kk, float *e, float *g, size_t n,
			   size_t k, uint32_t *idx, float *val);

/*
 * The steps of a selection over an array x of n entries (and a gradient g
 * to add to it, if any) that topk_select_steps cannot read itself, e.g.
 * device memory. The per-element rules are common/elem.h's
 * (elem_topk_keep, elem_topk_class). Each returns 0 or a negative errno,
 * which ends the selection with that code.
 */
struct topk_steps {
	/* s[b * TOPK_SAMPLE_BLOCK + i] = x[o + i] (+ g[o + i] with g), with
	 * o = b * topk_sample_stride(n), for b < TOPK_SAMPLE_BLOCKS and
	 * i < TOPK_SAMPLE_BLOCK: the sample (n > TOPK_SAMPLE_MAX); x unchanged. */
	int (*sample)(void *ctx, float *s);
	/* x[i] += g[i] for every i (elem_topk_add, stored). */
	int (*add)(void *ctx);
	/* counts[j] = how many i have |x[i]| >= t[j], for j < nt <= TOPK_MAX_THRESH. */
	int (*count)(void *ctx, const float *t, unsigned nt, uint64_t *counts);
	/* With add_g, x[i] += g[i] (stored) first; then every i with
	 * |x[i]| >= t is kept: idx[j] = i, val[j] = x[i] for the first cap
	 * of them in index order; *m = how many passed (may exceed cap). */
	int (*pass)(void *ctx, int add_g, float t, size_t cap, size_t *m);
	/* Exactly k (count(hi) = k - band <= k <= count(lo)): every i with
	 * |x[i]| >= hi, and the first band ones with lo <= |x[i]| < hi, in
	 * index order into idx/val; *m = k. */
	int (*take)(void *ctx, float lo, float hi, size_t band, size_t k, size_t *m);
};

/*
 * topk_select_ef's selection from x (+ g when has_g: added and stored,
 * as topk_select_ef does) of about k of n entries, 0 < k < n <=
 * UINT32_MAX, through st: the same steps in the same order, so the same
 * entries for the same input. kk counts the sample, which the search
 * reads in host memory (NULL: topk_best()). The selected entries are not
 * zeroed. Returns 0 with *m, or the first negative errno of a step.
 */
int topk_select_steps(const struct topk_kernels *kk, const struct topk_steps *st, void *ctx,
		      size_t n, size_t k, int has_g, size_t *m);

/*
 * The reference: exactly min(k, n) entries, the largest magnitudes (ties
 * broken by the lower index; a NaN as +inf), returned in index order.
 * Allocates n * 8 bytes of scratch; returns the count, or 0 with errno
 * ENOMEM.
 */
size_t topk_exact(const float *x, size_t n, size_t k, uint32_t *idx, float *val);

#endif
