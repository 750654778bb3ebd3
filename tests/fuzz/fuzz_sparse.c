/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_sparse.c - the engine's sparse keys (docs/protocol.md "Sparse
 * keys") driven by arbitrary sequences of sparse PUSHes, retransmissions
 * and ticks, checked against a reference model after every call.
 *
 * Each input starts from a fresh engine (lcore 0, scalar sums) with job 1
 * installed: world 3, seg_bytes 256, 6 slots, and three keys: key 5,
 * sparse f32, 200 elements (segments of 48: 5, the last of 8; segment 3
 * owned by lcore 1), key 6, sparse f16, 150 elements (segments of 96),
 * and key 7, dense f32 (sparse pushes to it are sparse_mismatch).
 *
 * A record of the input: first byte the operation (0-11 a PUSH, 12-13 a
 * tick, 14-15 abort then reinstall). A PUSH: rank, key selector, flags
 * (RETX, NOTICE, a header fault), round relative to the first record's
 * segment's last completed one, the number of records (1-4), then per
 * record a segment selector, a mode and a seed. Mode 0-5: a well-formed
 * record of a contribution at a density the mode sets (none, a few, half,
 * all: the smallest form), from small integers (exact sums) or, with the
 * seed's top bit, arbitrary bits (NaNs, infinities); mode 6: random body
 * bytes behind a plausible header; mode 7: a header fault (unknown form,
 * pad byte, n above the length).
 *
 * The model decides with the product's own record checks (common/sparse.h,
 * unit-tested in test_sparse.c) whether a packet is well formed, and keeps
 * per segment the rounds, the ranks in, each rank's dense contribution and
 * the last result. Checked: the packet's verdict (dropped and why, or not);
 * per record the answer the rules give (completed: a RESULT record to all,
 * equal bit for bit to the rank-ordered sum from +0 rounded once; a
 * duplicate of a completed round: the same record to the sender; of an
 * open one: a WAIT if the rank said NOTICE; stale, future, no_slot drops);
 * every RESULT packet within seg_bytes with valid records; the engine's
 * counters against the model's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/drops.h"
#include "common/sparse.h"
#include "common/sum.h"
#include "common/wire.h"
#include "dataplane/engine.h"

#define WORLD 3
#define SEG_BYTES 256
#define NSLOTS 6
#define TOKEN 0x5555aaaa5555aaaaull
#define NKEYS 3
#define MAXSEGS 5
#define MAXLEN 96
#define IP(r) (0x0A000001u + (r))
#define PORT(r) ((uint16_t)(7000 + (r)))

#include "tests/fuzz/fuzz_check.h"

struct kdef {
	uint32_t key;
	unsigned dtype;
	uint64_t count;
	int sparse;
	uint8_t owner[MAXSEGS];
};

static const struct kdef kdefs[NKEYS] = {
	{ 5, WIRE_F32, 200, 1, { 0, 0, 0, 1, 0 } },
	{ 6, WIRE_F16, 150, 1, { 0, 0 } },
	{ 7, WIRE_F32, 64, 0, { 0 } },
};

struct mseg {
	uint32_t done;
	int open;
	uint32_t round;
	uint64_t have;
	uint8_t contrib[WORLD][MAXLEN * 4]; /* each rank's, dense, the key's dtype */
	uint8_t result[MAXLEN * 4];         /* the last completed round's sum */
};

static struct {
	unsigned open;
	uint64_t pushes, completes;
	int notice[WORLD];
	struct mseg seg[NKEYS][MAXSEGS];
} M;

static struct engine eng;
static void *job_mem, *key_mem[NKEYS];
static size_t job_mem_len, key_mem_len[NKEYS];

struct in {
	const uint8_t *p;
	size_t n;
};

static uint8_t get8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static size_t esz_of(int k)
{
	return wire_dtype_size(kdefs[k].dtype);
}

static uint32_t elems_of(int k)
{
	return kdefs[k].sparse ? sparse_seg_elems(SEG_BYTES, esz_of(k))
			       : SEG_BYTES / (uint32_t)esz_of(k);
}

