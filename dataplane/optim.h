/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * optim.h - the optimizer updates of PS mode (docs/protocol.md "PS keys"):
 * SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW, with
 * PyTorch 1.13's formulas and meanings, applied by an lcore to one
 * segment's fp32 weights when its round completes.
 *
 * Rules:
 *  - Pure: no allocation, no clock, no globals; the same in pboxd, the unit
 *    tests and engine_bench.
 *  - fp32 arithmetic, one fixed order per element, compiled without FMA
 *    contraction (-ffp-contract=off), so an update gives the same bits on
 *    every machine; scalars derived from hyperparameters (bias corrections,
 *    step sizes) are computed in double and rounded to float once, as
 *    PyTorch passes Python floats to its fp32 kernels.
 *  - Elementwise only: a segment's update does not depend on any other
 *    segment, so lcores update their chunks independently.
 */
#ifndef PBOX_OPTIM_H
#define PBOX_OPTIM_H

#include <stddef.h>
#include <stdint.h>

enum optim_kind {
	OPTIM_NONE  = 0,
	OPTIM_SGD   = 1, /* values equal pbox_optim_kind */
	OPTIM_ADAM  = 2,
	OPTIM_ADAMW = 3,
};

#define OPTIM_MAX_PLANES 2 /* fp32 state arrays per weight */

/* Hyperparameters, PyTorch's names; fixed when a key is declared. Kept in
 * double, as Python floats, so the derived scalars round as PyTorch's. */
struct optim_params {
	uint8_t kind;          /* enum optim_kind */
	uint8_t nesterov;      /* SGD */
	double momentum;       /* SGD */
	double dampening;      /* SGD */
	double weight_decay;   /* SGD, Adam (L2 on the gradient), AdamW (decoupled) */
	double beta1, beta2;   /* Adam(W) */
	double eps;            /* Adam(W) */
};

/* Names: "sgd", "adam", "adamw"; NULL / OPTIM_NONE when unknown. */
const char *optim_name(unsigned kind);
unsigned optim_parse(const char *name);

/* State planes a key needs: SGD 1 with momentum (the momentum buffer) or
 * 0, Adam(W) 2 (exp_avg, exp_avg_sq). */
unsigned optim_planes(const struct optim_params *p);

/* Check the ranges PyTorch accepts (plus finiteness): 0, or -EINVAL with
 * the first bad hyperparameter (or an unknown kind) named in err. */
int optim_check(const struct optim_params *p, char *err, size_t errlen);

/*
 * One step on n elements: w the weights, st[] the state planes
 * (optim_planes of them), g / gdiv the gradient (g the rank-order sum,
 * gdiv the world to average it, or 1 to take the sum as it is), step the
 * number of this step counted from 1 (Adam's bias corrections use it;
 * SGD reads it only so: step 1 starts the momentum buffer with the
 * gradient, a later step continues st[0], so a caller whose buffer came
 * from elsewhere passes 2 or more), lr the learning rate of this step.
 */
void optim_step(const struct optim_params *p, float *w, float *const *st,
		const float *g, size_t n, uint64_t step, float lr, float gdiv);

/* optim_step with the variant chosen: avx2 0 = the baseline build, 1 =
 * the AVX2 one (the CPU must have it). Both give the same bits (tests). */
void optim_step_variant(const struct optim_params *p, float *w, float *const *st,
			const float *g, size_t n, uint64_t step, float lr, float gdiv, int avx2);

#endif
