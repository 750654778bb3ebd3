/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_optim.c - the PS-mode updates (dataplane/optim.c): SGD, Adam and
 * AdamW against a plain double-precision transcription of torch 1.13's
 * formulas over many steps (the largest difference within 1e-5 of the
 * weights' scale after 60 steps, as the torch comparison measures it), the baseline and AVX2 builds giving the same bits on every
 * length (vector bodies and scalar tails), one call on a whole array the
 * same bits as element-by-element calls, and the hyperparameter checks
 * naming what is out of range.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dataplane/optim.h"

#define N 1031   /* not a multiple of any vector width */
#define STEPS 60

static float grad_at(size_t i, int t, double w)
{
	return (float)(sin((double)i * 0.37 + t * 0.11) * 0.5 + 0.01 * w);
}

/* torch 1.13, single tensor, in double. */
static void ref_step(const struct optim_params *p, double *w, double *s0, double *s1,
		     const float *g, size_t n, int t, double lr)
{
	for (size_t i = 0; i < n; i++) {
		double gi = g[i], x = w[i];
		if (p->kind == OPTIM_SGD) {
			double d = gi + p->weight_decay * x;
			if (p->momentum != 0) {
				s0[i] = t == 1 ? d : s0[i] * p->momentum + (1 - p->dampening) * d;
				d = p->nesterov ? d + p->momentum * s0[i] : s0[i];
			}
			w[i] = x - lr * d;
			continue;
		}
		if (p->kind == OPTIM_ADAMW)
			x *= 1 - lr * p->weight_decay;
		else
			gi += p->weight_decay * x;
		s0[i] = s0[i] * p->beta1 + (1 - p->beta1) * gi;
		s1[i] = s1[i] * p->beta2 + (1 - p->beta2) * gi * gi;
		double bc1 = 1 - pow(p->beta1, t), bc2 = 1 - pow(p->beta2, t);
		w[i] = x - lr / bc1 * s0[i] / (sqrt(s1[i]) / sqrt(bc2) + p->eps);
	}
}

static const struct optim_params cases[] = {
	{ .kind = OPTIM_SGD },
	{ .kind = OPTIM_SGD, .momentum = 0.9, .nesterov = 1, .weight_decay = 1e-4 },
	{ .kind = OPTIM_SGD, .momentum = 0.5, .dampening = 0.25, .weight_decay = 1e-2 },
	{ .kind = OPTIM_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-3 },
	{ .kind = OPTIM_ADAMW, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 1e-2 },
};

static void steps__follow_torch_formulas_in_double(void **state)
{
	static float w[N], s0[N], s1[N], g[N];
	static double rw[N], r0[N], r1[N];

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct optim_params *p = &cases[c];
		float *st[2] = { s0, s1 };
		memset(s0, 0, sizeof(s0));
		memset(s1, 0, sizeof(s1));
		memset(r0, 0, sizeof(r0));
		memset(r1, 0, sizeof(r1));
		for (size_t i = 0; i < N; i++)
			rw[i] = w[i] = (float)(i % 13) * 0.1f - 0.6f;
		double worst = 0;
		for (int t = 1; t <= STEPS; t++) {
			float lr = 0.01f * (float)(1 + t % 3);
			for (size_t i = 0; i < N; i++)
				g[i] = grad_at(i, t, w[i]);
			optim_step(p, w, st, g, N, (uint64_t)t, lr, 1.0f);
			ref_step(p, rw, r0, r1, g, N, t, lr);
			double diff = 0, scale = 0;   /* relative to the tensor's scale */
			for (size_t i = 0; i < N; i++) {
				diff = fmax(diff, fabs(w[i] - rw[i]));
				scale = fmax(scale, fabs(rw[i]));
			}
			worst = fmax(worst, diff / scale);
		}
		if (worst > 1e-5)
			fail_msg("%s case %zu: relative error %g after %d steps",
				 optim_name(p->kind), c, worst, STEPS);
	}
}

