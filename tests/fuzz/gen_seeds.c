/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gen_seeds.c - writes the seed corpora under DIR/<target>/ (make
 * fuzz-seeds: DIR = tests/fuzz/corpus): a few valid inputs per fuzz
 * target so the fuzzers start past the first checks. Frames are built
 * with the product's own frame_udp_headers/wire_encode; engine records
 * follow the format described in fuzz_engine.c; RPC inputs are request
 * lines (and fuzz_rpc.c directives); fuzz_datagram's are records of
 * datagrams to a worker (fuzz_datagram.c), fuzz_ctrl_reply's the box's
 * control lines. (The config_ini and metrics seeds are plain files kept
 * in the corpus: a pboxd.conf and HTTP requests.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/frame.h"
#include "common/wire.h"
#include "control/ckpt_file.h"
#include "dataplane/dp.h"

static const char *root;

static void put(const char *target, const char *name, const void *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* ---- fuzz_frame: frames to 198.18.0.1 ---- */

#define BOX_IP 0xC6120001u
#define PEER_IP 0xC6120002u
static const uint8_t box_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t peer_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };

static size_t udp_frame(uint8_t *buf, const struct wire_msg *m, size_t extra)
{
	size_t plen = WIRE_HDR_LEN + (size_t)m->count * wire_dtype_size(m->dtype) + extra;
	frame_udp_headers(buf, box_mac, peer_mac, PEER_IP, BOX_IP, 40000, 47000, plen);
	wire_encode(buf + FRAME_HDRS_LEN, m);
	for (size_t i = WIRE_HDR_LEN; i < plen; i++)
		buf[FRAME_HDRS_LEN + i] = (uint8_t)(i * 7);
	return FRAME_HDRS_LEN + plen;
}

static void frames(void)
{
	uint8_t b[2048];
	size_t n;
	struct wire_msg m = { .type = WIRE_PUSH, .dtype = WIRE_F32, .job = 1, .rank = 0,
			      .count = 16, .token = 0x1122334455667788ull, .key = 7,
			      .seg = 0, .round = 1 };

	n = udp_frame(b, &m, 0);
	put("frame", "udp_push_f32", b, n);
	m.dtype = WIRE_F16;
	m.flags = WIRE_FLAG_RETX;
	n = udp_frame(b, &m, 0);
	put("frame", "udp_push_f16_retx", b, n);
	m = (struct wire_msg){ .type = WIRE_ERROR, .dtype = WIRE_F32, .job = 3, .status = 1 };
	n = udp_frame(b, &m, 0);
	put("frame", "udp_error", b, n);
	m = (struct wire_msg){ .type = WIRE_PUSH, .dtype = WIRE_BF16, .job = 1, .count = 4 };
	n = udp_frame(b, &m, 2); /* length does not match count */
	put("frame", "udp_bad_len", b, n);
	/* padded to the Ethernet minimum: trailing bytes beyond the IP length */
	m = (struct wire_msg){ .type = WIRE_PUSH, .dtype = WIRE_F32, .job = 1, .count = 0 };
	n = udp_frame(b, &m, 0);
	memset(b + n, 0, 16);
	put("frame", "udp_padded", b, n + 16);

	/* ARP request who-has 198.18.0.1, and a reply (ignored) */
	uint8_t arp[42] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x06,
			    0, 1, 0x08, 0, 6, 4, 0, 1,
			    0x02, 0, 0, 0, 0, 0x02, 198, 18, 0, 2,
			    0, 0, 0, 0, 0, 0, 198, 18, 0, 1 };
	put("frame", "arp_request", arp, sizeof(arp));
	arp[21] = 2;
	put("frame", "arp_reply", arp, sizeof(arp));

	/* ICMP echo request, 8 bytes of data */
	uint8_t ic[14 + 20 + 16];
	frame_udp_headers(ic, box_mac, peer_mac, PEER_IP, BOX_IP, 0, 0, 8);
	ic[14 + 2] = 0;
	ic[14 + 3] = 20 + 16;
	ic[14 + 9] = 1; /* ICMP */
	ic[14 + 10] = ic[14 + 11] = 0;
	uint16_t c = frame_csum(ic + 14, 20);
	memcpy(ic + 14 + 10, &c, 2);
	uint8_t *icmp = ic + 34;
	memset(icmp, 0, 16);
	icmp[0] = 8;
	icmp[5] = 1;
	icmp[7] = 1;
	memcpy(icmp + 8, "pboxping", 8);
	c = frame_csum(icmp, 16);
	memcpy(icmp + 2, &c, 2);
	put("frame", "icmp_echo", ic, sizeof(ic));
}

