/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_engine_sparse.c - the engine's sparse keys (docs/protocol.md
 * "Sparse keys"): several records per packet, sums exact against a dense
 * reference (rank order from +0, one rounding) whatever the arrival order,
 * empty and full contributions, duplicates answered per record, and every
 * malformed record dropping the whole packet before anything is applied.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sparse.h"
#include "common/sum.h"
#include "tests/unit/engine_fx.h"

#define SE32 ((SEG_BYTES - 64) / 4)   /* 48 f32 elements per sparse segment */
#define NSEGS 6
#define COUNT ((int)(SE32 * (NSEGS - 1) + 7))

static struct engine_key *install_sparse(struct fx *f, int i, uint32_t key, uint64_t count,
					 unsigned dtype)
{
	uint8_t owners[64] = { 0 };
	size_t n = engine_sparse_mem_bytes(count, dtype, SEG_BYTES, 1);
	f->keymem[i] = aligned_alloc(64, (n + 63) & ~(size_t)63);
	memset(f->keymem[i], 0, n);
	struct engine_key *k = engine_sparse_key_init(f->keymem[i], key, count, dtype,
						      SEG_BYTES, 1, owners);
	struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = f->job, .u.key = k };
	assert_int_equal(engine_apply(&f->e, &m), 0);
	return k;
}

static uint32_t seglen(uint32_t s, uint32_t se, uint64_t count)
{
	uint64_t left = count - (uint64_t)s * se;
	return left < se ? (uint32_t)left : se;
}

/* Records of segments [s0, s1) of a dense contribution x (esz bytes per
 * element) at pkt; returns the payload bytes. */
static uint32_t build(uint8_t *pkt, const uint8_t *x, size_t esz, uint32_t se, uint64_t count,
		      uint32_t s0, uint32_t s1)
{
	uint32_t used = 0;
	for (uint32_t s = s0; s < s1; s++)
		used += (uint32_t)sparse_encode_dense(pkt + used, s, x + (size_t)s * se * esz,
						      seglen(s, se, count), esz);
	return used;
}

static struct wire_msg sparse_hdr(struct fx *f, uint16_t rank, uint32_t key, uint32_t seg,
				  uint32_t round, uint16_t nrec, uint32_t plen, unsigned dtype)
{
	struct wire_msg m = push_hdr(f, rank, key, seg, round, nrec);
	m.flags = WIRE_FLAG_SPARSE | WIRE_FLAG_NOTICE;
	m.plen = plen;
	m.dtype = (uint8_t)dtype;
	return m;
}

/* Everything one push answered: results scattered into res (dense), the
 * verdicts counted. */
struct answers {
	unsigned all, one, notice, drops, recs_all, recs_one;
	int last_drop;
};

static int push_all(struct fx *f, struct wire_msg m, const void *payload, uint8_t *res,
		    size_t esz, uint32_t se, uint64_t count, struct answers *a)
{
	struct engine_out out;
	int rc = push(f, m, payload, &out);
	if (rc < 0)
		return rc;
	do {
		if (rc < 0) {
			a->drops++;
			a->last_drop = rc;
		} else if (rc == ENGINE_SEND_NOTICE) {
			a->notice++;
			assert_int_equal(out.hdr.type, WIRE_WAIT);
		} else if (rc == ENGINE_SEND_ALL || rc == ENGINE_SEND_ONE) {
			assert_true(out.hdr.flags & WIRE_FLAG_SPARSE);
			assert_true(out.plen <= SEG_BYTES);
			const uint8_t *p = out.payload;
			size_t left = out.plen;
			for (unsigned i = 0; i < out.hdr.count; i++) {
				struct sparse_rec r;
				uint32_t seg;
				uint16_t n;
				uint8_t form;
				sparse_rec_header(p, &seg, &n, &form);
				r.seg = seg; r.n = n; r.form = form; r.body = p + SPARSE_REC_HDR;
				r.bytes = SPARSE_REC_HDR + (uint32_t)sparse_body_bytes(form, n,
							seglen(seg, se, count), esz);
				assert_true(r.bytes <= left);
				assert_int_equal(sparse_rec_check(&r, seglen(seg, se, count), esz), 0);
				if (i == 0)
					assert_int_equal(seg, out.hdr.seg);
				sparse_rec_scatter(res + (size_t)seg * se * esz, &r, esz,
						   seglen(seg, se, count));
				p += r.bytes;
				left -= r.bytes;
			}
			assert_int_equal(left, 0);
			if (rc == ENGINE_SEND_ALL) {
				a->all++;
				a->recs_all += out.hdr.count;
			} else {
				a->one++;
				a->recs_one += out.hdr.count;
			}
		}
	} while ((rc = engine_next(&f->e, &out)) != ENGINE_ABSORBED);
	return 0;
}

