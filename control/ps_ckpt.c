/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_ckpt.c - PS keys' checkpoint files: a consistent snapshot of a key's
 * weights and optimizer state taken beside the running lcores, its file,
 * and loading it into a newly declared key. See ps_ckpt.h for the layout
 * and the rules.
 */
#include "control/ps_ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/sum.h"

#define MAGIC "PBOXCKP1"
#define SNAP_TRIES 200       /* a key mid-step is tried again ... */
#define SNAP_PAUSE_NS 500000 /* ... after 0.5 ms, for up to 0.1 s */
#define SAVE_TRIES 3         /* a job whose keys moved on during its save */
#define IO_PIECE (64u << 20) /* bytes written or read between keepalives */

void ps_ckpt_path(char *buf, size_t size, const char *dir, uint32_t key)
{
	snprintf(buf, size, "%s/key-%" PRIu32 ".pboxckpt", dir, key);
}

/* ---- header ---- */

struct hdr {
	uint32_t key;
	uint64_t count;
	uint8_t dtype, rdtype, average, kind, nesterov;
	uint8_t buf_written;   /* SGD: the momentum buffer was written (key_write) */
	double momentum, dampening, weight_decay, beta1, beta2, eps;
	uint64_t steps;
	uint32_t planes;
};

static uint8_t *put(uint8_t *p, const void *v, size_t n)
{
	memcpy(p, v, n); /* x86-64: already little-endian */
	return p + n;
}

static const uint8_t *get(const uint8_t *p, void *v, size_t n)
{
	memcpy(v, p, n);
	return p + n;
}

static void hdr_encode(uint8_t b[PS_CKPT_HDR], const struct hdr *h)
{
	uint32_t version = 1, zero = 0;
	uint8_t *p = put(b, MAGIC, 8);

	p = put(p, &version, 4);
	p = put(p, &h->key, 4);
	p = put(p, &h->count, 8);
	uint8_t small[8] = { h->dtype, h->rdtype, h->average, h->kind, h->nesterov,
			     h->buf_written };
	p = put(p, small, 8);
	p = put(p, &h->momentum, 8);
	p = put(p, &h->dampening, 8);
	p = put(p, &h->weight_decay, 8);
	p = put(p, &h->beta1, 8);
	p = put(p, &h->beta2, 8);
	p = put(p, &h->eps, 8);
	p = put(p, &h->steps, 8);
	p = put(p, &h->planes, 4);
	p = put(p, &zero, 4);
	memset(p, 0, (size_t)(b + PS_CKPT_HDR - p));   /* reserved */
}

static int hdr_decode(const uint8_t b[PS_CKPT_HDR], struct hdr *h)
{
	uint32_t version, zero;
	uint8_t small[8];
	const uint8_t *p = b + 8;

	if (memcmp(b, MAGIC, 8) != 0)
		return -1;
	p = get(p, &version, 4);
	p = get(p, &h->key, 4);
	p = get(p, &h->count, 8);
	p = get(p, small, 8);
	h->dtype = small[0];
	h->rdtype = small[1];
	h->average = small[2];
	h->kind = small[3];
	h->nesterov = small[4];
	h->buf_written = small[5] != 0;
	p = get(p, &h->momentum, 8);
	p = get(p, &h->dampening, 8);
	p = get(p, &h->weight_decay, 8);
	p = get(p, &h->beta1, 8);
	p = get(p, &h->beta2, 8);
	p = get(p, &h->eps, 8);
	p = get(p, &h->steps, 8);
	p = get(p, &h->planes, 4);
	get(p, &zero, 4);
	return version == 1 && zero == 0 && h->planes <= OPTIM_MAX_PLANES ? 0 : -1;
}

static struct hdr hdr_of(const struct job_key *k, uint64_t steps)
{
	const struct optim_params *o = &k->ps.opt;

	return (struct hdr){
		.key = k->key, .count = k->geom.count, .dtype = k->dtype,
		.rdtype = (uint8_t)k->ps.rdtype, .average = (uint8_t)k->ps.average,
		.kind = o->kind, .nesterov = o->nesterov,
		.buf_written = k->ek->ps->buf_written != 0, .momentum = o->momentum,
		.dampening = o->dampening, .weight_decay = o->weight_decay,
		.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .steps = steps,
		.planes = optim_planes(o),
	};
}

/* ---- snapshot ---- */

/* The arrays a snapshot holds: weights, then the state planes. */
static unsigned narrays(const struct job_key *k)
{
	return 1 + optim_planes(&k->ps.opt);
}

