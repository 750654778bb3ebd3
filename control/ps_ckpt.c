/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_ckpt.c - PS keys' checkpoint files: a consistent snapshot of a key's
 * weights and optimizer state taken beside the running lcores, its file,
 * and loading it into a newly declared key. See ps_ckpt.h for the layout
 * and the rules.
 */
#include "control/ps_ckpt.h"
#include "control/ps_finite.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/sum.h"
#include "control/ckpt_file.h"

#define SNAP_TRIES 200       /* a key mid-step is tried again ... */
#define SNAP_PAUSE_NS 500000 /* ... after 0.5 ms, for up to 0.1 s */
#define SAVE_TRIES 3         /* a job whose keys moved on during its save */

void ps_ckpt_path(char *buf, size_t size, const char *dir, uint32_t key)
{
	ckpt_path(buf, size, dir, key);
}

static struct ckpt_hdr hdr_of(const struct job *j, const struct job_key *k, uint64_t steps)
{
	const struct optim_params *o = &k->ps.opt;
	struct ckpt_hdr h = {
		.version = 2, .key = k->key, .count = k->geom.count, .dtype = k->dtype,
		.rdtype = (uint8_t)k->ps.rdtype, .average = (uint8_t)k->ps.average,
		.kind = o->kind, .nesterov = o->nesterov,
		.buf_written = k->ek->ps->buf_written != 0, .momentum = o->momentum,
		.dampening = o->dampening, .weight_decay = o->weight_decay,
		.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .steps = steps,
		.planes = optim_planes(o), .world = j->world,
	};

	snprintf(h.job, sizeof(h.job), "%s", j->name);
	return h;
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

