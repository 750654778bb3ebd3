/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_ckpt.h - checkpoints of PS keys (docs/operations.md "Checkpoints"):
 * one file per key, DIR/key-<K>.pboxckpt, holding the declaration it
 * belongs to (count, dtypes, optimizer and hyperparameters), the number of
 * optimizer steps taken, the fp32 weights and the optimizer's state
 * planes. job_save and --checkpoint-dir write them (ps_ckpt_snap_job,
 * then ps_ckpt_write_set on the checkpoint thread, control/ckpt_worker.h);
 * a job created with `restore`, or again under --checkpoint-dir, loads
 * them when its PS keys are declared (ps_ckpt_load), and
 * the key starts from there: its init round keeps the loaded weights, Adam's step
 * count goes on.
 *
 * The file format and the checkpoint directory rule: control/ckpt_file.h.
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

#include "control/ckpt_file.h"

/* DIR/key-<K>.pboxckpt into buf (size >= PS_CKPT_PATH). */
#define PS_CKPT_PATH CKPT_PATH
void ps_ckpt_path(char *buf, size_t size, const char *dir, uint32_t key);

/* A key job_save wrote: its number, index in j->keys, file size. */
struct ps_ckpt_saved {
	uint32_t key;
	uint32_t index;
	uint64_t bytes;
};

/* One key's snapshot in memory: its file's header (hlen bytes) and data
 * (dlen bytes: the weights, then each state plane), the round it holds
 * (engine_seg done) and the optimizer steps. */
struct ps_ckpt_snap {
	uint32_t key, index, done;
	uint64_t steps, bytes;       /* bytes: the file's */
	size_t hlen, dlen;
	uint8_t head[CKPT_HDR + CKPT_NAME_MAX];
	float *data;
};

/* A job's checkpoint in memory: every PS key at one cut. */
struct ps_ckpt_set {
	uint32_t n;
	struct ps_ckpt_snap *s;
};

/*
 * A checkpoint is taken in two parts. ps_ckpt_snap_job (control thread,
 * which owns the job) copies every PS key of j into memory, each at one
 * completed round with none open; only if no key completed a round since
 * its own copy (then all stood at their copied steps at once) is the set
 * kept, else it is taken again (3 times in all, then -EBUSY naming the
 * key that moved); !patient: each key and the cut are tried once, so the
 * control thread never waits (the periodic saves try again later). 0, or
 * -EINVAL (no PS key), -EBUSY, -ENODATA (a key has no weights yet),
 * -ENOMEM, with the message. ps_ckpt_write_set (any
 * thread: it touches only the set) then writes the files into dir: the
 * directory rule checked (ckpt_file.h), every key into its temporary
 * file, fsynced, then all renamed to their names and the directory
 * fsynced. A failure leaves no temporary file and the directory's earlier
 * checkpoint as it was (but for a rename failing part-way, named). ka is
 * told every 64 MiB written (NULL: none). 0 or -errno with the message.
 * ps_ckpt_set_free frees the set.
 *
 * ps_ckpt_save_job: both at once (saved, j->nkeys entries, gets the keys,
 * *n how many). ps_ckpt_snap_key: one key's copy (-EBUSY: stepping for
 * 0.1 s; -ENODATA), freed with ps_ckpt_snap_free; ps_ckpt_unchanged: no segment of k completed a round
 * since a copy at round done.
 */
int ps_ckpt_snap_job(const struct job *j, struct ps_ckpt_set *set, bool patient, char *err,
		     size_t errlen);
int ps_ckpt_write_set(const struct ps_ckpt_set *set, const char *dir,
		      const struct box_keepalive *ka, char *err, size_t errlen);
void ps_ckpt_set_free(struct ps_ckpt_set *set);
int ps_ckpt_save_job(const struct job *j, const char *dir, const struct box_keepalive *ka,
		     struct ps_ckpt_saved *saved, uint32_t *n, char *err, size_t errlen);
int ps_ckpt_snap_key(const struct job *j, const struct job_key *k, struct ps_ckpt_snap *s,
		     char *err, size_t errlen);
bool ps_ckpt_unchanged(const struct job_key *k, uint32_t done);
void ps_ckpt_snap_free(struct ps_ckpt_snap *s);