static float *array_of(const struct engine_ps *ps, unsigned a)
{
	return a == 0 ? ps->w : ps->st[a - 1];
}

/* Whether segment s's weights wait in the stage (written since its last
 * round, engine_ps pending). */
static bool staged(const struct engine_ps *ps, uint32_t s)
{
	return ps->pending && __atomic_load_n(&ps->pending[s], __ATOMIC_ACQUIRE);
}

/* Array a as a reader sees segment s of it: the stage's weights while
 * they wait there. */
static const float *seen(const struct engine_ps *ps, unsigned a, uint32_t s)
{
	return a == 0 && staged(ps, s) ? ps->staged : array_of(ps, a);
}

/* Copy elements [first, first + n) of arrays [a0, a1) of k into out (one
 * run of n floats per array), segment by segment, each at one completed
 * round (read before and after the copy), all at the same; *round gets
 * it. strict: also no round open on a segment (a round completing while
 * it is copied would tear the copy; between the checks the completion
 * keeps its slot). Not strict: the caller is one of the job's ranks with
 * no contribution in flight on the key, so no round can complete. 0, or
 * -EAGAIN (a segment was stepping or at another round). */
static int copy_range(const struct job_key *k, unsigned a0, unsigned a1, uint64_t first,
		      uint64_t n, float *out, uint32_t *round, int strict)
{
	const struct engine_key *ek = k->ek;
	uint64_t end = first + n;

	for (uint32_t s = (uint32_t)(first / ek->seg_elems); n && s < ek->nsegs; s++) {
		struct engine_seg *sg = &ek->segs[s];
		uint64_t lo = (uint64_t)s * ek->seg_elems, hi = lo + ek->seg_elems;
		if (lo >= end)
			break;
		lo = lo < first ? first : lo;
		hi = hi > end ? end : hi;
		uint32_t done = __atomic_load_n(&sg->done, __ATOMIC_ACQUIRE);
		uint16_t slot = __atomic_load_n(&sg->slot, __ATOMIC_ACQUIRE);
		if ((strict && slot != ENGINE_NO_SLOT) || (lo > first && done != *round))
			return -EAGAIN;
		*round = done;
		for (unsigned a = a0; a < a1; a++)
			memcpy(out + (a - a0) * n + (lo - first), seen(ek->ps, a, s) + lo,
			       (hi - lo) * sizeof(float));
		/* the slot, then done: the lcore opens the slot before it
		 * touches the weights and stores done before it frees the slot,
		 * so a round that ran during the copy shows in one of them */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if ((strict && __atomic_load_n(&sg->slot, __ATOMIC_ACQUIRE) != ENGINE_NO_SLOT) ||
		    __atomic_load_n(&sg->done, __ATOMIC_ACQUIRE) != done)
			return -EAGAIN;
	}
	return 0;
}

/* copy_range, tried again while the key is stepping (up to 0.1 s; not
 * strict: once, as nothing can step then, so segments at different
 * rounds stay so and a rank's reads never hold the control thread); *done
 * gets the round the copy's segments completed (engine_seg done). */
static int snapshot(const struct job *j, const struct job_key *k, unsigned a0, unsigned a1,
		    uint64_t first, uint64_t n, float *out, uint32_t *done, int strict,
		    char *err, size_t errlen)
{
	struct timespec pause = { 0, SNAP_PAUSE_NS };

	for (int t = 0; t < (strict ? SNAP_TRIES : 1); t++) {
		if (t)
			nanosleep(&pause, NULL);
		if (copy_range(k, a0, a1, first, n, out, done, strict) == 0) {
			if (engine_key_rounds(k->ek, *done) == 0)
				return errmsg(err, errlen, -ENODATA, "job %s key %" PRIu32 ": no "
					      "weights yet (the ranks have not run pbox_ps_init)",
					      j->name, k->key);
			return 0;
		}
	}
	if (!strict)
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": its segments are at "
			      "different steps (a step that failed part-way, or a call of this "
			      "rank still in flight)", j->name, k->key);
	return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": the key kept stepping "
		      "for 0.1 s; save between steps (when no rank is pushing)", j->name, k->key);
}

static int range_check(const struct job *j, const struct job_key *k, unsigned a,
		       uint64_t first, uint64_t n, char *err, size_t errlen)
{
	if (!k->is_ps)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 " is not a PS key",
			      j->name, k->key);
	if (a >= narrays(k))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": %s has %u state "
			      "planes", j->name, k->key, optim_name(k->ps.opt.kind),
			      narrays(k) - 1);
	if (first > k->geom.count || n > k->geom.count - first)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": elements [%" PRIu64
			      ", %" PRIu64 ") are outside the key's %" PRIu64, j->name, k->key,
			      first, first + n, k->geom.count);
	return 0;
}

