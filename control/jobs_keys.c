/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_keys.c - a job's keys: the key index; declaration (check a
 * declaration against the first one, cut a new key into chunks, place
 * them on endpoints, build the engine's key in the job arena and install
 * it on the owning lcores); release and removal (jobs_keys_tick); the PS
 * keys' stage and restore directory. Builds on jobs_core.c only; jobs.c
 * calls jobs_keys_tick.
 */
#include "control/jobs_keys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "common/clock.h"
#include "common/wire.h"
#include "control/jobs_core.h"
#include "control/log.h"
#include "control/ps_ckpt.h"

/* Bytes of removed keys one jobs_keys_tick zeroes per job (about 20 ms of
 * writing here): a large key comes back over several ticks. */
#define JOBS_ZERO_STEP (64ull << 20)

/* ---- per-job key index ---- */

static uint32_t hash(uint32_t key, uint32_t cap)
{
	return (key * 2654435761u) & (cap - 1);
}

const struct job_key *job_key_find(const struct job *j, uint32_t key)
{
	if (!j->key_index)
		return NULL;
	for (uint32_t h = hash(key, j->key_index_cap);; h = (h + 1) & (j->key_index_cap - 1)) {
		uint32_t v = j->key_index[h];
		if (v == 0)
			return NULL;
		if (j->keys[v - 1].key == key)
			return &j->keys[v - 1];
	}
}

static void index_add(struct job *j, uint32_t pos)
{
	uint32_t h = hash(j->keys[pos].key, j->key_index_cap);

	while (j->key_index[h])
		h = (h + 1) & (j->key_index_cap - 1);
	j->key_index[h] = pos + 1;
}

/* Room for one more key record (grows by doubling up to max_keys). */
static int reserve_key(struct job *j, uint32_t max_keys)
{
	if (j->nkeys < j->keys_cap)
		return 0;
	uint32_t cap = j->keys_cap ? j->keys_cap * 2 : 16;
	if (cap > max_keys)
		cap = max_keys;
	struct job_key *k = realloc(j->keys, (size_t)cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	j->keys = k;
	j->keys_cap = cap;
	return 0;
}

int jobs_restore_dir_check(const char *dir, char *err, size_t errlen)
{
	if (!dir || dir[0] != '/' || strlen(dir) > JOB_RESTORE_MAX)
		return errmsg(err, errlen, -EINVAL, "restore needs an absolute path of at most "
			      "%d bytes", JOB_RESTORE_MAX);
	char why[512];
	int fd = ckpt_dir_open(dir, why, sizeof(why));
	if (fd < 0)
		return errmsg(err, errlen, fd, "restore: %s", why);
	close(fd);
	return 0;
}

int jobs_set_restore(struct jobs *js, const struct job *cj, const char *dir,
		     char *err, size_t errlen)
{
	struct job *j = (struct job *)cj;
	int rc = jobs_restore_dir_check(dir, err, errlen);

	(void)js;
	if (rc < 0)
		return rc;
	if (j->nkeys)
		return errmsg(err, errlen, -EBUSY, "job %s: keys are declared already",
			      j->name);
	snprintf(j->restore, sizeof(j->restore), "%s", dir);
	return 0;
}

/* ---- release (docs/rpc.md "key_release") ---- */

const char *job_key_state(const struct job_key *k)
{
	return k->remove_mark ? "removing" : k->nreleased ? "releasing" : "live";
}

/* EBUSY for a declaration of a key its rank released: it names the ranks
 * still holding it (or says the lcores are letting go). */
static int busy_released(const struct job *j, const struct job_key *k, uint32_t key,
			 char *err, size_t errlen)
{
	char ranks[128] = "";
	size_t len = 0;
	struct rankset hold;

	rankset_missing(&hold, &k->released, j->world);
	if (k->remove_mark)
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 " is being removed "
			      "(every rank released it); declare it again in a moment",
			      j->name, key);
	for (unsigned r = 0; r < j->world && len + 8 < sizeof(ranks); r++)
		if (rankset_has(&hold, r))
			len += (size_t)snprintf(ranks + len, sizeof(ranks) - len, "%s%u",
						len ? ", " : "", r);
	return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 " is being released: "
		      "rank%s %s still hold%s it", j->name, key,
		      rankset_count(&hold, j->world) > 1 ? "s" : "", ranks,
		      rankset_count(&hold, j->world) > 1 ? "" : "s");
}

/* Post KEY_REMOVE where it is not posted yet; 1 once every lcore owning a
 * chunk has it. A full ring is retried by the next tick. */
static int post_key_remove(struct jobs *js, struct job *j, struct job_key *k)
{
	const struct box *b = js->box;
	struct engine_msg m = { .type = ENGINE_MSG_KEY_REMOVE, .job = j->id, .u.key = k->ek };
	uint8_t owns[BOX_MAX_LCORES] = { 0 };
	int all = 1;

	for (uint32_t c = 0; c < k->geom.nchunks; c++)
		owns[b->layout.eps[k->chunk_ep[c]].lcore] = 1;
	for (unsigned l = 0; l < b->layout.nlcores; l++) {
		if (k->remove_mark[l])
			continue;
		if (!owns[l]) { /* nothing to wait for there */
			k->remove_mark[l] = js->posted[l];
			continue;
		}
		if (b->dp.post(b->dp.ctx, l, &m) == 0)
			k->remove_mark[l] = ++js->posted[l];
		else
			all = 0;
	}
	return all;
}

