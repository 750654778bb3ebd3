/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_engine.c - the per-lcore aggregation engine: rounds, duplicates,
 * shadow copies, rank-ordered sums and every validation drop.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dataplane/engine.h"

#include "tests/unit/engine_fx.h"

/* Values whose float sum depends on the order of addition. */
static const float vals[4] = { 1e8f, 1.0f, -1e8f, 1.0f };

static void push__sum_is_rank_ordered_whatever_the_arrival(void **state)
{
	struct fx *f = *state;
	static const int orders[3][4] = { { 0, 1, 2, 3 }, { 3, 2, 1, 0 }, { 2, 0, 3, 1 } };
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	float expect = ((vals[0] + vals[1]) + vals[2]) + vals[3];

	for (int o = 0; o < 3; o++) {
		struct engine_out out;
		int rc = 0;
		for (int i = 0; i < 4; i++) {
			int r = orders[o][i];
			rc = push(f, push_hdr(f, (uint16_t)r, 7, 0, (uint32_t)o + 1, 1), &vals[r], &out);
			assert_int_equal(rc, i < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
		}
		float got;
		memcpy(&got, out.payload, sizeof(got));
		assert_memory_equal(&got, &expect, sizeof(got));
		assert_int_equal(out.hdr.type, WIRE_RESULT);
		assert_int_equal(out.hdr.round, (uint32_t)o + 1);
		assert_int_equal(out.hdr.count, 1);
	}
	assert_int_equal(f->e.c.completes, 3);
	assert_int_equal(f->e.c.pushes, 12);
}

static void push__duplicate_of_open_round_is_ignored(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float one = 1.0f, big = 1000.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);

	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 1, 1), &one, &out), ENGINE_ABSORBED);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 1, 1), &big, &out), ENGINE_ABSORBED);
	assert_int_equal(f->e.c.dup_open, 1);
	for (uint16_t r = 1; r < 4; r++)
		push(f, push_hdr(f, r, 7, 0, 1, 1), &one, &out);
	float got;
	memcpy(&got, out.payload, 4);
	assert_true(got == 4.0f); /* the duplicate's 1000 never counted */
}

static void push__duplicate_of_done_round_gets_shadow_copy(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float two = 2.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	for (uint16_t r = 0; r < 4; r++)
		push(f, push_hdr(f, r, 7, 0, 1, 1), &two, &out);

	struct wire_msg m = push_hdr(f, 2, 7, 0, 1, 1);
	m.flags = WIRE_FLAG_RETX;
	assert_int_equal(push(f, m, &two, &out), ENGINE_SEND_ONE);
	assert_int_equal(out.rank, 2);
	float got;
	memcpy(&got, out.payload, 4);
	assert_true(got == 8.0f);
	assert_int_equal(f->e.c.dup_done, 1);
	assert_int_equal(f->e.c.retx, 1);
	assert_int_equal(f->e.c.completes, 1);
}

static void push__round_zero_is_stale_and_skipping_is_future(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v = 1.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 0, 1), &v, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 2, 1), &v, &out), -DROP_FUTURE_ROUND);
}

static void push__round_zero_and_far_rounds_dropped(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v = 1.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 3, 1), &v, &out), -DROP_FUTURE_ROUND);
	for (uint32_t round = 1; round <= 2; round++)
		for (uint16_t r = 0; r < 4; r++)
			push(f, push_hdr(f, r, 7, 0, round, 1), &v, &out);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 1, 1), &v, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 4, 1), &v, &out), -DROP_FUTURE_ROUND);
}

/* A key in its second life (rounds 1..5 were its first's): the earlier
 * life's rounds are stale, even the last (no shadow copy of it here);
 * the new life starts at 6 and answers its own duplicates. */
static void push__earlier_lifes_rounds_are_stale(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v = 1.0f, got;
	uint8_t owners[1] = { 0 };
	size_t n = engine_key_mem_bytes(1, WIRE_F32, SEG_BYTES, 1);

	f->keymem[0] = aligned_alloc(64, (n + 63) & ~(size_t)63);
	memset(f->keymem[0], 0, n);
	struct engine_key *k = engine_key_init(f->keymem[0], 7, 1, WIRE_F32, SEG_BYTES, 1, owners);
	engine_key_set_round0(k, 5);
	struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job, .u.key = k };
	assert_int_equal(engine_apply(&f->e, &m), 0);

	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 1, 1), &v, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 5, 1), &v, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 7, 1), &v, &out), -DROP_FUTURE_ROUND);
	assert_int_equal(f->e.c.dup_done, 0);
	for (uint16_t r = 0; r < 4; r++)
		push(f, push_hdr(f, r, 7, 0, 6, 1), &v, &out);
	assert_int_equal(f->e.c.completes, 1);
	assert_int_equal(k->segs[0].done, 6);
	assert_int_equal(push(f, push_hdr(f, 1, 7, 0, 6, 1), &v, &out), ENGINE_SEND_ONE);
	memcpy(&got, out.payload, 4);
	assert_true(got == 4.0f);
	assert_int_equal(f->e.c.dup_done, 1);
	assert_int_equal(push(f, push_hdr(f, 1, 7, 0, 5, 1), &v, &out), -DROP_STALE_ROUND);
}

/* A key made again after a box restart (docs/protocol.md "Resuming after a
 * box restart"), round0 4: a FINAL push completes an open round with its
 * bytes (the contributions there are dropped, every rank is answered),
 * moves a segment with no round open up to its round, is acknowledged
 * with the result when repeated and with ERROR STALE when older; the next
 * round sums as usual. */