int ps_ckpt_read(const struct job *j, const struct job_key *k, unsigned a, uint64_t first,
		 uint32_t n, float *out, uint64_t *steps, char *err, size_t errlen)
{
	uint32_t done = 0;
	int rc = range_check(j, k, a, first, n, err, errlen);

	if (rc == 0)
		rc = snapshot(j, k, a, a + 1, first, n, out, &done, 0, err, errlen);
	if (rc == 0)
		*steps = k->ek->ps->step0 + engine_key_rounds(k->ek, done) - 1;
	return rc;
}

/* Weights [first, first + n) into the stage: a segment not waiting there
 * yet starts as its weights (a write may cover part of it), then waits
 * for its next round (release: the lcore reads the flag, then the stage). */
static void stage(const struct engine_key *ek, uint64_t first, uint64_t n, const float *in)
{
	struct engine_ps *ps = ek->ps;
	uint64_t end = first + n;

	for (uint32_t s = (uint32_t)(first / ek->seg_elems); s < ek->nsegs; s++) {
		uint64_t lo = (uint64_t)s * ek->seg_elems, hi = lo + ek->seg_elems;
		if (lo >= end)
			break;
		if (!staged(ps, s))
			memcpy(ps->staged + lo, ps->w + lo, ek->seg_elems * sizeof(float));
		lo = lo < first ? first : lo;
		hi = hi > end ? end : hi;
		memcpy(ps->staged + lo, in + (lo - first), (hi - lo) * sizeof(float));
		__atomic_store_n(&ps->pending[s], 1, __ATOMIC_RELEASE);
	}
}

int ps_ckpt_write(const struct job *j, const struct job_key *k, unsigned a, uint64_t first,
		  uint32_t n, const float *in, char *err, size_t errlen)
{
	const struct engine_key *ek = k->ek;
	int rc = range_check(j, k, a, first, n, err, errlen);

	if (rc < 0)
		return rc;
	/* no segment can complete while it is written: that needs rank 0's
	 * contribution, and rank 0 is the writer, between its steps */
	if (__atomic_load_n(&ek->segs[first / ek->seg_elems].done, __ATOMIC_ACQUIRE) == ek->round0)
		return errmsg(err, errlen, -ENODATA, "job %s key %" PRIu32 ": no weights yet "
			      "(run pbox_ps_init first)", j->name, k->key);
	if (a == 0 && ek->ps->rdtype == WIRE_F32 && !ek->ps->staged)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": its weights are "
			      "its results, and it has no stage for written ones (jobs_ps_stage)",
			      j->name, k->key);
	if (a == 0 && ek->ps->rdtype == WIRE_F32)
		stage(ek, first, n, in);
	else
		memcpy(array_of(ek->ps, a) + first, in, (size_t)n * sizeof(float));
	if (a == 1 && k->ps.opt.kind == OPTIM_SGD)
		ek->ps->buf_written = 1;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return 0;
}

int ps_ckpt_set_step(const struct job *j, const struct job_key *k, uint64_t steps,
		     char *err, size_t errlen)
{
	uint32_t rounds = engine_key_rounds(k->ek, __atomic_load_n(&k->ek->segs[0].done,
								    __ATOMIC_ACQUIRE));

	if (!k->is_ps)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 " is not a PS key",
			      j->name, k->key);
	if (rounds == 0)
		return errmsg(err, errlen, -ENODATA, "job %s key %" PRIu32 ": no weights yet "
			      "(run pbox_ps_init first)", j->name, k->key);
	/* the next step, the life's round rounds + 1, is step steps + 1 */
	k->ek->ps->step0 = steps - (rounds - 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return 0;
}

/* ---- files ---- */

/* fwrite n bytes in pieces, telling ka between them. 0 or -1. */
static int write_all(FILE *f, const void *p, size_t n, const struct box_keepalive *ka)
{
	const uint8_t *b = p;

	while (n) {
		size_t m = n < IO_PIECE ? n : IO_PIECE;
		if (fwrite(b, 1, m, f) != m)
			return -1;
		b += m;
		n -= m;
		box_keepalive(ka);
	}
	return 0;
}

