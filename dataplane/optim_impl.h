/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * optim_impl.h - private to optim.c and optim_avx2.c: the per-element
 * updates, written once and compiled into every variant (baseline, AVX2),
 * in torch 1.13's order (see optim.h for the rules).
 */
#ifndef PBOX_OPTIM_IMPL_H
#define PBOX_OPTIM_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/optim.h"

/* The gradient is the sum divided by gdiv (the world, or 1): a division,
 * or where gdiv is a power of two the product with its reciprocal, which
 * is exact, so the same bits for less time. */
struct optim_gdiv {
	float div, inv;
	int pow2;
};

static inline struct optim_gdiv optim_gdiv_of(float div)
{
	int e;
	float m = frexpf(div, &e);
	return (struct optim_gdiv){ .div = div, .inv = 1.0f / div, .pow2 = m == 0.5f };
}

static inline float optim_grad(const float *g, size_t i, struct optim_gdiv d)
{
	return d.pow2 ? g[i] * d.inv : g[i] / d.div;
}

/* d_p = grad + wd * param; buf = grad (first step) or buf * m + (1 - damp) * d_p;
 * d_p = d_p + m * buf (Nesterov) or buf; param += -lr * d_p. */
static inline void optim_sgd_elems(const struct optim_params *p, float *restrict w,
				   float *restrict buf, const float *restrict g, size_t n,
				   uint64_t step, float lr, float gdiv)
{
	const float wd = (float)p->weight_decay, m = (float)p->momentum;
	const float damp1 = (float)(1 - p->dampening), nlr = -lr;
	const struct optim_gdiv gd = optim_gdiv_of(gdiv);

	if (!buf) {
		for (size_t i = 0; i < n; i++) {
			float gi = optim_grad(g, i, gd);
			float d = wd != 0 ? gi + wd * w[i] : gi;
			w[i] = w[i] + nlr * d;
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		float gi = optim_grad(g, i, gd);
		float d = wd != 0 ? gi + wd * w[i] : gi;
		float b = step <= 1 ? d : buf[i] * m + damp1 * d;
		buf[i] = b;
		d = p->nesterov ? d + m * b : b;
		w[i] = w[i] + nlr * d;
	}
}

/* Adam (L2: grad += wd * param) and AdamW (param *= 1 - lr * wd):
 * m = m * b1 + (1 - b1) * g; v = v * b2 + ((1 - b2) * g) * g;
 * denom = sqrt(v) / sqrt(1 - b2^t) + eps; param += (-lr / (1 - b1^t)) * m / denom. */
static inline void optim_adam_elems(const struct optim_params *p, float *restrict w,
				    float *restrict m, float *restrict v,
				    const float *restrict g, size_t n, uint64_t step, float lr,
				    float gdiv)
{
	const struct optim_gdiv gd = optim_gdiv_of(gdiv);
	const int adamw = p->kind == OPTIM_ADAMW;
	const float wd = (float)p->weight_decay;
	const float decay = (float)(1 - (double)lr * p->weight_decay);
	const float b1 = (float)p->beta1, b2 = (float)p->beta2;
	const float ib1 = (float)(1 - p->beta1), ib2 = (float)(1 - p->beta2);
	const double bc1 = 1 - pow(p->beta1, (double)step);
	const double bc2 = 1 - pow(p->beta2, (double)step);
	const float nstep = (float)-((double)lr / bc1);
	const float bc2s = (float)sqrt(bc2), eps = (float)p->eps;

	for (size_t i = 0; i < n; i++) {
		float x = w[i], gi = optim_grad(g, i, gd);
		if (adamw)
			x = x * decay;
		else if (wd != 0)
			gi = gi + wd * x;
		float mi = m[i] * b1 + ib1 * gi;
		float vi = v[i] * b2 + (ib2 * gi) * gi;
		float denom = sqrtf(vi) / bc2s + eps;
		m[i] = mi;
		v[i] = vi;
		w[i] = x + (nstep * mi) / denom;
	}
}


/* The variants' entry points (optim.c: base; optim_avx2.c: AVX2). */
void optim_sgd_base(const struct optim_params *p, float *w, float *buf, const float *g,
		    size_t n, uint64_t step, float lr, float gdiv);
void optim_adam_base(const struct optim_params *p, float *w, float *m, float *v,
		     const float *g, size_t n, uint64_t step, float lr, float gdiv);
void optim_sgd_avx2(const struct optim_params *p, float *w, float *buf, const float *g,
		    size_t n, uint64_t step, float lr, float gdiv);
void optim_adam_avx2(const struct optim_params *p, float *w, float *m, float *v,
		     const float *g, size_t n, uint64_t step, float lr, float gdiv);

#endif
