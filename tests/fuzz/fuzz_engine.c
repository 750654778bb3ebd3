/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_engine.c - one lcore's aggregation engine (dataplane/engine.c)
 * driven by arbitrary sequences of PUSHes and control messages, checked
 * against a reference model after every call.
 *
 * Pushes whose record says so offer their payload by reference
 * (engine_push_ref, hold mode): the payload block is then freed only by
 * the engine's release, so ASan/LSan see any early, double or missing
 * release; after the last record the job is removed and every held
 * payload must have come back.
 *
 * Each input starts from a fresh engine (lcore 0, "scalar" sums) with job
 * 1 installed: world 4, seg_bytes 256, 8 slots, ranks registered at
 * 10.0.0.(r+1):(5000+r), and two keys: key 7, f32, 300 elements (5
 * segments, the last of 44; 2 segments per chunk, chunk 1 = segments 2-3
 * owned by lcore 1) and key 0x80000001, f16, 1153 elements (10 segments,
 * the last of 1, all on lcore 0: more open rounds than slots are
 * possible). Job and key memory are exact-size heap blocks, so ASan sees
 * any access outside them.
 *
 * The input is a sequence of records. First byte: the operation (0-9
 * PUSH, 10 advance the clock and tick, 11 WORKER_SET, 12 JOB_ABORT, 13
 * JOB_REMOVE, 14 reinstall the job under a new generation id, 15 install
 * a duplicate key, or, if the next byte is odd, KEY_REMOVE of key
 * (byte >> 1) % NKEYS and install it again in fresh memory: its rounds
 * go on above the highest its segments may have opened (last completed
 * + 1), as the control plane numbers a key declared again,
 * engine_key_set_round0). A PUSH record
 * has 6 more bytes: rank and faults (wrong source address/port, token,
 * job id, type), key selector (key A, key B,
 * unknown key, wrong dtype), RETX and NOTICE, segment (or one past / far
 * past the end), round relative to the segment's last completed one,
 * count variant, payload seed. A tick record has one: the time to advance
 * (100 us steps) and whether the lcore is congested from now on.
 *
 * Key 0x70 is a PS key (docs/protocol.md "PS keys": plain SGD on the sum,
 * f32, 100 elements in 2 segments): PUSH records may set INIT and a
 * learning rate (multiples of 1/4, or NaN, -1); the model checks the
 * init round (rank 0's weights, count 0 from the others), ERROR
 * NO_WEIGHTS for a gradient before them, bad_arg, and that every
 * completed round's RESULT holds the weights with exactly one update
 * w += -lr * sum applied (rank 0's lr; small integer payloads keep the
 * fp32 arithmetic exact), whatever duplicates and retransmissions come.
 *
 * Keys 0x60 and 0x61 are collective keys (docs/protocol.md "Collective
 * keys"), f32, 4 slices of 70 elements (8 segments of 64 and 6, 2 per
 * chunk, chunk 2 on lcore 1): 0x60 an allgather key (a gather key: the
 * segment's owner sends its data, the others count 0; every rank gets
 * the owner's bytes exactly), 0x61 a reduce_scatter key (all send; the
 * sum goes to the owner, a header with count 0 to the others, also when
 * answered from the shadow copy). PUSH records reach them through the PS
 * selector and two bits of the count byte.
 *
 * Recovery (docs/protocol.md "Recovery"): a duplicate of an open round
 * from a rank that says NOTICE must be a WAIT naming exactly the missing
 * ranks; a completed round is marked CE only while congested; every NACK a tick emits names an open round,
 * goes to a rank missing from it whose last push said NOTICE, and names
 * the missing ranks.
 *
 * Checked after every call: the verdict or drop reason equals the model's
 * (which follows the order of checks in engine.h/docs/protocol.md);
 * SEND_ALL / SEND_ONE payloads point at the segment's shadow copy inside
 * the key's result area with the segment's count, and a completed round's
 * shadow copy is the rank-ordered sum (scalar kernel) of what was pushed;
 * completes <= pushes / world; nfree == nslots - open rounds <= nslots;
 * engine_job_progress agrees with the model.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/drops.h"
#include "dataplane/engine.h"
#include "common/sum.h"
#include "common/wire.h"

#define WORLD 4
#define SEG_BYTES 256
#define NSLOTS 8
#define KEY_CAP 16
#define TOKEN 0x1122334455667788ull
#define NKEYS 5
#define PSK 2          /* kdefs[PSK] is a PS key */
#define GATK 3         /* kdefs[GATK]: an allgather key */
#define SCAK 4         /* kdefs[SCAK]: a reduce_scatter key */
#define SLICES 4
#define SLICE 70
#define MAXSEGS 16
#define IP(r) (0x0A000001u + (r))
#define PORT(r) ((uint16_t)(5000 + (r)))

#include "tests/fuzz/fuzz_check.h"

struct kdef {
	uint32_t key;
	unsigned dtype;
	uint64_t count;
	uint32_t segs_per_chunk;
	uint8_t owner[8];
};

static const struct kdef kdefs[NKEYS] = {
	{ 7, WIRE_F32, 300, 2, { 0, 1, 0 } },
	{ 0x80000001u, WIRE_F16, 1153, 2, { 0, 0, 0, 0, 0 } },
	{ 0x70, WIRE_F32, 100, 1, { 0, 0 } },   /* PS: plain SGD on the sum */
	{ 0x60, WIRE_F32, SLICES * SLICE, 2, { 0, 0, 1, 0 } },  /* allgather */
	{ 0x61, WIRE_F32, SLICES * SLICE, 2, { 0, 0, 1, 0 } },  /* reduce_scatter */
};
static const struct optim_params ps_opt = { .kind = OPTIM_SGD };

struct mseg {
	uint32_t done;
	int open;
	uint32_t round;
	uint64_t have;
	float lr;              /* PS: rank 0's learning rate of the open round */
	uint8_t data[WORLD][SEG_BYTES];
};

struct model {
	int state;             /* enum engine_job_state */
	uint32_t id;
	unsigned gen;
	unsigned open;         /* rounds holding a slot */
	uint64_t pushes;       /* accepted since install */
	uint64_t completes;    /* since install */
	uint32_t wip[WORLD];
	uint16_t wport[WORLD];
	int notice[WORLD];     /* the rank's last push that got past the checks */
	int congested;
	uint64_t now;
	struct mseg seg[NKEYS][MAXSEGS];
	uint32_t round0[NKEYS]; /* rounds of the key's earlier lives */
	float w[SEG_BYTES / 4 * MAXSEGS]; /* the PS key's weights */
};

static struct engine eng;
/* Held payloads (engine_push_ref): each push's payload is its own heap
 * block, offered by reference when the input says so; the release frees
 * it, so ASan catches a use after release and LSan one never released. */
static uint64_t n_held, n_released;

static void release_payload(void *ctx, void *ref)
{
	(void)ctx;
	n_released++;
	free(ref);
}
static struct model M;
static void *job_mem;
static size_t job_mem_len;
static void *key_mem[NKEYS];
static size_t key_mem_len[NKEYS];
static struct engine_key *keys[NKEYS];
static const struct sum_kernels *scalar;

struct in {
	const uint8_t *p;
	size_t n;
};

static int more(const struct in *in)
{
	return in->n > 0;
}

static uint8_t get8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static void *xalloc(size_t n)
{
	void *p = NULL;
	CHECK(posix_memalign(&p, 64, n) == 0);
	memset(p, 0, n);
	return p;
}

static int is_coll(int k)
{
	return k == GATK || k == SCAK;
}

static uint32_t nsegs_of(int k)
{
	if (is_coll(k))
		return engine_coll_nsegs(kdefs[k].count, kdefs[k].dtype, SEG_BYTES, SLICES);
	return engine_key_nsegs(kdefs[k].count, kdefs[k].dtype, SEG_BYTES);
}

static uint32_t seg_elems_of(int k)
{
	return SEG_BYTES / (uint32_t)wire_dtype_size(kdefs[k].dtype);
}

static uint16_t seg_count(int k, uint32_t seg)
{
	uint32_t per = (SLICE + seg_elems_of(k) - 1) / seg_elems_of(k);
	uint64_t first = is_coll(k) ? (uint64_t)(seg % per) * seg_elems_of(k)
				    : (uint64_t)seg * seg_elems_of(k);
	uint64_t left = (is_coll(k) ? SLICE : kdefs[k].count) - first;
	return (uint16_t)(left < seg_elems_of(k) ? left : seg_elems_of(k));
}

/* The rank owning segment seg of a collective key (its slice's). */
static unsigned seg_owner(int k, uint32_t seg)
{
	return seg / ((SLICE + seg_elems_of(k) - 1) / seg_elems_of(k));
}

/* Install job M.id with fresh memory, register ranks, install keys. */
/* Key k afresh in zeroed memory, installed on the engine. */
static void install_key(int k)
{
	const struct kdef *d = &kdefs[k];

	memset(key_mem[k], 0, key_mem_len[k]);
	if (is_coll(k))
		keys[k] = engine_coll_key_init(key_mem[k], d->key, d->count, d->dtype,
					       SEG_BYTES, d->segs_per_chunk, d->owner,
					       k == GATK ? ENGINE_COLL_GATHER
							 : ENGINE_COLL_SCATTER, 0, SLICES);
	else
		keys[k] = engine_key_init(key_mem[k], d->key, d->count, d->dtype, SEG_BYTES,
					  d->segs_per_chunk, d->owner);
	engine_key_set_round0(keys[k], M.round0[k]);
	for (uint32_t s = 0; s < MAXSEGS; s++)
		M.seg[k][s].done = M.round0[k];
	if (k == PSK)
		engine_ps_init((uint8_t *)key_mem[k] + engine_key_mem_bytes(d->count,
				d->dtype, SEG_BYTES, d->segs_per_chunk),
			       keys[k], &ps_opt, WIRE_F32, WIRE_F32, 0);
	struct engine_msg km = { .type = ENGINE_MSG_KEY_INSTALL, .job = M.id };
	km.u.key = keys[k];
	CHECK(engine_apply(&eng, &km) == 0);
}

static void install(void)
{
	struct engine_msg m = { .type = ENGINE_MSG_JOB_INSTALL };

	memset(job_mem, 0, job_mem_len);
	m.u.desc = (struct engine_job_desc){
		.id = M.id, .token = TOKEN, .world = WORLD, .seg_bytes = SEG_BYTES,
		.mem = job_mem, .key_cap = KEY_CAP, .nslots = NSLOTS,
	};
	CHECK(engine_apply(&eng, &m) == 0);
	for (unsigned r = 0; r < WORLD; r++) {
		struct engine_msg w = { .type = ENGINE_MSG_WORKER_SET, .job = M.id };
		w.u.worker.rank = (uint16_t)r;
		w.u.worker.ip = IP(r);
		w.u.worker.port = PORT(r);
		CHECK(engine_apply(&eng, &w) == 0);
		M.wip[r] = IP(r);
		M.wport[r] = PORT(r);
	}
	memset(M.seg, 0, sizeof(M.seg));
	memset(M.round0, 0, sizeof(M.round0)); /* a new job's keys start at 1 */
	for (int k = 0; k < NKEYS; k++)
		install_key(k);
	M.state = ENGINE_JOB_ACTIVE;
	memset(M.notice, 0, sizeof(M.notice));
	M.open = 0;
	M.pushes = 0;
	M.completes = 0;
	memset(M.w, 0, sizeof(M.w));
}

static void fill_payload(uint8_t *p, size_t n, uint8_t seed, unsigned rank)
{
	uint32_t x = 0x9E3779B9u * (seed + 1u) ^ (rank * 0x85EBCA6Bu);
	/* only a segment's worth is ever read; the rest of an over-long
	 * payload (count 0xFFFF) stays a cheap memset */
	if (n > SEG_BYTES) {
		memset(p + SEG_BYTES, seed, n - SEG_BYTES);
		n = SEG_BYTES;
	}
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
	/* mostly finite small numbers, with the odd NaN/Inf from the bits */
	if (seed & 1)
		for (size_t i = 1; i < n; i += 2)
			p[i] &= 0x3F;
}

static bool model_taken; /* the last model_push reached an open round */

static int model_push(const struct wire_msg *m, int kidx, uint32_t src_ip,
		      uint16_t src_port, uint16_t *cnt)
{
	model_taken = false;
	if (m->type != WIRE_PUSH)
		return -DROP_BAD_TYPE;
	if (M.state == ENGINE_JOB_FREE || m->job != M.id)
		return -DROP_NO_JOB;
	if (m->token != TOKEN)
		return -DROP_BAD_TOKEN;
	if (m->rank >= WORLD)
		return -DROP_BAD_RANK;
	if (M.wip[m->rank] != src_ip || M.wport[m->rank] != src_port || M.wip[m->rank] == 0)
		return -DROP_BAD_SOURCE;
	if (M.state == ENGINE_JOB_ABORTED)
		return ENGINE_SEND_ERROR;
	if (kidx < 0)
		return -DROP_NO_KEY;
	if (kidx != PSK && m->dtype != kdefs[kidx].dtype)
		return -DROP_BAD_DTYPE;
	if (m->seg >= nsegs_of(kidx))
		return -DROP_BAD_SEGMENT;
	if (kdefs[kidx].owner[m->seg / kdefs[kidx].segs_per_chunk] != 0)
		return -DROP_WRONG_LCORE;
	*cnt = seg_count(kidx, m->seg);
	if (kidx == PSK) { /* docs/protocol.md "PS keys" */
		int init = (m->flags & WIRE_FLAG_INIT) != 0;
		float lr;
		memcpy(&lr, &m->arg, sizeof(lr));
		int first = m->round - M.round0[kidx] == 1;
		if (first && !init)
			return ENGINE_SEND_ERROR;      /* no weights yet */
		if (init && (!first || m->arg))
			return -DROP_BAD_ARG;
		if (m->dtype != WIRE_F32)
			return -DROP_BAD_DTYPE;
		if (m->count != (init && m->rank != 0 ? 0 : *cnt))
			return -DROP_BAD_COUNT;
		if (!init && !(lr >= 0 && lr <= 3.4028234663852886e38f))
			return -DROP_BAD_ARG;
	} else if (m->count != (kidx == GATK && seg_owner(kidx, m->seg) != m->rank ? 0 : *cnt)) {
		return -DROP_BAD_COUNT;
	} else if (m->arg || (m->flags & WIRE_FLAG_INIT)) {
		return -DROP_BAD_FLAGS;
	}
	struct mseg *s = &M.seg[kidx][m->seg];
	if (m->round == s->done && s->done != M.round0[kidx])
		return ENGINE_SEND_ONE;
	if (m->round != s->done + 1)
		return m->round <= s->done ? -DROP_STALE_ROUND : -DROP_FUTURE_ROUND;
	if (!s->open && M.open == NSLOTS)
		return -DROP_NO_SLOT;
	model_taken = true;
	if (s->open && (s->have & (1ull << m->rank)))
		return (m->flags & WIRE_FLAG_NOTICE) ? ENGINE_SEND_NOTICE : ENGINE_ABSORBED;
	/* the model state is updated by the caller once the engine agrees */
	return (s->open ? __builtin_popcountll(s->have) : 0) + 1 == WORLD ? ENGINE_SEND_ALL
									 : ENGINE_ABSORBED;
}

static void check_out_result(const struct engine_out *out, const struct wire_msg *m,
			     int kidx, uint16_t cnt)
{
	const struct engine_key *k = keys[kidx];
	const uint8_t *res = k->result;
	const uint8_t *end = res + (size_t)k->nsegs * SEG_BYTES;
	const uint8_t *p = out->payload;
	size_t bytes = (size_t)cnt * wire_dtype_size(k->dtype);

	CHECK(out->job == &eng.jobs[engine_job_index(M.id)]);
	CHECK(out->hdr.type == WIRE_RESULT);
	CHECK(out->hdr.dtype == k->dtype);
	CHECK(out->hdr.job == M.id && out->hdr.token == TOKEN);
	CHECK(out->hdr.key == k->key && out->hdr.seg == m->seg && out->hdr.round == m->round);
	CHECK(out->hdr.count == cnt);
	CHECK(p == res + (size_t)m->seg * SEG_BYTES);
	CHECK(p >= res && p + bytes <= end);
	CHECK((uint8_t *)end <= (uint8_t *)key_mem[kidx] + key_mem_len[kidx]);
}

static void op_push(struct in *in)
{
	uint8_t b1 = get8(in), b2 = get8(in), b3 = get8(in), b4 = get8(in);
	uint8_t b5 = get8(in), b6 = get8(in);
	struct wire_msg m = { .type = WIRE_PUSH };
	int kidx;

	m.rank = b1 & 7;
	uint32_t src_ip = m.rank < WORLD ? IP(m.rank) : IP(0);
	uint16_t src_port = m.rank < WORLD ? PORT(m.rank) : PORT(0);
	if (b1 & 0x08)
		src_ip ^= 0x100;
	if (b1 & 0x10)
		src_port++;
	m.token = TOKEN;
	if (b1 & 0x20)
		m.token ^= 1ull << (b6 & 63);
	m.job = M.id;
	if (b1 & 0x40)
		m.job = (b6 & 1) ? M.id ^ ENGINE_MAX_JOBS : M.id + 1;
	if (b1 & 0x80)
		m.type = (b6 & 2) ? WIRE_RESULT : WIRE_ERROR;

	switch (b2 & 3) {
	case 0:
	case 1:
		kidx = !(b2 & 0x40) ? b2 & 1 : (b5 & 0x60) == 0x20 ? GATK
		       : (b5 & 0x60) == 0x40 ? SCAK : PSK;
		m.key = kdefs[kidx].key;
		m.dtype = (uint8_t)kdefs[kidx].dtype;
		break;
	case 2:
		kidx = -1;
		m.key = (b2 & 4) ? 12345 : 0;
		m.dtype = WIRE_F32;
		break;
	default:
		kidx = (b2 >> 2) & 1;
		m.key = kdefs[kidx].key;
		m.dtype = kidx == 0 ? ((b2 & 8) ? WIRE_BF16 : WIRE_F16) : WIRE_F32;
		break;
	}
	m.flags = (uint8_t)(((b2 & 0x10) ? WIRE_FLAG_RETX : 0) |
			    ((b2 & 0x20) ? WIRE_FLAG_NOTICE : 0) |
			    ((b2 & 0x80) ? WIRE_FLAG_INIT : 0));
	/* the PUSH argument: a PS key's learning rate, exact multiples of 1/4
	 * (so the model's fp32 update is exact), or NaN, -1 */
	if ((b3 & 0x40) || kidx == PSK) {
		float lr = (b6 & 0x80) ? ((b6 & 0x40) ? NAN : -1.0f) : (float)(b6 & 7) * 0.25f;
		if (!(m.flags & WIRE_FLAG_INIT) || (b3 & 0x20))
			memcpy(&m.arg, &lr, sizeof(m.arg));
	}

	uint32_t nsegs = kidx >= 0 ? nsegs_of(kidx) : 1;
	if (b3 & 0x80) {
		static const uint32_t far[4] = { 0, 0xFFFFFFFFu, 0x80000000u, 0x01000000u };
		m.seg = (b3 & 3) ? far[b3 & 3] : nsegs;
	} else {
		m.seg = kidx == PSK ? b3 & 1 : b3 & 15;
	}

	uint32_t done = (kidx >= 0 && m.seg < nsegs && m.seg < MAXSEGS) ? M.seg[kidx][m.seg].done : 0;
	switch (b4 & 7) {
	case 4: m.round = done; break;
	case 5: m.round = done + 2; break;
	case 6: m.round = done - 1; break;
	case 7: m.round = (b4 & 0x80) ? 0xFFFFFFFFu : (b4 & 0x40) ? 0 : done + 1 + (b4 >> 3); break;
	default: m.round = done + 1; break;
	}

	uint16_t right = (kidx >= 0 && m.seg < nsegs) ? seg_count(kidx, m.seg) : 1;
	if (kidx == PSK && (m.flags & WIRE_FLAG_INIT) && m.rank != 0)
		right = 0;  /* an init round: only rank 0 carries the weights */
	if (kidx == GATK && m.seg < nsegs && seg_owner(kidx, m.seg) != m.rank)
		right = 0;  /* a gather key: only the owner carries data */
	switch (b5 & 7) {
	case 5: m.count = (uint16_t)(right + 1); break;
	case 6: m.count = (uint16_t)(right - 1); break;
	case 7: m.count = (b5 & 8) ? 0xFFFF : 0; break;
	default: m.count = right; break;
	}
	/* wire_decode guarantees the payload is count elements of dtype */
	size_t plen = (size_t)m.count * wire_dtype_size(m.dtype);
	uint8_t *payload = malloc(plen ? plen : 1);
	fill_payload(payload, plen, b6, m.rank);
	if (kidx == PSK && m.dtype == WIRE_F32 && m.count != 0xFFFF)
		for (size_t i = 0; i < plen / 4; i++) { /* small integers: exact sums */
			float f = (float)((int)(payload[4 * i] % 17) - 8);
			memcpy(payload + 4 * i, &f, sizeof(f));
		}
	uint8_t *mp = malloc(plen ? plen : 1);     /* the model's copy */
	memcpy(mp, payload, plen);
	int hold = (b5 & 0x10) != 0;

	uint16_t cnt = 0;
	int want = model_push(&m, kidx, src_ip, src_port, &cnt);
	struct engine_out out;
	memset(&out, 0xA5, sizeof(out));
	uint64_t pushes0 = eng.c.pushes, dup_open0 = eng.c.dup_open, dup_done0 = eng.c.dup_done;
	uint64_t retx0 = eng.c.retx;
	int rc = engine_push_ref(&eng, &m, plen ? payload : NULL, hold ? payload : NULL,
				 src_ip, src_port, &out);
	/* held only when offered, and only for an accepted new contribution */
	CHECK(out.held == 0 || (hold && rc >= 0 && eng.c.pushes == pushes0 + 1));
	if (out.held)
		n_held++;
	else
		free(payload);
	payload = NULL;
	CHECK(n_released <= n_held);

	if (rc != want) {
		fprintf(stderr, "engine_push: got %d, model %d (type %u job %u rank %u key %u "
			"dtype %u seg %u round %u count %u flags %u)\n", rc, want, m.type, m.job,
			m.rank, m.key, m.dtype, m.seg, m.round, m.count, m.flags);
		abort();
	}
	/* the engine learns whether the rank understands notices from a push
	 * taken into an open round (the lcore learns its address from it) */
	if (model_taken)
		M.notice[m.rank] = (m.flags & WIRE_FLAG_NOTICE) != 0;
	if (rc < 0) {
		CHECK(-rc > DROP_NONE && -rc < DROP_COUNT);
		CHECK(eng.c.pushes == pushes0);
		free(mp);
		return;
	}
	CHECK(rc <= ENGINE_SEND_NOTICE);
	if (rc == ENGINE_SEND_ERROR) {
		CHECK(out.hdr.type == WIRE_ERROR &&
		      out.hdr.status == (M.state == ENGINE_JOB_ABORTED ? WIRE_ST_NO_JOB
									: WIRE_ST_NO_WEIGHTS));
		CHECK(out.payload == NULL && out.rank == m.rank);
		CHECK(out.job == &eng.jobs[engine_job_index(M.id)]);
		free(mp);
		return;
	}
	CHECK(eng.c.retx == retx0 + ((m.flags & WIRE_FLAG_RETX) ? 1 : 0));

	struct mseg *s = &M.seg[kidx][m.seg];
	/* a scatter key's sum goes to its owner; the others get a count of 0 */
	int ack = kidx == SCAK && seg_owner(kidx, m.seg) != m.rank;
	if (rc == ENGINE_SEND_ONE) {
		CHECK(eng.c.dup_done == dup_done0 + 1);
		check_out_result(&out, &m, kidx, ack ? 0 : cnt);
		CHECK(out.plen == (ack ? 0 : cnt * wire_dtype_size(kdefs[kidx].dtype)));
		CHECK(out.rank == m.rank);
		free(mp);
		return;
	}
	if (s->open && (s->have & (1ull << m.rank))) { /* duplicate of an open round */
		CHECK(eng.c.dup_open == dup_open0 + 1);
		CHECK(eng.c.pushes == pushes0);
		if (rc == ENGINE_SEND_NOTICE) {
			CHECK(out.hdr.type == WIRE_WAIT && out.rank == m.rank);
			CHECK(out.hdr.key == m.key && out.hdr.seg == m.seg &&
			      out.hdr.round == m.round && out.hdr.count == 0);
			CHECK(out.notice.missing == (~s->have & ((1ull << WORLD) - 1)));
			CHECK(out.job == &eng.jobs[engine_job_index(M.id)]);
		} else {
			CHECK(rc == ENGINE_ABSORBED);
		}
		free(mp);
		return;
	}
	CHECK(eng.c.pushes == pushes0 + 1);
	if (!s->open) {
		s->open = 1;
		s->round = m.round;
		s->have = 0;
		M.open++;
	}
	s->have |= 1ull << m.rank;
	memcpy(s->data[m.rank], mp, plen);
	if (kidx == PSK && m.rank == 0)
		memcpy(&s->lr, &m.arg, sizeof(s->lr));
	M.pushes++;
	free(mp);
	if (rc == ENGINE_ABSORBED)
		return;

	/* SEND_ALL: the round completed */
	check_out_result(&out, &m, kidx, cnt);
	CHECK(out.only == (kidx == SCAK ? seg_owner(kidx, m.seg) : ENGINE_ONLY_NONE));
	/* marked only while congested (whether a job is at its share may lag
	 * a rate period behind a reinstall) */
	CHECK(!(out.hdr.flags & WIRE_FLAG_CE) || M.congested);
	const void *src[WORLD];
	uint8_t want_sum[SEG_BYTES];
	for (unsigned r = 0; r < WORLD; r++)
		src[r] = s->data[r];
	scalar->fn[kdefs[kidx].dtype](want_sum, src, WORLD, cnt);
	if (kidx == PSK) { /* the weights: rank 0's, then w += -lr * sum, once */
		float *w = M.w + (size_t)m.seg * seg_elems_of(PSK);
		uint64_t updates0 = eng.c.updates;
		if (m.round - M.round0[kidx] == 1) {
			memcpy(w, s->data[0], (size_t)cnt * sizeof(float));
		} else {
			for (unsigned i = 0; i < cnt; i++) {
				float g;
				memcpy(&g, want_sum + 4 * i, sizeof(g));
				w[i] = w[i] + -s->lr * g;
			}
		}
		(void)updates0;
		CHECK(memcmp(w, out.payload, (size_t)cnt * sizeof(float)) == 0);
	} else if (kidx == GATK) { /* the owner's bytes, as sent */
		CHECK(memcmp(s->data[seg_owner(kidx, m.seg)], out.payload, (size_t)cnt * 4) == 0);
	} else {
		CHECK(memcmp(want_sum, out.payload,
			     (size_t)cnt * wire_dtype_size(kdefs[kidx].dtype)) == 0);
	}
	s->done = m.round;
	s->open = 0;
	s->have = 0;
	M.open--;
	M.completes++;
}

/* Advance the clock, maybe flip congestion, tick: every NACK must name an
 * open round and a rank missing from it that understands notices. */
static void op_tick(struct in *in)
{
	uint8_t b = get8(in);
	struct engine_out outs[WORLD * 4];

	M.now += ((uint64_t)(b & 0x7F) + 1) * 100000;
	if (b & 0x80)
		M.congested = !M.congested;
	engine_clock(&eng, M.now);
	engine_set_congested(&eng, M.congested);
	uint64_t nacks0 = eng.c.nacks;
	unsigned n = engine_tick(&eng, outs, WORLD * 4);
	CHECK(n <= WORLD * 4);
	CHECK(eng.c.nacks == nacks0 + n);
	CHECK(n == 0 || (M.state == ENGINE_JOB_ACTIVE && !M.congested));
	for (unsigned i = 0; i < n; i++) {
		const struct engine_out *o = &outs[i];
		int k = -1;
		for (int i2 = 0; i2 < NKEYS; i2++)
			k = o->hdr.key == kdefs[i2].key ? i2 : k;
		CHECK(k >= 0 && o->hdr.seg < nsegs_of(k));
		const struct mseg *s = &M.seg[k][o->hdr.seg];
		CHECK(o->hdr.type == WIRE_NACK && o->hdr.count == 0 && o->payload == NULL);
		CHECK(o->hdr.job == M.id && o->hdr.token == TOKEN && o->rank < WORLD);
		CHECK(s->open && o->hdr.round == s->round);
		CHECK(!(s->have & (1ull << o->rank)) && M.notice[o->rank]);
		CHECK(o->notice.missing == (~s->have & ((1ull << WORLD) - 1)));
	}
}

static void op_worker(struct in *in)
{
	uint8_t b = get8(in);
	struct engine_msg w = { .type = ENGINE_MSG_WORKER_SET, .job = (b & 0x80) ? M.id + 1 : M.id };
	unsigned r = b & 7;

	w.u.worker.rank = (uint16_t)r;
	w.u.worker.ip = (b & 0x08) ? 0 : (b & 0x10) ? IP(r) + 100 : IP(r);
	w.u.worker.port = (b & 0x20) ? PORT(r + 1) : PORT(r);
	int rc = engine_apply(&eng, &w);
	if (M.state == ENGINE_JOB_FREE || w.job != M.id) {
		CHECK(rc == -ENOENT);
	} else if (r >= WORLD) {
		CHECK(rc == -EINVAL);
	} else {
		CHECK(rc == 0);
		M.wip[r] = w.u.worker.ip;
		M.wport[r] = w.u.worker.port;
	}
}

static void op_simple(uint32_t type)
{
	struct engine_msg m = { .type = type, .job = M.id };
	int rc = engine_apply(&eng, &m);

	if (M.state == ENGINE_JOB_FREE) {
		CHECK(rc == -ENOENT);
		return;
	}
	CHECK(rc == 0);
	if (type == ENGINE_MSG_JOB_ABORT) {
		M.state = ENGINE_JOB_ABORTED;
	} else {
		M.state = ENGINE_JOB_FREE;
		memset(M.notice, 0, sizeof(M.notice));
		memset(M.wip, 0, sizeof(M.wip));
		memset(M.wport, 0, sizeof(M.wport));
	}
}

static void op_reinstall(void)
{
	if (M.state != ENGINE_JOB_FREE) {
		/* over a live job: refused without touching the given memory */
		static uint8_t dummy[64];
		struct engine_msg m = { .type = ENGINE_MSG_JOB_INSTALL };
		m.u.desc = (struct engine_job_desc){
			.id = M.id + ENGINE_MAX_JOBS, .token = TOKEN, .world = WORLD,
			.seg_bytes = SEG_BYTES, .mem = dummy, .key_cap = KEY_CAP, .nslots = NSLOTS,
		};
		CHECK(engine_apply(&eng, &m) == -EEXIST);
		return;
	}
	M.gen++;
	M.id = 1 + ENGINE_MAX_JOBS * (M.gen & 0x3FFFFFF);
	install();
}

/* KEY_REMOVE of key k (docs/rpc.md "key_release"): its open rounds give
 * back their slots and held payloads; installed again, it starts over. */
static void op_key_remove(int k)
{
	struct engine_msg rm = { .type = ENGINE_MSG_KEY_REMOVE, .job = M.id };
	rm.u.key = keys[k];
	int rc = engine_apply(&eng, &rm);

	if (M.state == ENGINE_JOB_FREE) {
		CHECK(rc == -ENOENT);
		return;
	}
	CHECK(rc == 0);
	CHECK(engine_apply(&eng, &rm) == -ENOENT);
	M.round0[k] = 0;
	for (uint32_t s = 0; s < nsegs_of(k); s++) {
		M.open -= M.seg[k][s].open ? 1 : 0;
		if (M.seg[k][s].done + 1 > M.round0[k])
			M.round0[k] = M.seg[k][s].done + 1;
	}
	memset(M.seg[k], 0, sizeof(M.seg[k]));
	if (k == PSK)
		memset(M.w, 0, sizeof(M.w));
	install_key(k);
}

static void op_dup_key(void)
{
	struct engine_msg km = { .type = ENGINE_MSG_KEY_INSTALL, .job = M.id };
	km.u.key = keys[0];
	int rc = engine_apply(&eng, &km);
	CHECK(rc == (M.state == ENGINE_JOB_FREE ? -ENOENT : -EEXIST));
}

static void check_invariants(void)
{
	const struct engine_job *j = &eng.jobs[engine_job_index(M.id)];
	struct engine_progress p;

	CHECK(eng.c.completes <= eng.c.pushes / WORLD);
	int rc = engine_job_progress(&eng, M.id, &p);
	if (M.state == ENGINE_JOB_FREE) {
		CHECK(rc == -ENOENT);
		CHECK(j->state == ENGINE_JOB_FREE);
		return;
	}
	CHECK(rc == 0);
	CHECK(j->state == M.state);
	CHECK(j->nfree <= j->nslots && j->nslots == NSLOTS);
	CHECK(j->nfree == NSLOTS - M.open);
	CHECK(j->completes == M.completes);
	CHECK(j->completes <= M.pushes / WORLD);
	CHECK(p.completes == M.completes && p.open == M.open);
	uint64_t missing = 0;
	for (int k = 0; k < NKEYS; k++)
		for (uint32_t s = 0; s < nsegs_of(k); s++) {
			const struct mseg *ms = &M.seg[k][s];
			CHECK(keys[k]->segs[s].done == ms->done);
			CHECK((keys[k]->segs[s].slot != ENGINE_NO_SLOT) == ms->open);
			if (ms->open)
				missing |= ~ms->have & ((1ull << WORLD) - 1);
		}
	CHECK(p.missing.w[0] == missing);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	scalar = sum_by_name("scalar");
	CHECK(scalar);
	job_mem_len = engine_job_mem_bytes(WORLD, SEG_BYTES, KEY_CAP, NSLOTS);
	job_mem = xalloc(job_mem_len);
	for (int k = 0; k < NKEYS; k++) {
		const struct kdef *d = &kdefs[k];
		CHECK(nsegs_of(k) <= MAXSEGS);
		CHECK(engine_key_nchunks(d->count, d->dtype, SEG_BYTES, d->segs_per_chunk) <= 8);
		key_mem_len[k] = is_coll(k) ? engine_coll_mem_bytes(d->count, d->dtype, SEG_BYTES,
								    d->segs_per_chunk, SLICES) :
				 engine_key_mem_bytes(d->count, d->dtype, SEG_BYTES,
						      d->segs_per_chunk) +
				 (k == PSK ? engine_ps_mem_bytes(d->count, SEG_BYTES,
								 optim_planes(&ps_opt), WIRE_F32) : 0);
		key_mem[k] = xalloc(key_mem_len[k]);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };

	engine_init(&eng, 0, scalar);
	engine_set_hold(&eng, release_payload, NULL);
	n_held = n_released = 0;
	memset(&M, 0, sizeof(M));
	M.id = 1;
	M.now = 1000000000ull;
	engine_clock(&eng, M.now);
	install();
	check_invariants();
	for (unsigned n = 0; more(&in) && n < 4096; n++) {
		uint8_t op = get8(&in) & 15;
		if (op <= 9)
			op_push(&in);
		else if (op == 10)
			op_tick(&in);
		else if (op == 11)
			op_worker(&in);
		else if (op == 12)
			op_simple(ENGINE_MSG_JOB_ABORT);
		else if (op == 13)
			op_simple(ENGINE_MSG_JOB_REMOVE);
		else if (op == 14)
			op_reinstall();
		else {
			uint8_t b = get8(&in);
			if (b & 1)
				op_key_remove((b >> 1) % NKEYS);
			else
				op_dup_key();
		}
		check_invariants();
	}
	/* removing the job gives back every payload still held */
	struct engine_msg rm = { .type = ENGINE_MSG_JOB_REMOVE, .job = M.id };
	engine_apply(&eng, &rm);
	CHECK(n_released == n_held);
	return 0;
}
