/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * optim_avx2.c - the optimizer updates compiled for AVX2 (8 floats per
 * instruction; dataplane/Makefile.inc), picked by optim_step when the CPU
 * has it. The same per-element code as the baseline (optim_impl.h): the
 * same bits.
 */
#include "dataplane/optim_impl.h"

void optim_sgd_avx2(const struct optim_params *p, float *w, float *buf, const float *g,
		    size_t n, uint64_t step, float lr, float gdiv)
{
	optim_sgd_elems(p, w, buf, g, n, step, lr, gdiv);
}

void optim_adam_avx2(const struct optim_params *p, float *w, float *m, float *v,
		     const float *g, size_t n, uint64_t step, float lr, float gdiv)
{
	optim_adam_elems(p, w, m, v, g, n, step, lr, gdiv);
}