	for (int t = 0; t < (strict == 1 ? SNAP_TRIES : 1); t++) {
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
	if (strict == 2)
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": the key is stepping",
			      j->name, k->key);
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

/* ---- a job's checkpoint: snapshot on the control thread, files anywhere ---- */

/* A snapshot's memory: large ones mapped with their pages populated at
 * once (a fresh malloc'd buffer took a page fault per 4 KiB as the copy
 * touched it: 128 MiB held the control thread about 0.3 s). */
#define SNAP_MAP_MIN (1u << 20)

static float *snap_alloc(size_t nbytes)
{
	if (nbytes < SNAP_MAP_MIN)
		return malloc(nbytes ? nbytes : 1);
	void *p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void ps_ckpt_snap_free(struct ps_ckpt_snap *s)
{
	if (s->data && s->dlen >= SNAP_MAP_MIN)
		munmap(s->data, s->dlen);
	else
		free(s->data);
	s->data = NULL;
}

/* One key's copy: strict 1 tries for 0.1 s, 2 once. */
static int snap_key(const struct job *j, const struct job_key *k, struct ps_ckpt_snap *s,
		    int strict, char *err, size_t errlen)
{
	uint64_t count = k->geom.count;
	size_t nbytes = (size_t)narrays(k) * count * sizeof(float);
	int rc;

	memset(s, 0, sizeof(*s));
	s->key = k->key;
	s->dlen = nbytes;
	s->data = snap_alloc(nbytes);
	if (!s->data)
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory for "
			      "the snapshot (%zu bytes)", j->name, k->key, nbytes);
	rc = snapshot(j, k, 0, narrays(k), 0, count, s->data, &s->done, strict, err, errlen);
	if (rc < 0) {
		ps_ckpt_snap_free(s);
		return rc;
	}
	struct ckpt_hdr h = hdr_of(j, k, k->ek->ps->step0 +
				   engine_key_rounds(k->ek, s->done) - 1);
	s->steps = h.steps;
	s->hlen = ckpt_head_bytes(&h);
	ckpt_encode(s->head, &h);
	s->dlen = nbytes;
	s->bytes = s->hlen + nbytes;
	return 0;
}

int ps_ckpt_snap_key(const struct job *j, const struct job_key *k, struct ps_ckpt_snap *s,
		     char *err, size_t errlen)
{
	return snap_key(j, k, s, 1, err, errlen);
}

bool ps_ckpt_unchanged(const struct job_key *k, uint32_t done)
{
	const struct engine_key *ek = k->ek;

	for (uint32_t s = 0; s < ek->nsegs; s++)
		if (__atomic_load_n(&ek->segs[s].done, __ATOMIC_ACQUIRE) != done)
			return false;
	return true;
}

void ps_ckpt_set_free(struct ps_ckpt_set *set)
{
	for (uint32_t i = 0; set->s && i < set->n; i++)
		ps_ckpt_snap_free(&set->s[i]);
	free(set->s);
	set->s = NULL;
	set->n = 0;
}

/* Every PS key of j (those being removed are gone) into set, once. */
static int snap_all(const struct job *j, struct ps_ckpt_set *set, int strict, char *err,
		    size_t errlen)
{
	for (uint32_t i = 0; i < j->nkeys; i++) {
		const struct job_key *k = &j->keys[i];
		if (!k->is_ps || k->remove_mark)
			continue;
		int rc = snap_key(j, k, &set->s[set->n], strict, err, errlen);
		if (rc < 0)
			return rc;
		set->s[set->n++].index = i;
	}
	return 0;
}

int ps_ckpt_snap_job(const struct job *j, struct ps_ckpt_set *set, bool patient, char *err,
		     size_t errlen)
{
	int rc = 0;

	memset(set, 0, sizeof(*set));
	for (int t = 0; t < (patient ? SAVE_TRIES : 1); t++) {
		set->s = calloc(j->nkeys ? j->nkeys : 1, sizeof(*set->s));
		if (!set->s)
			return errmsg(err, errlen, -ENOMEM, "job %s: out of memory", j->name);
		if ((rc = snap_all(j, set, patient ? 1 : 2, err, errlen)) < 0)
			break;
		if (set->n == 0) {
			rc = errmsg(err, errlen, -EINVAL, "job %s has no PS key (declared with an "
				    "optimizer) to save", j->name);
			break;
		}
		uint32_t i = 0;
		while (i < set->n && ps_ckpt_unchanged(&j->keys[set->s[i].index], set->s[i].done))
			i++;
		/* one cut: every key stood at its copied step at once (when the
		 * last one was copied) */
		if (i == set->n)
			return 0;
		rc = errmsg(err, errlen, -EBUSY, "job %s: key %" PRIu32 " stepped while the "
			    "job's other keys were copied (%d tries): the files would mix steps; "
			    "save between steps (when no rank is pushing)", j->name,
			    set->s[i].key, SAVE_TRIES);
		ps_ckpt_set_free(set);
	}
	ps_ckpt_set_free(set);
	return rc;
}

/* ---- a job's snapshot a piece at a time (ckpt_worker.c) ---- */

struct ps_ckpt_cut {
	uint32_t job_id;
	char job[JOB_NAME_MAX + 1];
	struct ps_ckpt_set set;        /* s[i].done: the round key i is copied at */
	const struct engine_key **ek;  /* key i's engine key when begun */
	uint32_t cur;                  /* the key being copied, */
	unsigned arr;                  /* its array, */
	uint64_t off;                  /* the next element of it */
	int started;                   /* s[cur].done is known */
	int tries, patient;
	long wait_ns;                  /* stepping: waited so far */
	struct timespec wait_from;
};

/* Fresh pages for a large copy, not populated: the chunks fault them in
 * a piece at a time. */
static float *cut_alloc(size_t nbytes)
{
	if (nbytes < SNAP_MAP_MIN)
		return malloc(nbytes ? nbytes : 1);
	void *p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void ps_ckpt_cut_free(struct ps_ckpt_cut *c)
{
	if (!c)
		return;
	ps_ckpt_set_free(&c->set);
	free(c->ek);
	free(c);
}

int ps_ckpt_cut_begin(const struct job *j, bool patient, struct ps_ckpt_cut **out,
		      char *err, size_t errlen)
{
	struct ps_ckpt_cut *c = calloc(1, sizeof(*c));
	uint32_t n = j->nkeys ? j->nkeys : 1;

	if (!c || !(c->set.s = calloc(n, sizeof(*c->set.s))) ||
	    !(c->ek = calloc(n, sizeof(*c->ek)))) {
		ps_ckpt_cut_free(c);
		return errmsg(err, errlen, -ENOMEM, "job %s: out of memory", j->name);
	}
	c->job_id = j->id;
	snprintf(c->job, sizeof(c->job), "%s", j->name);
	c->patient = patient;
	for (uint32_t i = 0; i < j->nkeys; i++) {
		const struct job_key *k = &j->keys[i];
		if (!k->is_ps || k->remove_mark)
			continue;
		struct ps_ckpt_snap *sn = &c->set.s[c->set.n];
		sn->key = k->key;
		sn->index = i;
		sn->dlen = (size_t)narrays(k) * k->geom.count * sizeof(float);
		if (!(sn->data = cut_alloc(sn->dlen))) {
			ps_ckpt_cut_free(c);
			return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory "
				      "for the snapshot (%zu bytes)", j->name, k->key, sn->dlen);
		}
		c->ek[c->set.n++] = k->ek;
	}
	if (c->set.n == 0) {
		ps_ckpt_cut_free(c);
		return errmsg(err, errlen, -EINVAL, "job %s has no PS key (declared with an "
			      "optimizer) to save", j->name);
	}
	*out = c;
	return 0;
}

/* Copy again from the first key (a key completed a round since its copy):
 * 1, or -EBUSY once the tries are spent. */
static int cut_restart(struct ps_ckpt_cut *c, uint32_t key, char *err, size_t errlen)
{
	if (++c->tries >= (c->patient ? SAVE_TRIES : 1))
		return errmsg(err, errlen, -EBUSY, "job %s: key %" PRIu32 " stepped while the "
			      "job's keys were copied (%d tries): the files would mix steps; save "
			      "between steps (when no rank is pushing)", c->job, key, c->tries);
	c->cur = 0;
	c->arr = 0;
	c->off = 0;
	c->started = 0;
	return 1;
}

/* Key cur is mid-step (a round open): wait for it across polls, 0.1 s at
 * most (patient), else -EBUSY. 1 to try again. */
static int cut_wait(struct ps_ckpt_cut *c, uint32_t key, char *err, size_t errlen)
{
	struct timespec now;

	if (!c->patient)
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": the key is stepping",
			      c->job, key);
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (c->wait_ns == 0 && c->wait_from.tv_sec == 0)
		c->wait_from = now;
	c->wait_ns = (now.tv_sec - c->wait_from.tv_sec) * 1000000000L + now.tv_nsec -
		     c->wait_from.tv_nsec;
	if (c->wait_ns > (long)SNAP_TRIES * SNAP_PAUSE_NS)
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": the key kept stepping "
			      "for 0.1 s; save between steps (when no rank is pushing)", c->job, key);
	return 1;
}

