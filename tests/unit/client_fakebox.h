/*
 * client_fakebox.h - a minimal in-test pbox box for libpbox's loopback
 * tests: a JSON-RPC control listener (box_endpoints, job_join, key_declare,
 * job_leave; job_aborted notifications) and two UDP data endpoints on
 * 127.0.0.1 that sum PUSH rounds in rank order with the shadow-copy rule of
 * docs/protocol.md. One job, up to FK_MAX_RANKS ranks. Knobs inject loss,
 * silence, aborts and a lost control connection. Not the product's engine:
 * the lead's integration test runs the real pboxd.
 */
#ifndef PBOX_TEST_CLIENT_FAKEBOX_H
#define PBOX_TEST_CLIENT_FAKEBOX_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "common/jsonl.h"
#include "common/sum.h"
#include "common/wire.h"

#ifndef FK_MAX_RANKS
#define FK_MAX_RANKS 8
#endif
#define FK_MAX_CONNS 16
#ifndef FK_MAX_KEYS
#define FK_MAX_KEYS  64
#endif
#define FK_JOB_ID    65u
#define FK_TOKEN     0x0123456789abcdefull

struct fk_key {
	uint32_t key;
	uint64_t count;
	int dtype;
	uint32_t seg_elems, nsegs, nchunks;
	uint32_t *done;
	uint64_t *have;
	uint8_t *contrib;  /* nsegs * FK_MAX_RANKS * seg_bytes */
	uint8_t *shadow;   /* nsegs * seg_bytes */
	uint16_t *shadow_count;
};

struct fakebox {
	/* knobs: set before fakebox_start */
	int world;
	uint32_t seg_bytes;
	uint32_t segs_per_chunk;
	int drop_push_every;     /* drop every Nth PUSH (0: none) */
	int drop_result_every;   /* drop every Nth RESULT sent (0: none) */
	int silent;              /* never answer PUSHes */
	const char *reject_join; /* job_join fails with this message (-22) */
	int abort_after_pushes;  /* after N pushes: job_aborted + ERROR answers */
	int abort_quietly;       /* ... without the notification */
	int close_after_pushes;  /* after N pushes: close the control connections */
	/* state, owned by the box thread */
	int lfd, ufd[2];
	uint16_t ctrl_port, udp_port[2];
	int stop_pipe[2];
	pthread_t th;
	int conns[FK_MAX_CONNS];
	struct jsonl_buf in[FK_MAX_CONNS];
	struct sockaddr_in rank_addr[FK_MAX_RANKS];
	struct fk_key keys[FK_MAX_KEYS];
	int nkeys;
	int aborted;
	/* counters: read after fakebox_stop */
	int pushes, retx_pushes, results_sent, errors_sent, declares, leaves;
};

static int fk_bind(int type, uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		abort();
	*port = ntohs(a.sin_port);
	return fd;
}

static void fk_send_json(struct fakebox *b, int ci, json_t *msg)
{
	if (b->conns[ci] >= 0)
		jsonl_send(b->conns[ci], msg, 1000);
	json_decref(msg);
}

static json_t *fk_error(int code, const char *text)
{
	return json_pack("{s:i, s:s}", "code", code, "message", text);
}

static json_t *fk_endpoints(struct fakebox *b)
{
	return json_pack("{s:i, s:[{s:s, s:i}, {s:s, s:i}], s:i}", "version", WIRE_VERSION,
			 "endpoints", "ip", "127.0.0.1", "port", b->udp_port[0], "ip", "127.0.0.1",
			 "port", b->udp_port[1], "mtu", 1500);
}

static json_t *fk_join(struct fakebox *b, json_t *p, json_t **err)
{
	int rank = (int)json_integer_value(json_object_get(p, "rank"));
	const char *ip = json_string_value(json_object_get(p, "data_ip"));
	int port = (int)json_integer_value(json_object_get(p, "data_port"));

	if (b->reject_join) {
		*err = fk_error(-22, b->reject_join);
		return NULL;
	}
	if (rank < 0 || rank >= b->world || !ip) {
		*err = fk_error(-22, "rank out of range");
		return NULL;
	}
	b->rank_addr[rank] = (struct sockaddr_in){ .sin_family = AF_INET,
						   .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &b->rank_addr[rank].sin_addr);
	return json_pack("{s:i, s:s, s:i, s:i, s:i, s:I}", "job_id", FK_JOB_ID, "token",
			 "0123456789abcdef", "world", b->world, "seg_bytes", b->seg_bytes,
			 "chunk_bytes", 32768, "max_bytes", (json_int_t)1 << 28);
}

