/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_engine_ps.c - a PS key's non-finite gradients (docs/protocol.md
 * "Non-finite gradients"): under each policy (skip, abort, pass) the exact
 * weights after a round whose gradient sum holds a NaN or an Inf, what
 * the ranks are answered, and the counts (job, rank, lcore); a sum that
 * overflows from finite gradients names no rank; f16 gradients are
 * checked as sent.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/finite.h"
#include "common/sum.h"
#include "tests/unit/engine_fx.h"

#define PS_KEY   7
#define PS_COUNT 70u   /* two segments of SEG_BYTES / 4: 64 and 6 elements */
#define SEG0     64u
#define SEG1     6u
#define LR       0.5f

static int setup_policy(void **state, uint8_t policy)
{
	struct fx *f = calloc(1, sizeof(*f));
	engine_init(&f->e, 0, sum_by_name("scalar"));
	f->nonfinite = policy;
	install_job(f, 2, 8);
	*state = f;
	return 0;
}

static int setup_skip(void **state)
{
	return setup_policy(state, ENGINE_NF_SKIP);
}

static int setup_abort(void **state)
{
	return setup_policy(state, ENGINE_NF_ABORT);
}

static int setup_pass(void **state)
{
	return setup_policy(state, ENGINE_NF_PASS);
}

/* A PS key (plain SGD, averaged, f32 weights) with gradients of gdtype,
 * its init round done: every weight 1. */
static struct engine_key *install_ps(struct fx *f, unsigned gdtype)
{
	uint8_t owners[64] = { 0 };
	struct optim_params opt = { .kind = OPTIM_SGD };
	size_t kb = engine_key_mem_bytes(PS_COUNT, WIRE_F32, SEG_BYTES, 1);
	size_t pb = engine_ps_mem_bytes(PS_COUNT, SEG_BYTES, optim_planes(&opt), WIRE_F32);
	f->keymem[0] = aligned_alloc(64, (kb + pb + 63) & ~(size_t)63);
	memset(f->keymem[0], 0, kb + pb);
	struct engine_key *k = engine_key_init(f->keymem[0], PS_KEY, PS_COUNT, WIRE_F32,
					       SEG_BYTES, 1, owners);
	engine_ps_init((uint8_t *)f->keymem[0] + kb, k, &opt, gdtype, WIRE_F32, 1);
	struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job, .u.key = k };
	assert_int_equal(engine_apply(&f->e, &m), 0);

	float ones[SEG0];
	struct engine_out out;
	for (unsigned i = 0; i < SEG0; i++)
		ones[i] = 1.0f;
	for (uint32_t s = 0; s < 2; s++) {
		uint16_t n = s == 0 ? SEG0 : SEG1;
		struct wire_msg h = push_hdr(f, 0, PS_KEY, s, 1, n);
		h.flags = WIRE_FLAG_INIT;
		assert_int_equal(push(f, h, ones, &out), ENGINE_ABSORBED);
		h = push_hdr(f, 1, PS_KEY, s, 1, 0);
		h.flags = WIRE_FLAG_INIT;
		assert_int_equal(push(f, h, NULL, &out), ENGINE_SEND_ALL);
	}
	return k;
}

/* A gradient PUSH of rank to segment seg in round (lr LR). */
static int push_grad(struct fx *f, unsigned dtype, uint16_t rank, uint32_t seg,
		     uint32_t round, const void *g, struct engine_out *out)
{
	struct wire_msg h = push_hdr(f, rank, PS_KEY, seg, round, seg == 0 ? SEG0 : SEG1);
	float lr = LR;
	memcpy(&h.arg, &lr, sizeof(lr));
	h.dtype = (uint8_t)dtype;
	return push(f, h, g, out);
}

static void fill(float *g, unsigned n, float v)
{
	for (unsigned i = 0; i < n; i++)
		g[i] = v;
}

/* Round 2: both segments; rank 1's segment 0 has bad at element 3. The
 * answers of the last push of each segment in v[]. */
static void round2(struct fx *f, float bad, int v[2], struct engine_out out[2])
{
	float g0[SEG0], g1[SEG0];

	fill(g0, SEG0, 1.0f);
	fill(g1, SEG0, 1.0f);
	g1[3] = bad;
	for (uint32_t s = 0; s < 2; s++) {
		/* (ERROR once the job has stopped: abort) */
		int v0 = push_grad(f, WIRE_F32, 0, s, 2, g0, &out[s]);
		assert_int_equal(v0, f->nonfinite == ENGINE_NF_ABORT && s == 1 ? ENGINE_SEND_ERROR
									  : ENGINE_ABSORBED);
		v[s] = push_grad(f, WIRE_F32, 1, s, 2, s == 0 ? g1 : g0, &out[s]);
	}
}

static void progress(struct fx *f, struct engine_progress *p)
{
	assert_int_equal(engine_job_progress(&f->e, f->job, p), 0);
}