int ps_ckpt_cut_step(const struct job *j, struct ps_ckpt_cut *c, size_t budget, char *err,
		     size_t errlen)
{
	uint64_t left = budget / sizeof(float);

	if (!j || j->id != c->job_id || strcmp(j->name, c->job) != 0 || j->removing)
		return errmsg(err, errlen, -ECONNABORTED, "job %s went while it was saved",
			      c->job);
	while (c->cur < c->set.n) {
		struct ps_ckpt_snap *sn = &c->set.s[c->cur];
		const struct job_key *k = job_key_find(j, sn->key);
		if (!k || k->ek != c->ek[c->cur] || k->remove_mark)
			return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 " was released "
				      "while it was saved", c->job, sn->key);
		uint64_t count = k->geom.count, n = count - c->off;
		if (left == 0)
			return 1;
		n = n < left ? n : left;
		uint32_t round = 0;
		int rc = copy_range(k, c->arr, c->arr + 1, c->off, n,
				    sn->data + (size_t)c->arr * count + c->off, &round, 1);
		if (rc == 0 && c->started && round != sn->done)
			return cut_restart(c, sn->key, err, errlen);
		if (rc < 0) {
			if (c->started && !ps_ckpt_unchanged(k, sn->done))
				return cut_restart(c, sn->key, err, errlen);
			return cut_wait(c, sn->key, err, errlen);
		}
		c->wait_ns = 0;
		c->wait_from = (struct timespec){ 0, 0 };
		if (!c->started) {
			if (engine_key_rounds(k->ek, round) == 0)
				return errmsg(err, errlen, -ENODATA, "job %s key %" PRIu32 ": no "
					      "weights yet (the ranks have not run pbox_ps_init)",
					      j->name, k->key);
			sn->done = round;
			c->started = 1;
		}
		left -= n;
		c->off += n;
		if (c->off < count)
			continue;
		c->off = 0;
		if (++c->arr < narrays(k))
			continue;
		/* the key copied whole at round done: its header */
		struct ckpt_hdr h = hdr_of(j, k, k->ek->ps->step0 +
					   engine_key_rounds(k->ek, sn->done) - 1);
		sn->steps = h.steps;
		sn->hlen = ckpt_head_bytes(&h);
		ckpt_encode(sn->head, &h);
		sn->bytes = sn->hlen + sn->dlen;
		c->arr = 0;
		c->started = 0;
		c->cur++;
	}
	/* one cut: every key still stands at the round it was copied at, so
	 * all stood there at once (now) */
	for (uint32_t i = 0; i < c->set.n; i++) {
		const struct job_key *k = job_key_find(j, c->set.s[i].key);
		if (!k || k->ek != c->ek[i] || k->remove_mark)
			return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 " was released "
				      "while it was saved", c->job, c->set.s[i].key);
		if (!ps_ckpt_unchanged(k, c->set.s[i].done))
			return cut_restart(c, c->set.s[i].key, err, errlen);
	}
	return 0;
}