static void final__completes_open_round_jumps_and_acks(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v = 1.0f, res = 42.0f, got;
	struct engine_key *k = install_key(f, 0, 7, 1, WIRE_F32, -1);
	engine_key_set_round0(k, 4);

	/* round 5: ranks 1, 2 contribute, rank 0 holds its result */
	assert_int_equal(push(f, push_hdr(f, 1, 7, 0, 5, 1), &v, &out), ENGINE_ABSORBED);
	assert_int_equal(push(f, push_hdr(f, 2, 7, 0, 5, 1), &v, &out), ENGINE_ABSORBED);
	struct wire_msg m = push_hdr(f, 0, 7, 0, 6, 1);
	m.flags = WIRE_FLAG_FINAL;
	assert_int_equal(push(f, m, &res, &out), -DROP_FUTURE_ROUND);   /* 5 first */
	m.round = 5;
	assert_int_equal(push(f, m, &res, &out), ENGINE_SEND_ALL);
	memcpy(&got, out.payload, 4);
	assert_true(got == 42.0f);
	assert_int_equal(out.hdr.round, 5);
	assert_int_equal(k->segs[0].done, 5);
	assert_int_equal(f->e.c.finals, 2);
	/* rank 3's contribution to 5 is answered with the result */
	assert_int_equal(push(f, push_hdr(f, 3, 7, 0, 5, 1), &v, &out), ENGINE_SEND_ONE);
	memcpy(&got, out.payload, 4);
	assert_true(got == 42.0f);
	/* no round open: a FINAL of 6 moves the segment there */
	res = 7.0f;
	m.round = 6;
	assert_int_equal(push(f, m, &res, &out), ENGINE_SEND_ONE);
	assert_int_equal(k->segs[0].done, 6);
	assert_int_equal(push(f, m, &res, &out), ENGINE_SEND_ONE);       /* repeated: ack */
	m.round = 5;
	assert_int_equal(push(f, m, &res, &out), ENGINE_SEND_ERROR);     /* older: stale */
	assert_int_equal(out.hdr.status, WIRE_ST_STALE);
	/* round 7 sums as usual */
	for (uint16_t r = 0; r < 4; r++)
		push(f, push_hdr(f, r, 7, 0, 7, 1), &v, &out);
	memcpy(&got, out.payload, 4);
	assert_true(got == 4.0f);
	assert_int_equal(k->segs[0].done, 7);
}

/* FINAL pushes only where every rank gets the whole result: not a PS,
 * sparse or scatter key's, and with the segment's count. */
static void final__refused_where_it_cannot_apply(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[2] = { 1.0f, 1.0f };
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	struct wire_msg m = push_hdr(f, 0, 7, 0, 1, 2);
	m.flags = WIRE_FLAG_FINAL;
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_COUNT);
	m = push_hdr(f, 0, 7, 0, 1, 1);
	m.flags = WIRE_FLAG_FINAL | WIRE_FLAG_INIT;
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_FLAGS);
	/* round 0 (the key's start) is nobody's result */
	m.flags = WIRE_FLAG_FINAL;
	m.round = 0;
	assert_int_equal(push(f, m, v, &out), ENGINE_SEND_ERROR);
	assert_int_equal(out.hdr.status, WIRE_ST_STALE);
}

/* A job of 1,024 ranks (beyond one 64-bit word of bookkeeping): the sum
 * is exact and in rank order, a duplicate is ignored, a WAIT names the
 * missing ranks from the first missing one's word of 64 on (its base),
 * and the progress report and NACKs find ranks past 64. */
static void world__1024_ranks_sum_wait_and_progress(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	static struct engine_out outs[ENGINE_MAX_WORLD + 8];
	struct engine_progress p;
	float v;

	free(f->jobmem);
	f->e.jobs[engine_job_index(f->job)].state = ENGINE_JOB_FREE;
	install_job(f, 1024, 4);
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	for (uint16_t r = 0; r < 1024; r++) {
		if (r == 700 || r == 1023)
			continue;   /* the late ones */
		v = (float)r;
		struct wire_msg m = push_hdr(f, r, 7, 0, 1, 1);
		m.flags = WIRE_FLAG_NOTICE;
		assert_int_equal(push(f, m, &v, &out), ENGINE_ABSORBED);
	}
	/* rank 5 again: a WAIT naming 700 and 1023 (from 640: bit 60; 1023 is
	 * in another word) */
	struct wire_msg m = push_hdr(f, 5, 7, 0, 1, 1);
	m.flags = WIRE_FLAG_NOTICE;
	v = 1000.0f;
	assert_int_equal(push(f, m, &v, &out), ENGINE_SEND_NOTICE);
	assert_int_equal(out.notice.base, 640);
	assert_int_equal(out.notice.missing, 1ull << 60);
	assert_int_equal(engine_job_progress(&f->e, f->job, &p), 0);
	assert_int_equal(p.open, 1);
	assert_true(rankset_has(&p.missing, 700) && rankset_has(&p.missing, 1023));
	assert_int_equal(rankset_count(&p.missing, 1024), 2);
	assert_int_equal(rankset_count(&p.missing_all, 1024), 2);
	/* NACKs reach both once the round is old enough */
	f->e.now += 10 * ENGINE_NACK_BLIND * 1000000000ull;
	unsigned n = engine_tick(&f->e, outs, ENGINE_MAX_WORLD + 8), nacked = 0;
	for (unsigned i = 0; i < n; i++)
		nacked += outs[i].hdr.type == WIRE_NACK &&
			  (outs[i].rank == 700 || outs[i].rank == 1023);
	assert_int_equal(nacked, 0);   /* (they never said they understand NACKs) */
	v = 700.0f;
	assert_int_equal(push(f, push_hdr(f, 700, 7, 0, 1, 1), &v, &out), ENGINE_ABSORBED);
	v = 1023.0f;
	assert_int_equal(push(f, push_hdr(f, 1023, 7, 0, 1, 1), &v, &out), ENGINE_SEND_ALL);
	float got;
	memcpy(&got, out.payload, 4);
	float ordered = 0;   /* the rank-ordered float sum */
	for (uint16_t r = 0; r < 1024; r++)
		ordered += (float)r;
	assert_true(got == ordered);
	assert_int_equal(f->e.c.dup_open, 1);
}