/* Every rank released k: the lcores drop it, its endpoints' load goes
 * back now, its memory once they applied the REMOVE (jobs_keys_tick).
 * mark: the key's remove_mark, zeroed, taken over. */
static void start_key_remove(struct jobs *js, struct job *j, struct job_key *k, uint64_t *mark)
{
	k->remove_mark = mark;
	assign_release(&k->geom, js->load, js->box->layout.neps, k->chunk_ep);
	j->keys_removing++;
	post_key_remove(js, j, k);
}

/* The key index again from keys[] (after a key left the array). */
static void index_rebuild(struct job *j)
{
	memset(j->key_index, 0, (size_t)j->key_index_cap * sizeof(*j->key_index));
	for (uint32_t i = 0; i < j->nkeys; i++)
		index_add(j, i);
}

/* A block of a removed key, zeroed, goes back to the job. */
static void give_back(struct jobs *js, struct job *j, uint64_t off, uint64_t bytes)
{
	if (arena_free(&j->mem, off, bytes) < 0)
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s: out of memory for "
			     "the free list; %" PRIu64 " bytes stay taken", j->name, bytes);
}

static void zero(struct jobs *js, struct job *j, uint64_t off, uint64_t len)
{
	const struct box_dp *dp = &js->box->dp;

	if (dp->mem_zero)
		dp->mem_zero(dp->ctx, j->arena + off, len);
	else
		memset(j->arena + off, 0, len);
}

/* Queue a removed key's block to be zeroed (zero_some); 0 or -ENOMEM. */
static int queue_zero(struct job *j, uint64_t off, uint64_t len, int last)
{
	if (j->nzeroing == j->zeroing_cap) {
		uint32_t cap = j->zeroing_cap ? 2 * j->zeroing_cap : 8;
		struct job_zeroing *z = realloc(j->zeroing, cap * sizeof(*z));
		if (!z)
			return -ENOMEM;
		j->zeroing = z;
		j->zeroing_cap = cap;
	}
	j->zeroing[j->nzeroing++] = (struct job_zeroing){ .off = off, .len = len,
							  .last = (uint8_t)last };
	return 0;
}

/*
 * Zero queued blocks, at most JOBS_ZERO_STEP bytes this tick, and give
 * back those done. A large key comes back over several ticks, so that the
 * control thread never stalls on it (issue 44.2: 2 s for an 800 MB key);
 * where the data plane can (anonymous memory) its pages go back to the
 * system instead of being written. Returns the bytes given back.
 */
static uint64_t zero_some(struct jobs *js, struct job *j)
{
	uint64_t budget = JOBS_ZERO_STEP, back = 0;

	while (j->nzeroing && budget) {
		struct job_zeroing *z = &j->zeroing[0];
		uint64_t n = z->len - z->done < budget ? z->len - z->done : budget;
		zero(js, j, z->off + z->done, n);
		z->done += n;
		budget -= n;
		if (z->done < z->len)
			break;
		give_back(js, j, z->off, z->len);
		back += z->len;
		if (z->last)
			j->keys_removing--;
		memmove(z, z + 1, (size_t)(--j->nzeroing) * sizeof(*z));
	}
	return back;
}

int jobs_ps_stage(struct jobs *js, const struct job *cj, const struct job_key *ck,
		  char *err, size_t errlen)
{
	struct job *j = (struct job *)cj;
	struct job_key *k = (struct job_key *)ck;
	uint64_t off;

	(void)js;
	if (!k->is_ps || k->ps.rdtype != WIRE_F32 || k->stage_bytes)
		return 0;
	size_t need = engine_ps_stage_bytes(k->ek);
	uint64_t left = j->max_bytes - j->mem.used;
	int rc = arena_alloc(&j->mem, need, &off);
	if (rc == -ENOSPC)
		return errmsg(err, errlen, -ENOSPC, "job %s key %" PRIu32 ": writing its weights "
			      "needs %zu bytes of job memory in one block (they wait there for "
			      "the next step), %" PRIu64 " of %" PRIu64 " are free", j->name,
			      k->key, need, left, j->max_bytes);
	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": out of memory", j->name,
			      k->key);
	engine_ps_stage_init(k->ek, j->arena + off);
	k->stage_off = off;
	k->stage_bytes = need;
	return 0;
}