/* fread n bytes in pieces, telling ka after each. 0 or -1 (short). */
static int read_all(FILE *f, void *p, size_t n, const struct box_keepalive *ka)
{
	uint8_t *b = p;

	while (n) {
		size_t m = n < IO_PIECE ? n : IO_PIECE;
		if (fread(b, 1, m, f) != m)
			return -1;
		b += m;
		n -= m;
		box_keepalive(ka);
	}
	return 0;
}

static void tmp_path(char *buf, size_t size, const char *dir, uint32_t key)
{
	char path[PS_CKPT_PATH];

	ps_ckpt_path(path, sizeof(path), dir, key);
	snprintf(buf, size, "%s.tmp", path);
}

int ps_ckpt_save(const struct job *j, const struct job_key *k, const char *dir,
		 const struct box_keepalive *ka, uint64_t *bytes, uint32_t *done, char *err,
		 size_t errlen)
{
	char tmp[PS_CKPT_PATH + 8];
	uint64_t count = k->geom.count;
	size_t nbytes = (size_t)narrays(k) * count * sizeof(float);
	float *data = malloc(nbytes ? nbytes : 1);
	uint8_t h[PS_CKPT_HDR];
	int rc;

	if (!data)
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory for "
			      "the snapshot (%zu bytes)", j->name, k->key, nbytes);
	rc = snapshot(j, k, 0, narrays(k), 0, count, data, done, 1, err, errlen);
	if (rc < 0) {
		free(data);
		return rc;
	}
	struct hdr hd = hdr_of(k, k->ek->ps->step0 + engine_key_rounds(k->ek, *done) - 1);
	hdr_encode(h, &hd);
	tmp_path(tmp, sizeof(tmp), dir, k->key);
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		rc = -errno;
		free(data);
		return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": cannot create %s: %s",
			      j->name, k->key, tmp, strerror(-rc));
	}
	errno = 0;
	int bad = write_all(f, h, sizeof(h), ka) || write_all(f, data, nbytes, ka);
	bad |= fclose(f) != 0;
	free(data);
	if (bad) {
		rc = errno ? -errno : -EIO;
		unlink(tmp);
		return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": cannot write %s: %s",
			      j->name, k->key, tmp, strerror(-rc));
	}
	*bytes = sizeof(h) + nbytes;
	return 0;
}

bool ps_ckpt_unchanged(const struct job_key *k, uint32_t done)
{
	const struct engine_key *ek = k->ek;

	for (uint32_t s = 0; s < ek->nsegs; s++)
		if (__atomic_load_n(&ek->segs[s].done, __ATOMIC_ACQUIRE) != done)
			return false;
	return true;
}

void ps_ckpt_discard(const char *dir, uint32_t key)
{
	char tmp[PS_CKPT_PATH + 8];

	tmp_path(tmp, sizeof(tmp), dir, key);
	unlink(tmp);
}

int ps_ckpt_commit(const struct job *j, uint32_t key, const char *dir, char *err, size_t errlen)
{
	char path[PS_CKPT_PATH], tmp[PS_CKPT_PATH + 8];

	ps_ckpt_path(path, sizeof(path), dir, key);
	tmp_path(tmp, sizeof(tmp), dir, key);
	if (rename(tmp, path) == 0)
		return 0;
	int rc = -errno;
	return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": cannot rename %s to %s: %s",
		      j->name, key, tmp, path, strerror(-rc));
}

/* Discard the temporary files of saved[0..n). */
static void discard_all(const char *dir, const struct ps_ckpt_saved *saved, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ps_ckpt_discard(dir, saved[i].key);
}

/* Every PS key of j (those being removed are gone) into temporary files,
 * *n of them; each key's round in done[]. 0 or the first failure (the
 * files written so far discarded). */
static int save_all(const struct job *j, const char *dir, const struct box_keepalive *ka,
		    struct ps_ckpt_saved *saved, uint32_t *done, uint32_t *n, char *err,
		    size_t errlen)
{
	*n = 0;
	for (uint32_t i = 0; i < j->nkeys; i++) {
		const struct job_key *k = &j->keys[i];
		if (!k->is_ps || k->remove_mark)
			continue;
		saved[*n].key = k->key;
		saved[*n].index = i;
		int rc = ps_ckpt_save(j, k, dir, ka, &saved[*n].bytes, &done[*n], err, errlen);
		if (rc < 0) {
			discard_all(dir, saved, *n);
			return rc;
		}
		(*n)++;
	}
	return 0;
}

