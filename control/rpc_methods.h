/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_methods.h - the handlers of the control protocol (docs/rpc.md), one
 * small file per concern: job_rpc.c (jobs), key_rpc.c (key_declare,
 * key_release), ckpt_rpc.c (a PS key's weights and state: job_save,
 * key_read, key_write), box_rpc.c (the box). rpc.c lists them in its method
 * table. Each has the rpc_handler_fn signature.
 */
#ifndef PBOX_RPC_METHODS_H
#define PBOX_RPC_METHODS_H

#include "control/rpc.h"

#define RPC_HANDLER(name) \
	int name(struct rpc_ctx *ctx, json_t *params, json_t **result, char *err, size_t errlen)

RPC_HANDLER(rpc_job_create);
RPC_HANDLER(rpc_job_join);
RPC_HANDLER(rpc_job_leave);
RPC_HANDLER(rpc_job_list);
RPC_HANDLER(rpc_job_status);
RPC_HANDLER(rpc_job_abort);
RPC_HANDLER(rpc_heartbeat);
RPC_HANDLER(rpc_key_declare);
RPC_HANDLER(rpc_key_release);
/* key_declare's result for k of j (a new reference, NULL: out of memory):
 * also the answer of a declaration that waited for the key's checkpoint
 * (control/ckpt_restore.h). */
struct job;
struct job_key;
json_t *rpc_key_declared(struct box *box, const struct job *j, const struct job_key *k);
/* ckpt_rpc.c */
RPC_HANDLER(rpc_job_save);
RPC_HANDLER(rpc_key_read);
RPC_HANDLER(rpc_key_write);
RPC_HANDLER(rpc_box_endpoints);
RPC_HANDLER(rpc_box_status);
RPC_HANDLER(rpc_box_stats);

#endif