/*
 * The same snapshot a piece at a time, so that the control thread is
 * never held for long (issue 44.4: a 512 MiB key held it 0.33-0.73 s):
 * ps_ckpt_cut_begin takes j's PS keys and their buffers (-EINVAL no PS
 * key, -ENOMEM); each ps_ckpt_cut_step (control thread, one per poll)
 * copies at most budget bytes more, each segment strictly at one
 * completed round with none open (copy_range) and every piece of a key
 * at the key's round; once all are copied it checks that no key
 * completed a round since its copy, so all stood at their copied rounds
 * at once: one cut, as ps_ckpt_snap_job. A key that stepped meanwhile
 * starts the copy over (3 tries if patient, else 1: then -EBUSY naming
 * it); one mid-step is waited for across steps (0.1 s if patient, else
 * -EBUSY). The job must not write its keys between steps (key_write is
 * refused while a cut of its job runs: ckpt_worker_copying). j: the job
 * looked up again by id for every step (NULL or another: -ECONNABORTED);
 * a key released meanwhile: -EBUSY. 1: more to copy; 0: done
 * (ps_ckpt_cut_take gives the set); < 0 with the message.
 */
struct ps_ckpt_cut;
int ps_ckpt_cut_begin(const struct job *j, bool patient, struct ps_ckpt_cut **out,
		      char *err, size_t errlen);
int ps_ckpt_cut_step(const struct job *j, struct ps_ckpt_cut *c, size_t budget, char *err,
		     size_t errlen);
void ps_ckpt_cut_take(struct ps_ckpt_cut *c, struct ps_ckpt_set *set);
uint32_t ps_ckpt_cut_job(const struct ps_ckpt_cut *c);
void ps_ckpt_cut_free(struct ps_ckpt_cut *c);

/* Load key k's checkpoint from dir into its PS state (before the key is
 * installed on the lcores): the directory must meet the rule and the file
 * be a regular file (ckpt_file.h) holding the same count, dtypes,
 * optimizer and hyperparameters as k's declaration and (same_job) being
 * of j's name and world, whole; -EINVAL naming the file and the first
 * thing wrong, -ENOENT if there is none. The file is read and checked
 * whole before the key's state is touched: a refused file loads nothing.
 * Sets restored and step0. Tells ka (the watchdog) as it reads. */
int ps_ckpt_load(const struct job *j, const struct job_key *k, const char *dir,
		 int same_job, const struct box_keepalive *ka, char *err, size_t errlen);

/*
 * ps_ckpt_load in parts, so that the file is read and checked off the
 * control thread (control/ckpt_load.h): ps_ckpt_load_prepare (control
 * thread) takes what the load needs from the declaration into a: the
 * header the file must have, the directory and the key's arrays in the
 * arena; ps_ckpt_load_read (any thread: it touches only a and the file)
 * reads and checks the file whole (the same checks and messages as
 * ps_ckpt_load; *buf to free, *data the arrays in it); ps_ckpt_load_copy
 * copies them into the key's arrays; ps_ckpt_load_done (control thread)
 * sets restored, step0 and the buffer flag.
 */
struct ps_ckpt_load_args {
	char dir[CKPT_PATH];
	char who[JOB_NAME_MAX + 32];    /* "job NAME key K": messages start so */
	struct ckpt_hdr want;
	uint32_t key;
	uint64_t count;
	unsigned narrays;
	float *dst[1 + OPTIM_MAX_PLANES];
};
void ps_ckpt_load_prepare(const struct job *j, const struct job_key *k, const char *dir,
			  int same_job, struct ps_ckpt_load_args *a);
int ps_ckpt_load_read(const struct ps_ckpt_load_args *a, const struct box_keepalive *ka,
		      uint8_t **buf, const uint8_t **data, struct ckpt_hdr *got, char *err,
		      size_t errlen);
void ps_ckpt_load_copy(const struct ps_ckpt_load_args *a, const uint8_t *data,
		       const struct box_keepalive *ka);
void ps_ckpt_load_done(const struct job_key *k, const struct ckpt_hdr *got);

/* --checkpoint-dir: a job's directory ROOT/<job> into buf. Only a job
 * named with at most PS_CKPT_JOB_DIR_MAX of [A-Za-z0-9._-], not starting
 * with '.', has one (-EINVAL). ROOT must meet the directory rule; create:
 * the job's directory is made (0700) if missing; else -ENOENT if it is.
 * 0 or a negative errno with the message. */
#define PS_CKPT_JOB_DIR_MAX 200
int ps_ckpt_auto_dir(char *buf, size_t size, const char *root, const char *job, int create,
		     char *err, size_t errlen);

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
