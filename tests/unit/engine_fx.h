/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_fx.h - the engine tests' fixture: one engine (lcore 0, scalar
 * kernels) with a job of `world` ranks at SEG_BYTES, keys installed from
 * heap memory, PUSH headers and pushes from each rank's address.
 * Included by test_engine.c and test_engine_sparse.c only.
 */
#ifndef PBOX_TESTS_ENGINE_FX_H
#define PBOX_TESTS_ENGINE_FX_H

#include <stdlib.h>
#include <string.h>

#include "dataplane/engine.h"

#define SEG_BYTES 256u
#define IP(r) (0xC6120002u + (r)) /* 198.18.0.2 + r */
#define PORT(r) (40000u + (r))

struct fx {
	struct engine e;
	void *jobmem;
	void *keymem[4];
	uint32_t job;
	uint64_t token;
	uint16_t world;
	uint8_t nonfinite;   /* the job's PS policy (enum engine_nonfinite) */
};

static void install_job(struct fx *f, uint16_t world, uint32_t nslots)
{
	size_t n = engine_job_mem_bytes(world, SEG_BYTES, 16, nslots);
	f->jobmem = aligned_alloc(64, (n + 63) & ~(size_t)63);
	memset(f->jobmem, 0, n);
	f->job = 65;
	f->token = 0x1122334455667788ull;
	f->world = world;
	struct engine_msg m = { .type = ENGINE_MSG_JOB_INSTALL, .job = f->job,
		.u.desc = { .id = f->job, .token = f->token, .world = world,
			    .seg_bytes = SEG_BYTES, .mem = f->jobmem, .key_cap = 16,
			    .nslots = nslots } };
	assert_int_equal(engine_apply(&f->e, &m), 0);
	struct engine_msg nf = { .type = ENGINE_MSG_JOB_NONFINITE, .job = f->job,
				 .u.nonfinite = f->nonfinite };
	assert_int_equal(engine_apply(&f->e, &nf), 0);
	for (uint16_t r = 0; r < world; r++) {
		struct engine_msg w = { .type = ENGINE_MSG_WORKER_SET, .job = f->job,
			.u.worker = { .rank = r, .ip = IP(r), .port = PORT(r) } };
		assert_int_equal(engine_apply(&f->e, &w), 0);
	}
}

/* Key with count elements; chunk owners: lcore 0 except chunk `other`. */
static struct engine_key *install_key(struct fx *f, int i, uint32_t key,
				      uint64_t count, unsigned dtype, int other)
{
	uint8_t owners[64] = { 0 };
	uint32_t nch = engine_key_nchunks(count, dtype, SEG_BYTES, 1);
	if (other >= 0 && (uint32_t)other < nch)
		owners[other] = 1;
	size_t n = engine_key_mem_bytes(count, dtype, SEG_BYTES, 1);
	f->keymem[i] = aligned_alloc(64, (n + 63) & ~(size_t)63);
	memset(f->keymem[i], 0, n);
	struct engine_key *k = engine_key_init(f->keymem[i], key, count, dtype,
					       SEG_BYTES, 1, owners);
	struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job, .u.key = k };
	assert_int_equal(engine_apply(&f->e, &m), 0);
	return k;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	engine_init(&f->e, 0, sum_by_name("scalar"));
	install_job(f, 4, 8);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	free(f->jobmem);
	for (int i = 0; i < 4; i++)
		free(f->keymem[i]);
	free(f);
	return 0;
}

static struct wire_msg push_hdr(struct fx *f, uint16_t rank, uint32_t key,
				uint32_t seg, uint32_t round, uint16_t count)
{
	return (struct wire_msg){ .type = WIRE_PUSH, .dtype = WIRE_F32, .job = f->job,
		.token = f->token, .rank = rank, .key = key, .seg = seg,
		.round = round, .count = count };
}

static int push(struct fx *f, struct wire_msg m, const void *payload,
		struct engine_out *out)
{
	return engine_push(&f->e, &m, payload, IP(m.rank), PORT(m.rank), out);
}

#endif