/* ---- fuzz_engine: record sequences ---- */

/* op 0 = PUSH: rank/faults, key selector, seg, round selector, count
 * selector, payload seed (see fuzz_engine.c) */
static size_t push(uint8_t *p, unsigned rank, unsigned key, unsigned seg, uint8_t round_sel)
{
	p[0] = 0;
	p[1] = (uint8_t)rank;
	p[2] = (uint8_t)key;
	p[3] = (uint8_t)seg;
	p[4] = round_sel;
	p[5] = 0;
	p[6] = (uint8_t)(rank * 31 + seg);
	return 7;
}

static void engine(void)
{
	uint8_t b[1024];
	size_t n = 0;

	/* one full round of key A segment 0, then the same round again (dup) */
	for (unsigned r = 0; r < 4; r++)
		n += push(b + n, r, 0, 0, 0);
	n += push(b + n, 2, 0, 0, 4);
	put("engine", "round_f32", b, n);

	/* key B: two rounds of its last (1-element) segment, a dup inside */
	n = 0;
	for (unsigned round = 0; round < 2; round++)
		for (unsigned r = 0; r < 4; r++) {
			n += push(b + n, r, 1, 9, 0);
			if (r == 1)
				n += push(b + n, r, 1, 9, 0);
		}
	put("engine", "rounds_f16_last_seg", b, n);

	/* open more rounds than there are slots: the 9th gets NO_SLOT */
	n = 0;
	for (unsigned s = 0; s < 10; s++)
		n += push(b + n, 0, 1, s, 0);
	put("engine", "slots_exhausted", b, n);

	/* partial round, abort (ERROR answers), remove, reinstall, push again */
	n = 0;
	n += push(b + n, 0, 0, 1, 0);
	n += push(b + n, 1, 0, 1, 0);
	b[n++] = 12;
	n += push(b + n, 2, 0, 1, 0);
	b[n++] = 13;
	n += push(b + n, 2, 0, 1, 0);
	b[n++] = 14;
	for (unsigned r = 0; r < 4; r++)
		n += push(b + n, r, 0, 4, 0);
	b[n++] = 15;
	put("engine", "abort_remove_reinstall", b, n);

	/* re-register rank 3 elsewhere, then faults: wrong lcore, stale, future */
	n = 0;
	b[n++] = 11;
	b[n++] = 0x13; /* rank 3, new ip */
	n += push(b + n, 3, 0, 0, 0);
	n += push(b + n, 0, 0, 2, 0);
	n += push(b + n, 0, 0, 0, 6);
	n += push(b + n, 0, 0, 0, 5);
	put("engine", "faults", b, n);

	/* collective keys (fuzz_engine.c): an allgather round of slice 0's two
	 * segments (owner rank 0 sends, the others query), a duplicate; then
	 * a reduce_scatter round of segment 3 (owner rank 1), answered again
	 * from the shadow copy to its owner and to another rank */
	n = 0;
	for (unsigned s = 0; s < 2; s++)
		for (unsigned r = 0; r < 4; r++) {
			n += push(b + n, r, 0x40, s, 0);
			b[n - 2] = 0x20;
		}
	n += push(b + n, 2, 0x40, 1, 4);
	b[n - 2] = 0x20;
	put("engine", "allgather_round", b, n);
	n = 0;
	for (unsigned r = 0; r < 4; r++) {
		n += push(b + n, r, 0x40, 3, 0);
		b[n - 2] = 0x40;
	}
	for (unsigned r = 1; r < 3; r++) {
		n += push(b + n, r, 0x40, 3, 4);
		b[n - 2] = 0x40;
	}
	put("engine", "reduce_scatter_round", b, n);

	/* KEY_REMOVE (op 15, odd byte): key A with a half-open round goes and
	 * comes back; its round 1 runs again from the start, key B unharmed */
	n = 0;
	n += push(b + n, 0, 0, 0, 0);
	n += push(b + n, 1, 0, 0, 0);
	n += push(b + n, 0, 1, 3, 0);
	b[n++] = 15;
	b[n++] = 1;          /* remove key A (index 0) */
	for (unsigned r = 0; r < 4; r++)
		n += push(b + n, r, 0, 0, 0);
	for (unsigned r = 1; r < 4; r++)
		n += push(b + n, r, 1, 3, 0);
	b[n++] = 15;
	b[n++] = 5;          /* remove the PS key (index 2) */
	put("engine", "key_remove_open_round", b, n);
}

