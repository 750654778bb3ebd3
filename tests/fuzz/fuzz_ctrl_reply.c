/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_ctrl_reply.c - what libpbox makes of the box's lines on its control
 * connection (docs/rpc.md): the answers to box_endpoints and job_join
 * (client/ops/connect.c, read by ctrl_call: client/core/ctrl.c), to
 * key_declare (client/xfer/progress.c's parse_layout and what starts a
 * call on the layout) and the notifications such as job_aborted, all from
 * arbitrary bytes. The two .c files are compiled into this fuzzer for
 * their static parsers (as tests/unit/test_tp_xdp_rx.c does with
 * tp_xdp.c); the rest of libpbox comes from libpbox-internal-fuzz.a.
 *
 * The input is what the box sends, as it is (lines split at '\n'), handed
 * whole to the client through a socket pair whose far end is then shut:
 * the client (fuzz_client.h, rank 0 of 2) calls box_endpoints (request
 * id 1) and job_join (id 2) as pbox_connect does, then declares key 1
 * (200 f32, allreduce, id 3) and key 2 (allgather of 150 bf16 a rank,
 * id 4) as the progress thread does, and reads the rest of the lines as
 * the progress thread would, then sends what the calls may send.
 *
 * Checked, beyond ASan and UBSan: a layout the client takes (the key
 * READY) is one it can use, every segment inside the key and on an
 * endpoint box_endpoints listed; every PUSH names such an endpoint,
 * carries at most seg_bytes from inside the caller's buffer, with the job
 * and token job_join gave (fuzz_client.h's fake transport); every call
 * ends; nothing leaks. FUZZ_CTRL_VERBOSE=1 prints how far an input got.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/ops/connect.c"
#include "common/rpc_client.h"
#include "client/xfer/progress.c"

#include "tests/fuzz/fuzz_client.h"

#define MAX_INPUT (64 * 1024)

/* Every READY key's layout is usable. */
static void check_layout(const pbox_client *c, uint32_t key)
{
	const struct key_state *ks = keytab_find(&c->keys, key);

	if (!ks || ks->phase != KEY_READY)
		return;
	const struct seg_layout *l = &ks->lay;
	CHECK(l->nsegs > 0 && l->seg_elems > 0 && l->segs_per_chunk > 0);
	CHECK((uint64_t)l->nchunks * l->segs_per_chunk >= l->nsegs);
	for (uint32_t s = 0; s < l->nsegs; s++) {
		CHECK(seg_first(l, s) + seg_len(l, s) <= l->count);
		CHECK(seg_len(l, s) > 0 && seg_len(l, s) * l->elem <= c->seg_bytes);
		CHECK(seg_endpoint(l, s) < c->neps);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_tp f;
	pbox_client *c;
	int sv[2];
	char err[CLIENT_MSG_LEN];
	json_t *res = NULL;
	float k1[200];
	uint16_t k2[300], k2in[150];
	struct pbox_req *r[2] = { NULL, NULL };

	if (size > MAX_INPUT)
		return 0;
	c = fz_client_new(&f);
	c->opts.timeout_ms = 20;
	free(c->eps);   /* box_endpoints gives them */
	c->eps = NULL;
	c->neps = 0;
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	c->ctrl.fd = sv[0];
	snprintf(c->ctrl.addr, sizeof(c->ctrl.addr), "%s", c->control);
	CHECK(jsonl_init(&c->ctrl.in, RPC_CLIENT_MAX_REPLY) == 0);
	CHECK(write(sv[1], data, size) == (ssize_t)size);
	shutdown(sv[1], SHUT_WR);

	if (get_endpoints(c) < 0)
		goto out;
	CHECK(c->neps > 0 && c->eps);
	f.neps = c->neps;
	if (ctrl_call(&c->ctrl, "job_join", NULL, 20, &res, err, sizeof(err)) < 0)
		goto out;
	int rc = client_join_answer(c, res);
	json_decref(res);
	if (rc < 0)
		goto out;
	f.job = c->job_id;
	f.token = c->token;
	f.max_payload = c->seg_bytes;

	memset(k1, 0, sizeof(k1));
	memset(k2, 0, sizeof(k2));
	memset(k2in, 0, sizeof(k2in));
	fz_client_register(&f, k1, sizeof(k1));
	fz_client_register(&f, k2, sizeof(k2));
	fz_client_register(&f, k2in, sizeof(k2in));
	r[0] = req_new(c, 1, &op_allreduce);
	r[1] = req_new(c, 2, &op_coll);
	CHECK(r[0] && r[1]);
	r[0]->src = r[0]->buf = k1;
	r[0]->count = 200;
	r[0]->dtype = r[0]->rdtype = PBOX_F32;
	r[1]->src = k2in;   /* rank 0's slice: elements 0..149 */
	r[1]->buf = k2;
	r[1]->count = 300;
	r[1]->dtype = r[1]->rdtype = PBOX_BF16;
	r[1]->coll = COLL_ALLGATHER;
	uint64_t now = clock_ns();
	for (int i = 0; i < 2; i++)
		progress_admit(c, r[i], now);
	read_ctrl(c, true);       /* the lines ctrl_call read already */
	check_layout(c, 1);
	check_layout(c, 2);
	xfer_fill(c, now);
	while (c->ctrl_open) {    /* the rest, until the box's end is shut */
		read_ctrl(c, false);
		check_layout(c, 1);
		check_layout(c, 2);
		xfer_fill(c, now);
	}
	if (getenv("FUZZ_CTRL_VERBOSE")) /* what the input reached */
		for (int i = 0; i < 2; i++) {
			const struct key_state *ks = keytab_find(&c->keys, r[i]->key);
			fprintf(stderr, "key %u: phase %d, finished %d rc %d (%s); %llu PUSHes\n",
				r[i]->key, ks ? ks->phase : -1, r[i]->finished, r[i]->rc,
				r[i]->finished ? r[i]->msg : "", (unsigned long long)f.sent);
		}
	xfer_timers(c, now + 5 * 1000000000ull);
	xfer_apply_pending(c);
out:
	close(sv[1]);
	fz_client_free(c);   /* (closes sv[0]) */
	for (int i = 0; i < 2; i++) {
		if (r[i])
			CHECK(r[i]->finished);
		req_free(r[i]);
	}
	return 0;
}