static struct fk_key *fk_find(struct fakebox *b, uint32_t key)
{
	for (int i = 0; i < b->nkeys; i++)
		if (b->keys[i].key == key)
			return &b->keys[i];
	return NULL;
}

static struct fk_key *fk_add(struct fakebox *b, uint32_t key, uint64_t count, int dtype)
{
	struct fk_key *k = &b->keys[b->nkeys++];

	k->key = key;
	k->count = count;
	k->dtype = dtype;
	k->seg_elems = b->seg_bytes / (uint32_t)wire_dtype_size((unsigned)dtype);
	k->nsegs = (uint32_t)((count + k->seg_elems - 1) / k->seg_elems);
	k->nchunks = (k->nsegs + b->segs_per_chunk - 1) / b->segs_per_chunk;
	k->done = calloc(k->nsegs, sizeof(*k->done));
	k->have = calloc(k->nsegs, sizeof(*k->have));
	k->contrib = calloc((size_t)k->nsegs * FK_MAX_RANKS, b->seg_bytes);
	k->shadow = calloc(k->nsegs, b->seg_bytes);
	k->shadow_count = calloc(k->nsegs, sizeof(*k->shadow_count));
	return k;
}

static json_t *fk_declare(struct fakebox *b, json_t *p, json_t **err)
{
	uint32_t key = (uint32_t)json_integer_value(json_object_get(p, "key"));
	uint64_t count = (uint64_t)json_integer_value(json_object_get(p, "count"));
	int dtype = wire_dtype_parse(json_string_value(json_object_get(p, "dtype")));
	struct fk_key *k = fk_find(b, key);
	char msg[128];

	b->declares++;
	if (dtype < 0 || count == 0 || (!k && b->nkeys == FK_MAX_KEYS)) {
		*err = fk_error(-22, "bad declaration");
		return NULL;
	}
	if (k && (k->count != count || k->dtype != dtype)) {
		snprintf(msg, sizeof(msg), "key %u: count %llu differs from the declared %llu",
			 key, (unsigned long long)count, (unsigned long long)k->count);
		*err = fk_error(-22, msg);
		return NULL;
	}
	if (!k)
		k = fk_add(b, key, count, dtype);
	json_t *chunks = json_array();
	for (uint32_t i = 0; i < k->nchunks; i++)
		json_array_append_new(chunks, json_integer(i % 2));
	return json_pack("{s:I, s:I, s:s, s:i, s:i, s:i, s:o}", "key", (json_int_t)key,
			 "count", (json_int_t)count, "dtype", wire_dtype_name((unsigned)dtype),
			 "seg_elems", k->seg_elems, "nsegs", k->nsegs, "segs_per_chunk",
			 b->segs_per_chunk, "chunks", chunks);
}

static void fk_rpc(struct fakebox *b, int ci, json_t *req)
{
	const char *m = json_string_value(json_object_get(req, "method"));
	json_t *p = json_object_get(req, "params");
	json_t *res = NULL, *err = NULL;

	if (!m)
		return;
	if (!strcmp(m, "box_endpoints"))
		res = fk_endpoints(b);
	else if (!strcmp(m, "job_join"))
		res = fk_join(b, p, &err);
	else if (!strcmp(m, "key_declare"))
		res = fk_declare(b, p, &err);
	else if (!strcmp(m, "job_leave"))
		res = json_object(), b->leaves++;
	else
		err = fk_error(-32601, "method not found");
	json_t *out = json_pack("{s:s, s:O}", "jsonrpc", "2.0", "id", json_object_get(req, "id"));
	json_object_set_new(out, err ? "error" : "result", err ? err : res);
	fk_send_json(b, ci, out);
}

static void fk_close_conn(struct fakebox *b, int ci)
{
	close(b->conns[ci]);
	b->conns[ci] = -1;
	jsonl_free(&b->in[ci]);
}