/* ---- fuzz_rpc: request lines ---- */

#define RQ(id, method, params) \
	"{\"jsonrpc\":\"2.0\",\"id\":" #id ",\"method\":\"" method "\",\"params\":" params "}"

static void rpc1(const char *name, const char *text)
{
	put("rpc", name, text, strlen(text));
}

static void rpc(void)
{
	rpc1("job_list", RQ(1, "job_list", "{}"));
	rpc1("box_status", RQ(1, "box_status", "{}"));
	rpc1("box_stats", RQ("s", "box_stats", "{}"));
	rpc1("box_endpoints", RQ(null, "box_endpoints", "{}"));
	rpc1("job_create", RQ(2, "job_create", "{\"job\":\"a\",\"world\":2,\"max_bytes\":1048576}"));
	rpc1("job_join", RQ(3, "job_join", "{\"job\":\"a\",\"rank\":0,\"world\":1,"
				      "\"data_ip\":\"10.0.0.1\",\"data_port\":5000,\"mtu\":1500}"));
	rpc1("notification", "{\"jsonrpc\":\"2.0\",\"method\":\"job_create\",\"params\":"
			     "{\"job\":\"n\",\"world\":1}}");
	rpc1("flow_two_ranks",
	     RQ(1, "job_join", "{\"job\":\"j\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":5000}") "\n"
	     "!s 2\n"
	     RQ(2, "job_join", "{\"job\":\"j\",\"rank\":1,\"world\":2,\"data_ip\":\"10.0.0.2\",\"data_port\":5000}") "\n"
	     "!s 1\n"
	     RQ(3, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":7,\"count\":100000,\"dtype\":\"f32\"}") "\n"
	     "!s 2\n"
	     RQ(4, "key_declare", "{\"job_id\":64,\"rank\":1,\"key\":7,\"count\":100000,\"dtype\":\"f32\"}") "\n"
	     RQ(5, "key_declare", "{\"job_id\":64,\"rank\":1,\"key\":8,\"count\":3,\"dtype\":\"bf16\"}") "\n"
	     RQ(6, "job_status", "{\"job\":\"j\"}") "\n"
	     RQ(7, "box_stats", "{}") "\n"
	     RQ(8, "job_leave", "{\"job_id\":64,\"rank\":1}") "\n"
	     "!close 1\n"
	     "!tick\n"
	     RQ(9, "job_list", "{}"));
	rpc1("flow_collectives",
	     RQ(1, "job_join", "{\"job\":\"c\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":5000}") "\n"
	     RQ(2, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":1,\"count\":100,\"dtype\":\"f32\",\"collective\":\"allgather\"}") "\n"
	     RQ(3, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":2,\"count\":9,\"dtype\":\"f16\",\"collective\":\"broadcast\",\"root\":1}") "\n"
	     RQ(4, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":3,\"count\":7,\"dtype\":\"f32\",\"collective\":\"reduce_scatter\"}") "\n"
	     RQ(5, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":1,\"count\":100,\"dtype\":\"f32\",\"collective\":\"reduce_scatter\"}") "\n"
	     RQ(6, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":4,\"count\":8,\"dtype\":\"f32\",\"collective\":\"broadcast\",\"root\":2}") "\n"
	     RQ(7, "job_status", "{\"job\":\"c\"}"));
	rpc1("flow_release",
	     RQ(1, "job_join", "{\"job\":\"r\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":5000}") "\n"
	     "!s 2\n"
	     RQ(2, "job_join", "{\"job\":\"r\",\"rank\":1,\"world\":2,\"data_ip\":\"10.0.0.2\",\"data_port\":5000}") "\n"
	     RQ(3, "key_declare", "{\"job_id\":64,\"rank\":1,\"key\":7,\"count\":1000,\"dtype\":\"f32\"}") "\n"
	     RQ(4, "key_release", "{\"job_id\":64,\"rank\":1,\"keys\":[7]}") "\n"
	     RQ(5, "key_declare", "{\"job_id\":64,\"rank\":1,\"key\":7,\"count\":500,\"dtype\":\"f32\"}") "\n"
	     "!s 1\n"
	     RQ(6, "key_release", "{\"job_id\":64,\"rank\":0,\"keys\":[7,7]}") "\n"
	     RQ(7, "key_release", "{\"job_id\":64,\"rank\":0,\"keys\":[7]}") "\n"
	     "!tick\n"
	     RQ(8, "job_status", "{\"job\":\"r\"}") "\n"
	     RQ(9, "key_declare", "{\"job_id\":64,\"rank\":0,\"key\":7,\"count\":500,\"dtype\":\"f32\"}"));
	rpc1("flow_abort_secret", /* session 1 is remote: needs fuzz_rpc's secret */
	     RQ(1, "job_join", "{\"job\":\"y\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":1}") "\n"
	     RQ(2, "job_abort", "{\"job\":\"y\"}") "\n"
	     RQ(3, "job_abort", "{\"job\":\"y\",\"secret\":\"fuzz-operator-secreT\"}") "\n"
	     RQ(4, "job_abort", "{\"job\":\"y\",\"secret\":\"fuzz-operator-secret\",\"reason\":\"r\"}") "\n"
	     RQ(5, "job_status", "{\"job\":\"y\"}") "\n"
	     "!close 1\n"
	     "!tick");
	rpc1("flow_abort",
	     RQ(1, "job_join", "{\"job\":\"x\",\"rank\":0,\"world\":3,\"data_ip\":\"10.0.0.1\",\"data_port\":1}") "\n"
	     "!s 2\n"
	     RQ(2, "job_abort", "{\"job\":\"x\",\"reason\":\"test\"}") "\n"
	     RQ(3, "job_status", "{\"job\":\"x\"}") "\n"
	     "!close 1\n"
	     "!tick");
	rpc1("flow_failures",
	     "!defer\n"
	     RQ(1, "job_create", "{\"job\":\"d\",\"world\":4}") "\n"
	     "!drain\n"
	     "!full 1\n"
	     RQ(2, "job_create", "{\"job\":\"e\",\"world\":4}") "\n"
	     "!nomem\n"
	     RQ(3, "job_create", "{\"job\":\"f\",\"world\":4}") "\n"
	     "!nomem\n"
	     RQ(4, "job_create", "{\"job\":\"g\",\"world\":64,\"max_bytes\":99999999999}"));
}