static uint64_t rank_nonfinite(struct fx *f, uint16_t r)
{
	struct engine_lateness l;
	assert_int_equal(engine_rank_lateness(&f->e, f->job, r, &l), 0);
	return l.nonfinite;
}

static void ps_skip__keeps_weights_and_says_so(void **state)
{
	struct fx *f = *state;
	struct engine_key *k = install_ps(f, WIRE_F32);
	struct engine_out out[2];
	int v[2];

	round2(f, NAN, v, out);
	/* segment 0: not stepped, the weights as they were, RESULT SKIPPED */
	assert_int_equal(v[0], ENGINE_SEND_ALL);
	assert_int_equal(out[0].hdr.type, WIRE_RESULT);
	assert_int_equal(out[0].hdr.status, WIRE_ST_SKIPPED);
	for (unsigned i = 0; i < SEG0; i++)
		assert_true(k->ps->w[i] == 1.0f);
	assert_memory_equal(out[0].payload, k->ps->w, SEG0 * sizeof(float));
	/* segment 1 (finite): stepped, 1 - 0.5 * mean(1, 1) */
	assert_int_equal(v[1], ENGINE_SEND_ALL);
	assert_int_equal(out[1].hdr.status, WIRE_ST_OK);
	for (unsigned i = 0; i < SEG1; i++)
		assert_true(k->ps->w[SEG0 + i] == 0.5f);
	/* counted: the job, rank 1 (not rank 0), the lcore */
	struct engine_progress p;
	progress(f, &p);
	assert_int_equal(p.nonfinite, 1);
	assert_int_equal(p.skipped, 1);
	assert_int_equal(p.nf_abort, 0);
	assert_int_equal(rank_nonfinite(f, 0), 0);
	assert_int_equal(rank_nonfinite(f, 1), 1);
	assert_int_equal(f->e.c.nonfinite, 1);
	assert_int_equal(f->e.c.skipped, 1);
	assert_int_equal(f->e.c.updates, 1);

	/* a retransmission of the skipped round is answered SKIPPED too */
	float g[SEG0];
	fill(g, SEG0, 1.0f);
	struct engine_out o;
	assert_int_equal(push_grad(f, WIRE_F32, 0, 0, 2, g, &o), ENGINE_SEND_ONE);
	assert_int_equal(o.hdr.status, WIRE_ST_SKIPPED);

	/* the next round steps from the kept weights: 1 - 0.5 * mean(1, 3) */
	float g3[SEG0];
	fill(g3, SEG0, 3.0f);
	assert_int_equal(push_grad(f, WIRE_F32, 0, 0, 3, g, &o), ENGINE_ABSORBED);
	assert_int_equal(push_grad(f, WIRE_F32, 1, 0, 3, g3, &o), ENGINE_SEND_ALL);
	assert_int_equal(o.hdr.status, WIRE_ST_OK);
	for (unsigned i = 0; i < SEG0; i++)
		assert_true(k->ps->w[i] == 0.0f);
	assert_int_equal(f->e.c.updates, 2);
	assert_int_equal(f->e.c.skipped, 1);
}

static void ps_abort__stops_the_job_naming_rank_and_key(void **state)
{
	struct fx *f = *state;
	struct engine_key *k = install_ps(f, WIRE_F32);
	struct engine_out out[2];
	int v[2];

	round2(f, INFINITY, v, out);
	/* the last sender of segment 0's round is answered ERROR NONFINITE */
	assert_int_equal(v[0], ENGINE_SEND_ERROR);
	assert_int_equal(out[0].hdr.type, WIRE_ERROR);
	assert_int_equal(out[0].hdr.status, WIRE_ST_NONFINITE);
	assert_int_equal(out[0].rank, 1);
	for (unsigned i = 0; i < SEG0; i++)
		assert_true(k->ps->w[i] == 1.0f);
	/* the job stopped on this lcore: segment 1's round is refused, not stepped */
	assert_int_equal(v[1], ENGINE_SEND_ERROR);
	assert_int_equal(out[1].hdr.status, WIRE_ST_NO_JOB);
	for (unsigned i = 0; i < SEG1; i++)
		assert_true(k->ps->w[SEG0 + i] == 1.0f);
	assert_int_equal(f->e.c.updates, 0);
	/* where, for the control plane's reason */
	struct engine_progress p;
	progress(f, &p);
	assert_int_equal(p.nf_abort, 1);
	assert_int_equal(p.nf_rank, 1);
	assert_int_equal(p.nf_key, PS_KEY);
	assert_int_equal(p.nf_seg, 0);
	assert_int_equal(p.nf_round, 2);
	assert_int_equal(p.nonfinite, 1);
	assert_int_equal(p.skipped, 0);
	assert_int_equal(rank_nonfinite(f, 1), 1);
	assert_int_equal(rank_nonfinite(f, 0), 0);
}