static void fk_ctrl_input(struct fakebox *b, int ci)
{
	char *line;
	size_t len;

	if (jsonl_fill(&b->in[ci], b->conns[ci]) <= 0) {
		fk_close_conn(b, ci);
		return;
	}
	while (b->conns[ci] >= 0 && jsonl_next(&b->in[ci], &line, &len) == 1) {
		json_t *req = json_loadb(line, len, 0, NULL);
		if (req)
			fk_rpc(b, ci, req);
		json_decref(req);
	}
}

static void fk_accept(struct fakebox *b)
{
	int fd = accept(b->lfd, NULL, NULL);

	for (int i = 0; fd >= 0 && i < FK_MAX_CONNS; i++) {
		if (b->conns[i] < 0) {
			b->conns[i] = fd;
			jsonl_init(&b->in[i], 0);
			return;
		}
	}
	if (fd >= 0)
		close(fd);
}

static void fk_send_pkt(struct fakebox *b, int ep, int rank, struct wire_msg *h,
			const void *payload, size_t len)
{
	uint8_t pkt[WIRE_HDR_LEN + WIRE_MAX_PAYLOAD];

	if (h->type == WIRE_RESULT && b->drop_result_every &&
	    ++b->results_sent % b->drop_result_every == 0)
		return;
	if (h->type == WIRE_RESULT && !b->drop_result_every)
		b->results_sent++;
	h->rank = (uint16_t)rank;
	wire_encode(pkt, h);
	if (len)
		memcpy(pkt + WIRE_HDR_LEN, payload, len);
	sendto(b->ufd[ep], pkt, WIRE_HDR_LEN + len, 0, (struct sockaddr *)&b->rank_addr[rank],
	       sizeof(b->rank_addr[rank]));
}

static void fk_sum(struct fakebox *b, struct fk_key *k, uint32_t s, uint16_t count)
{
	const void *src[FK_MAX_RANKS];
	uint8_t *base = k->contrib + (size_t)s * FK_MAX_RANKS * b->seg_bytes;

	for (int r = 0; r < b->world; r++)
		src[r] = base + (size_t)r * b->seg_bytes;
	sum_by_name("scalar")->fn[k->dtype](k->shadow + (size_t)s * b->seg_bytes, src,
					     (unsigned)b->world, count);
	k->shadow_count[s] = count;
}

static void fk_maybe_abort(struct fakebox *b)
{
	if (b->close_after_pushes && b->pushes == b->close_after_pushes)
		for (int i = 0; i < FK_MAX_CONNS; i++)
			if (b->conns[i] >= 0)
				fk_close_conn(b, i);
	if (!b->abort_after_pushes || b->pushes != b->abort_after_pushes)
		return;
	b->aborted = 1;
	for (int i = 0; !b->abort_quietly && i < FK_MAX_CONNS; i++)
		if (b->conns[i] >= 0)
			fk_send_json(b, i, json_pack("{s:s, s:s, s:{s:s, s:i, s:s}}", "jsonrpc",
						     "2.0", "method", "job_aborted", "params", "job",
						     "fk", "job_id", FK_JOB_ID, "reason", "rank 1 lost"));
}

static void fk_push(struct fakebox *b, int ep, const uint8_t *pkt, size_t len)
{
	struct wire_msg m;

	if (wire_decode(pkt, len, &m) < 0 || m.type != WIRE_PUSH || m.job != FK_JOB_ID ||
	    m.token != FK_TOKEN || m.rank >= b->world)
		return;
	b->pushes++;
	b->retx_pushes += (m.flags & WIRE_FLAG_RETX) != 0;
	fk_maybe_abort(b);
	if (b->aborted) {
		struct wire_msg e = m;
		e.type = WIRE_ERROR, e.count = 0, e.status = WIRE_ST_NO_JOB;
		b->errors_sent++;
		fk_send_pkt(b, ep, m.rank, &e, NULL, 0);
		return;
	}
	struct fk_key *k = fk_find(b, m.key);
	if (b->silent || (b->drop_push_every && b->pushes % b->drop_push_every == 0) || !k ||
	    m.seg >= k->nsegs)
		return;
	size_t bytes = (size_t)m.count * wire_dtype_size(m.dtype);
	m.type = WIRE_RESULT;
	m.flags = 0;
	if (m.round == k->done[m.seg]) { /* duplicate of a done round: shadow copy */
		fk_send_pkt(b, ep, m.rank, &m, k->shadow + (size_t)m.seg * b->seg_bytes, bytes);
		return;
	}
	if (m.round != k->done[m.seg] + 1 || (k->have[m.seg] >> m.rank & 1))
		return;
	memcpy(k->contrib + ((size_t)m.seg * FK_MAX_RANKS + m.rank) * b->seg_bytes,
	       pkt + WIRE_HDR_LEN, bytes);
	k->have[m.seg] |= 1ull << m.rank;
	if (k->have[m.seg] != (1ull << b->world) - 1)
		return;
	fk_sum(b, k, m.seg, m.count);
	k->have[m.seg] = 0;
	k->done[m.seg] = m.round;
	for (int r = 0; r < b->world; r++)
		fk_send_pkt(b, ep, r, &m, k->shadow + (size_t)m.seg * b->seg_bytes, bytes);
}