static void push__validation_drops_each_reason(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[SEG_BYTES / 4] = { 0 };
	install_key(f, 0, 7, 100, WIRE_F32, 1); /* 64 elems/seg: 2 segs, seg 1 on lcore 1 */
	struct wire_msg m;

	m = push_hdr(f, 0, 7, 0, 1, 64); m.type = WIRE_RESULT;
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_TYPE);
	m = push_hdr(f, 0, 7, 0, 1, 64); m.job = f->job + ENGINE_MAX_JOBS;
	assert_int_equal(push(f, m, v, &out), -DROP_NO_JOB);
	m = push_hdr(f, 0, 7, 0, 1, 64); m.token ^= 1;
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_TOKEN);
	m = push_hdr(f, 0, 7, 0, 1, 64); m.rank = 4;
	assert_int_equal(engine_push(&f->e, &m, v, IP(0), PORT(0), &out), -DROP_BAD_RANK);
	m = push_hdr(f, 1, 7, 0, 1, 64);
	assert_int_equal(engine_push(&f->e, &m, v, IP(0), PORT(1), &out), -DROP_BAD_SOURCE);
	assert_int_equal(engine_push(&f->e, &m, v, IP(1), PORT(0), &out), -DROP_BAD_SOURCE);
	m = push_hdr(f, 0, 8, 0, 1, 64);
	assert_int_equal(push(f, m, v, &out), -DROP_NO_KEY);
	m = push_hdr(f, 0, 7, 0, 1, 64); m.dtype = WIRE_F16;
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_DTYPE);
	m = push_hdr(f, 0, 7, 2, 1, 36);
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_SEGMENT);
	m = push_hdr(f, 0, 7, 1, 1, 36);
	assert_int_equal(push(f, m, v, &out), -DROP_WRONG_LCORE);
	m = push_hdr(f, 0, 7, 0, 1, 63);
	assert_int_equal(push(f, m, v, &out), -DROP_BAD_COUNT);
	assert_int_equal(f->e.c.pushes, 0);
}

static void push__short_last_segment_on_its_lcore(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[36];
	for (int i = 0; i < 36; i++)
		v[i] = (float)i;
	struct engine_key *k = install_key(f, 0, 7, 100, WIRE_F32, 0);
	assert_int_equal(k->nsegs, 2);
	f->e.lcore = 1; /* now the engine owns segment 1 only... */
	assert_int_equal(push(f, push_hdr(f, 0, 7, 1, 1, 36), v, &out), -DROP_WRONG_LCORE);
	f->e.lcore = 0;
	for (uint16_t r = 0; r < 4; r++)
		push(f, push_hdr(f, r, 7, 1, 1, 36), v, &out);
	assert_int_equal(out.hdr.count, 36);
	const float *res = out.payload;
	for (int i = 0; i < 36; i++)
		assert_true(res[i] == 4.0f * (float)i);
}

static void push__pool_exhaustion_drops_no_slot(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[64] = { 0 };
	install_key(f, 0, 7, 64 * 10, WIRE_F32, -1); /* 10 segments, 8 slots */
	for (uint32_t s = 0; s < 8; s++)
		assert_int_equal(push(f, push_hdr(f, 0, 7, s, 1, 64), v, &out), ENGINE_ABSORBED);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 8, 1, 64), v, &out), -DROP_NO_SLOT);
	for (uint16_t r = 1; r < 4; r++) /* finish segment 0: frees a slot */
		push(f, push_hdr(f, r, 7, 0, 1, 64), v, &out);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 8, 1, 64), v, &out), ENGINE_ABSORBED);
}

static void push__f16_and_bf16_sum_with_one_rounding(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	install_key(f, 0, 1, 3, WIRE_F16, -1);
	install_key(f, 1, 2, 3, WIRE_BF16, -1);
	/* 1 + 2^-11 four times: fp32 accumulation keeps the small parts. */
	uint16_t h[3] = { float_to_half(1.0f), float_to_half(0.5f), float_to_half(-2.0f) };
	uint16_t b[3] = { float_to_bf16(1.5f), float_to_bf16(-0.25f), float_to_bf16(3.0f) };
	for (uint16_t r = 0; r < 4; r++) {
		struct wire_msg m = push_hdr(f, r, 1, 0, 1, 3);
		m.dtype = WIRE_F16;
		push(f, m, h, &out);
	}
	const uint16_t *rh = out.payload;
	assert_true(half_to_float(rh[0]) == 4.0f);
	assert_true(half_to_float(rh[1]) == 2.0f);
	assert_true(half_to_float(rh[2]) == -8.0f);
	for (uint16_t r = 0; r < 4; r++) {
		struct wire_msg m = push_hdr(f, r, 2, 0, 1, 3);
		m.dtype = WIRE_BF16;
		push(f, m, b, &out);
	}
	const uint16_t *rb = out.payload;
	assert_true(bf16_to_float(rb[0]) == 6.0f);
	assert_true(bf16_to_float(rb[1]) == -1.0f);
	assert_true(bf16_to_float(rb[2]) == 12.0f);
}

static void apply__abort_answers_error_then_remove_forgets(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v = 1.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	struct engine_msg a = { .type = ENGINE_MSG_JOB_ABORT, .job = f->job };
	assert_int_equal(engine_apply(&f->e, &a), 0);
	assert_int_equal(push(f, push_hdr(f, 3, 7, 0, 1, 1), &v, &out), ENGINE_SEND_ERROR);
	assert_int_equal(out.hdr.type, WIRE_ERROR);
	assert_int_equal(out.hdr.status, WIRE_ST_NO_JOB);
	assert_int_equal(out.rank, 3);
	/* a forged token still gets nothing back */
	struct wire_msg m = push_hdr(f, 3, 7, 0, 1, 1);
	m.token++;
	assert_int_equal(push(f, m, &v, &out), -DROP_BAD_TOKEN);
	struct engine_msg rm = { .type = ENGINE_MSG_JOB_REMOVE, .job = f->job };
	assert_int_equal(engine_apply(&f->e, &rm), 0);
	assert_int_equal(push(f, push_hdr(f, 3, 7, 0, 1, 1), &v, &out), -DROP_NO_JOB);
	assert_int_equal(engine_apply(&f->e, &rm), -ENOENT);
}

