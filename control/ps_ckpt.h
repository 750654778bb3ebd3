/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_ckpt.h - checkpoints of PS keys (docs/operations.md "Checkpoints"):
 * one file per key, DIR/key-<K>.pboxckpt, holding the declaration it
 * belongs to (count, dtypes, optimizer and hyperparameters), the number of
 * optimizer steps taken, the fp32 weights and the optimizer's state
 * planes. job_save writes them (ps_ckpt_save); a job created with
 * `restore` loads them when its PS keys are declared (ps_ckpt_load), and
 * the key starts from there: its init round keeps the loaded weights, Adam's step
 * count goes on.
 *
 * File layout, little-endian: "PBOXCKP1", u32 version 1, u32 key, u64
 * count, u8 gradient dtype, u8 weights dtype, u8 average, u8 optimizer,
 * u8 nesterov, u8 buffer written (SGD: the momentum buffer was given by
 * key_write, so the first step continues it; 0 in files of pbox before
 * 2026-11-25), 2 zero bytes, f64 momentum, dampening, weight_decay,
 * beta1, beta2, eps, u64 steps, u32 planes, u32 0, 8 reserved bytes
 * (written zero, not read: earlier files hold anything there): 104 bytes
 * of header; then (1 + planes) arrays of count f32: the weights, then
 * each state plane.
 *
 * Snapshots run on the control thread while the lcores may be stepping:
 * each segment is copied between two reads of its round and slot, and a
 * key is saved only if every segment was copied at one same completed
 * round with no round open on it (else -EBUSY: save between steps); a
 * job's keys are saved together only if none moved on while the others
 * were copied (ps_ckpt_save_job).
 */
#ifndef PBOX_PS_CKPT_H
#define PBOX_PS_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/jobs.h"

#define PS_CKPT_HDR 104

/* DIR/key-<K>.pboxckpt into buf (size >= PS_CKPT_PATH). */
#define PS_CKPT_PATH 4200
void ps_ckpt_path(char *buf, size_t size, const char *dir, uint32_t key);

/* A key job_save wrote: its number, index in j->keys, file size. */
struct ps_ckpt_saved {
	uint32_t key;
	uint32_t index;
	uint64_t bytes;
};

/*
 * job_save: a checkpoint of every PS key of j into dir, all at one cut.
 * Every key is snapshotted into DIR/key-<K>.pboxckpt.tmp first; only if no
 * key completed a round since its own snapshot (then all stood at their
 * saved steps at once) are the files renamed to their names, else the
 * temporary files go and the whole save is tried again (3 times in all,
 * then -EBUSY naming the key that moved). A failure leaves no new file
 * and the directory's earlier checkpoint as it was (but for a rename
 * failing part-way, named). ka is told every 64 MiB written (NULL: none).
 * saved (j->nkeys entries) gets the keys, *n how many. 0, or -EINVAL (no PS key), -EBUSY, -ENODATA, -ENOMEM, -errno
 * (the files), with the message in err.
 */
int ps_ckpt_save_job(const struct job *j, const char *dir, const struct box_keepalive *ka,
		     struct ps_ckpt_saved *saved, uint32_t *n, char *err, size_t errlen);

/* Its steps: write key k's snapshot into DIR/key-<K>.pboxckpt.tmp
 * (*bytes: the file's size; *done: the round it holds, engine_seg done):
 * 0, or -EBUSY (stepping: copied at different rounds after a few tries),
 * -ENODATA (no weights yet: the init round has not completed), -EIO /
 * -errno (the file). ps_ckpt_unchanged: no segment of k completed a round
 * since. ps_ckpt_commit renames the file to its name (a reader never sees
 * half a file); ps_ckpt_discard removes it. */
int ps_ckpt_save(const struct job *j, const struct job_key *k, const char *dir,
		 const struct box_keepalive *ka, uint64_t *bytes, uint32_t *done, char *err,
		 size_t errlen);
bool ps_ckpt_unchanged(const struct job_key *k, uint32_t done);
int ps_ckpt_commit(const struct job *j, uint32_t key, const char *dir, char *err, size_t errlen);
void ps_ckpt_discard(const char *dir, uint32_t key);

/* Load key k's checkpoint from dir into its PS state (before the key is
 * installed on the lcores): the file must hold the same count, dtypes,
 * optimizer and hyperparameters as k's declaration (-EINVAL naming the
 * first difference), -ENOENT if there is none. Sets restored and step0.
 * Reads in pieces, telling ka (the watchdog) after each, as a save does. */
int ps_ckpt_load(const struct job *j, const struct job_key *k, const char *dir,
		 const struct box_keepalive *ka, char *err, size_t errlen);

/*
 * Worker access between steps (key_read, key_write): array a is 0 for the
 * weights, 1.. for the state planes; elements [first, first + n).
 * ps_ckpt_read copies them and gives the optimizer steps they hold; the
 * caller is a rank of the job with no call in flight on the key, so no
 * round can complete meanwhile even if the other ranks pushed the next
 * step (-EBUSY only if the segments were at different rounds). ps_ckpt_write overwrites them; the caller
 * must be rank 0 with no call in flight on the key, so no segment can
 * complete meanwhile (-ENODATA before the init round). Written weights
 * are the next step's start; until it, retransmissions of the last
 * step still get its weights: when those are the weights themselves
 * (f32), written ones wait in the key's stage (jobs_ps_stage first;
 * reads see them), else the results are a copy the write leaves alone. ps_ckpt_set_step makes the next step number steps + 1
 * (Adam's bias correction). 0 or a negative errno with the message.
 */
int ps_ckpt_read(const struct job *j, const struct job_key *k, unsigned a, uint64_t first,
		 uint32_t n, float *out, uint64_t *steps, char *err, size_t errlen);
int ps_ckpt_write(const struct job *j, const struct job_key *k, unsigned a, uint64_t first,
		  uint32_t n, const float *in, char *err, size_t errlen);
int ps_ckpt_set_step(const struct job *j, const struct job_key *k, uint64_t steps,
		     char *err, size_t errlen);

#endif