static void fk_udp_input(struct fakebox *b, int ep)
{
	uint8_t pkt[WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 64];
	ssize_t n;

	while ((n = recv(b->ufd[ep], pkt, sizeof(pkt), MSG_DONTWAIT)) > 0)
		fk_push(b, ep, pkt, (size_t)n);
}

static void *fk_main(void *arg)
{
	struct fakebox *b = arg;

	for (;;) {
		struct pollfd p[4 + FK_MAX_CONNS] = {
			{ .fd = b->stop_pipe[0], .events = POLLIN },
			{ .fd = b->lfd, .events = POLLIN },
			{ .fd = b->ufd[0], .events = POLLIN },
			{ .fd = b->ufd[1], .events = POLLIN },
		};
		for (int i = 0; i < FK_MAX_CONNS; i++)
			p[4 + i] = (struct pollfd){ .fd = b->conns[i], .events = POLLIN };
		if (poll(p, 4 + FK_MAX_CONNS, 1000) < 0)
			continue;
		if (p[0].revents)
			return NULL;
		if (p[1].revents)
			fk_accept(b);
		for (int ep = 0; ep < 2; ep++)
			if (p[2 + ep].revents)
				fk_udp_input(b, ep);
		for (int i = 0; i < FK_MAX_CONNS; i++)
			if (p[4 + i].revents && b->conns[i] >= 0)
				fk_ctrl_input(b, i);
	}
}

/* Fill b with defaults: world 2, 1408-byte segments, 2 segments per chunk. */
static void fakebox_init(struct fakebox *b)
{
	memset(b, 0, sizeof(*b));
	b->world = 2;
	b->seg_bytes = 1408;
	b->segs_per_chunk = 2;
}

static void fakebox_start(struct fakebox *b)
{
	b->lfd = fk_bind(SOCK_STREAM, &b->ctrl_port);
	listen(b->lfd, 16);
	b->ufd[0] = fk_bind(SOCK_DGRAM, &b->udp_port[0]);
	b->ufd[1] = fk_bind(SOCK_DGRAM, &b->udp_port[1]);
	for (int i = 0; i < 2; i++) {
		int sz = 8 << 20;
		setsockopt(b->ufd[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	}
	for (int i = 0; i < FK_MAX_CONNS; i++)
		b->conns[i] = -1;
	if (pipe(b->stop_pipe) < 0 || pthread_create(&b->th, NULL, fk_main, b) != 0)
		abort();
}

/* "127.0.0.1:port" of the control listener. */
static const char *fakebox_addr(const struct fakebox *b, char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%u", b->ctrl_port);
	return buf;
}

static void fakebox_stop(struct fakebox *b)
{
	if (write(b->stop_pipe[1], "x", 1) != 1)
		abort();
	pthread_join(b->th, NULL);
	for (int i = 0; i < FK_MAX_CONNS; i++)
		if (b->conns[i] >= 0)
			fk_close_conn(b, i);
	close(b->lfd);
	close(b->ufd[0]);
	close(b->ufd[1]);
	close(b->stop_pipe[0]);
	close(b->stop_pipe[1]);
	for (int i = 0; i < b->nkeys; i++) {
		struct fk_key *k = &b->keys[i];
		free(k->done);
		free(k->have);
		free(k->contrib);
		free(k->shadow);
		free(k->shadow_count);
	}
}

#endif