/* Every length 0..70: the AVX2 build, the baseline and n=1 calls agree. */
static void gdiv__power_of_two_same_bits_as_division(void **state)
{
	static float w1[N], w2[N], g[N], g4[N];
	float *none[2] = { NULL, NULL };
	struct optim_params p = { .kind = OPTIM_SGD };

	(void)state;
	for (size_t i = 0; i < N; i++) {
		w1[i] = w2[i] = 1;
		g[i] = grad_at(i, 1, 0) * 3;
		g4[i] = g[i] / 4.0f;    /* what the engine did before: a division */
	}
	optim_step(&p, w1, none, g, N, 1, 0.5f, 4.0f);
	optim_step(&p, w2, none, g4, N, 1, 0.5f, 1.0f);
	assert_memory_equal(w1, w2, sizeof(w1));
}

static void variants__same_bits_every_length(void **state)
{
	float w[3][70], a[3][70], b[3][70], g[70];

	(void)state;
	if (!__builtin_cpu_supports("avx2"))
		skip();
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (size_t n = 0; n <= 70; n++) {
			/* the mean over 4 (a product) and over 3 (a division) */
			float gdiv = n % 2 ? 4.0f : 3.0f;
			for (int v = 0; v < 3; v++)
				for (size_t i = 0; i < n; i++) {
					w[v][i] = (float)i * 0.25f - 3;
					a[v][i] = (float)i * 0.01f;
					b[v][i] = (float)i * 0.001f;
				}
			for (size_t i = 0; i < n; i++)
				g[i] = grad_at(i, 3, 0.5);
			for (int t = 1; t <= 3; t++) {
				float *s[3][2] = { { a[0], b[0] }, { a[1], b[1] }, { a[2], b[2] } };
				optim_step_variant(&cases[c], w[0], s[0], g, n, (uint64_t)t, 0.1f,
						   gdiv, 0);
				optim_step_variant(&cases[c], w[1], s[1], g, n, (uint64_t)t, 0.1f,
						   gdiv, 1);
				for (size_t i = 0; i < n; i++) {
					float *one[2] = { &a[2][i], &b[2][i] };
					optim_step_variant(&cases[c], &w[2][i], one, &g[i], 1,
							   (uint64_t)t, 0.1f, gdiv, 0);
				}
			}
			for (int v = 1; v < 3; v++) {
				assert_memory_equal(w[0], w[v], n * sizeof(float));
				assert_memory_equal(a[0], a[v], n * sizeof(float));
				assert_memory_equal(b[0], b[v], n * sizeof(float));
			}
		}
}

static void check__names_the_bad_hyperparameter(void **state)
{
	char err[128];
	struct optim_params p = { .kind = OPTIM_SGD, .momentum = 1.0 };

	(void)state;
	assert_int_equal(optim_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "momentum 1 is out of range"));
	p = (struct optim_params){ .kind = OPTIM_SGD, .nesterov = 1 };
	assert_int_equal(optim_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nesterov needs momentum"));
	p = (struct optim_params){ .kind = OPTIM_SGD, .weight_decay = -1 };
	assert_int_equal(optim_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "weight_decay"));
	p = (struct optim_params){ .kind = OPTIM_ADAM, .beta1 = 0.9, .beta2 = 1.0, .eps = 1e-8 };
	assert_int_equal(optim_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "beta2"));
	p.beta2 = 0.999;
	p.eps = NAN;
	assert_int_equal(optim_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "eps"));
	p.eps = 1e-8;
	assert_int_equal(optim_check(&p, err, sizeof(err)), 0);
	p.kind = 9;
	assert_int_equal(optim_check(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown optimizer"));
	assert_int_equal(optim_parse("adamw"), OPTIM_ADAMW);
	assert_int_equal(optim_parse("lamb"), OPTIM_NONE);
	assert_string_equal(optim_name(OPTIM_SGD), "sgd");
	assert_int_equal(optim_planes(&cases[0]), 0);
	assert_int_equal(optim_planes(&cases[1]), 1);
	assert_int_equal(optim_planes(&cases[3]), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(steps__follow_torch_formulas_in_double),
		cmocka_unit_test(variants__same_bits_every_length),
		cmocka_unit_test(gdiv__power_of_two_same_bits_as_division),
		cmocka_unit_test(check__names_the_bad_hyperparameter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