/* Dense contributions of 4 ranks: rank 0 empty, rank 1 full, the others
 * at about density d (values that depend on the order of addition). */
static void contributions(float x[4][COUNT], unsigned seed)
{
	srand(seed);
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < COUNT; i++) {
			float v = (float)(rand() % 2001 - 1000) * (rand() % 2 ? 1e7f : 1e-3f);
			int keep = r == 1 || (r > 1 && rand() % (r == 2 ? 10 : 3) == 0);
			x[r][i] = keep ? v : 0.0f;
		}
}

static void sparse__sum_exact_in_rank_order_whatever_the_arrival(void **state)
{
	struct fx *f = *state;
	static const int orders[3][4] = { { 0, 1, 2, 3 }, { 3, 2, 1, 0 }, { 2, 0, 3, 1 } };
	static float x[4][COUNT];
	uint8_t pkt[4][SEG_BYTES * NSEGS];
	install_sparse(f, 0, 9, COUNT, WIRE_F32);

	for (int o = 0; o < 3; o++) {
		float ref[COUNT], res[COUNT];
		struct answers a = { 0 };
		contributions(x, 100 + o);
		for (int i = 0; i < COUNT; i++) {
			float acc = 0.0f;
			for (int r = 0; r < 4; r++)
				acc += x[r][i];
			ref[i] = acc;
		}
		memset(res, 0xff, sizeof(res));
		for (int i = 0; i < 4; i++) {
			int r = orders[o][i];
			/* two packets per rank: segments 0-2 and 3-5 */
			for (uint32_t h = 0; h < 2; h++) {
				uint32_t plen = build(pkt[r], (const uint8_t *)x[r], 4, SE32, COUNT,
						      3 * h, 3 * h + 3);
				assert_int_equal(push_all(f, sparse_hdr(f, (uint16_t)r, 9, 3 * h,
					(uint32_t)o + 1, 3, plen, WIRE_F32), pkt[r], (uint8_t *)res, 4,
					SE32, COUNT, &a), 0);
			}
		}
		assert_int_equal(a.recs_all, NSEGS);
		/* rank 1's dense records fill a 256-byte packet each */
		assert_true(a.all >= 2 && a.all <= NSEGS);
		assert_memory_equal(res, ref, sizeof(ref));
	}
	assert_int_equal(f->e.c.completes, 3 * NSEGS);
	assert_int_equal(f->e.c.pushes, 3 * 4 * NSEGS);
}

static void sparse__f16_one_rounding_and_empty_round(void **state)
{
	struct fx *f = *state;
	uint16_t x[4][COUNT], res[COUNT], ref[COUNT];
	uint8_t pkt[SEG_BYTES * 12];
	uint32_t se = (SEG_BYTES - 64) / 2;
	uint32_t nsegs = (COUNT + se - 1) / se;
	struct answers a = { 0 };
	install_sparse(f, 0, 10, COUNT, WIRE_F16);

	srand(7);
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < COUNT; i++)
			x[r][i] = rand() % 4 == 0 ? float_to_half((float)(rand() % 200 - 100) / 7.0f) : 0;
	for (int i = 0; i < COUNT; i++) {
		float acc = 0.0f;
		for (int r = 0; r < 4; r++)
			acc += half_to_float(x[r][i]);
		ref[i] = float_to_half(acc);
	}
	for (int r = 0; r < 4; r++) {
		uint32_t plen = build(pkt, (const uint8_t *)x[r], 2, se, COUNT, 0, nsegs);
		assert_int_equal(push_all(f, sparse_hdr(f, (uint16_t)r, 10, 0, 1, (uint16_t)nsegs,
					  plen, WIRE_F16), pkt, (uint8_t *)res, 2, se, COUNT, &a), 0);
	}
	assert_memory_equal(res, ref, sizeof(ref));
	/* round 2: nobody has anything: every segment's sum is empty */
	memset(x, 0, sizeof(x));
	memset(res, 0x55, sizeof(res));
	for (int r = 0; r < 4; r++) {
		uint32_t plen = build(pkt, (const uint8_t *)x[r], 2, se, COUNT, 0, nsegs);
		assert_int_equal(plen, nsegs * SPARSE_REC_HDR);
		assert_int_equal(push_all(f, sparse_hdr(f, (uint16_t)r, 10, 0, 2, (uint16_t)nsegs,
					  plen, WIRE_F16), pkt, (uint8_t *)res, 2, se, COUNT, &a), 0);
	}
	for (int i = 0; i < COUNT; i++)
		assert_int_equal(res[i], 0);
}