static uint32_t nsegs_of(int k)
{
	return (uint32_t)((kdefs[k].count + elems_of(k) - 1) / elems_of(k));
}

static uint32_t len_of(int k, uint32_t s)
{
	uint64_t left = kdefs[k].count - (uint64_t)s * elems_of(k);
	return left < elems_of(k) ? (uint32_t)left : elems_of(k);
}

static uint32_t model_len(const void *ctx, uint32_t s)
{
	int k = *(const int *)ctx;
	return s < nsegs_of(k) ? len_of(k, s) : 0;
}

static void *xalloc(size_t n)
{
	void *p = NULL;
	CHECK(posix_memalign(&p, 64, n) == 0);
	memset(p, 0, n);
	return p;
}

static void install(void)
{
	struct engine_msg m = { .type = ENGINE_MSG_JOB_INSTALL, .job = 1 };

	memset(job_mem, 0, job_mem_len);
	m.u.desc = (struct engine_job_desc){ .id = 1, .token = TOKEN, .world = WORLD,
		.seg_bytes = SEG_BYTES, .mem = job_mem, .key_cap = 8, .nslots = NSLOTS };
	CHECK(engine_apply(&eng, &m) == 0);
	for (unsigned r = 0; r < WORLD; r++) {
		struct engine_msg w = { .type = ENGINE_MSG_WORKER_SET, .job = 1 };
		w.u.worker.rank = (uint16_t)r;
		w.u.worker.ip = IP(r);
		w.u.worker.port = PORT(r);
		CHECK(engine_apply(&eng, &w) == 0);
	}
	for (int k = 0; k < NKEYS; k++) {
		const struct kdef *d = &kdefs[k];
		memset(key_mem[k], 0, key_mem_len[k]);
		struct engine_msg km = { .type = ENGINE_MSG_KEY_INSTALL, .job = 1 };
		km.u.key = d->sparse ? engine_sparse_key_init(key_mem[k], d->key, d->count,
							      d->dtype, SEG_BYTES, 1, d->owner)
				     : engine_key_init(key_mem[k], d->key, d->count, d->dtype,
						       SEG_BYTES, 1, d->owner);
		CHECK(km.u.key->nsegs == nsegs_of(k));
		CHECK(engine_apply(&eng, &km) == 0);
	}
	uint64_t pushes = M.pushes, completes = M.completes; /* the engine's count on */
	memset(&M, 0, sizeof(M));
	M.pushes = pushes;
	M.completes = completes;
}

