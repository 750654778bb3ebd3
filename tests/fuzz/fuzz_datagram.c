/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_datagram.c - libpbox's handling of what arrives on its data port
 * (client/xfer/xfer.c: RESULT, WAIT, NACK, ERROR; its timers) with calls
 * in flight, on arbitrary datagrams from arbitrary senders.
 *
 * The client (fuzz_client.h: rank 0 of 2, three endpoints) streams two
 * allreduce calls whose keys are declared: key 1, 200 f32 (4 segments,
 * chunks on endpoints 0 and 2) and key 2, 300 bf16 (3 segments on
 * endpoints 1, 0, 2), round 1 each. The input is a list of records:
 *
 *   sel (1 byte) | len (2 bytes, little-endian) | len bytes
 *
 * sel 0xFF: a timer tick, len milliseconds later (xfer_timers). Else the
 * bytes are one datagram, fixed up by sel so the fuzzer gets past the
 * first checks: bit 2 sets job, token and rank to the client's, bit 3 the
 * round to 1; bits 0-1 pick the sender: 0 the endpoint the named
 * segment belongs to (endpoint 0 when it names none), 1 another box
 * endpoint, 2 that endpoint's address on another port, 3 another address
 * on its port.
 *
 * The oracle is a model of the rules (docs/protocol.md, "Security model"
 * of docs/reliability.md), kept apart from the code: a RESULT counts when
 * it decodes, is for job 65 with the token, to rank 0, for round 1 of a
 * key whose call is still running, of its dtype, dense, names a segment
 * in range with exactly that segment's elements, and comes from that
 * segment's endpoint; the first such RESULT of a segment is its result.
 * At the end every segment holds its result's bytes if it has one and the
 * caller's bytes if not, and the library took a result for exactly the
 * segments the model did. ASan and UBSan check the rest; PUSHes the fake
 * transport sends must name a known endpoint and payload inside the
 * caller's buffers (fuzz_client.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ops/ops.h"
#include "tests/fuzz/fuzz_client.h"

#define NKEYS 2
#define MAX_SEGS 4
#define MAX_DGRAM 2048

struct fkey {
	uint32_t key;
	pbox_dtype dtype;
	uint32_t count, seg_elems, nsegs, segs_per_chunk;
	uint16_t chunk_ep[MAX_SEGS];
};

static const struct fkey KEYS[NKEYS] = {
	{ 1, PBOX_F32, 200, 64, 4, 2, { 0, 2 } },
	{ 2, PBOX_BF16, 300, 128, 3, 1, { 1, 0, 2 } },
};

struct model {
	struct pbox_req *r;
	uint8_t *buf, *orig;
	size_t esz;
	bool have[MAX_SEGS];
	uint8_t *want[MAX_SEGS];      /* the accepted RESULT's payload */
};

static uint32_t seg_len_of(const struct fkey *k, uint32_t s)
{
	uint32_t first = s * k->seg_elems;
	return k->count - first < k->seg_elems ? k->count - first : k->seg_elems;
}

static int key_index(uint32_t key)
{
	for (int i = 0; i < NKEYS; i++)
		if (KEYS[i].key == key)
			return i;
	return -1;
}