static void sparse__duplicates_answered_per_record(void **state)
{
	struct fx *f = *state;
	static float x[4][COUNT];
	static float res[COUNT];
	uint8_t pkt[4][SEG_BYTES * NSEGS];
	uint32_t plen[4];
	struct answers a = { 0 };
	install_sparse(f, 0, 9, COUNT, WIRE_F32);
	contributions(x, 5);

	for (int r = 0; r < 4; r++)
		plen[r] = build(pkt[r], (const uint8_t *)x[r], 4, SE32, COUNT, 0, 4);
	for (int r = 0; r < 3; r++)
		push_all(f, sparse_hdr(f, (uint16_t)r, 9, 0, 1, 4, plen[r], WIRE_F32), pkt[r],
			 (uint8_t *)res, 4, SE32, COUNT, &a);
	/* rank 1 again while the rounds are open: a WAIT per record */
	push_all(f, sparse_hdr(f, 1, 9, 0, 1, 4, plen[1], WIRE_F32), pkt[1], (uint8_t *)res, 4,
		 SE32, COUNT, &a);
	assert_int_equal(a.notice, 4);
	assert_int_equal(f->e.c.dup_open, 4);
	push_all(f, sparse_hdr(f, 3, 9, 0, 1, 4, plen[3], WIRE_F32), pkt[3], (uint8_t *)res, 4,
		 SE32, COUNT, &a);
	assert_int_equal(a.recs_all, 4);
	/* rank 2 again after completion: its results from the shadow copies,
	 * packed into as few packets for it as they fit */
	push_all(f, sparse_hdr(f, 2, 9, 0, 1, 4, plen[2], WIRE_F32), pkt[2], (uint8_t *)res, 4,
		 SE32, COUNT, &a);
	assert_true(a.one >= 1 && a.one <= 4);
	assert_int_equal(a.recs_one, 4);
	assert_int_equal(f->e.c.dup_done, 4);
	/* a record of a round two ahead is dropped on its own */
	uint32_t p2 = build(pkt[0], (const uint8_t *)x[0], 4, SE32, COUNT, 4, 6);
	struct engine_out out;
	assert_int_equal(push(f, sparse_hdr(f, 0, 9, 4, 3, 2, p2, WIRE_F32), pkt[0], &out),
			 ENGINE_ABSORBED);
	assert_int_equal(engine_next(&f->e, &out), -DROP_FUTURE_ROUND);
	assert_int_equal(engine_next(&f->e, &out), -DROP_FUTURE_ROUND);
	assert_int_equal(engine_next(&f->e, &out), ENGINE_ABSORBED);
}

/* A congested lcore marks completed sparse rounds CE; marks counts rounds
 * (one per completed record), as the dense path's, not packets. */
static void sparse__marks_count_rounds(void **state)
{
	struct fx *f = *state;
	static float x[4][COUNT];
	uint8_t pkt[4][SEG_BYTES * NSEGS];
	uint32_t plen[4];
	struct engine_out out;
	unsigned ce_recs = 0;

	install_sparse(f, 0, 9, COUNT, WIRE_F32);
	contributions(x, 7);
	engine_set_congested(&f->e, 1);
	for (int r = 0; r < 4; r++)
		plen[r] = build(pkt[r], (const uint8_t *)x[r], 4, SE32, COUNT, 0, 3);
	for (int r = 0; r < 4; r++) {
		int rc = push(f, sparse_hdr(f, (uint16_t)r, 9, 0, 1, 3, plen[r], WIRE_F32), pkt[r],
			      &out);
		do {
			if (rc == ENGINE_SEND_ALL && (out.hdr.flags & WIRE_FLAG_CE))
				ce_recs += out.hdr.count;
		} while ((rc = engine_next(&f->e, &out)) != ENGINE_ABSORBED);
	}
	assert_int_equal(f->e.c.completes, 3);
	assert_int_equal(ce_recs, 3);
	assert_int_equal(f->e.c.marks, 3);
}

/* An IDX record by hand: n indices, then n f32 values. */
static uint32_t idx_rec(uint8_t *p, uint32_t seg, const uint16_t *idx, uint16_t n)
{
	memset(p, 0, 8 + 4 * (size_t)n + 4);
	memcpy(p, &seg, 4);
	memcpy(p + 4, &n, 2);
	memcpy(p + 8, idx, 2 * (size_t)n);
	size_t v = 8 + ((2 * (size_t)n + 3) & ~(size_t)3);
	for (uint16_t j = 0; j < n; j++) {
		float one = 1.0f;
		memcpy(p + v + 4 * j, &one, 4);
	}
	return (uint32_t)(v + 4 * (size_t)n);
}

