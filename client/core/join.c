/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * join.c - job_join's request and its answer (docs/rpc.md "job_join"):
 * pbox_connect's join and the rejoin after a lost control connection
 * (xfer/resume.c) send the same params and take the same answer.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/knobs.h"
#include "client/core/client.h"
#include "common/wire.h"

json_t *client_join_params(pbox_client *c)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &c->tp.src, ip, sizeof(ip));
	uint64_t replace_ms = 0;
	knob_value(NULL, KNOB_REPLACE_WAIT, &replace_ms);   /* (checked at connect) */
	/* the job's timeout if this join creates it; heartbeats from the
	 * progress thread (progress.c) tell the box this rank lives */
	json_t *params = json_pack("{s:s, s:i, s:i, s:s, s:i, s:I, s:I, s:i}", "job", c->job,
				   "rank", c->rank, "world", c->world, "data_ip", ip,
				   "data_port", (int)c->tp.port, "mtu", (json_int_t)c->opts.mtu,
				   "timeout_ms", (json_int_t)c->opts.timeout_ms,
				   "heartbeat_ms", CLIENT_HEARTBEAT_MS);
	if (params && replace_ms)
		json_object_set_new(params, "replace_wait_ms", json_integer((json_int_t)replace_ms));
	if (params && c->placement[0])   /* a fleet's box (ops/fleet.c) */
		json_object_set_new(params, "placement", json_string(c->placement));
	if (params && c->secret[0])   /* (checked by pbox_connect) */
		json_object_set_new(params, "join_secret", json_string(c->secret));
	/* The box caps both (--max-job-bytes) but takes no more than its
	 * bounds (docs/rpc.md: INT64_MAX, key_bytes half that): a larger
	 * request is the bound, not a negative json_int_t (-32602,
	 * PBOX_EPROTO). */
	if (params && c->opts.job_bytes)
		json_object_set_new(params, "max_bytes", json_integer(
			c->opts.job_bytes < INT64_MAX ? (json_int_t)c->opts.job_bytes : INT64_MAX));
	else if (params && c->opts.key_bytes)
		json_object_set_new(params, "key_bytes", json_integer(
			c->opts.key_bytes < INT64_MAX / 2 ? (json_int_t)c->opts.key_bytes
							  : INT64_MAX / 2));
	/* the job's nonfinite policy if this join creates it (0: the box's
	 * default, abort) */
	static const char *const nonfinite[] = { NULL, "abort", "skip", "pass" };
	if (params && c->opts.nonfinite)
		json_object_set_new(params, "nonfinite", json_string(nonfinite[c->opts.nonfinite]));
	return params;
}

int client_join_answer(pbox_client *c, const json_t *res)
{
	const char *tok = json_string_value(json_object_get(res, "token"));
	json_t *jid = json_object_get(res, "job_id");
	json_int_t id = json_integer_value(jid);
	json_int_t seg = json_integer_value(json_object_get(res, "seg_bytes"));
	json_t *w = json_object_get(res, "world");

	/* exactly 16 hex digits (docs/rpc.md): strtoull alone also takes
	 * blanks, a sign and "0x" */
	if (!tok || strlen(tok) != 16 || strspn(tok, "0123456789abcdefABCDEF") != 16)
		return client_error(c, PBOX_EPROTO, "job_join: box %s sent token '%s', not 16 "
				    "hex digits", c->control, tok ? tok : "(none)");
	c->token = strtoull(tok, NULL, 16);
	/* a missing or non-integer job_id is not job 0 */
	if (!json_is_integer(jid) || id < 0 || id > UINT32_MAX || seg <= 0 ||
	    seg > WIRE_MAX_PAYLOAD || seg % WIRE_PAYLOAD_ALIGN)
		return client_error(c, PBOX_EPROTO, "job_join: box %s sent job_id %lld, "
				    "seg_bytes %lld", c->control, (long long)id, (long long)seg);
	if (w && json_integer_value(w) != c->world)
		return client_error(c, PBOX_EREJECTED, "job_join: job '%s' has world %lld, "
				    "not %d", c->job, (long long)json_integer_value(w), c->world);
	c->job_id = (uint32_t)id;
	c->seg_bytes = (uint32_t)seg;
	c->chunk_bytes = (uint32_t)json_integer_value(json_object_get(res, "chunk_bytes"));
	json_int_t slots = json_integer_value(json_object_get(res, "slots"));
	c->box_slots = slots > 0 && slots < 65536 ? (uint32_t)slots : 256; /* older boxes: 256 */
	return 0;
}