static void apply__bad_messages_rejected(void **state)
{
	struct fx *f = *state;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	struct engine_msg dup = { .type = ENGINE_MSG_JOB_INSTALL, .job = f->job,
		.u.desc = { .id = f->job, .world = 4, .seg_bytes = SEG_BYTES,
			    .mem = f->jobmem, .key_cap = 16, .nslots = 8 } };
	assert_int_equal(engine_apply(&f->e, &dup), -EEXIST);
	struct engine_msg w = { .type = ENGINE_MSG_WORKER_SET, .job = f->job,
		.u.worker = { .rank = 4 } };
	assert_int_equal(engine_apply(&f->e, &w), -EINVAL);
	struct engine_msg k = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job,
		.u.key = (struct engine_key *)f->keymem[0] };
	assert_int_equal(engine_apply(&f->e, &k), -EEXIST);
	struct engine_msg bad = { .type = 99, .job = f->job };
	assert_int_equal(engine_apply(&f->e, &bad), -EINVAL);
	struct engine_msg odd = dup;
	odd.u.desc.id = f->job + 1;
	odd.job = f->job + 1;
	odd.u.desc.key_cap = 12; /* not a power of two */
	assert_int_equal(engine_apply(&f->e, &odd), -EINVAL);
}

static void apply__key_table_full_is_enospc(void **state)
{
	struct fx *f = *state;
	uint8_t own = 0;
	static _Alignas(64) uint8_t mem[9][1024];
	int rc = 0;
	for (uint32_t i = 0; i < 9 && rc == 0; i++) {
		struct engine_key *k = engine_key_init(mem[i], 100 + i, 1, WIRE_F32,
						       SEG_BYTES, 1, &own);
		struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job, .u.key = k };
		rc = engine_apply(&f->e, &m);
		if (i < 8)
			assert_int_equal(rc, 0);
	}
	assert_int_equal(rc, -ENOSPC); /* key_cap 16 holds at most 8 keys */
}

static void progress__names_missing_ranks_of_open_rounds(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	struct engine_progress p;
	float v = 1.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	assert_int_equal(engine_job_progress(&f->e, f->job, &p), 0);
	assert_int_equal(p.open, 0);
	push(f, push_hdr(f, 0, 7, 0, 1, 1), &v, &out);
	push(f, push_hdr(f, 2, 7, 0, 1, 1), &v, &out);
	assert_int_equal(engine_job_progress(&f->e, f->job, &p), 0);
	assert_int_equal(p.open, 1);
	assert_int_equal(p.missing.w[0], 0xA); /* ranks 1 and 3 */
	assert_int_equal(p.key, 7);
	assert_int_equal(p.round, 1);
	assert_int_equal(p.completes, 0);
	push(f, push_hdr(f, 1, 7, 0, 1, 1), &v, &out);
	push(f, push_hdr(f, 3, 7, 0, 1, 1), &v, &out);
	assert_int_equal(engine_job_progress(&f->e, f->job, &p), 0);
	assert_int_equal(p.open, 0);
	assert_int_equal(p.missing.w[0], 0);
	assert_int_equal(p.completes, 1);
	assert_int_equal(engine_job_progress(&f->e, f->job + 1, &p), -ENOENT);
}

/* ---- held contributions (engine_push_ref) ---- */

/* A "packet": its payload at an odd 2-byte offset, as in an rx mbuf. */
struct pkt {
	int released;
	uint8_t bytes[2 + SEG_BYTES];
};

static struct pkt *released_log[64];
static int nreleased;

static void release_pkt(void *ctx, void *ref)
{
	struct pkt *p = ref;
	(*(int *)ctx)++;
	p->released++;
	released_log[nreleased++ % 64] = p;
}

static int push_ref(struct fx *f, struct wire_msg m, struct pkt *p, struct engine_out *out)
{
	return engine_push_ref(&f->e, &m, p->bytes + 2, p, IP(m.rank), PORT(m.rank), out);
}

static void hold__sum_exact_and_each_packet_released_once_at_completion(void **state)
{
	struct fx *f = *state;
	struct pkt pk[4] = { 0 };
	struct engine_out out;
	int calls = 0;
	const uint16_t n = 5;                  /* 5 floats, misaligned by 2 */

	engine_set_hold(&f->e, release_pkt, &calls);
	nreleased = 0;
	install_key(f, 0, 7, n, WIRE_F32, -1);
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < n; i++) {
			float v = vals[r] * (float)(i + 1);
			memcpy(pk[r].bytes + 2 + 4 * i, &v, 4);
		}
	static const int order[4] = { 2, 0, 3, 1 };
	for (int i = 0; i < 4; i++) {
		int r = order[i];
		int rc = push_ref(f, push_hdr(f, (uint16_t)r, 7, 0, 1, n), &pk[r], &out);
		assert_int_equal(rc, i < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
		assert_int_equal(out.held, 1);
		assert_int_equal(calls, i < 3 ? 0 : 4);  /* nothing given back early */
	}
	for (int r = 0; r < 4; r++)
		assert_int_equal(pk[r].released, 1);
	for (int i = 0; i < n; i++) {
		float got, expect = ((vals[0] * (float)(i + 1) + vals[1] * (float)(i + 1)) +
				     vals[2] * (float)(i + 1)) + vals[3] * (float)(i + 1);
		memcpy(&got, (const uint8_t *)out.payload + 4 * i, 4);
		assert_memory_equal(&got, &expect, 4);
	}
	assert_int_equal(f->e.c.held, 4);
	/* a retransmission of the done round is answered, not held */
	assert_int_equal(push_ref(f, push_hdr(f, 1, 7, 0, 1, n), &pk[1], &out), ENGINE_SEND_ONE);
	assert_int_equal(out.held, 0);
	engine_set_hold(&f->e, NULL, NULL);
}

