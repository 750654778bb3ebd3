/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_worker.h - checkpoint files written off the control thread
 * (docs/operations.md "Checkpoints"): the control thread copies a job's
 * snapshot into memory a piece per poll (ckpt_worker_save, at one cut),
 * hands it to the worker thread, and goes on serving RPCs; the worker writes, fsyncs and
 * renames the files (ps_ckpt_write_set). One checkpoint is written at a
 * time, box-wide.
 *
 * A job_save is answered when its files are written (or failed), from
 * ckpt_worker_poll on the control thread; if that takes longer than
 * --checkpoint-timeout-ms the call is answered -ETIMEDOUT at the bound,
 * naming the job and directory, and the write goes on (a thread blocked
 * in a slow disk cannot be stopped): no other checkpoint starts until it
 * ends, and its end is logged.
 *
 * With --checkpoint-dir DIR, ckpt_worker_poll also saves every PS job
 * into DIR/<job>/ every --checkpoint-every seconds (a job that took no
 * step since its last save is skipped; one whose keys are stepping is
 * tried again a second later), so a restarted pboxd restores a job
 * created again with the same name (ps_ckpt_auto_dir, jobs_keys.c).
 */
#ifndef PBOX_CKPT_WORKER_H
#define PBOX_CKPT_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "control/box.h"
#include "control/ps_ckpt.h"

struct ckpt_worker;

/* Start the worker thread: 0, or -errno. ckpt_worker_close waits for a
 * write in flight to end, then stops the thread. */
int ckpt_worker_open(struct ckpt_worker **out);
void ckpt_worker_close(struct ckpt_worker *w);

/* How the worker answers a session: the RPC server's send (a new
 * reference is not taken; msg is borrowed). */
typedef int (*ckpt_send_fn)(void *ctx, void *session, const json_t *msg);

/*
 * Hand set (taken over, even on failure) for job to be written into dir;
 * session and id (borrowed: a reference is taken) get the job_save answer
 * when it is written, or at the timeout (timeout_ms 0: none); session
 * NULL: a periodic save, only logged. 0, or -EBUSY (a write is in flight:
 * the message names its job, directory and age), -ENOMEM.
 */
int ckpt_worker_submit(struct ckpt_worker *w, struct ps_ckpt_set *set, const char *job,
		       const char *dir, void *session, json_t *id, unsigned timeout_ms,
		       char *err, size_t errlen);

/*
 * job_save (and the periodic saves): the snapshot of j is copied a piece
 * per poll on the control thread (ps_ckpt_cut_step: CUT_STEP bytes, so a
 * large key never holds it long; one cut, as ps_ckpt_snap_job), then
 * written as ckpt_worker_submit's set; session and id get the answer (a
 * failed copy's error, or the write's). 0, or -EBUSY (a checkpoint is
 * being copied or written), -EINVAL (no PS key), -ENOMEM.
 * ckpt_worker_copying: a copy of job_id's keys is under way (key_write
 * is refused meanwhile: it would change a key between two pieces);
 * ckpt_worker_hurry: a copy is under way (the server polls without
 * waiting, so that it ends soon).
 */
int ckpt_worker_save(struct ckpt_worker *w, const struct job *j, const char *dir,
		     void *session, json_t *id, unsigned timeout_ms, bool patient, char *err,
		     size_t errlen);
int ckpt_worker_copying(const struct ckpt_worker *w, uint32_t job_id);
int ckpt_worker_hurry(const struct ckpt_worker *w);

/* Control thread, every poll: deliver a finished write's answer, answer
 * one past its timeout, and start the periodic saves that are due. */
void ckpt_worker_poll(struct ckpt_worker *w, struct box *box, ckpt_send_fn send,
		      void *send_ctx);

/* The session has ended: its pending answers are dropped (a job_save's,
 * and its key_declares waiting for a checkpoint read). */
void ckpt_worker_forget(struct ckpt_worker *w, void *session);

/* The key_declares waiting for their key's checkpoint to be read
 * (control/ckpt_restore.h); ckpt_worker_poll answers them. */
struct ckpt_restore *ckpt_worker_restores(struct ckpt_worker *w);

/* Writes that ended since open: finished ok, failed, answered at the
 * timeout (counters for tests and logs). */
struct ckpt_worker_stats {
	unsigned long written, failed, timed_out, auto_saved;
};
struct ckpt_worker_stats ckpt_worker_stats(struct ckpt_worker *w);

#endif