void ps_ckpt_cut_take(struct ps_ckpt_cut *c, struct ps_ckpt_set *set)
{
	*set = c->set;
	memset(&c->set, 0, sizeof(c->set));
}

uint32_t ps_ckpt_cut_job(const struct ps_ckpt_cut *c)
{
	return c->job_id;
}

int ps_ckpt_write_set(const struct ps_ckpt_set *set, const char *dir,
		      const struct box_keepalive *ka, char *err, size_t errlen)
{
	int dfd = ckpt_dir_open(dir, err, errlen), rc = 0;
	uint32_t i;

	if (dfd < 0)
		return dfd;
	for (i = 0; i < set->n && rc == 0; i++)
		rc = ckpt_write_tmp(dfd, dir, set->s[i].key, set->s[i].head, set->s[i].hlen,
				    set->s[i].data, set->s[i].dlen, ka, err, errlen);
	if (rc < 0) { /* the one that failed removed its own */
		for (uint32_t d = 0; d + 1 < i; d++)
			ckpt_discard(dfd, set->s[d].key);
		close(dfd);
		return rc;
	}
	for (i = 0; i < set->n && rc == 0; i++)
		rc = ckpt_commit(dfd, dir, set->s[i].key, err, errlen);
	if (rc < 0)   /* the one that failed, and those after it */
		for (uint32_t d = i - 1; d < set->n; d++)
			ckpt_discard(dfd, set->s[d].key);
	if (rc == 0)
		rc = ckpt_dir_sync(dfd, dir, err, errlen);
	close(dfd);
	return rc;
}

int ps_ckpt_save_job(const struct job *j, const char *dir, const struct box_keepalive *ka,
		     struct ps_ckpt_saved *saved, uint32_t *n, char *err, size_t errlen)
{
	struct ps_ckpt_set set;
	int rc = ps_ckpt_snap_job(j, &set, true, err, errlen);

	*n = 0;
	if (rc < 0)
		return rc;
	rc = ps_ckpt_write_set(&set, dir, ka, err, errlen);
	for (uint32_t i = 0; rc == 0 && i < set.n; i++)
		saved[(*n)++] = (struct ps_ckpt_saved){ set.s[i].key, set.s[i].index,
							set.s[i].bytes };
	ps_ckpt_set_free(&set);
	return rc;
}

void ps_ckpt_load_prepare(const struct job *j, const struct job_key *k, const char *dir,
			  int same_job, struct ps_ckpt_load_args *a)
{
	memset(a, 0, sizeof(*a));
	a->want = hdr_of(j, k, 0);
	if (!same_job) {
		a->want.job[0] = '\0';
		a->want.world = 0;
	}
	snprintf(a->dir, sizeof(a->dir), "%s", dir);
	snprintf(a->who, sizeof(a->who), "job %s key %" PRIu32, j->name, k->key);
	a->key = k->key;
	a->count = k->geom.count;
	a->narrays = narrays(k);
	for (unsigned i = 0; i < a->narrays; i++)
		a->dst[i] = array_of(k->ek->ps, i);
}