static void hold__duplicate_not_held_and_abort_releases(void **state)
{
	struct fx *f = *state;
	struct pkt a = { 0 }, dup = { 0 }, b = { 0 };
	struct engine_out out;
	int calls = 0;

	engine_set_hold(&f->e, release_pkt, &calls);
	install_key(f, 0, 7, 4, WIRE_F32, -1);
	assert_int_equal(push_ref(f, push_hdr(f, 0, 7, 0, 1, 4), &a, &out), ENGINE_ABSORBED);
	assert_int_equal(out.held, 1);
	assert_int_equal(push_ref(f, push_hdr(f, 0, 7, 0, 1, 4), &dup, &out), ENGINE_ABSORBED);
	assert_int_equal(out.held, 0);        /* dup_open: the caller frees it */
	assert_int_equal(f->e.c.dup_open, 1);
	/* a drop is never held either */
	struct wire_msg bad = push_hdr(f, 1, 7, 0, 1, 4);
	bad.token ^= 1;
	assert_int_equal(push_ref(f, bad, &b, &out), -DROP_BAD_TOKEN);
	assert_int_equal(out.held, 0);
	assert_int_equal(push_ref(f, push_hdr(f, 1, 7, 0, 1, 4), &b, &out), ENGINE_ABSORBED);
	assert_int_equal(calls, 0);
	struct engine_msg ab = { .type = ENGINE_MSG_JOB_ABORT, .job = f->job };
	assert_int_equal(engine_apply(&f->e, &ab), 0);
	assert_int_equal(calls, 2);
	assert_int_equal(a.released, 1);
	assert_int_equal(b.released, 1);
	assert_int_equal(dup.released, 0);
	struct engine_msg rm = { .type = ENGINE_MSG_JOB_REMOVE, .job = f->job };
	assert_int_equal(engine_apply(&f->e, &rm), 0);
	assert_int_equal(calls, 2);           /* nothing released twice */
	engine_set_hold(&f->e, NULL, NULL);
}

