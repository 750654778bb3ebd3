/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * optim.c - SGD, Adam and AdamW steps on fp32 arrays, element by element
 * in the order of PyTorch 1.13's single-tensor implementations
 * (torch/optim/sgd.py, adam.py, adamw.py): the same roundings, so a box
 * step stays within a few ulps of torch.optim's (which may fuse a
 * multiply-add where this file never does, see optim.h).
 */
#include "dataplane/optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = { [OPTIM_SGD] = "sgd", [OPTIM_ADAM] = "adam",
				      [OPTIM_ADAMW] = "adamw" };

const char *optim_name(unsigned kind)
{
	return kind >= OPTIM_SGD && kind <= OPTIM_ADAMW ? names[kind] : NULL;
}

unsigned optim_parse(const char *name)
{
	for (unsigned k = OPTIM_SGD; name && k <= OPTIM_ADAMW; k++)
		if (strcmp(name, names[k]) == 0)
			return k;
	return OPTIM_NONE;
}

unsigned optim_planes(const struct optim_params *p)
{
	if (p->kind == OPTIM_SGD)
		return p->momentum != 0 ? 1 : 0;
	return p->kind == OPTIM_ADAM || p->kind == OPTIM_ADAMW ? 2 : 0;
}

static int bad(char *err, size_t errlen, const char *what, double v, const char *range)
{
	snprintf(err, errlen, "%s %g is out of range (%s)", what, v, range);
	return -1;
}

int optim_check(const struct optim_params *p, char *err, size_t errlen)
{
	if (!optim_name(p->kind)) {
		snprintf(err, errlen, "unknown optimizer %u (sgd, adam or adamw)", p->kind);
		return -1;
	}
	if (!(p->weight_decay >= 0) || !isfinite(p->weight_decay))
		return bad(err, errlen, "weight_decay", p->weight_decay, "finite, >= 0");
	if (p->kind == OPTIM_SGD) {
		if (!(p->momentum >= 0 && p->momentum < 1))
			return bad(err, errlen, "momentum", p->momentum, "0 <= momentum < 1");
		if (!(p->dampening >= 0 && p->dampening <= 1))
			return bad(err, errlen, "dampening", p->dampening, "0 <= dampening <= 1");
		if (p->nesterov > 1) {
			snprintf(err, errlen, "nesterov %u is not 0 or 1", p->nesterov);
			return -1;
		}
		if (p->nesterov && (p->momentum <= 0 || p->dampening != 0)) {
			snprintf(err, errlen, "nesterov needs momentum > 0 and dampening 0 "
				 "(as torch.optim.SGD)");
			return -1;
		}
		return 0;
	}
	if (!(p->beta1 >= 0 && p->beta1 < 1))
		return bad(err, errlen, "beta1", p->beta1, "0 <= beta1 < 1");
	if (!(p->beta2 >= 0 && p->beta2 < 1))
		return bad(err, errlen, "beta2", p->beta2, "0 <= beta2 < 1");
	if (!(p->eps > 0) || !isfinite(p->eps))
		return bad(err, errlen, "eps", p->eps, "finite, > 0");
	return 0;
}

/* d_p = grad + wd * param; buf = grad (first step) or buf * m + (1 - damp) * d_p;
 * d_p = d_p + m * buf (Nesterov) or buf; param += -lr * d_p. */
static void sgd(const struct optim_params *p, float *restrict w, float *restrict buf,
		const float *restrict g, size_t n, uint64_t step, float lr)
{
	const float wd = (float)p->weight_decay, m = (float)p->momentum;
	const float damp1 = (float)(1 - p->dampening), nlr = -lr;

	if (!buf) {
		for (size_t i = 0; i < n; i++) {
			float d = wd != 0 ? g[i] + wd * w[i] : g[i];
			w[i] = w[i] + nlr * d;
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		float d = wd != 0 ? g[i] + wd * w[i] : g[i];
		float b = step <= 1 ? d : buf[i] * m + damp1 * d;
		buf[i] = b;
		d = p->nesterov ? d + m * b : b;
		w[i] = w[i] + nlr * d;
	}
}

/* Adam (L2: grad += wd * param) and AdamW (param *= 1 - lr * wd):
 * m = m * b1 + (1 - b1) * g; v = v * b2 + ((1 - b2) * g) * g;
 * denom = sqrt(v) / sqrt(1 - b2^t) + eps; param += (-lr / (1 - b1^t)) * m / denom. */
static void adam(const struct optim_params *p, float *restrict w, float *restrict m,
		 float *restrict v, const float *restrict g, size_t n, uint64_t step, float lr)
{
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
		float x = w[i], gi = g[i];
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

void optim_step(const struct optim_params *p, float *w, float *const *st,
		const float *g, size_t n, uint64_t step, float lr)
{
	switch (p->kind) {
	case OPTIM_SGD:
		sgd(p, w, optim_planes(p) ? st[0] : NULL, g, n, step, lr);
		break;
	case OPTIM_ADAM:
	case OPTIM_ADAMW:
		adam(p, w, st[0], st[1], g, n, step, lr);
		break;
	default:
		break;
	}
}