int ps_ckpt_save_job(const struct job *j, const char *dir, const struct box_keepalive *ka,
		     struct ps_ckpt_saved *saved, uint32_t *n, char *err, size_t errlen)
{
	uint32_t *done = malloc((j->nkeys ? j->nkeys : 1) * sizeof(*done));
	int rc = 0;

	if (!done)
		return errmsg(err, errlen, -ENOMEM, "job %s: out of memory", j->name);
	for (int t = 0; t < SAVE_TRIES; t++) {
		if ((rc = save_all(j, dir, ka, saved, done, n, err, errlen)) < 0)
			break;
		if (*n == 0) {
			rc = errmsg(err, errlen, -EINVAL, "job %s has no PS key (declared with an "
				    "optimizer) to save", j->name);
			break;
		}
		uint32_t i = 0;
		while (i < *n && ps_ckpt_unchanged(&j->keys[saved[i].index], done[i]))
			i++;
		if (i == *n) {
			/* one cut: every key stood at its saved step at once
			 * (when the last one was copied) */
			for (i = 0; i < *n && rc == 0; i++)
				rc = ps_ckpt_commit(j, saved[i].key, dir, err, errlen);
			if (rc < 0)   /* the one that failed, and those after it */
				discard_all(dir, saved + i - 1, *n - (i - 1));
			free(done);
			return rc;
		}
		discard_all(dir, saved, *n);
		rc = errmsg(err, errlen, -EBUSY, "job %s: key %" PRIu32 " stepped while the "
			    "job's other keys were saved (%d tries): the files would mix steps; "
			    "save between steps (when no rank is pushing)", j->name, saved[i].key,
			    SAVE_TRIES);
	}
	free(done);
	return rc;
}

/* The first field where the file's header h differs from the key's
 * declaration want, or NULL. */
static const char *differs(const struct hdr *h, const struct hdr *want)
{
	if (h->key != want->key)
		return "key";
	if (h->count != want->count)
		return "count";
	if (h->dtype != want->dtype)
		return "gradient dtype";
	if (h->rdtype != want->rdtype)
		return "weights_dtype";
	if (h->average != want->average)
		return "sum";
	if (h->kind != want->kind)
		return "optimizer";
	if (h->nesterov != want->nesterov || h->momentum != want->momentum ||
	    h->dampening != want->dampening || h->weight_decay != want->weight_decay ||
	    h->beta1 != want->beta1 || h->beta2 != want->beta2 || h->eps != want->eps)
		return "hyperparameters";
	if (h->planes != want->planes)
		return "state planes";
	return NULL;
}

int ps_ckpt_load(const struct job *j, const struct job_key *k, const char *dir,
		 const struct box_keepalive *ka, char *err, size_t errlen)
{
	char path[PS_CKPT_PATH];
	uint8_t b[PS_CKPT_HDR];
	struct hdr h, want = hdr_of(k, 0);
	struct engine_ps *ps = k->ek->ps;
	uint64_t count = k->geom.count;
	int rc = 0;

	ps_ckpt_path(path, sizeof(path), dir, k->key);
	FILE *f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		return errmsg(err, errlen, rc == -ENOENT ? -ENOENT : rc, "job %s key %" PRIu32
			      ": the job restores from %s, which has no checkpoint of this key"
			      " (%s: %s)", j->name, k->key, dir, path, strerror(-rc));
	}
	if (fread(b, 1, sizeof(b), f) != sizeof(b) || hdr_decode(b, &h) < 0) {
		fclose(f);
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": %s is not a pbox "
			      "checkpoint", j->name, k->key, path);
	}
	const char *what = differs(&h, &want);
	if (what) {
		fclose(f);
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": the checkpoint %s "
			      "is of another key or shape: its %s differs from the declaration"
			      " (%" PRIu64 " %s, %s)", j->name, k->key, path, what, h.count,
			      wire_dtype_name(h.dtype) ? wire_dtype_name(h.dtype) : "?",
			      optim_name(h.kind) ? optim_name(h.kind) : "?");
	}
	for (unsigned a = 0; a < narrays(k) && rc == 0; a++)
		if (read_all(f, array_of(ps, a), count * sizeof(float), ka) < 0)
			rc = -EINVAL;
	if (rc == 0 && fgetc(f) != EOF)
		rc = -EINVAL;
	fclose(f);
	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": %s has the wrong size for"
			      " %" PRIu64 " elements and %u state planes", j->name, k->key, path,
			      count, h.planes);
	ps->restored = 1;
	ps->step0 = h.steps;
	ps->buf_written = h.buf_written;
	return 0;
}
