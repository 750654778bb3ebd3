/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_restore.h - key_declares answered later (issue 44.4): a PS key
 * restored from a checkpoint has its file read off the control thread
 * (jobs.h JOBS_PENDING, control/ckpt_load.h); each declaration of it
 * meanwhile waits here (its session and request id) and is answered when
 * the read ends, every one with the same answer: the key's geometry, or
 * the read's error. A waiter whose connection closed is dropped
 * (ckpt_restore_forget: no answer goes to a closed session); one whose
 * job went before the read ended is answered -ECONNABORTED.
 *
 * Control thread only. The checkpoint worker (ckpt_worker.h) owns one and
 * drives it from ckpt_worker_poll and ckpt_worker_forget.
 */
#ifndef PBOX_CKPT_RESTORE_H
#define PBOX_CKPT_RESTORE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "control/box.h"

struct ckpt_restore;

int ckpt_restore_open(struct ckpt_restore **out);
void ckpt_restore_close(struct ckpt_restore *r);

/* session's declaration of job_id's key (request id, borrowed: a
 * reference is taken) waits for the read: 0, or -ENOMEM with the
 * message. */
int ckpt_restore_wait(struct ckpt_restore *r, uint32_t job_id, uint32_t key, void *session,
		      json_t *id, char *err, size_t errlen);

/* End the reads that ended (jobs_restores_poll) and answer their waiters
 * with send (ckpt_worker.h ckpt_send_fn); answer those whose job went. */
typedef int (*ckpt_restore_send_fn)(void *ctx, void *session, const json_t *msg);
void ckpt_restore_poll(struct ckpt_restore *r, struct box *box, ckpt_restore_send_fn send,
		       void *send_ctx);

/* The session has ended: its waiting declarations are dropped. */
void ckpt_restore_forget(struct ckpt_restore *r, void *session);

/* Declarations waiting (tests). */
unsigned ckpt_restore_waiting(const struct ckpt_restore *r);

#endif