int ps_ckpt_load_read(const struct ps_ckpt_load_args *a, const struct box_keepalive *ka,
		      uint8_t **bufp, const uint8_t **datap, struct ckpt_hdr *got, char *err,
		      size_t errlen)
{
	char path[CKPT_PATH], why[512];
	size_t len = 0, plane = (size_t)a->count * sizeof(float);
	uint8_t *buf = NULL;
	const uint8_t *data;
	int dfd, rc;

	*bufp = NULL;
	ckpt_path(path, sizeof(path), a->dir, a->key);
	if ((dfd = ckpt_dir_open(a->dir, why, sizeof(why))) < 0)
		return errmsg(err, errlen, dfd, "%s: %s", a->who, why);
	/* the largest file of this count: any optimizer, any job name */
	uint64_t max = CKPT_HDR + CKPT_NAME_MAX + (1 + OPTIM_MAX_PLANES) * (uint64_t)plane;
	rc = ckpt_read(dfd, a->dir, a->key, max, ka, &buf, &len, why, sizeof(why));
	close(dfd);
	if (rc == -ENOENT)
		return errmsg(err, errlen, -ENOENT, "%s: the job restores from %s, which has no "
			      "checkpoint of this key (%s: %s)", a->who, a->dir, path,
			      strerror(ENOENT));
	if (rc == 0)
		rc = ckpt_decode(buf, len, &a->want, path, got, &data, why, sizeof(why));
	if (rc < 0) {
		free(buf);
		return errmsg(err, errlen, rc, "%s: %s", a->who, why);
	}
	/* a NaN or Inf never leaves the weights: refused (ps_finite.h) */
	const void *arrays[1 + OPTIM_MAX_PLANES];
	char where[CKPT_PATH + 128];
	for (unsigned i = 0; i < a->narrays; i++)
		arrays[i] = data + i * plane;
	snprintf(where, sizeof(where), "%s: the checkpoint %s", a->who, path);
	rc = ps_state_finite(arrays, a->narrays, a->count, got->kind, where, err, errlen);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*bufp = buf;
	*datap = data;
	return 0;
}

void ps_ckpt_load_copy(const struct ps_ckpt_load_args *a, const uint8_t *data,
		       const struct box_keepalive *ka)
{
	size_t plane = (size_t)a->count * sizeof(float);

	for (unsigned i = 0; i < a->narrays; i++) {
		memcpy(a->dst[i], data + i * plane, plane);
		box_keepalive(ka);
	}
}

void ps_ckpt_load_done(const struct job_key *k, const struct ckpt_hdr *got)
{
	struct engine_ps *ps = k->ek->ps;

	ps->restored = 1;
	ps->step0 = got->steps;
	ps->buf_written = got->buf_written;
}

int ps_ckpt_load(const struct job *j, const struct job_key *k, const char *dir,
		 int same_job, const struct box_keepalive *ka, char *err, size_t errlen)
{
	struct ps_ckpt_load_args *a = malloc(sizeof(*a));
	struct ckpt_hdr got;
	const uint8_t *data;
	uint8_t *buf;
	int rc;

	if (!a)
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory",
			      j->name, k->key);
	ps_ckpt_load_prepare(j, k, dir, same_job, a);
	rc = ps_ckpt_load_read(a, ka, &buf, &data, &got, err, errlen);
	if (rc == 0) { /* all of it checked: only now is the key's state touched */
		ps_ckpt_load_copy(a, data, ka);
		ps_ckpt_load_done(k, &got);
	}
	free(buf);
	free(a);
	return rc;
}

/* ---- --checkpoint-dir: a directory per job ---- */

int ps_ckpt_auto_dir(char *buf, size_t size, const char *root, const char *job, int create,
		     char *err, size_t errlen)
{
	size_t n = strlen(job);
	int rfd, rc = 0;

	if (n == 0 || n > PS_CKPT_JOB_DIR_MAX || job[0] == '.' ||
	    strspn(job, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
		return errmsg(err, errlen, -EINVAL, "job %s: only a job named with at most %d of "
			      "A-Z a-z 0-9 . _ - (not starting with '.') has periodic checkpoints",
			      job, PS_CKPT_JOB_DIR_MAX);
	if ((size_t)snprintf(buf, size, "%s/%s", root, job) >= size)
		return errmsg(err, errlen, -EINVAL, "job %s: %s/%s is too long", job, root, job);
	if ((rfd = ckpt_dir_open(root, err, errlen)) < 0)
		return rfd;
	if (create && mkdirat(rfd, job, 0700) != 0 && errno != EEXIST)
		rc = -errno;
	else if (!create && faccessat(rfd, job, F_OK, AT_SYMLINK_NOFOLLOW) != 0)
		rc = -errno;
	close(rfd);
	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s: %s: %s", job, buf, strerror(-rc));
	return 0;
}