static void hold__remove_releases_and_null_ref_copies(void **state)
{
	struct fx *f = *state;
	struct pkt a = { 0 }, b = { 0 };
	struct engine_out out;
	int calls = 0;

	engine_set_hold(&f->e, release_pkt, &calls);
	install_key(f, 0, 7, 4, WIRE_F32, -1);
	assert_int_equal(push_ref(f, push_hdr(f, 0, 7, 0, 1, 4), &a, &out), ENGINE_ABSORBED);
	/* no ref offered (the lcore is at its budget): copied, not held */
	struct wire_msg m = push_hdr(f, 1, 7, 0, 1, 4);
	assert_int_equal(engine_push_ref(&f->e, &m, b.bytes + 2, NULL, IP(1), PORT(1), &out),
			 ENGINE_ABSORBED);
	assert_int_equal(out.held, 0);
	memset(b.bytes, 0x7f, sizeof(b.bytes));   /* the copy must not change */
	struct engine_msg rm = { .type = ENGINE_MSG_JOB_REMOVE, .job = f->job };
	assert_int_equal(engine_apply(&f->e, &rm), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(a.released, 1);
	engine_set_hold(&f->e, NULL, NULL);
}

/* KEY_REMOVE: the key's open round gives back its slot and held packets,
 * the keys after it in its probe cluster stay reachable, and the key can
 * be installed afresh (docs/rpc.md "key_release"). */
static void apply__key_remove_keeps_cluster_and_frees_slots(void **state)
{
	struct fx *f = *state;
	struct pkt a = { 0 };
	struct engine_out out;
	uint32_t ks[3], n = 0;
	int calls = 0;
	float v[4] = { 1, 2, 3, 4 };

	/* three keys whose probes start at the same table entry (key_cap 16) */
	for (uint32_t k = 1; n < 3; k++)
		if (((k * 2654435761u) & 15) == ((1u * 2654435761u) & 15))
			ks[n++] = k;
	struct engine_key *kb = NULL;
	for (int i = 0; i < 3; i++) {
		struct engine_key *k = install_key(f, i, ks[i], 1, WIRE_F32, -1);
		if (i == 1)
			kb = k;
	}
	engine_set_hold(&f->e, release_pkt, &calls);
	struct engine_job *j = &f->e.jobs[engine_job_index(f->job)];
	uint32_t nfree = j->nfree;
	assert_int_equal(push_ref(f, push_hdr(f, 0, ks[1], 0, 1, 1), &a, &out), ENGINE_ABSORBED);
	assert_int_equal(j->nfree, nfree - 1);
	struct engine_msg rm = { .type = ENGINE_MSG_KEY_REMOVE, .job = f->job, .u.key = kb };
	assert_int_equal(engine_apply(&f->e, &rm), 0);
	assert_int_equal(calls, 1);             /* the held contribution went back */
	assert_int_equal(a.released, 1);
	assert_int_equal(j->nfree, nfree);
	assert_int_equal(j->nkeys, 2);
	assert_int_equal(engine_apply(&f->e, &rm), -ENOENT);
	engine_set_hold(&f->e, NULL, NULL);
	/* the others still complete; the removed one is unknown */
	for (int i = 0; i < 3; i += 2)
		for (int r = 0; r < 4; r++)
			assert_int_equal(push(f, push_hdr(f, (uint16_t)r, ks[i], 0, 1, 1), &v[r], &out),
					 r < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
	assert_int_equal(push(f, push_hdr(f, 0, ks[1], 0, 1, 1), &v[0], &out), -DROP_NO_KEY);
	/* installed again with another size, its rounds start over */
	install_key(f, 3, ks[1], 3, WIRE_F32, -1);
	float w[3] = { 1, 1, 1 };
	for (int r = 0; r < 4; r++)
		assert_int_equal(push(f, push_hdr(f, (uint16_t)r, ks[1], 0, 1, 3), w, &out),
				 r < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
	assert_int_equal(out.hdr.count, 3);
}

#define SEG_F32_R (SEG_BYTES / 4)

/* JOB_RESET (a rank was replaced): the job's open rounds give back their
 * slots and held packets; the segments owned here count as done up to the
 * new base, so a PUSH of an old round is stale and the rounds go on from
 * base + 1 with every rank's contribution again; a segment another lcore
 * owns is left to its own reset. */
static void apply__job_reset_drops_open_rounds_and_rebases(void **state)
{
	struct fx *f = *state;
	struct pkt a = { 0 };
	struct engine_out out;
	int calls = 0;
	float v[4] = { 1, 2, 3, 4 };

	/* 3 segments of SEG_F32_R floats; chunk 2 is lcore 1's */
	struct engine_key *k = install_key(f, 0, 9, 3 * SEG_F32_R, WIRE_F32, 2);
	struct engine_job *j = &f->e.jobs[engine_job_index(f->job)];
	uint32_t nfree = j->nfree;
	float seg[SEG_F32_R];
	for (int i = 0; i < (int)SEG_F32_R; i++)
		seg[i] = 1.0f;
	/* round 1 of segment 0 complete; round 2 of segment 0 open (rank 0
	 * held), round 1 of segment 1 open (ranks 1, 2) */
	for (int r = 0; r < 4; r++)
		push(f, push_hdr(f, (uint16_t)r, 9, 0, 1, SEG_F32_R), seg, &out);
	engine_set_hold(&f->e, release_pkt, &calls);
	assert_int_equal(push_ref(f, push_hdr(f, 0, 9, 0, 2, SEG_F32_R), &a, &out), ENGINE_ABSORBED);
	for (int r = 1; r < 3; r++)
		assert_int_equal(push(f, push_hdr(f, (uint16_t)r, 9, 1, 1, SEG_F32_R), seg, &out),
				 ENGINE_ABSORBED);
	assert_int_equal(j->nfree, nfree - 2);
	struct engine_msg m = { .type = ENGINE_MSG_JOB_RESET, .job = f->job, .u.round0 = 7 };
	assert_int_equal(engine_apply(&f->e, &m), 0);
	assert_int_equal(calls, 1);             /* the held contribution went back */
	assert_int_equal(a.released, 1);
	engine_set_hold(&f->e, NULL, NULL);
	assert_int_equal(j->nfree, nfree);
	assert_int_equal(k->segs[0].slot, ENGINE_NO_SLOT);
	assert_int_equal(k->segs[1].slot, ENGINE_NO_SLOT);
	/* the last done round is still answered (a rank's lost RESULT) */
	assert_int_equal(push(f, push_hdr(f, 2, 9, 0, 1, SEG_F32_R), seg, &out), ENGINE_SEND_ONE);
	/* dropped rounds never open again, nor any up to the base */
	assert_int_equal(push(f, push_hdr(f, 0, 9, 1, 1, SEG_F32_R), seg, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 9, 0, 2, SEG_F32_R), seg, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 9, 0, 7, SEG_F32_R), seg, &out), -DROP_STALE_ROUND);
	assert_int_equal(push(f, push_hdr(f, 0, 9, 0, 9, SEG_F32_R), seg, &out), -DROP_FUTURE_ROUND);
	/* round 8 takes every rank again and completes, on either segment */
	for (int r = 0; r < 4; r++) {
		float w[SEG_F32_R];
		for (int i = 0; i < (int)SEG_F32_R; i++)
			w[i] = v[r];
		assert_int_equal(push(f, push_hdr(f, (uint16_t)r, 9, 1, 8, SEG_F32_R), w, &out),
				 r < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
	}
	assert_int_equal(out.hdr.round, 8);
	assert_true(((const float *)out.payload)[0] == 10.0f);
	assert_int_equal(k->segs[1].done, 8);
	for (int r = 0; r < 4; r++)
		assert_int_equal(push(f, push_hdr(f, (uint16_t)r, 9, 0, 8, SEG_F32_R), seg, &out),
				 r < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
	assert_int_equal(push(f, push_hdr(f, 0, 9, 0, 9, SEG_F32_R), seg, &out), ENGINE_ABSORBED);
}

/* ---- recovery: WAIT, NACK, lateness, marks (docs/protocol.md) ---- */

#define SEG_F32 (SEG_BYTES / 4)

static struct wire_msg npush(struct fx *f, uint16_t rank, uint32_t key, uint32_t seg,
			     uint32_t round)
{
	struct wire_msg m = push_hdr(f, rank, key, seg, round, SEG_F32);
	m.flags = WIRE_FLAG_NOTICE;
	return m;
}

static void recovery__wait_answers_duplicate_of_open_round(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[SEG_F32] = { 0 };

	install_key(f, 0, 7, SEG_F32, WIRE_F32, -1);
	engine_clock(&f->e, 1000000);
	assert_int_equal(push(f, npush(f, 0, 7, 0, 1), v, &out), ENGINE_ABSORBED);
	assert_int_equal(push(f, npush(f, 1, 7, 0, 1), v, &out), ENGINE_ABSORBED);
	engine_clock(&f->e, 1004000);
	struct wire_msg d = npush(f, 0, 7, 0, 1);
	d.flags |= WIRE_FLAG_RETX;
	assert_int_equal(push(f, d, v, &out), ENGINE_SEND_NOTICE);
	assert_int_equal(out.hdr.type, WIRE_WAIT);
	assert_int_equal(out.rank, 0);
	assert_int_equal(out.hdr.count, 0);
	assert_int_equal(out.hdr.seg, 0);
	assert_int_equal(out.hdr.round, 1);
	assert_true(out.notice.missing == 0xC);
	assert_int_equal(out.notice.open_us, 4);
	assert_int_equal(f->e.c.waits, 1);
	/* a rank that did not say it understands notices gets silence */
	assert_int_equal(push(f, push_hdr(f, 1, 7, 0, 1, SEG_F32), v, &out), ENGINE_ABSORBED);
	assert_int_equal(f->e.c.dup_open, 2);
	assert_int_equal(f->e.c.waits, 1);
}

static unsigned tick_at(struct fx *f, uint64_t now, struct engine_out *outs, unsigned max)
{
	engine_clock(&f->e, now);
	return engine_tick(&f->e, outs, max);
}

static void recovery__nack_rank_seen_past_segment_then_blind(void **state)
{
	struct fx *f = *state;
	struct engine_out outs[64];
	float v[SEG_F32] = { 0 };
	uint64_t t0 = 5000000000ull;

	install_key(f, 0, 7, 3 * SEG_F32, WIRE_F32, -1);
	engine_clock(&f->e, t0);
	for (uint16_t r = 0; r < 3; r++)
		for (uint32_t s = 0; s < 2; s++)
			assert_int_equal(push(f, npush(f, r, 7, s, 1), v, &outs[0]), ENGINE_ABSORBED);
	/* rank 3 sends segment 1 (completing it) but its segment 0 is lost;
	 * flagged RETX, the round is no sample of the spread (NACK delay
	 * stays ENGINE_NACK_INIT_NS) */
	struct wire_msg r3 = npush(f, 3, 7, 1, 1);
	r3.flags |= WIRE_FLAG_RETX;
	assert_int_equal(push(f, r3, v, &outs[0]), ENGINE_SEND_ALL);
	/* rank 0 alone on segment 2: the others are only late */
	assert_int_equal(push(f, npush(f, 0, 7, 2, 1), v, &outs[0]), ENGINE_ABSORBED);

	assert_int_equal(tick_at(f, t0 + ENGINE_NACK_INIT_NS - 1, outs, 64), 0);
	assert_int_equal(tick_at(f, t0 + ENGINE_NACK_INIT_NS, outs, 64), 1);
	assert_int_equal(outs[0].hdr.type, WIRE_NACK);
	assert_int_equal(outs[0].rank, 3);
	assert_int_equal(outs[0].hdr.seg, 0);
	assert_true(outs[0].notice.missing == 0x8);
	assert_int_equal(outs[0].notice.open_us, ENGINE_NACK_INIT_NS / 1000);
	/* backed off: nothing again right away */
	assert_int_equal(tick_at(f, t0 + ENGINE_NACK_INIT_NS + 1000, outs, 64), 0);
	/* blind: ranks 1, 2, 3 never seen past segment 2 get theirs late */
	uint64_t blind = t0 + ENGINE_NACK_BLIND * ENGINE_NACK_INIT_NS;
	unsigned n = tick_at(f, blind, outs, 64);
	unsigned seg2 = 0;
	for (unsigned i = 0; i < n; i++)
		if (outs[i].hdr.seg == 2) {
			seg2++;
			assert_true(outs[i].rank >= 1 && outs[i].rank <= 3);
			assert_true(outs[i].notice.missing == 0xE);
		}
	assert_int_equal(seg2, 3);
	struct engine_lateness l;
	assert_int_equal(engine_rank_lateness(&f->e, f->job, 3, &l), 0);
	assert_true(l.nacks >= 2);
}

/* Ranks 3 ms apart, no loss: the NACK timer comes due at 1 ms and sends
 * nothing (nobody seen past, not yet blind), and the round is still a
 * sample of the spread: the delay learns it. A PUSH that was dropped
 * (a round not open yet) does not make its rank one to NACK: the lcore
 * learns a rank's address only from an accepted contribution. */
static void recovery__delay_learns_spread_beyond_first_timer(void **state)
{
	struct fx *f = *state;
	struct engine_out outs[64];
	float v[SEG_F32] = { 0 };
	uint64_t t0 = 7000000000ull;
	struct engine_job *j = &f->e.jobs[engine_job_index(f->job)];

	install_key(f, 0, 7, SEG_F32, WIRE_F32, -1);
	engine_clock(&f->e, t0);
	assert_int_equal(push(f, npush(f, 0, 7, 0, 1), v, &outs[0]), ENGINE_ABSORBED);
	assert_int_equal(tick_at(f, t0 + ENGINE_NACK_INIT_NS, outs, 64), 0);
	engine_clock(&f->e, t0 + 3000000);
	for (uint16_t r = 1; r < 3; r++)
		assert_int_equal(push(f, npush(f, r, 7, 0, 1), v, &outs[0]), ENGINE_ABSORBED);
	assert_int_equal(push(f, npush(f, 3, 7, 0, 1), v, &outs[0]), ENGINE_SEND_ALL);
	assert_true(j->nack_delay_ns > 3000000);

	/* round 2, opened by rank 0 without NOTICE; rank 3's PUSH of round 3
	 * is dropped: blind, no rank is NACKed (none had a PUSH accepted
	 * with NOTICE since) */
	for (uint16_t r = 0; r < 4; r++)
		j->ranks[r].notice = 0;   /* as a job whose ranks never sent */
	uint64_t t1 = t0 + 10000000;
	engine_clock(&f->e, t1);
	assert_int_equal(push(f, push_hdr(f, 0, 7, 0, 2, SEG_F32), v, &outs[0]), ENGINE_ABSORBED);
	assert_int_equal(push(f, npush(f, 3, 7, 0, 3), v, &outs[0]), -DROP_FUTURE_ROUND);
	assert_false(j->ranks[3].notice);
	assert_int_equal(tick_at(f, t1 + ENGINE_NACK_BLIND * j->nack_delay_ns, outs, 64), 0);
}

static void recovery__nacks_limited_per_rank(void **state)
{
	struct fx *f = *state;
	struct engine_out outs[ENGINE_MAX_WORLD + 8];
	float v[SEG_F32] = { 0 };
	uint64_t t0 = 1000000000ull;
	const uint32_t nsegs = 200;

	free(f->jobmem);
	memset(&f->e.jobs[engine_job_index(f->job)], 0, sizeof(f->e.jobs[0]));
	install_job(f, 2, 256);
	uint8_t owners[50] = { 0 };   /* 4 segments per chunk, all on lcore 0 */
	size_t kb = engine_key_mem_bytes((uint64_t)nsegs * SEG_F32, WIRE_F32, SEG_BYTES, 4);
	f->keymem[0] = aligned_alloc(64, (kb + 63) & ~(size_t)63);
	memset(f->keymem[0], 0, kb);
	struct engine_msg km = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job,
		.u.key = engine_key_init(f->keymem[0], 9, (uint64_t)nsegs * SEG_F32, WIRE_F32,
					 SEG_BYTES, 4, owners) };
	assert_int_equal(engine_apply(&f->e, &km), 0);
	engine_clock(&f->e, t0);
	assert_int_equal(push(f, npush(f, 1, 9, nsegs - 1, 1), v, &outs[0]), ENGINE_ABSORBED);
	for (uint32_t s = 0; s < nsegs - 1; s++)
		assert_int_equal(push(f, npush(f, 0, 9, s, 1), v, &outs[0]), ENGINE_ABSORBED);
	unsigned total = 0, n;
	engine_clock(&f->e, t0 + ENGINE_NACK_INIT_NS);
	while ((n = engine_tick(&f->e, outs, ENGINE_MAX_WORLD + 8)) > 0)
		total += n;
	assert_int_equal(total, ENGINE_NACK_BURST);
	assert_int_equal(f->e.c.nacks_limited, nsegs - 1 - ENGINE_NACK_BURST);
	/* tokens come back one per ENGINE_NACK_REFILL_NS */
	struct engine_lateness l;
	assert_int_equal(engine_rank_lateness(&f->e, f->job, 1, &l), 0);
	assert_int_equal(l.nacks, ENGINE_NACK_BURST);
}

static void recovery__lateness_per_rank(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[SEG_F32] = { 0 };
	struct engine_lateness l;

	install_key(f, 0, 7, SEG_F32, WIRE_F32, -1);
	for (uint16_t r = 0; r < 4; r++) {
		engine_clock(&f->e, 1000000 + (uint64_t)r * r * 1000);
		push(f, npush(f, r, 7, 0, 1), v, &out);
	}
	assert_int_equal(engine_rank_lateness(&f->e, f->job, 0, &l), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.sum_ns, 0);
	assert_int_equal(engine_rank_lateness(&f->e, f->job, 3, &l), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.sum_ns, 9000);
	assert_int_equal(l.max_ns, 9000);
	assert_int_equal(engine_rank_lateness(&f->e, f->job, 4, &l), -ENOENT);
	assert_int_equal(engine_rank_lateness(&f->e, f->job + 1, 0, &l), -ENOENT);
}

static void recovery__marks_only_when_congested_and_for_notice_ranks(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[SEG_F32] = { 0 };

	install_key(f, 0, 7, SEG_F32, WIRE_F32, -1);
	for (uint32_t round = 1; round <= 2; round++) {
		engine_set_congested(&f->e, round == 2);
		for (uint16_t r = 0; r < 4; r++) {
			struct wire_msg m = r == 3 ? push_hdr(f, r, 7, 0, round, SEG_F32)
						   : npush(f, r, 7, 0, round);
			push(f, m, v, &out);
		}
		assert_int_equal(out.hdr.type, WIRE_RESULT);
		assert_int_equal(!!(out.hdr.flags & WIRE_FLAG_CE), round == 2);
	}
	assert_int_equal(f->e.c.marks, 1);
	const struct engine_job *j = &f->e.jobs[engine_job_index(f->job)];
	assert_true(engine_rank_notice(j, 0));
	assert_false(engine_rank_notice(j, 3)); /* the box strips CE for it */
	/* weights: at most ENGINE_WEIGHT_MAX */
	struct engine_msg m = { .type = ENGINE_MSG_JOB_INSTALL, .job = 66,
		.u.desc = { .id = 66, .token = 1, .world = 1, .seg_bytes = SEG_BYTES,
			    .mem = f->jobmem, .key_cap = 16, .nslots = 1,
			    .weight = ENGINE_WEIGHT_MAX + 1 } };
	assert_int_equal(engine_apply(&f->e, &m), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(push__sum_is_rank_ordered_whatever_the_arrival, setup, teardown),
		cmocka_unit_test_setup_teardown(push__duplicate_of_open_round_is_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(push__duplicate_of_done_round_gets_shadow_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(push__round_zero_is_stale_and_skipping_is_future, setup, teardown),
		cmocka_unit_test_setup_teardown(push__round_zero_and_far_rounds_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(push__earlier_lifes_rounds_are_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(push__validation_drops_each_reason, setup, teardown),
		cmocka_unit_test_setup_teardown(push__short_last_segment_on_its_lcore, setup, teardown),
		cmocka_unit_test_setup_teardown(push__pool_exhaustion_drops_no_slot, setup, teardown),
		cmocka_unit_test_setup_teardown(push__f16_and_bf16_sum_with_one_rounding, setup, teardown),
		cmocka_unit_test_setup_teardown(apply__abort_answers_error_then_remove_forgets, setup, teardown),
		cmocka_unit_test_setup_teardown(apply__bad_messages_rejected, setup, teardown),
		cmocka_unit_test_setup_teardown(apply__key_table_full_is_enospc, setup, teardown),
		cmocka_unit_test_setup_teardown(progress__names_missing_ranks_of_open_rounds, setup, teardown),
		cmocka_unit_test_setup_teardown(hold__sum_exact_and_each_packet_released_once_at_completion, setup, teardown),
		cmocka_unit_test_setup_teardown(hold__duplicate_not_held_and_abort_releases, setup, teardown),
		cmocka_unit_test_setup_teardown(hold__remove_releases_and_null_ref_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(apply__job_reset_drops_open_rounds_and_rebases,
						setup, teardown),
		cmocka_unit_test_setup_teardown(apply__key_remove_keeps_cluster_and_frees_slots, setup, teardown),
		cmocka_unit_test_setup_teardown(recovery__wait_answers_duplicate_of_open_round, setup, teardown),
		cmocka_unit_test_setup_teardown(recovery__nack_rank_seen_past_segment_then_blind, setup, teardown),
		cmocka_unit_test_setup_teardown(recovery__delay_learns_spread_beyond_first_timer, setup, teardown),
		cmocka_unit_test_setup_teardown(recovery__nacks_limited_per_rank, setup, teardown),
		cmocka_unit_test_setup_teardown(recovery__lateness_per_rank, setup, teardown),
		cmocka_unit_test_setup_teardown(recovery__marks_only_when_congested_and_for_notice_ranks, setup, teardown),
		cmocka_unit_test_setup_teardown(final__completes_open_round_jumps_and_acks, setup, teardown),
		cmocka_unit_test_setup_teardown(final__refused_where_it_cannot_apply, setup, teardown),
		cmocka_unit_test_setup_teardown(world__1024_ranks_sum_wait_and_progress, setup, teardown),
	};
	return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