static uint32_t rng(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* A record for segment s of key k at out (room: 2 x SEG_BYTES); its bytes. */
static size_t make_record(uint8_t *out, int k, uint32_t s, uint8_t mode, uint8_t seed)
{
	uint32_t len = s < nsegs_of(k) ? len_of(k, s) : elems_of(k);
	size_t esz = esz_of(k);
	uint32_t x = 0x9E3779B9u * (seed + 1u) + s;
	uint8_t vals[MAXLEN * 4];

	if (mode <= 5) {
		static const unsigned every[6] = { 0, 17, 5, 2, 1, 1 };
		memset(vals, 0, sizeof(vals));
		for (uint32_t i = 0; i < len; i++) {
			if (every[mode] == 0 || rng(&x) % every[mode])
				continue;
			uint32_t bits = rng(&x);
			if (!(seed & 0x80)) { /* a small integer, exact in every sum */
				float f = (float)((int)(bits % 9) - 4);
				if (esz == 4)
					memcpy(&bits, &f, 4);
				else
					bits = float_to_half(f);
			}
			memcpy(vals + i * esz, &bits, esz);
		}
		return sparse_encode_dense(out, s, vals, len, esz);
	}
	if (mode == 6 && (seed & 1)) {
		/* valid IDX of nearly every entry: larger than DENSE, which no
		 * sender picks; up to 2 x SEG_BYTES, past a rank's room in a slot */
		uint16_t n = (uint16_t)(len > seed % 4u ? len - seed % 4u : len);
		size_t vals_at = (2 * (size_t)n + 3) & ~(size_t)3;
		memset(out, 0, SPARSE_REC_HDR + vals_at);
		memcpy(out, &s, 4);
		memcpy(out + 4, &n, 2);
		out[6] = SPARSE_IDX;
		for (uint16_t i = 0; i < n; i++) {
			uint16_t idx = (uint16_t)(i + (len - n) * (i == n - 1u));
			memcpy(out + SPARSE_REC_HDR + 2 * (size_t)i, &idx, 2);
		}
		for (size_t i = 0; i < (size_t)n * esz; i++)
			out[SPARSE_REC_HDR + vals_at + i] = (uint8_t)(rng(&x) & 0x3F);
		return SPARSE_REC_HDR + vals_at + (size_t)n * esz;
	}
	/* a plausible header and random bytes */
	uint16_t n = (uint16_t)(rng(&x) % (len + 1));
	uint8_t form = (uint8_t)(rng(&x) % 3);
	size_t body = sparse_body_bytes(form, form == SPARSE_DENSE ? len : n, len, esz);
	if (body > SEG_BYTES - SPARSE_REC_HDR)
		body = SEG_BYTES - SPARSE_REC_HDR;
	memcpy(out, &s, 4);
	memcpy(out + 4, &n, 2);
	out[6] = form;
	out[7] = 0;
	for (size_t i = 0; i < body; i++)
		out[SPARSE_REC_HDR + i] = (uint8_t)rng(&x);
	if (mode == 7) { /* a header fault */
		switch (seed % 3) {
		case 0: out[6] = 3; break;
		case 1: out[7] = 1; break;
		default: n = (uint16_t)(len + 1); memcpy(out + 4, &n, 2); break;
		}
	}
	return SPARSE_REC_HDR + body;
}

/* The model's verdict for the whole packet: 0 (records applied one by
 * one) or a drop reason. */
static int model_packet(int k, const struct wire_msg *m, const uint8_t *pl)
{
	if (!kdefs[k].sparse)
		return -DROP_SPARSE_MISMATCH;
	if (m->arg || (m->flags & WIRE_FLAG_INIT))
		return -DROP_BAD_FLAGS;
	size_t left = m->plen;
	uint32_t prev = 0;
	for (unsigned i = 0; i < m->count; i++) {
		struct sparse_rec r;
		if (sparse_rec_parse(pl, left, esz_of(k), model_len, &k, &r) < 0 ||
		    (i == 0 ? r.seg != m->seg : r.seg <= prev) ||
		    sparse_rec_check(&r, len_of(k, r.seg), esz_of(k)) < 0)
			return -DROP_BAD_SPARSE;
		CHECK(r.bytes <= SEG_BYTES); /* an accepted record fits a rank's room */
		if (kdefs[k].owner[r.seg])
			return -DROP_WRONG_LCORE;
		prev = r.seg;
		pl += r.bytes;
		left -= r.bytes;
	}
	return left ? -DROP_BAD_SPARSE : 0;
}

/* The rank-ordered sum from +0 of segment sg's contributions, rounded. */
static void model_sum(int k, uint32_t len, struct mseg *sg, uint8_t *out)
{
	for (uint32_t i = 0; i < len; i++) {
		float acc = 0.0f;
		for (unsigned r = 0; r < WORLD; r++) {
			float v;
			if (esz_of(k) == 4) {
				memcpy(&v, sg->contrib[r] + i * 4, 4);
			} else {
				uint16_t h;
				memcpy(&h, sg->contrib[r] + i * 2, 2);
				v = half_to_float(h);
			}
			acc += v;
		}
		if (acc != acc) {
			uint32_t canon = 0x7fc00000u;
			memcpy(&acc, &canon, 4);
		}
		if (esz_of(k) == 4) {
			memcpy(out + i * 4, &acc, 4);
		} else {
			uint16_t h = float_to_half(acc);
			memcpy(out + i * 2, &h, 2);
		}
	}
}

/* What the engine answered for one PUSH, per segment. */
struct seen {
	int all[MAXSEGS], one[MAXSEGS], wait[MAXSEGS];
	unsigned drops[DROP_COUNT];
};

static void collect(int k, int v, const struct engine_out *out, struct seen *sn)
{
	if (v < 0) {
		sn->drops[-v]++;
		return;
	}
	if (v == ENGINE_SEND_NOTICE) {
		CHECK(out->hdr.type == WIRE_WAIT && out->hdr.seg < MAXSEGS);
		sn->wait[out->hdr.seg]++;
		return;
	}
	CHECK(v == ENGINE_SEND_ALL || v == ENGINE_SEND_ONE);
	CHECK(out->hdr.flags & WIRE_FLAG_SPARSE);
	CHECK(out->plen <= SEG_BYTES && out->hdr.count >= 1);
	const uint8_t *p = out->payload;
	size_t left = out->plen;
	for (unsigned i = 0; i < out->hdr.count; i++) {
		struct sparse_rec r;
		CHECK(sparse_rec_parse(p, left, esz_of(k), model_len, &k, &r) == 0);
		CHECK(sparse_rec_check(&r, len_of(k, r.seg), esz_of(k)) == 0);
		uint8_t dense[MAXLEN * 4];
		sparse_rec_scatter(dense, &r, esz_of(k), len_of(k, r.seg));
		/* the result is the model's last sum of that segment */
		CHECK(memcmp(dense, M.seg[k][r.seg].result, len_of(k, r.seg) * esz_of(k)) == 0);
		(v == ENGINE_SEND_ALL ? sn->all : sn->one)[r.seg]++;
		p += r.bytes;
		left -= r.bytes;
	}
	CHECK(left == 0);
}

static void op_push(struct in *in)
{
	uint8_t b0 = get8(in), ksel = get8(in) % NKEYS, fl = get8(in), rd = get8(in);
	unsigned rank = b0 % WORLD, nrec = get8(in) % 4 + 1;
	int k = ksel;
	uint8_t pl[SEG_BYTES * 9]; /* 4 records of at most 2 x SEG_BYTES */
	uint32_t segs[4];
	size_t used = 0;
	struct wire_msg m = { .type = WIRE_PUSH, .dtype = (uint8_t)kdefs[k].dtype,
			      .flags = (uint8_t)(WIRE_FLAG_SPARSE | (fl & 3)), .job = 1,
			      .rank = (uint16_t)rank, .token = TOKEN, .key = kdefs[k].key };

	for (unsigned i = 0; i < nrec; i++) {
		uint8_t ss = get8(in), mode = get8(in) % 8, seed = get8(in);
		segs[i] = ss % (nsegs_of(k) + 1); /* sometimes one past the end */
		used += make_record(pl + used, k, segs[i], mode, seed);
	}
	m.count = (uint16_t)nrec;
	m.seg = segs[0];
	m.plen = (uint32_t)used;
	if (fl & 0x80)
		m.seg++;              /* header fault: not the first record's */
	uint32_t base = segs[0] < MAXSEGS ? M.seg[k][segs[0]].done : 0;
	m.round = base + (uint32_t)(rd % 4) - 1; /* done-1 .. done+2 */

	struct engine_out out;
	int want = model_packet(k, &m, pl);
	int v = engine_push(&eng, &m, pl, IP(rank), PORT(rank), &out);
	if (want < 0) {
		CHECK(v == want);
		CHECK(engine_next(&eng, &out) == ENGINE_ABSORBED);
		return;
	}
	CHECK(v == ENGINE_ABSORBED);
	/* the model, record by record, before looking at the answers */
	struct seen sn;
	int expect_all[MAXSEGS] = { 0 }, expect_one[MAXSEGS] = { 0 }, expect_wait[MAXSEGS] = { 0 };
	unsigned expect_drops[DROP_COUNT] = { 0 };
	memset(&sn, 0, sizeof(sn));
	const uint8_t *p = pl;
	for (unsigned i = 0; i < nrec; i++) {
		struct sparse_rec r;
		CHECK(sparse_rec_parse(p, m.plen - (size_t)(p - pl), esz_of(k), model_len, &k, &r) == 0);
		p += r.bytes;
		struct mseg *sg = &M.seg[k][r.seg];
		uint32_t len = len_of(k, r.seg);
		if (m.round == sg->done && sg->done) {
			expect_one[r.seg]++;
			continue;
		}
		if (m.round != sg->done + 1) {
			expect_drops[m.round <= sg->done ? DROP_STALE_ROUND : DROP_FUTURE_ROUND]++;
			continue;
		}
		if (!sg->open) {
			if (M.open == NSLOTS) {
				expect_drops[DROP_NO_SLOT]++;
				continue;
			}
			sg->open = 1;
			sg->round = m.round;
			sg->have = 0;
			M.open++;
		}
		/* taken into an open round: the engine learns the flag */
		M.notice[rank] = (fl & WIRE_FLAG_NOTICE) != 0;
		if (sg->have >> rank & 1) {
			if (M.notice[rank])
				expect_wait[r.seg]++;
			continue;
		}
		sparse_rec_scatter(sg->contrib[rank], &r, esz_of(k), len);
		sg->have |= 1ull << rank;
		M.pushes++;
		if (sg->have == (1ull << WORLD) - 1) {
			model_sum(k, len, sg, sg->result);
			sg->done = m.round;
			sg->open = 0;
			M.open--;
			M.completes++;
			expect_all[r.seg]++;
		}
	}
	for (int a = 0; v != ENGINE_ABSORBED || a == 0; a++) {
		v = engine_next(&eng, &out);
		if (v != ENGINE_ABSORBED)
			collect(k, v, &out, &sn);
	}
	CHECK(memcmp(sn.all, expect_all, sizeof(expect_all)) == 0);
	CHECK(memcmp(sn.one, expect_one, sizeof(expect_one)) == 0);
	CHECK(memcmp(sn.wait, expect_wait, sizeof(expect_wait)) == 0);
	CHECK(memcmp(sn.drops, expect_drops, sizeof(expect_drops)) == 0);
}

static void op_tick(struct in *in)
{
	struct engine_out outs[64];
	engine_clock(&eng, eng.now + (uint64_t)(get8(in) + 1) * 1000000ull);
	unsigned n = engine_tick(&eng, outs, 64);
	for (unsigned i = 0; i < n; i++) {
		const struct wire_msg *h = &outs[i].hdr;
		CHECK(h->type == WIRE_NACK);
		int k = h->key == 5 ? 0 : h->key == 6 ? 1 : 2;
		CHECK(h->seg < MAXSEGS && M.seg[k][h->seg].open);
		CHECK(!(M.seg[k][h->seg].have >> outs[i].rank & 1) && M.notice[outs[i].rank]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct in in = { data, size };

	if (!ready) {
		job_mem_len = engine_job_mem_bytes(WORLD, SEG_BYTES, 8, NSLOTS);
		job_mem = xalloc(job_mem_len);
		for (int k = 0; k < NKEYS; k++) {
			key_mem_len[k] = kdefs[k].sparse
				? engine_sparse_mem_bytes(kdefs[k].count, kdefs[k].dtype, SEG_BYTES, 1)
				: engine_key_mem_bytes(kdefs[k].count, kdefs[k].dtype, SEG_BYTES, 1);
			key_mem[k] = xalloc(key_mem_len[k]);
		}
		ready = 1;
	}
	engine_init(&eng, 0, sum_by_name("scalar"));
	engine_clock(&eng, 1000000000ull);
	M.pushes = M.completes = 0;
	install();
	for (unsigned n = 0; in.n && n < 2048; n++) {
		uint8_t op = get8(&in) & 15;
		if (op <= 11) {
			op_push(&in);
		} else if (op <= 13) {
			op_tick(&in);
		} else {
			struct engine_msg rm = { .type = ENGINE_MSG_JOB_REMOVE, .job = 1 };
			CHECK(engine_apply(&eng, &rm) == 0);
			install();
		}
		CHECK(eng.c.pushes == M.pushes && eng.c.completes == M.completes);
		CHECK(eng.jobs[1].nfree == NSLOTS - M.open);
	}
	return 0;
}