void jobs_keys_tick(struct jobs *js, struct job *j)
{
	uint32_t done = 0;

	for (uint32_t i = 0; i < j->nkeys;) {
		struct job_key *k = &j->keys[i];
		if (!k->remove_mark || !post_key_remove(js, j, k) || !jobs_applied(js, k->remove_mark)) {
			i++;
			continue;
		}
		/* no lcore refers to the key any more: its rounds are final
		 * (a rank may have pushed the one after a segment's last
		 * completed, which then never completed: that one counts too);
		 * its blocks are zeroed, then go back to the job (zero_some;
		 * without memory for the queue, at once) */
		for (uint32_t s = 0; s < k->ek->nsegs; s++)
			if (k->ek->segs[s].done + 1 > j->round_hwm)
				j->round_hwm = k->ek->segs[s].done + 1;
		int st = k->stage_bytes != 0;
		if (queue_zero(j, k->off, k->bytes, !st) < 0 ||
		    (st && queue_zero(j, k->stage_off, k->stage_bytes, 1) < 0)) {
			if (st && j->nzeroing && j->zeroing[j->nzeroing - 1].off == k->off)
				j->nzeroing--;   /* the first went in: undo it */
			zero(js, j, k->off, k->bytes);
			give_back(js, j, k->off, k->bytes);
			if (st) {
				zero(js, j, k->stage_off, k->stage_bytes);
				give_back(js, j, k->stage_off, k->stage_bytes);
			}
			j->keys_removing--;
		}
		free(k->chunk_ep);
		free(k->remove_mark);
		j->keys[i] = j->keys[--j->nkeys];
		done++;
	}
	if (done)
		index_rebuild(j);
	uint64_t back = zero_some(js, j);
	if (back)
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_DEBUG, "job %s: %" PRIu64 " bytes of "
			     "released keys back (%" PRIu64 " of %" PRIu64 " in use)", j->name,
			     back, j->mem.used, j->max_bytes);
}

/* The remove marks of the keys rank's release of keys[0..n) completes
 * (marks[i] for keys[i]; NULL for keys other ranks still hold), or NULL
 * when memory ran out. */
static uint64_t **alloc_marks(const struct jobs *js, const struct job *j, uint32_t rank,
			      const uint32_t *keys, uint32_t n)
{
	uint64_t **marks = calloc(n ? n : 1, sizeof(*marks));

	for (uint32_t i = 0; marks && i < n; i++) {
		const struct job_key *k = job_key_find(j, keys[i]);
		if (k->nreleased + !rankset_has(&k->released, rank) != j->world)
			continue;
		marks[i] = calloc(js->box->layout.nlcores, sizeof(*marks[i]));
		if (!marks[i]) {
			for (uint32_t o = 0; o < i; o++)
				free(marks[o]);
			free(marks);
			marks = NULL;
		}
	}
	return marks;
}

int jobs_release(struct jobs *js, uint32_t job_id, uint32_t rank, const void *session,
		 const uint32_t *keys, uint32_t n, uint32_t *removed, uint32_t *nremoved,
		 char *err, size_t errlen)
{
	struct job *j = (struct job *)jobs_find_id(js, job_id);

	*nremoved = 0;
	if (!j)
		return errmsg(err, errlen, -ENOENT, "no job with id %" PRIu32, job_id);
	if (j->state == JOB_ABORTED)
		return errmsg(err, errlen, -ECONNABORTED, "job %s is aborted (%s)",
			      j->name, j->reason);
	if (rank >= j->world || !j->ranks[rank].joined)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 " has not joined "
			      "the job", j->name, rank);
	if (session != j->ranks[rank].session)
		return errmsg(err, errlen, -EACCES, "job %s: rank %" PRIu32 " belongs to "
			      "another connection (release keys on the connection that "
			      "joined)", j->name, rank);
	/* check everything first: an error releases nothing */
	for (uint32_t i = 0; i < n; i++) {
		const struct job_key *k = job_key_find(j, keys[i]);
		if (!k)
			return errmsg(err, errlen, -ENOENT, "job %s has no key %" PRIu32,
				      j->name, keys[i]);
		if (rankset_has(&k->released, rank))
			return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %"
				      PRIu32 " released it already", j->name, keys[i], rank);
		for (uint32_t o = 0; o < i; o++)
			if (keys[o] == keys[i])
				return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 " is "
					      "named twice", j->name, keys[i]);
	}
	/* then the memory, so that nothing can fail once keys change */
	uint64_t **marks = alloc_marks(js, j, rank, keys, n);
	if (!marks)
		return errmsg(err, errlen, -ENOMEM, "job %s: out of memory releasing %" PRIu32
			      " key%s (none was released)", j->name, n, n == 1 ? "" : "s");
	for (uint32_t i = 0; i < n; i++) {
		struct job_key *k = (struct job_key *)job_key_find(j, keys[i]);
		if (!k->nreleased)
			j->keys_releasing++;
		rankset_add(&k->released, rank);
		k->nreleased++;
		if (!marks[i])
			continue;
		start_key_remove(js, j, k, marks[i]);
		j->keys_releasing--;
		removed[(*nremoved)++] = keys[i];
	}
	free(marks);
	return 0;
}

void jobs_keys_release_all(struct jobs *js, struct job *j)
{
	for (uint32_t i = 0; i < j->nkeys; i++) {
		struct job_key *k = &j->keys[i];
		if (k->remove_mark)
			continue;
		uint64_t *mark = calloc(js->box->layout.nlcores, sizeof(*mark));
		if (!mark) {
			ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s key %" PRIu32
				     ": out of memory releasing it; it stays declared", j->name, k->key);
			continue;
		}
		if (k->nreleased)
			j->keys_releasing--;
		rankset_fill(&k->released, j->world);
		k->nreleased = j->world;
		start_key_remove(js, j, k, mark);
	}
}