/* ---- fuzz_ckpt: checkpoint files ---- */

/* A checkpoint of h with arrays of i * 0.5f; version 1: its header's
 * version and last 8 bytes as an older pbox wrote them. */
static void ckpt1(const char *name, const struct ckpt_hdr *h, int v1)
{
	static uint8_t b[CKPT_HDR + CKPT_NAME_MAX + 4 * 64 * sizeof(float)];
	size_t hlen = ckpt_head_bytes(h), n = (1 + h->planes) * h->count;

	ckpt_encode(b, h);
	for (size_t i = 0; i < n; i++) {
		float f = (float)i * 0.5f;
		memcpy(b + hlen + i * sizeof(f), &f, sizeof(f));
	}
	if (v1) {
		b[8] = 1;
		memmove(b + CKPT_HDR, b + hlen, n * sizeof(float));
		memset(b + 96, 0xa5, 8);
		hlen = CKPT_HDR;
	}
	put("ckpt", name, b, hlen + n * sizeof(float));
}

static void ckpt(void)
{
	struct ckpt_hdr sgd = { .key = 7, .count = 16, .dtype = WIRE_F32, .rdtype = WIRE_F32,
				.average = 1, .kind = OPTIM_SGD, .momentum = 0.9, .steps = 3,
				.planes = 1, .world = 2, .job = "fz" };
	struct ckpt_hdr adam = { .key = 1, .count = 40, .dtype = WIRE_BF16,
				 .rdtype = WIRE_BF16, .kind = OPTIM_ADAM, .beta1 = 0.9,
				 .beta2 = 0.999, .eps = 1e-8, .steps = 1000, .planes = 2,
				 .world = 8, .job = "train-a" };

	ckpt1("sgd-fz", &sgd, 0);
	ckpt1("adam", &adam, 0);
	ckpt1("sgd-v1", &sgd, 1);
	sgd.job[0] = '\0';
	sgd.planes = 0;
	sgd.momentum = 0;
	ckpt1("sgd-noname", &sgd, 0);
}

