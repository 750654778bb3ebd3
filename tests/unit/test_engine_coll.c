/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_engine_coll.c - the engine's collective keys (docs/protocol.md
 * "Collective keys"): a broadcast key takes its root's bytes as sent, the
 * others' 40-byte queries complete the round; an allgather key's slices,
 * each cut on its own, take their owners' bytes; a scatter key's sum goes
 * to the owner with header-only acknowledgements to the rest, and its
 * shadow copy answers a retransmission the same way; payloads from the
 * wrong ranks are dropped as bad_count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/engine_fx.h"

#define SEG_F32 (SEG_BYTES / 4) /* 64 f32 per segment */
#define SLICE   70              /* two segments per slice: 64 and 6 */

static struct engine_key *install_coll(struct fx *f, int i, uint32_t key, uint64_t count,
				       unsigned coll, uint16_t root, uint16_t nslices)
{
	uint8_t owners[64] = { 0 };
	size_t n = engine_coll_mem_bytes(count, WIRE_F32, SEG_BYTES, 1, nslices);
	f->keymem[i] = aligned_alloc(64, (n + 63) & ~(size_t)63);
	memset(f->keymem[i], 0, n);
	assert_true(engine_coll_nchunks(count, WIRE_F32, SEG_BYTES, 1, nslices) <= 64);
	struct engine_key *k = engine_coll_key_init(f->keymem[i], key, count, WIRE_F32, SEG_BYTES,
						    1, owners, coll, root, nslices);
	struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job, .u.key = k };
	assert_int_equal(engine_apply(&f->e, &m), 0);
	return k;
}

/* Rank r's bits for element i, with -0, a NaN payload and a denormal. */
static uint32_t bits(int r, size_t i)
{
	static const uint32_t special[] = { 0x80000000u, 0x7FC01234u, 0x00000001u };
	return i % 7 < 3 ? special[i % 7] : 0x3F800000u + (uint32_t)(r * 1000 + (int)i);
}

static void fill(uint32_t *v, int r, size_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = bits(r, first + i);
}

static void coll__broadcast_takes_the_roots_bytes(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	uint32_t v[SEG_F32];
	install_coll(f, 0, 9, 100, ENGINE_COLL_GATHER, 2, 1);
	assert_int_equal(engine_coll_nsegs(100, WIRE_F32, SEG_BYTES, 1), 2);

	for (uint32_t s = 0; s < 2; s++) {
		uint16_t len = s ? 36 : SEG_F32;
		fill(v, 2, s * SEG_F32, len);
		/* a payload from a non-root, or none from the root, is dropped */
		assert_int_equal(push(f, push_hdr(f, 0, 9, s, 1, len), v, &out), -DROP_BAD_COUNT);
		assert_int_equal(push(f, push_hdr(f, 2, 9, s, 1, 0), NULL, &out), -DROP_BAD_COUNT);
		assert_int_equal(push(f, push_hdr(f, 3, 9, s, 1, 0), NULL, &out), ENGINE_ABSORBED);
		assert_int_equal(push(f, push_hdr(f, 2, 9, s, 1, len), v, &out), ENGINE_ABSORBED);
		assert_int_equal(push(f, push_hdr(f, 0, 9, s, 1, 0), NULL, &out), ENGINE_ABSORBED);
		memset(v, 0xEE, sizeof(v)); /* the root's packet is gone: the copy counts */
		assert_int_equal(push(f, push_hdr(f, 1, 9, s, 1, 0), NULL, &out), ENGINE_SEND_ALL);
		assert_int_equal(out.hdr.count, len);
		assert_int_equal(out.plen, len * 4u);
		assert_int_equal(out.only, ENGINE_ONLY_NONE);
		fill(v, 2, s * SEG_F32, len);
		assert_memory_equal(out.payload, v, len * 4u);
	}
	/* a query of the completed round gets the root's bytes again */
	assert_int_equal(push(f, push_hdr(f, 3, 9, 1, 1, 0), NULL, &out), ENGINE_SEND_ONE);
	assert_int_equal(out.hdr.count, 36);
	assert_memory_equal(out.payload, v, 36 * 4);
	assert_int_equal(f->e.c.completes, 2);
}