/* ---- declaration ---- */

static const char *const coll_names[JOB_NCOLL] = {
	[JOB_ALLREDUCE] = "allreduce", [JOB_BROADCAST] = "broadcast",
	[JOB_ALLGATHER] = "allgather", [JOB_REDUCE_SCATTER] = "reduce_scatter",
};

int jobs_coll_parse(const char *name, unsigned *coll)
{
	for (unsigned i = 0; i < JOB_NCOLL; i++)
		if (strcmp(name, coll_names[i]) == 0) {
			*coll = i;
			return 0;
		}
	return -EINVAL;
}

const char *jobs_coll_name(unsigned coll)
{
	return coll < JOB_NCOLL ? coll_names[coll] : NULL;
}

/* The engine's kind of a collective and its slices (docs/protocol.md
 * "Collective keys"). */
static unsigned engine_coll_of(unsigned coll)
{
	return coll == JOB_BROADCAST || coll == JOB_ALLGATHER ? ENGINE_COLL_GATHER
	       : coll == JOB_REDUCE_SCATTER ? ENGINE_COLL_SCATTER : ENGINE_COLL_SUM;
}

static uint16_t nslices_of(const struct job *j, unsigned coll)
{
	return coll == JOB_ALLGATHER || coll == JOB_REDUCE_SCATTER ? j->world : 1;
}

/* Whether two PS declarations are the same (every field PyTorch means). */
static bool same_ps(const struct job_ps *a, const struct job_ps *b)
{
	return a->opt.kind == b->opt.kind && a->opt.nesterov == b->opt.nesterov &&
	       a->opt.momentum == b->opt.momentum && a->opt.dampening == b->opt.dampening &&
	       a->opt.weight_decay == b->opt.weight_decay && a->opt.beta1 == b->opt.beta1 &&
	       a->opt.beta2 == b->opt.beta2 && a->opt.eps == b->opt.eps &&
	       a->rdtype == b->rdtype && a->average == b->average &&
	       a->mean_over == b->mean_over;
}

static int check_same(const struct job *j, const struct job_key *k,
		      const struct jobs_declare_args *a, char *err, size_t errlen)
{
	if (k->geom.count != a->count || k->dtype != a->dtype)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %" PRIu32
			      " declares %" PRIu64 " %s (%" PRIu64 " bytes) but rank %u declared %"
			      PRIu64 " %s (%" PRIu64 " bytes)", j->name, a->key, a->rank, a->count,
			      wire_dtype_name(a->dtype), a->count * wire_dtype_size(a->dtype),
			      k->first_rank, k->geom.count, wire_dtype_name(k->dtype),
			      k->geom.count * wire_dtype_size(k->dtype));
	if (k->sparse != a->sparse)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %" PRIu32
			      " declares it %s but rank %u declared it %s", j->name, a->key,
			      a->rank, a->sparse ? "sparse" : "dense", k->first_rank,
			      k->sparse ? "sparse" : "dense");
	if (k->coll != a->coll || (a->coll == JOB_BROADCAST && k->root != a->root))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %" PRIu32
			      " declares it for %s (root %u) but rank %u declared it for %s "
			      "(root %u)", j->name, a->key, a->rank, jobs_coll_name(a->coll),
			      a->root, k->first_rank, jobs_coll_name(k->coll), k->root);
	if (k->is_ps != (a->ps != NULL))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %" PRIu32
			      " declares it %s but rank %u declared it %s", j->name, a->key,
			      a->rank, a->ps ? "with an optimizer" : "as a plain sum",
			      k->first_rank, k->is_ps ? "with an optimizer" : "as a plain sum");
	if (a->ps && !same_ps(&k->ps, a->ps))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %" PRIu32
			      " declares another optimizer or other hyperparameters than rank %u"
			      " (%s)", j->name, a->key, a->rank, k->first_rank,
			      optim_name(k->ps.opt.kind));
	return 0;
}