/* ---- fuzz_datagram: records sel | len (LE 2) | datagram (fuzz_datagram.c) ---- */

/* body: plen bytes, or NULL: plen bytes of fill */
static size_t dg_rec(uint8_t *p, uint8_t sel, const struct wire_msg *m, const void *body,
		     size_t plen, uint8_t fill)
{
	size_t len = WIRE_HDR_LEN + plen;

	p[0] = sel;
	p[1] = (uint8_t)len;
	p[2] = (uint8_t)(len >> 8);
	wire_encode(p + 3, m);
	if (body)
		memcpy(p + 3 + WIRE_HDR_LEN, body, plen);
	else
		memset(p + 3 + WIRE_HDR_LEN, fill, plen);
	return 3 + len;
}

static size_t dg_tick(uint8_t *p, unsigned ms)
{
	p[0] = 0xFF;
	p[1] = (uint8_t)ms;
	p[2] = (uint8_t)(ms >> 8);
	return 3;
}

/* A RESULT of the fuzzer's key 1 (200 f32, 64 a segment) or key 2 (300
 * bf16, 128 a segment), round 1, to rank 0 of job 65. */
static struct wire_msg dg_result(unsigned key, unsigned seg)
{
	unsigned per = key == 1 ? 64 : 128, count = key == 1 ? 200 : 300;
	unsigned n = count - seg * per < per ? count - seg * per : per;

	return (struct wire_msg){ .type = WIRE_RESULT, .dtype = key == 1 ? WIRE_F32 : WIRE_BF16,
				  .job = 65, .token = 0xaa, .key = key, .seg = seg, .round = 1,
				  .count = (uint16_t)n };
}

static void datagram(void)
{
	static uint8_t b[16384];
	size_t n = 0;

	/* every segment of both keys from its endpoint: both calls complete */
	for (unsigned s = 0; s < 4; s++) {
		struct wire_msg m = dg_result(1, s);
		n += dg_rec(b + n, 0, &m, NULL, m.count * 4u, (uint8_t)(0x10 + s));
	}
	for (unsigned s = 0; s < 3; s++) {
		struct wire_msg m = dg_result(2, s);
		n += dg_rec(b + n, 0, &m, NULL, m.count * 2u, (uint8_t)(0x20 + s));
	}
	put("datagram", "all_results", b, n);

	/* forged: from another endpoint, another port, another address; then
	 * the real one, a duplicate and a stale round */
	n = 0;
	for (uint8_t sel = 1; sel <= 3; sel++) {
		struct wire_msg m = dg_result(1, 1);
		n += dg_rec(b + n, sel, &m, NULL, m.count * 4u, 0x66);
	}
	struct wire_msg m = dg_result(1, 1);
	n += dg_rec(b + n, 0, &m, NULL, m.count * 4u, 0x11);
	n += dg_rec(b + n, 0, &m, NULL, m.count * 4u, 0x12);
	m.round = 0;
	n += dg_rec(b + n, 0, &m, NULL, m.count * 4u, 0x13);
	put("datagram", "forged_then_real", b, n);

	/* WAIT (the box waits for rank 1), NACK, timers, then the results */
	n = 0;
	m = (struct wire_msg){ .type = WIRE_WAIT, .job = 65, .token = 0xaa, .key = 2, .seg = 0,
			       .round = 1 };
	uint8_t notice[WIRE_NOTICE_LEN];
	wire_notice_encode(notice, &(struct wire_notice){ .missing = 2, .open_us = 1500000 });
	n += dg_rec(b + n, 0, &m, notice, sizeof(notice), 0);
	m.type = WIRE_NACK;
	m.seg = 1;
	n += dg_rec(b + n, 0, &m, notice, sizeof(notice), 0);
	n += dg_tick(b + n, 50);
	n += dg_tick(b + n, 300);
	for (unsigned s = 0; s < 3; s++) {
		struct wire_msg r = dg_result(2, s);
		n += dg_rec(b + n, 0, &r, NULL, r.count * 2u, 0x30);
	}
	n += dg_tick(b + n, 2000);
	put("datagram", "wait_nack_timers", b, n);

	/* ERROR: the job aborted; NO_WEIGHTS for key 1 */
	n = 0;
	m = (struct wire_msg){ .type = WIRE_ERROR, .job = 65, .token = 0xaa, .key = 1, .seg = 0,
			       .round = 1, .status = WIRE_ST_NO_WEIGHTS };
	n += dg_rec(b + n, 0, &m, NULL, 0, 0);
	m.status = WIRE_ST_NO_JOB;
	m.key = 2;
	n += dg_rec(b + n, 2, &m, NULL, 0, 0);
	n += dg_rec(b + n, 0, &m, NULL, 0, 0);
	n += dg_tick(b + n, 400);
	put("datagram", "errors", b, n);
}