static void ps_pass__steps_anyway_but_counts(void **state)
{
	struct fx *f = *state;
	struct engine_key *k = install_ps(f, WIRE_F32);
	struct engine_out out[2];
	int v[2];

	round2(f, NAN, v, out);
	assert_int_equal(v[0], ENGINE_SEND_ALL);
	assert_int_equal(out[0].hdr.status, WIRE_ST_OK);
	assert_true(isnan(k->ps->w[3]));       /* the NaN went into the weights */
	assert_true(k->ps->w[2] == 0.5f);      /* 1 - 0.5 * mean(1, 1) */
	assert_true(k->ps->w[SEG0] == 0.5f);
	assert_int_equal(f->e.c.updates, 2);
	struct engine_progress p;
	progress(f, &p);
	assert_int_equal(p.nonfinite, 1);
	assert_int_equal(p.skipped, 0);
	assert_int_equal(p.nf_abort, 0);
	assert_int_equal(rank_nonfinite(f, 1), 1);
}

/* Finite gradients whose sum overflows: no rank is at fault. */
static void ps_abort__overflowing_sum_names_no_rank(void **state)
{
	struct fx *f = *state;
	install_ps(f, WIRE_F32);
	float g[SEG0];
	struct engine_out o;

	fill(g, SEG0, 3e38f);
	assert_int_equal(push_grad(f, WIRE_F32, 0, 0, 2, g, &o), ENGINE_ABSORBED);
	assert_int_equal(push_grad(f, WIRE_F32, 1, 0, 2, g, &o), ENGINE_SEND_ERROR);
	assert_int_equal(o.hdr.status, WIRE_ST_NONFINITE);
	struct engine_progress p;
	progress(f, &p);
	assert_int_equal(p.nf_abort, 1);
	assert_int_equal(p.nf_rank, ENGINE_NF_NO_RANK);
	assert_int_equal(rank_nonfinite(f, 0), 0);
	assert_int_equal(rank_nonfinite(f, 1), 0);
}

/* f16 gradients: rank 0's +Inf (0x7c00) named; bf16 NaN found as sent. */
static void ps_skip__f16_gradient_checked_as_sent(void **state)
{
	struct fx *f = *state;
	struct engine_key *k = install_ps(f, WIRE_F16);
	uint16_t g0[SEG0], g1[SEG0];
	struct engine_out o;

	for (unsigned i = 0; i < SEG0; i++)
		g0[i] = g1[i] = 0x3c00; /* 1.0 */
	g0[63] = 0x7c00;                /* +Inf */
	assert_int_equal(push_grad(f, WIRE_F16, 0, 0, 2, g0, &o), ENGINE_ABSORBED);
	assert_int_equal(push_grad(f, WIRE_F16, 1, 0, 2, g1, &o), ENGINE_SEND_ALL);
	assert_int_equal(o.hdr.status, WIRE_ST_SKIPPED);
	assert_true(k->ps->w[63] == 1.0f);
	assert_int_equal(rank_nonfinite(f, 0), 1);
	assert_int_equal(rank_nonfinite(f, 1), 0);
	/* and the scalar finder on each encoding */
	uint16_t bf[3] = { 0x3f80, 0x7fc0, 0x7f80 }; /* 1, NaN, Inf */
	assert_int_equal(finite_first(bf, 3, WIRE_BF16), 1);
	assert_int_equal(finite_first(g0, SEG0, WIRE_F16), 63);
	assert_int_equal(finite_first(g1, SEG0, WIRE_F16), SEG0);
}

/* Each variant of the vector check against the scalar one, every
 * position and class, lengths across the vector loops' tails. */
static void finite__all_f32_matches_scalar(void **state)
{
	(void)state;
	float a[37];
	const float odd[] = { NAN, -NAN, INFINITY, -INFINITY, 3.4028235e38f, -0.0f, 1e-45f };

	for (int avx2 = 0; avx2 <= (__builtin_cpu_supports("avx2") ? 1 : 0); avx2++)
		for (unsigned n = 0; n <= 37; n++)
			for (unsigned at = 0; at < n; at++)
				for (unsigned c = 0; c < sizeof(odd) / sizeof(odd[0]); c++) {
					fill(a, 37, 2.0f);
					a[at] = odd[c];
					int got = finite_all_f32_variant(a, n, avx2);
					assert_int_equal(got, finite_first(a, n, WIRE_F32) == n);
					assert_int_equal(got, isfinite(odd[c]) != 0);
				}
	assert_true(finite_all_f32(a, 0));
}

int main(void)
{
	(void)setup;        /* the fixture's, unused here: world 2 per policy */
	(void)install_key;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ps_skip__keeps_weights_and_says_so, setup_skip, teardown),
		cmocka_unit_test_setup_teardown(ps_abort__stops_the_job_naming_rank_and_key, setup_abort, teardown),
		cmocka_unit_test_setup_teardown(ps_pass__steps_anyway_but_counts, setup_pass, teardown),
		cmocka_unit_test_setup_teardown(ps_abort__overflowing_sum_names_no_rank, setup_abort, teardown),
		cmocka_unit_test_setup_teardown(ps_skip__f16_gradient_checked_as_sent, setup_skip, teardown),
		cmocka_unit_test(finite__all_f32_matches_scalar),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