static int check_new(const struct jobs *js, const struct job *j,
		     const struct jobs_declare_args *a, char *err, size_t errlen)
{
	uint32_t max_keys = js->box->cfg.max_keys, nkeys = j->nkeys + j->nrestoring;

	if (nkeys >= max_keys && (j->keys_releasing || j->keys_removing))
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": the job has %"
				 PRIu32 " keys, the limit (--max-keys), %" PRIu32 " of them being "
				 "released: retry once they are gone", j->name, a->key, max_keys,
				 j->keys_releasing + j->keys_removing);
	if (nkeys >= max_keys)
		return errmsg(err, errlen, -ENOSPC, "job %s key %" PRIu32 ": the job already "
				 "has %" PRIu32 " keys, the limit (--max-keys)", j->name, a->key,
				 max_keys);
	if (a->count == 0 || a->count > j->max_bytes / wire_dtype_size(a->dtype))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": count %" PRIu64
				 " is outside [1, %" PRIu64 "] for %s (job memory %" PRIu64 " bytes)",
				 j->name, a->key, a->count, j->max_bytes / wire_dtype_size(a->dtype),
				 wire_dtype_name(a->dtype), j->max_bytes);
	if (a->sparse && a->ps)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": a sparse key "
				 "cannot have an optimizer", j->name, a->key);
	if (a->sparse && a->count > UINT32_MAX)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": a sparse key "
				 "holds at most %u elements (32-bit indices), not %" PRIu64,
				 j->name, a->key, UINT32_MAX, a->count);
	if (a->sparse && j->seg_bytes <= WIRE_SPARSE_SLACK)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": segments of %"
				 PRIu32 " bytes leave no room for sparse records (MTU too small)",
				 j->name, a->key, j->seg_bytes);
	if (a->coll != JOB_ALLREDUCE && (a->sparse || a->ps))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": a %s key "
				 "is dense and has no optimizer", j->name, a->key,
				 jobs_coll_name(a->coll));
	if (a->coll >= JOB_NCOLL || (a->coll == JOB_BROADCAST && a->root >= j->world))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": root %u is "
				 "not a rank of the job (world %u)", j->name, a->key, a->root,
				 j->world);
	if (nslices_of(j, a->coll) > 1 && a->count % j->world)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": a %s key of "
				 "%" PRIu64 " elements is not %u equal slices (count must be a "
				 "multiple of the world)", j->name, a->key, jobs_coll_name(a->coll),
				 a->count, j->world);
	if (js->box->layout.neps == 0)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": the box has no "
				 "data endpoints", j->name, a->key);
	return 0;
}

/* Post KEY_INSTALL to every lcore that owns at least one chunk. */
static int install_key(struct jobs *js, struct job *j, struct engine_key *ek,
		       const uint8_t *owner_of, unsigned *failed)
{
	uint8_t owns[BOX_MAX_LCORES] = { 0 };
	struct engine_msg m = { .type = ENGINE_MSG_KEY_INSTALL, .job = j->id, .u.key = ek };

	for (uint32_t c = 0; c < ek->nchunks; c++)
		owns[owner_of[c]] = 1;
	for (unsigned l = 0; l < js->box->layout.nlcores; l++) {
		if (!owns[l])
			continue;
		int rc = jobs_post(js, l, &m);
		if (rc < 0) {
			*failed = l;
			return rc;
		}
	}
	return 0;
}

/* Arena bytes of a key: its engine key (a PS key laid out as f32) and
 * its PS state. */
static size_t key_bytes(const struct job *j, const struct job_key *k,
			const struct jobs_declare_args *a)
{
	if (a->sparse)
		return engine_sparse_mem_bytes(a->count, k->geom.dtype, j->seg_bytes,
					       k->geom.segs_per_chunk);
	if (a->coll != JOB_ALLREDUCE)
		return engine_coll_mem_bytes(a->count, k->geom.dtype, j->seg_bytes,
					     k->geom.segs_per_chunk, nslices_of(j, a->coll));
	size_t need = engine_key_mem_bytes(a->count, k->geom.dtype, j->seg_bytes,
					   k->geom.segs_per_chunk);
	if (a->ps)
		need += engine_ps_mem_bytes(a->count, j->seg_bytes, optim_planes(&a->ps->opt),
					    a->ps->rdtype);
	return need;
}

/* Where a new PS key's checkpoint comes from: 1 with dir and same_job
 * (the job's restore directory: every file must be there; --checkpoint-dir:
 * a job whose name has periodic checkpoints there, pboxd restarted and the
 * job created again, must match the job's name and world, and a key with
 * no file starts from rank 0's weights: *missing_ok); 0: none, the key
 * starts from rank 0's weights; or a negative errno with the message. */
static int restore_source(const struct box *b, const struct job *j, uint32_t key, char *dir,
			  size_t size, int *same_job, int *missing_ok, char *err, size_t errlen)
{
	char why[512];
	int rc;

	*same_job = *missing_ok = 0;
	if (j->restore[0]) {
		snprintf(dir, size, "%s", j->restore);
		return 1;
	}
	if (!b->cfg.checkpoint_dir[0])
		return 0;
	rc = ps_ckpt_auto_dir(dir, size, b->cfg.checkpoint_dir, j->name, 0, why, sizeof(why));
	if (rc == -ENOENT || rc == -EINVAL)
		return 0;
	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": --checkpoint-dir: %s",
			      j->name, key, why);
	*same_job = *missing_ok = 1;
	return 1;
}

/* Undo build_key: the chunks' load back, the block zeroed a piece per
 * tick (jobs_keys_tick: a large key never stalls the control thread)
 * and given back to the job. */
static void unbuild_key(struct jobs *js, struct job *j, struct job_key *k, uint8_t *owner)
{
	assign_release(&k->geom, js->load, js->box->layout.neps, k->chunk_ep);
	if (queue_zero(j, k->off, k->bytes, 1) == 0) {
		j->keys_removing++;
	} else {
		zero(js, j, k->off, k->bytes);
		give_back(js, j, k->off, k->bytes);
	}
	free(k->chunk_ep);
	k->chunk_ep = NULL;
	free(owner);
}