/* ---- fuzz_ctrl_reply: the box's lines (ids: box_endpoints 1, job_join 2,
 * key_declare of key 1 3, of key 2 4) ---- */

#define CR_EPS "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"version\":1,\"mtu\":1500," \
	"\"endpoints\":[{\"ip\":\"198.18.0.1\",\"port\":47000},{\"ip\":\"198.18.0.2\",\"port\":47000}]}}\n"
#define CR_JOIN "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"job_id\":65,\"token\":\"00000000000000aa\"," \
	"\"world\":2,\"seg_bytes\":256,\"chunk_bytes\":512,\"max_bytes\":1000000,\"key_bytes\":100000," \
	"\"slots\":256}}\n"
#define CR_K1 "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"key\":1,\"count\":200,\"dtype\":\"f32\"," \
	"\"seg_elems\":64,\"nsegs\":4,\"segs_per_chunk\":2,\"chunks\":[0,1],\"first_round\":1," \
	"\"sparse\":false,\"collective\":\"allreduce\"}}\n"
#define CR_K2 "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"key\":2,\"count\":300,\"dtype\":\"bf16\"," \
	"\"seg_elems\":128,\"nsegs\":4,\"segs_per_chunk\":2,\"chunks\":[1,0],\"first_round\":3," \
	"\"sparse\":false,\"collective\":\"allgather\"}}\n"
#define CR_ABORT "{\"jsonrpc\":\"2.0\",\"method\":\"job_aborted\",\"params\":{\"job\":\"fz\"," \
	"\"job_id\":65,\"reason\":\"rank 1 lost (control connection closed)\"}}\n"

static void ctrl_reply(void)
{
	put("ctrl_reply", "declared", CR_EPS CR_JOIN CR_K1 CR_K2,
	    strlen(CR_EPS CR_JOIN CR_K1 CR_K2));
	put("ctrl_reply", "declared_then_aborted", CR_EPS CR_JOIN CR_K2 CR_K1 CR_ABORT,
	    strlen(CR_EPS CR_JOIN CR_K2 CR_K1 CR_ABORT));
	const char *busy = CR_EPS CR_JOIN "{\"jsonrpc\":\"2.0\",\"method\":\"noise\",\"params\":{}}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-16,\"message\":\"job fz key 1: "
		"released by rank 0, not yet by rank 1\"}}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-22,\"message\":\"rank 1 declared "
		"it for broadcast\"}}\n";
	put("ctrl_reply", "declare_errors", busy, strlen(busy));
	const char *bad = CR_EPS "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"job_id\":65.0,"
		"\"token\":\"0x00000000000aa0\",\"seg_bytes\":1408}}\n";
	put("ctrl_reply", "bad_join", bad, strlen(bad));
	const char *eperr = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,"
		"\"message\":\"no such method\"}}\n";
	put("ctrl_reply", "endpoints_error", eperr, strlen(eperr));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_seeds DIR\n");
		return 2;
	}
	root = argv[1];
	mkdir(root, 0755);
	frames();
	engine();
	rpc();
	ckpt();
	datagram();
	ctrl_reply();
	return 0;
}