static void coll__allgather_slices_cut_on_their_own(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	uint32_t v[SEG_F32];
	struct engine_key *k = install_coll(f, 0, 11, 4 * SLICE, ENGINE_COLL_GATHER, 0, 4);
	assert_int_equal(k->nsegs, 8);
	assert_int_equal(k->slice_segs, 2);

	for (uint32_t s = 0; s < 8; s++) {
		uint16_t owner = (uint16_t)(s / 2), len = s % 2 ? SLICE - SEG_F32 : SEG_F32;
		assert_int_equal(engine_seg_owner(k, s), owner);
		fill(v, owner, (s % 2) * SEG_F32, len);
		for (uint16_t r = 0; r < 4; r++) {
			uint16_t rr = (uint16_t)((r + s) % 4); /* arrival order varies */
			int rc = push(f, push_hdr(f, rr, 11, s, 1, rr == owner ? len : 0),
				      rr == owner ? v : NULL, &out);
			assert_int_equal(rc, r < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
		}
		assert_int_equal(out.hdr.count, len);
		assert_memory_equal(out.payload, v, len * 4u);
	}
	/* the full segment's length is refused where the slice ends short */
	fill(v, 0, 0, SEG_F32);
	assert_int_equal(push(f, push_hdr(f, 0, 11, 1, 2, SEG_F32), v, &out), -DROP_BAD_COUNT);
}

static void coll__scatter_sum_to_owner_acks_to_others(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float v[4][SEG_F32];
	install_coll(f, 0, 13, 4 * SLICE, ENGINE_COLL_SCATTER, 0, 4);

	for (uint32_t s = 0; s < 8; s++) {
		uint16_t len = s % 2 ? SLICE - SEG_F32 : SEG_F32;
		for (int r = 0; r < 4; r++)
			for (int i = 0; i < len; i++)
				v[r][i] = (float)(r + 1) * 1e7f + (float)(i * (int)s) * 0.1f;
		for (uint16_t r = 0; r < 4; r++) {
			uint16_t rr = (uint16_t)(3 - r);
			/* a scatter key wants every rank's data: a query is dropped */
			assert_int_equal(push(f, push_hdr(f, rr, 13, s, 1, 0), NULL, &out),
					 -DROP_BAD_COUNT);
			int rc = push(f, push_hdr(f, rr, 13, s, 1, len), v[rr], &out);
			assert_int_equal(rc, r < 3 ? ENGINE_ABSORBED : ENGINE_SEND_ALL);
		}
		assert_int_equal(out.only, s / 2);
		assert_int_equal(out.hdr.count, len);
		for (int i = 0; i < len; i++) {
			float want = ((v[0][i] + v[1][i]) + v[2][i]) + v[3][i], got;
			memcpy(&got, (const uint8_t *)out.payload + 4 * i, 4);
			assert_memory_equal(&got, &want, 4);
		}
		/* retransmissions: the owner gets the sum, the others an ack */
		uint16_t owner = (uint16_t)(s / 2), other = (uint16_t)((owner + 1) % 4);
		assert_int_equal(push(f, push_hdr(f, owner, 13, s, 1, len), v[owner], &out),
				 ENGINE_SEND_ONE);
		assert_int_equal(out.hdr.count, len);
		assert_int_equal(out.plen, len * 4u);
		assert_int_equal(push(f, push_hdr(f, other, 13, s, 1, len), v[other], &out),
				 ENGINE_SEND_ONE);
		assert_int_equal(out.hdr.count, 0);
		assert_int_equal(out.plen, 0);
	}
	assert_int_equal(f->e.c.completes, 8);
	assert_int_equal(f->e.c.dup_done, 16);
}

static void coll__plain_key_answers_everyone(void **state)
{
	struct fx *f = *state;
	struct engine_out out;
	float one = 1.0f;
	install_key(f, 0, 7, 1, WIRE_F32, -1);
	for (uint16_t r = 0; r < 4; r++)
		push(f, push_hdr(f, r, 7, 0, 1, 1), &one, &out);
	assert_int_equal(out.only, ENGINE_ONLY_NONE);
	assert_int_equal(push(f, push_hdr(f, 1, 7, 0, 1, 1), &one, &out), ENGINE_SEND_ONE);
	assert_int_equal(out.hdr.count, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(coll__broadcast_takes_the_roots_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(coll__allgather_slices_cut_on_their_own, setup, teardown),
		cmocka_unit_test_setup_teardown(coll__scatter_sum_to_owner_acks_to_others, setup, teardown),
		cmocka_unit_test_setup_teardown(coll__plain_key_answers_everyone, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