/* Place the chunks and build the engine key in the arena. */
static int build_key(struct jobs *js, struct job *j, struct job_key *k,
		     const struct jobs_declare_args *a, uint8_t **owner_out,
		     char *err, size_t errlen)
{
	const struct box *b = js->box;
	size_t need = key_bytes(j, k, a);
	uint64_t left = j->max_bytes - j->mem.used, off;
	int rc = arena_alloc(&j->mem, need, &off);

	if (rc == -ENOSPC && (j->keys_releasing || j->keys_removing))
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": needs %zu bytes "
				 "of job memory, %" PRIu64 " of %" PRIu64 " are free, and %" PRIu32
				 " keys being released by the ranks will give back more: declare "
				 "it again in a moment", j->name, a->key, need, left, j->max_bytes,
				 j->keys_releasing + j->keys_removing);
	if (rc == -ENOSPC && need <= left)
		return errmsg(err, errlen, -ENOSPC, "job %s key %" PRIu32 ": needs %zu bytes "
				 "of job memory in one block%s, %" PRIu64 " of %" PRIu64 " are free "
				 "but the largest free block is %" PRIu64 " bytes", j->name, a->key,
				 need, a->ps ? " (weights, optimizer state and results)" : "", left,
				 j->max_bytes, arena_largest(&j->mem));
	if (rc == -ENOSPC)
		return errmsg(err, errlen, -ENOSPC, "job %s key %" PRIu32 ": needs %zu bytes "
				 "of job memory%s, %" PRIu64 " of %" PRIu64 " left", j->name, a->key,
				 need, a->ps ? " (weights, optimizer state and results)" : "",
				 left, j->max_bytes);
	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s key %" PRIu32 ": out of memory",
				 j->name, a->key);
	k->chunk_ep = malloc((size_t)k->geom.nchunks * sizeof(*k->chunk_ep));
	uint8_t *owner = malloc(k->geom.nchunks);
	if (!k->chunk_ep || !owner) {
		free(k->chunk_ep);
		free(owner);
		k->chunk_ep = NULL;
		arena_free(&j->mem, off, need);
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory",
				 j->name, a->key);
	}
	assign_chunks(&k->geom, js->load, b->layout.neps, k->chunk_ep);
	for (uint32_t c = 0; c < k->geom.nchunks; c++)
		owner[c] = (uint8_t)b->layout.eps[k->chunk_ep[c]].lcore;
	uint8_t *mem = j->arena + off;
	if (a->sparse)
		k->ek = engine_sparse_key_init(mem, a->key, a->count, k->geom.dtype,
					       j->seg_bytes, k->geom.segs_per_chunk, owner);
	else if (a->coll != JOB_ALLREDUCE)
		k->ek = engine_coll_key_init(mem, a->key, a->count, k->geom.dtype, j->seg_bytes,
					     k->geom.segs_per_chunk, owner,
					     engine_coll_of(a->coll), a->root,
					     nslices_of(j, a->coll));
	else
		k->ek = engine_key_init(mem, a->key, a->count, k->geom.dtype, j->seg_bytes,
					k->geom.segs_per_chunk, owner);
	/* a resuming rank's key goes on below its results (FINAL pushes
	 * bring them: docs/protocol.md "Resuming after a box restart") */
	engine_key_set_round0(k->ek, a->resume_round > j->round_hwm + 1 ? a->resume_round - 1
									  : j->round_hwm);
	if (a->ps) {
		struct engine_ps *ps = engine_ps_init(mem + engine_key_mem_bytes(a->count,
				k->geom.dtype, j->seg_bytes, k->geom.segs_per_chunk),
			       k->ek, &a->ps->opt, a->dtype, a->ps->rdtype, a->ps->average);
		ps->mean_over = a->ps->mean_over;
	}
	k->bytes = need;
	k->off = off;
	*owner_out = owner;
	return 0;
}

/* A key built (build_key, its state restored if it is) goes into keys[]
 * and onto the lcores; owner is taken. */
static int add_key(struct jobs *js, struct job *j, struct job_key *kp, uint8_t *owner,
		   struct job_key **out, char *err, size_t errlen)
{
	struct job_key k = *kp;
	unsigned failed = 0;
	int rc;

	if (reserve_key(j, js->box->cfg.max_keys) < 0) {
		unbuild_key(js, j, kp, owner);
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory",
			      j->name, k.key);
	}
	j->keys[j->nkeys] = k;
	index_add(j, j->nkeys);
	j->nkeys++;
	rc = install_key(js, j, k.ek, owner, &failed);
	free(owner);
	if (rc < 0) {
		char why[128];
		snprintf(why, sizeof(why), "key %" PRIu32 " could not be installed on lcore %u "
			 "(message ring full)", k.key, failed);
		jobs_abort_job(js, j, why);
		return errmsg(err, errlen, -ECONNABORTED, "job %s: %s", j->name, why);
	}
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_DEBUG, "job %s key %" PRIu32 ": %" PRIu64
		" %s, %" PRIu32 " segments in %" PRIu32 " chunks, %zu bytes%s", j->name, k.key,
		k.geom.count, wire_dtype_name(k.dtype), k.geom.nsegs, k.geom.nchunks, k.bytes,
		k.is_ps && k.ek->ps->restored ? ", restored" : "");
	*out = &j->keys[j->nkeys - 1];
	return 0;
}