static void sparse__bad_records_drop_the_whole_packet(void **state)
{
	struct fx *f = *state;
	uint8_t pkt[2 * SEG_BYTES];
	struct engine_out out;
	static const uint16_t unsorted[] = { 3, 1 }, repeated[] = { 2, 2 }, outside[] = { 48 },
			      good[] = { 1, 5 };
	install_sparse(f, 0, 9, COUNT, WIRE_F32);
	install_key(f, 1, 11, 100, WIRE_F32, -1);
	uint32_t n;

#define EXPECT_DROP(m, why) assert_int_equal(push(f, (m), pkt, &out), -(why))
	n = idx_rec(pkt, 0, unsorted, 2);
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	n = idx_rec(pkt, 0, repeated, 2);
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	n = idx_rec(pkt, 0, outside, 1);
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	n = idx_rec(pkt, 5, outside, 1); /* the short last segment has 7 elements */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 5, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	n = idx_rec(pkt, 0, good, 2);
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n + 4, WIRE_F32), DROP_BAD_SPARSE); /* trailing */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 2, n, WIRE_F32), DROP_BAD_SPARSE);     /* count */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 1, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);     /* hdr seg */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n - 4, WIRE_F32), DROP_BAD_SPARSE); /* overrun */
	pkt[7] = 1; /* the record's zero byte */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	pkt[7] = 0;
	pkt[6] = 3; /* unknown form */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	pkt[6] = SPARSE_DENSE; /* n (2) is not the segment's length */
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	/* a bitmap record whose bits disagree with n */
	memset(pkt, 0, sizeof(pkt));
	uint32_t bits = 0x5, seg = 0;
	uint16_t two = 3;
	memcpy(pkt, &seg, 4);
	memcpy(pkt + 4, &two, 2);
	pkt[6] = SPARSE_BITMAP;
	memcpy(pkt + 8, &bits, 4);
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, 8 + 8 + 12, WIRE_F32), DROP_BAD_SPARSE);
	/* an IDX record of every entry: valid indices, but 296 bytes where the
	 * DENSE form takes 200 and a rank's room in a slot is SEG_BYTES (256):
	 * dropped before anything is copied (it overran into the next rank's
	 * room before the bound) */
	{
		uint16_t all[SE32];
		for (unsigned i = 0; i < SE32; i++)
			all[i] = (uint16_t)i;
		n = idx_rec(pkt, 0, all, SE32);
		assert_true(n > SEG_BYTES);
		EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
		n = idx_rec(pkt, 0, all, 34); /* 212 bytes: still above DENSE */
		EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), DROP_BAD_SPARSE);
	}
	/* segments not increasing: the second record repeats segment 0 */
	n = idx_rec(pkt, 0, good, 2);
	uint32_t n2 = idx_rec(pkt + n, 0, good, 2);
	EXPECT_DROP(sparse_hdr(f, 0, 9, 0, 1, 2, n + n2, WIRE_F32), DROP_BAD_SPARSE);
	/* sparse to a dense key, dense to a sparse key */
	n = idx_rec(pkt, 0, good, 2);
	EXPECT_DROP(sparse_hdr(f, 0, 11, 0, 1, 1, n, WIRE_F32), DROP_SPARSE_MISMATCH);
	struct wire_msg d = push_hdr(f, 0, 9, 0, 1, SE32);
	EXPECT_DROP(d, DROP_SPARSE_MISMATCH);
#undef EXPECT_DROP
	assert_int_equal(f->e.c.pushes, 0);
	/* the good record goes in */
	n = idx_rec(pkt, 0, good, 2);
	assert_int_equal(push(f, sparse_hdr(f, 0, 9, 0, 1, 1, n, WIRE_F32), pkt, &out),
			 ENGINE_ABSORBED);
	assert_int_equal(engine_next(&f->e, &out), ENGINE_ABSORBED);
	assert_int_equal(f->e.c.pushes, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(sparse__sum_exact_in_rank_order_whatever_the_arrival, setup, teardown),
		cmocka_unit_test_setup_teardown(sparse__f16_one_rounding_and_empty_round, setup, teardown),
		cmocka_unit_test_setup_teardown(sparse__duplicates_answered_per_record, setup, teardown),
		cmocka_unit_test_setup_teardown(sparse__bad_records_drop_the_whole_packet, setup, teardown),
		cmocka_unit_test_setup_teardown(sparse__marks_count_rounds, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
