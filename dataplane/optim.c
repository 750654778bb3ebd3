/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * optim.c - SGD, Adam and AdamW steps on fp32 arrays, element by element
 * in the order of PyTorch 1.13's single-tensor implementations
 * (torch/optim/sgd.py, adam.py, adamw.py): the same roundings, so a box
 * step stays within a few ulps of torch.optim's (which may fuse a
 * multiply-add where this file never does, see optim.h).
 */
#include "dataplane/optim.h"
#include "dataplane/optim_impl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/errmsg.h"

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

/* -EINVAL, naming the hyperparameter what, its value v and its range. */
static int bad(char *err, size_t errlen, const char *what, double v, const char *range)
{
	return errmsg(err, errlen, -EINVAL, "%s %g is out of range (%s)", what, v, range);
}

int optim_check(const struct optim_params *p, char *err, size_t errlen)
{
	if (!optim_name(p->kind))
		return errmsg(err, errlen, -EINVAL, "unknown optimizer %u (sgd, adam or adamw)",
			      p->kind);
	if (!(p->weight_decay >= 0) || !isfinite(p->weight_decay))
		return bad(err, errlen, "weight_decay", p->weight_decay, "finite, >= 0");
	if (p->kind == OPTIM_SGD) {
		if (!(p->momentum >= 0 && p->momentum < 1))
			return bad(err, errlen, "momentum", p->momentum, "0 <= momentum < 1");
		if (!(p->dampening >= 0 && p->dampening <= 1))
			return bad(err, errlen, "dampening", p->dampening, "0 <= dampening <= 1");
		if (p->nesterov > 1)
			return errmsg(err, errlen, -EINVAL, "nesterov %u is not 0 or 1",
				      p->nesterov);
		if (p->nesterov && (p->momentum <= 0 || p->dampening != 0))
			return errmsg(err, errlen, -EINVAL,
				      "nesterov needs momentum > 0 and dampening 0 "
				      "(as torch.optim.SGD)");
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

/* The variants: the same per-element code compiled for the baseline and
 * for AVX2 (optim_avx2.c); vector sqrt and division round as the scalar
 * ones, and nothing is contracted, so both give the same bits. */
void optim_sgd_base(const struct optim_params *p, float *w, float *buf, const float *g,
		    size_t n, uint64_t step, float lr, float gdiv)
{
	optim_sgd_elems(p, w, buf, g, n, step, lr, gdiv);
}

void optim_adam_base(const struct optim_params *p, float *w, float *m, float *v,
		     const float *g, size_t n, uint64_t step, float lr, float gdiv)
{
	optim_adam_elems(p, w, m, v, g, n, step, lr, gdiv);
}

void optim_step_variant(const struct optim_params *p, float *w, float *const *st,
			const float *g, size_t n, uint64_t step, float lr, float gdiv, int avx2)
{
	float *buf = p->kind == OPTIM_SGD && optim_planes(p) ? st[0] : NULL;

	switch (p->kind) {
	case OPTIM_SGD:
		(avx2 ? optim_sgd_avx2 : optim_sgd_base)(p, w, buf, g, n, step, lr, gdiv);
		break;
	case OPTIM_ADAM:
	case OPTIM_ADAMW:
		(avx2 ? optim_adam_avx2 : optim_adam_base)(p, w, st[0], st[1], g, n, step, lr,
							    gdiv);
		break;
	default:
		break;
	}
}

void optim_step(const struct optim_params *p, float *w, float *const *st,
		const float *g, size_t n, uint64_t step, float lr, float gdiv)
{
	optim_step_variant(p, w, st, g, n, step, lr, gdiv, __builtin_cpu_supports("avx2"));
}