static struct job_restoring *restoring_find(const struct job *j, uint32_t key)
{
	for (uint32_t i = 0; i < j->nrestoring; i++)
		if (j->restoring[i]->k.key == key)
			return j->restoring[i];
	return NULL;
}

/*
 * A new PS key's state from its checkpoint, if it has one
 * (restore_source): read here at once (!defer), or handed to a reader
 * thread: the key (k, owner taken) waits in j->restoring and JOBS_PENDING
 * is returned. 0: nothing to restore, or restored here; < 0: the key is
 * undone, with the message.
 */
static int restore_key(struct jobs *js, struct job *j, struct job_key *k, uint8_t *owner,
		       bool defer, char *err, size_t errlen)
{
	char dir[PS_CKPT_PATH];
	int same_job, missing_ok;
	int rc = restore_source(js->box, j, k->key, dir, sizeof(dir), &same_job, &missing_ok,
				err, errlen);

	if (rc > 0 && !defer) {
		rc = ps_ckpt_load(j, k, dir, same_job, &js->box->keepalive, err, errlen);
		if (rc == -ENOENT && missing_ok)
			rc = 0;
	}
	if (rc <= 0) {
		if (rc < 0)
			unbuild_key(js, j, k, owner);
		return rc;
	}
	struct job_restoring *r = calloc(1, sizeof(*r));
	if (r && j->nrestoring == j->restoring_cap) {
		uint32_t cap = j->restoring_cap ? 2 * j->restoring_cap : 4;
		struct job_restoring **a = realloc(j->restoring, cap * sizeof(*a));
		if (a) {
			j->restoring = a;
			j->restoring_cap = cap;
		}
	}
	if (!r || j->nrestoring == j->restoring_cap) {
		free(r);
		unbuild_key(js, j, k, owner);
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory",
			      j->name, k->key);
	}
	r->k = *k;
	r->owner = owner;
	r->missing_ok = missing_ok;
	r->since = clock_s();
	ps_ckpt_load_prepare(j, k, dir, same_job, &r->args);
	j->restoring[j->nrestoring++] = r;
	rc = ckpt_load_start(&r->args, &r->load);   /* -EAGAIN: the next poll */
	if (rc < 0 && rc != -EAGAIN)
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "%s: no reader thread for its "
			     "checkpoint (%s); tried again", r->args.who, strerror(-rc));
	return JOBS_PENDING;
}

/* One key being restored: 1 still reading; 0 read (its state set); or a
 * negative errno with the message (the read dropped). */
static int restoring_step(struct jobs *js, struct job *j, struct job_restoring *r,
			  char *err, size_t errlen)
{
	unsigned bound = js->box->cfg.checkpoint_timeout_ms;
	struct ckpt_hdr got;
	char path[PS_CKPT_PATH];
	int rc = 1;

	if (j->state == JOB_ABORTED) {
		ckpt_load_drop(r->load);
		r->load = NULL;
		return errmsg(err, errlen, -ECONNABORTED, "job %s is aborted (%s)", j->name,
			      j->reason);
	}
	if (!r->load && ckpt_load_start(&r->args, &r->load) < 0)
		r->load = NULL;
	if (r->load)
		rc = ckpt_load_poll(r->load, &got, err, errlen);
	if (rc <= 0) {
		ckpt_load_drop(r->load);
		r->load = NULL;
		if (rc == -ENOENT && r->missing_ok)
			return 0;
		if (rc == 0)
			ps_ckpt_load_done(&r->k, &got);
		return rc;
	}
	if (bound && (clock_s() - r->since) * 1000.0 >= bound) {
		ckpt_load_drop(r->load);   /* its thread may go on; it never touches the key */
		r->load = NULL;
		ps_ckpt_path(path, sizeof(path), r->args.dir, r->k.key);
		return errmsg(err, errlen, -ETIMEDOUT, "%s: reading its checkpoint %s did not "
			      "finish within %u ms (--checkpoint-timeout-ms: a slow or hung disk)%s",
			      r->args.who, path, bound, ckpt_load_inflight() >= CKPT_LOAD_MAX ?
			      "; every reader thread is busy" : "");
	}
	return 1;
}

void jobs_restores_poll(struct jobs *js, jobs_restored_fn fn, void *ctx)
{
	char err[512];   /* RPC_ERR_MAX */

	for (const struct job *cj = jobs_next(js, NULL); cj; cj = jobs_next(js, cj)) {
		struct job *j = (struct job *)cj;
		for (uint32_t i = 0; i < j->nrestoring;) {
			struct job_restoring *r = j->restoring[i];
			struct job_key *k = NULL;
			uint32_t key = r->k.key;
			err[0] = '\0';
			int rc = restoring_step(js, j, r, err, sizeof(err));
			if (rc == 1) {
				i++;
				continue;
			}
			j->restoring[i] = j->restoring[--j->nrestoring];
			if (rc == 0)
				rc = add_key(js, j, &r->k, r->owner, &k, err, sizeof(err));
			else
				unbuild_key(js, j, &r->k, r->owner);
			free(r);
			if (rc < 0)
				ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "%s", err);
			fn(ctx, j, key, rc == 0 ? k : NULL, rc, err);
		}
	}
}

