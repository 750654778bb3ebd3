/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_load.h - a PS key's checkpoint read off the control thread (issue
 * 44.4): a key_declare that restores a key hands its file to a reader
 * thread of its own, which reads the file, checks it whole
 * (ps_ckpt_load_read: the same checks and messages as ever) and copies
 * the arrays into the key's place in the job arena; the control thread
 * polls it (jobs_restores_poll) and goes on serving RPCs meanwhile.
 *
 * A read is dropped (the key's declaration failed, timed out, or its job
 * went): the thread may go on reading (a thread blocked in a slow disk
 * cannot be stopped) but never touches the arena after the drop; a drop
 * waits at most for a copy in progress (memory speed, never the disk).
 * At most CKPT_LOAD_MAX reads are in flight, box-wide, dropped ones
 * included: one more waits (-EAGAIN) until one ends.
 */
#ifndef PBOX_CKPT_LOAD_H
#define PBOX_CKPT_LOAD_H

#include <stddef.h>

#include "control/ps_ckpt.h"

#define CKPT_LOAD_MAX 16

struct ckpt_load;

/* Start reading a's file (a is copied): 0 and *out, -EAGAIN (CKPT_LOAD_MAX
 * in flight), -ENOMEM or -errno of pthread_create. */
int ckpt_load_start(const struct ps_ckpt_load_args *a, struct ckpt_load **out);

/* 1: still reading; 0: read, checked and copied into a's arrays (*got
 * its header); or the read's negative errno with its message. */
int ckpt_load_poll(struct ckpt_load *l, struct ckpt_hdr *got, char *err, size_t errlen);

/* The control thread lets go of l (NULL ignored): after this, l's thread
 * never writes the arena. */
void ckpt_load_drop(struct ckpt_load *l);

/* Reads in flight (their threads alive), box-wide. */
unsigned ckpt_load_inflight(void);

#endif