/* The key declared as the box would have answered: READY, round 0. */
static void declare(pbox_client *c, const struct fkey *k)
{
	struct key_state *ks = keytab_get(&c->keys, k->key);
	struct seg_layout l = { .count = k->count, .elem = (uint32_t)wire_dtype_size(k->dtype),
				.seg_elems = k->seg_elems, .nsegs = k->nsegs,
				.segs_per_chunk = k->segs_per_chunk };

	CHECK(ks);
	l.nchunks = (k->nsegs + k->segs_per_chunk - 1) / k->segs_per_chunk;
	l.chunk_ep = malloc(l.nchunks * sizeof(*l.chunk_ep));
	CHECK(l.chunk_ep);
	memcpy(l.chunk_ep, k->chunk_ep, l.nchunks * sizeof(*l.chunk_ep));
	ks->dtype = ks->rdtype = (uint8_t)k->dtype;
	ks->count = k->count;
	ks->first_round = 1;
	ks->round = 0;
	CHECK(key_set_layout(ks, &l) == 0);
	ks->phase = KEY_READY;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The endpoint of the segment d names, 0 if none. */
static unsigned seg_ep(const uint8_t *d, size_t len)
{
	if (len < WIRE_HDR_LEN)
		return 0;
	int k = key_index(get32(d + 24));
	uint32_t s = get32(d + 28);
	if (k < 0 || s >= KEYS[k].nsegs)
		return 0;
	return KEYS[k].chunk_ep[s / KEYS[k].segs_per_chunk];
}

/* What the model makes of datagram d from src_ep (-1: not a box endpoint,
 * or not that one's address and port). */
static void model_take(struct model *m, const uint8_t *d, size_t len, int src_ep)
{
	struct wire_msg w;

	if (wire_decode(d, len, &w) < 0 || w.type != WIRE_RESULT || w.job != FZ_JOB ||
	    w.token != FZ_TOKEN || w.rank != 0 || w.round != 1)
		return;
	int k = key_index(w.key);
	if (k < 0)
		return;
	const struct fkey *fk = &KEYS[k];
	struct model *mk = &m[k];
	if (mk->r->finished || w.dtype != (uint8_t)fk->dtype || (w.flags & WIRE_FLAG_SPARSE) ||
	    w.seg >= fk->nsegs || w.count != seg_len_of(fk, w.seg) ||
	    w.plen != w.count * mk->esz || src_ep != fk->chunk_ep[w.seg / fk->segs_per_chunk] ||
	    mk->have[w.seg])
		return;
	mk->have[w.seg] = true;
	mk->want[w.seg] = malloc(w.plen);
	CHECK(mk->want[w.seg]);
	memcpy(mk->want[w.seg], d + WIRE_HDR_LEN, w.plen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_tp f;
	pbox_client *c = fz_client_new(&f);
	struct model m[NKEYS];
	uint64_t now = 1000000000ull;
	static uint8_t dg[MAX_DGRAM];

	memset(m, 0, sizeof(m));
	for (int k = 0; k < NKEYS; k++) {
		const struct fkey *fk = &KEYS[k];
		declare(c, fk);
		m[k].esz = wire_dtype_size(fk->dtype);
		m[k].buf = malloc(fk->count * m[k].esz);
		m[k].orig = malloc(fk->count * m[k].esz);
		CHECK(m[k].buf && m[k].orig);
		for (size_t i = 0; i < fk->count * m[k].esz; i++)
			m[k].buf[i] = m[k].orig[i] = (uint8_t)(i * 7 + (size_t)k);
		fz_client_register(&f, m[k].buf, fk->count * m[k].esz);
		struct pbox_req *r = req_new(c, fk->key, &op_allreduce);
		CHECK(r);
		r->src = r->buf = m[k].buf;
		r->count = fk->count;
		r->dtype = r->rdtype = (uint8_t)fk->dtype;
		m[k].r = r;
		progress_admit(c, r, now);
		CHECK(r->state == REQ_STREAMING && !r->finished);
	}
	xfer_fill(c, now);

	while (size >= 3) {
		uint8_t sel = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		data += 3;
		size -= 3;
		if (sel == 0xFF) {
			now += len * 1000000ull;
			xfer_timers(c, now);
			xfer_apply_pending(c);
			continue;
		}
		if (len > size)
			len = size;
		if (len > MAX_DGRAM)
			len = MAX_DGRAM;
		memcpy(dg, data, len);
		data += len;
		size -= len;
		if (len >= WIRE_HDR_LEN && (sel & 4)) {
			put32(dg + 8, FZ_JOB);
			dg[12] = dg[13] = 0;
			put32(dg + 16, (uint32_t)(FZ_TOKEN >> 32));
			put32(dg + 20, (uint32_t)FZ_TOKEN);
		}
		if (len >= WIRE_HDR_LEN && (sel & 8))
			put32(dg + 32, 1);
		unsigned ep = seg_ep(dg, len);
		uint32_t ip = FZ_EP_IP[ep];
		uint16_t port = FZ_EP_PORT[ep];
		int src_ep = (int)ep;
		switch (sel & 3) {
		case 1:
			ep = (ep + 1) % FZ_NEPS;
			ip = FZ_EP_IP[ep];
			port = FZ_EP_PORT[ep];
			src_ep = (int)ep;
			break;
		case 2:
			port = (uint16_t)(port + 100);
			src_ep = -1;
			break;
		case 3:
			ip = 0x0A090909u;
			src_ep = -1;
			break;
		}
		model_take(m, dg, len, src_ep);
		f.rx[0] = (struct tp_dgram){ .data = dg, .len = (uint32_t)len,
					     .src_ip = htonl(ip), .src_port = htons(port) };
		f.nrx = 1;
		now += 1000;
		xfer_recv(c, now);
		xfer_apply_pending(c);
	}

	for (int k = 0; k < NKEYS; k++) {
		const struct fkey *fk = &KEYS[k];
		struct key_state *ks = keytab_find(&c->keys, fk->key);
		CHECK(ks);
		for (uint32_t s = 0; s < fk->nsegs; s++) {
			size_t off = (size_t)s * fk->seg_elems * m[k].esz;
			size_t n = (size_t)seg_len_of(fk, s) * m[k].esz;
			CHECK(seg_bit(ks->got, s) == m[k].have[s]);
			CHECK(memcmp(m[k].buf + off, m[k].have[s] ? m[k].want[s] : m[k].orig + off,
				     n) == 0);
		}
		/* a call that succeeded has every result */
		if (m[k].r->finished && m[k].r->rc == 0)
			for (uint32_t s = 0; s < fk->nsegs; s++)
				CHECK(m[k].have[s]);
	}
	fz_client_free(c);
	for (int k = 0; k < NKEYS; k++) {
		CHECK(m[k].r->finished);
		req_free(m[k].r);
		free(m[k].buf);
		free(m[k].orig);
		for (uint32_t s = 0; s < MAX_SEGS; s++)
			free(m[k].want[s]);
	}
	return 0;
}