int jobs_restore_pending(const struct jobs *js, uint32_t job_id, uint32_t key)
{
	const struct job *j = jobs_find_id(js, job_id);

	return j && restoring_find(j, key) != NULL;
}

static int new_key(struct jobs *js, struct job *j, const struct jobs_declare_args *a,
		   struct job_key **out, char *err, size_t errlen)
{
	struct job_key k = { .key = a->key, .dtype = (uint8_t)a->dtype,
			     .is_ps = a->ps != NULL, .sparse = a->sparse,
			     .coll = (uint8_t)a->coll, .root = a->root,
			     .first_rank = (uint16_t)a->rank };
	unsigned layout = a->ps ? WIRE_F32 : a->dtype; /* PS keys: fp32 weights fit */
	/* sparse keys: segments 64 bytes shorter, so a record always fits */
	uint32_t lay_bytes = a->sparse ? j->seg_bytes - WIRE_SPARSE_SLACK : j->seg_bytes;
	uint8_t *owner = NULL;
	int rc = check_new(js, j, a, err, errlen);

	if (rc < 0)
		return rc;
	if (a->ps)
		k.ps = *a->ps;
	if (assign_geom(a->count, layout, lay_bytes, js->box->cfg.chunk_bytes, &k.geom) < 0)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": %" PRIu64
				 " %s cannot be cut into %" PRIu32 "-byte segments", j->name,
				 a->key, a->count, wire_dtype_name(a->dtype), j->seg_bytes);
	if (nslices_of(j, a->coll) > 1) { /* world slices, each cut on its own */
		uint64_t n = j->world, slice = a->count / n, se = k.geom.seg_elems;
		uint64_t padded = n * ((slice + se - 1) / se) * se;
		if (assign_geom(padded, layout, lay_bytes, js->box->cfg.chunk_bytes,
				&k.geom) < 0)
			return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": %" PRIu64
					 " %s cannot be cut into %" PRIu32 "-byte segments",
					 j->name, a->key, a->count, wire_dtype_name(a->dtype),
					 j->seg_bytes);
		k.geom.count = a->count;
	}
	if (reserve_key(j, js->box->cfg.max_keys) < 0)
		return errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory",
				 j->name, a->key);
	rc = build_key(js, j, &k, a, &owner, err, errlen);
	if (rc < 0)
		return rc;
	rankset_add(&k.declared, a->rank);
	if (a->ps) {
		rc = restore_key(js, j, &k, owner, a->defer_restore, err, errlen);
		if (rc != 0)
			return rc;
	}
	return add_key(js, j, &k, owner, out, err, errlen);
}

int jobs_declare(struct jobs *js, const struct jobs_declare_args *a,
		 const struct job_key **out, char *err, size_t errlen)
{
	struct job *j = (struct job *)jobs_find_id(js, a->job_id);
	struct job_key *k;
	int rc;

	if (!j)
		return errmsg(err, errlen, -ENOENT, "no job with id %" PRIu32, a->job_id);
	if (j->state == JOB_ABORTED)
		return errmsg(err, errlen, -ECONNABORTED, "job %s is aborted (%s)",
				 j->name, j->reason);
	if (a->rank >= j->world || !j->ranks[a->rank].joined)
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": rank %" PRIu32
				 " has not joined the job", j->name, a->key, a->rank);
	if (a->session != j->ranks[a->rank].session)
		return errmsg(err, errlen, -EACCES, "job %s key %" PRIu32 ": rank %" PRIu32
				 " belongs to another connection (declare keys on the"
				 " connection that joined)", j->name, a->key, a->rank);
	if (!wire_dtype_name(a->dtype))
		return errmsg(err, errlen, -EINVAL, "job %s key %" PRIu32 ": unknown dtype %u",
				 j->name, a->key, a->dtype);
	k = (struct job_key *)job_key_find(j, a->key);
	struct job_restoring *r = k ? NULL : restoring_find(j, a->key);
	if (r) { /* its checkpoint is being read: this rank waits for it too */
		if ((rc = check_same(j, &r->k, a, err, errlen)) < 0)
			return rc;
		rankset_add(&r->k.declared, a->rank);
		return JOBS_PENDING;
	}
	if (k && (k->remove_mark || rankset_has(&k->released, a->rank))) {
		return busy_released(j, k, a->key, err, errlen);
	} else if (k) {
		rc = check_same(j, k, a, err, errlen);
	} else {
		rc = new_key(js, j, a, &k, err, errlen);
	}
	if (rc != 0)
		return rc;
	rankset_add(&k->declared, a->rank);
	*out = k;
	return 0;
}
