/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.c - host-local aggregation (host.h; docs/architecture.md "The host
 * level"): pbox_connect's host level, the host thread, pbox_close's.
 *
 * The caller's client stays the flat job's (every call that is not a
 * host-level sum goes there unchanged); c->host adds the host group
 * (host_shm.c) and the lane's client: local rank l of host h joins
 * "<job>.lane<l>" of world H as rank h, with the caller's options.
 *
 * pbox_iallreduce of a host buffer becomes a request run by the host
 * thread, one at a time in submission order (the order every member of
 * the host calls in): copy the buffer into this member's slot of the
 * key's shared memory (but its own part); barrier 1; sum this member's
 * part over the slots (its own from its buffer) in local rank order into
 * result area (n & 1) and allreduce it on the lane, fed as the sum goes
 * (sum_fed); copy its part's result out; barrier 2; copy the other parts'
 * results out. A member that starts call n + 1
 * has passed barrier 2 of call n, which every member reached after
 * copying call n - 1's result out: two result areas need no third
 * barrier. Slots are rewritten only after barrier 2, when every part of
 * the call before was summed.
 *
 * A device call (pbox_iallreduce_dev, pbox_iallreduce_topk_dev:
 * gpu/gpu_host.c) is that dense or top-k call on its key's pinned bounce
 * buffer: the host thread runs its stages
 * around it (r->dev: host_in copies the device data into the buffer,
 * host_out enqueues the copy back), so it takes the same barriers and
 * order as a host buffer of its wire dtype.
 *
 * A top-k call (pbox_iallreduce_topk, HK_TOPK) is the dense call with
 * pbox_allreduce_topk on the lane in place of pbox_allreduce: each rank's
 * part of the host's sum is selected with that part's residual and
 * momentum (the lane client's top-k state of the key), so a host sends
 * density x count entries, not L times as many, and the selection's CPU
 * is spread over the host's ranks as the sum is.
 *
 * A sparse call (pbox_iallreduce_sparse, HK_SPARSE) puts its entries in
 * the slot (their count, indices, values); each rank merges the entries
 * of its part from every slot, a host's entries at an index summed in
 * local rank order (in f32, rounded once to the dtype), and sends the
 * merged entries as a sparse call on its lane. pbox_allreduce_host
 * (HK_HOSTSUM) is the dense call without the lane: the host's sum only.
 *
 * PS keys run the same way (enum host_kind): each rank's part is a PS key
 * of its lane declared with mean_over = the job's world; a push sums the
 * host's gradients of the part into private scratch and pushes it, the
 * weights coming back into the result area; init and write take rank 0's
 * (local rank 0's) f32 data from slot 0; read gathers every part.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/knobs.h"
#include "client/ops/host.h"
#include "common/sum.h"

#define HOST_STRIDE_ALIGN 4096u
#define HOST_SPARSE_HDR   64u     /* a sparse slot: its entry count, then
				     indices and values */
#define HOST_FEED_BYTES   (1u << 20)   /* a dense part is summed and fed to
					  its lane call in chunks of this */
#define HOST_DRAIN_WAIT_MS 50u       /* sum_fed looks at its lane call at least
					  this often (its end rings no bell) */
#define HOST_LATE_MS      2000u   /* barrier 2 waits this past timeout_ms: a
				     member's lane call has timeout_ms of its
				     own and then names its failure */

struct hkey {                     /* a key of the host level */
	uint32_t key;
	uint8_t dtype;            /* (PS: the gradients') */
	uint8_t wdtype;           /* PS: the weights' the box returns */
	uint8_t kind;             /* enum hkey_kind, fixed by its first call */
	bool unlinked;            /* its name is gone (every member mapped it) */
	bool on_lane;             /* this rank's part was declared on its lane */
	uint64_t count;
	size_t lo, hi;            /* this rank's part (host_slice) */
	size_t stride;            /* bytes per slot and result area */
	void *mem;                /* its shared memory, NULL until its first call */
};

/* What a key of the host level is. */
enum hkey_kind {
	HKEY_DENSE = 0,   /* pbox_iallreduce (and device calls) */
	HKEY_PS,          /* declared with pbox_declare_optimizer */
	HKEY_TOPK,        /* pbox_iallreduce_topk */
	HKEY_SPARSE,      /* pbox_iallreduce_sparse */
	HKEY_HOSTSUM,     /* pbox_allreduce_host */
};

static const char *const hkey_kind_name[] = { "dense", "PS", "top-k", "sparse", "host-sum" };

/* What a host-level call does (r->coll of its request). */
enum host_kind {
	HK_DENSE = 0,   /* pbox_iallreduce */
	HK_TOPK,        /* pbox_iallreduce_topk (r->topk: its options) */
	HK_SPARSE,      /* pbox_iallreduce_sparse (r->sp_*: the entries' copy) */
	HK_HOSTSUM,     /* pbox_allreduce_host */
	HK_INIT,        /* pbox_ps_init: host 0's local rank 0 (rank 0) uploads */
	HK_PUSH,        /* pbox_ipush_pull */
	HK_READ,        /* pbox_ps_read: every local rank of a host */
	HK_WRITE,       /* pbox_ps_write, pbox_ps_set_steps: host 0's ranks */
	HK_STEPS,
};

struct host {
	struct host_layout lay;
	struct hgroup *g;
	pbox_client *lane;
	char lane_job[80];        /* (at most 63: host_layout_of checks) */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;     /* the queue and stop */
	pthread_cond_t cond;
	bool stop;                /* pbox_close: calls queued fail */
	struct pbox_req *head, *tail;   /* queued calls, linked by sub_next */
	pthread_mutex_t klock;    /* keys: added by the host thread, removed by
				     pbox_release_keys (never one in flight) */
	struct hkey **keys;
	uint32_t nkeys, kcap;
	uint64_t calls;           /* host thread only */
	uint8_t *scratch;         /* ... a PS part's host sum */
	size_t scratch_bytes;
};

/* A host-level call: run by the host thread, never by the progress thread. */
static const struct req_op op_host = { .declares = true };

/* The layout the options and environment give: 0 with *on false (off),
 * or *lay; PBOX_EINVAL with c's message. */
static int layout(pbox_client *c, struct host_layout *lay, bool *on)
{
	uint64_t enabled, lw, lr;
	char err[CLIENT_MSG_LEN];
	int rc;

	*on = false;
	if ((rc = knob_value(c, KNOB_HOST_LOCAL, &enabled)) < 0)
		return rc;
	uint32_t L = c->opts.local_world, l = c->opts.local_rank;
	if (L == 0 && knob_text(KNOB_LOCAL_WORLD_SIZE) && knob_text(KNOB_LOCAL_RANK)) {
		if ((rc = knob_value(c, KNOB_LOCAL_WORLD_SIZE, &lw)) < 0 ||
		    (rc = knob_value(c, KNOB_LOCAL_RANK, &lr)) < 0)
			return rc;
		L = (uint32_t)lw;
		l = (uint32_t)lr;
	}
	if (!enabled || L <= 1)
		return 0;
	if (host_layout_of(c->rank, c->world, l, L, c->job, lay, err, sizeof(err)) < 0)
		return client_error(c, PBOX_EINVAL, "job '%s' %s", c->job, err);
	*on = true;
	return 0;
}

static void fail_queued(pbox_client *c, struct host *h)
{
	char msg[CLIENT_MSG_LEN];

	pthread_mutex_lock(&h->lock);
	struct pbox_req *r = h->head;
	h->head = h->tail = NULL;
	pthread_mutex_unlock(&h->lock);
	while (r) {
		struct pbox_req *next = r->sub_next;
		snprintf(msg, sizeof(msg), "job '%s' rank %d key %u: the client closed before "
			 "the call ran", c->job, c->rank, r->key);
		req_end(c, r, PBOX_ECLOSED, msg);
		r = next;
	}
}

/* Add k to the table (k->key not in it). 0 or PBOX_ENOMEM. */
static int key_add(struct host *h, struct hkey *k)
{
	int rc = 0;

	pthread_mutex_lock(&h->klock);
	if (h->nkeys == h->kcap) {
		uint32_t cap = h->kcap ? h->kcap * 2 : 16;
		struct hkey **t = realloc(h->keys, cap * sizeof(*t));
		if (t) {
			h->keys = t;
			h->kcap = cap;
		}
	}
	if (h->nkeys < h->kcap)
		h->keys[h->nkeys++] = k;
	else
		rc = PBOX_ENOMEM;
	pthread_mutex_unlock(&h->klock);
	return rc;
}

static struct hkey *key_find(struct host *h, uint32_t key)
{
	struct hkey *k = NULL;

	pthread_mutex_lock(&h->klock);
	for (uint32_t i = 0; i < h->nkeys && !k; i++)
		if (h->keys[i]->key == key)
			k = h->keys[i];
	pthread_mutex_unlock(&h->klock);
	return k;
}

/* The kind of key a call of kind coll is made on. */
static unsigned key_kind_of(unsigned coll)
{
	switch (coll) {
	case HK_DENSE: return HKEY_DENSE;
	case HK_TOPK: return HKEY_TOPK;
	case HK_SPARSE: return HKEY_SPARSE;
	case HK_HOSTSUM: return HKEY_HOSTSUM;
	default: return HKEY_PS;
	}
}

/* What names a key's shared memory beside its key and count: its dtype
 * and kind (a key of another kind maps another name). */
static unsigned key_mem_tag(const struct hkey *k)
{
	return k->dtype | (unsigned)k->kind << 8;
}

/* The key of r: found (of r's kind, count and dtype) or, for a call that
 * is not a PS one, made now; its shared memory mapped at its first call. */
static struct hkey *key_of(pbox_client *c, struct host *h, const struct pbox_req *r,
			   char *msg, size_t len)
{
	unsigned kind = key_kind_of(r->coll);
	bool ps = kind == HKEY_PS;
	struct hkey *k = key_find(h, r->key);

	if (k && (k->kind != kind || k->count != r->count || (!ps && k->dtype != r->dtype))) {
		static const char *const call[] = { "an allreduce", "a PS call", "a top-k call",
						    "a sparse call", "a host sum" };
		snprintf(msg, len, "job '%s' rank %d key %u: host level: a %s key of %llu elements "
			 "of %s, this call is %s with %zu of %s (use another key)", c->job, c->rank,
			 r->key, hkey_kind_name[k->kind], (unsigned long long)k->count,
			 wire_dtype_name(k->dtype), call[kind], r->count,
			 wire_dtype_name(r->dtype));
		return NULL;
	}
	if (!k && ps) {
		snprintf(msg, len, "job '%s' rank %d key %u: not a PS key: declare it with "
			 "pbox_declare_optimizer first", c->job, c->rank, r->key);
		return NULL;
	}
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k || key_add(h, k) < 0) {
			free(k);
			snprintf(msg, len, "job '%s' rank %d key %u: out of memory", c->job,
				 c->rank, r->key);
			return NULL;
		}
		k->key = r->key;
		k->kind = (uint8_t)kind;
		k->dtype = r->dtype;
		k->count = r->count;
		host_slice(r->count, h->lay.local_world, h->lay.local, &k->lo, &k->hi);
	}
	if (!k->mem) {
		/* PS slots hold f32 weights too (init, read, write); a sparse
		 * key's, up to count entries */
		size_t esz = ps ? 4 : wire_dtype_size(k->dtype);
		size_t bytes = kind == HKEY_SPARSE ? HOST_SPARSE_HDR + k->count * (4 + esz) :
			       k->count * esz;
		size_t stride = (bytes + HOST_STRIDE_ALIGN - 1) / HOST_STRIDE_ALIGN *
				HOST_STRIDE_ALIGN;
		k->mem = hgroup_key_map(h->g, k->key, k->count, key_mem_tag(k), stride, msg, len);
		if (!k->mem)
			return NULL;
		k->stride = stride;
	}
	return k;
}

/* scratch of at least bytes, or NULL with msg */
static uint8_t *scratch(pbox_client *c, struct host *h, struct hkey *k, size_t bytes,
			char *msg, size_t len)
{
	if (h->scratch_bytes < bytes) {
		uint8_t *t = realloc(h->scratch, bytes);
		if (!t) {
			snprintf(msg, len, "job '%s' rank %d key %u: out of memory", c->job, c->rank,
				 k->key);
			return NULL;
		}
		h->scratch = t;
		h->scratch_bytes = bytes;
	}
	return h->scratch;
}

/* The first of idx's n indices at or above x. */
static size_t lower_bound(const uint32_t *idx, size_t n, uint64_t x)
{
	size_t a = 0, b = n;

	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (idx[m] < x)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

static float wide(const uint8_t *v, size_t j, unsigned dtype)
{
	float f;
	uint16_t u;

	if (dtype == WIRE_F32) {
		memcpy(&f, v + 4 * j, 4);
		return f;
	}
	memcpy(&u, v + 2 * j, 2);
	return dtype == WIRE_F16 ? half_to_float(u) : bf16_to_float(u);
}

/* HK_SPARSE: the entries of this rank's part from every slot, merged (an
 * index's values summed in local rank order), sent on the lane; the
 * dense sum of the part into res. */
static int sparse_part(pbox_client *c, struct host *h, struct hkey *k, uint8_t *res,
		       char *msg, size_t len)
{
	uint32_t L = h->lay.local_world;
	size_t lo = k->lo, n = k->hi - k->lo, esz = wire_dtype_size(k->dtype), total = 0;
	const uint32_t *idx[PBOX_HOST_LOCAL_MAX];
	const uint8_t *val[PBOX_HOST_LOCAL_MAX];
	size_t at[PBOX_HOST_LOCAL_MAX], end[PBOX_HOST_LOCAL_MAX];

	for (uint32_t i = 0; i < L; i++) {
		uint8_t *slot = hgroup_slot(k->mem, k->stride, i);
		uint64_t nnz;
		memcpy(&nnz, slot, sizeof(nnz));
		idx[i] = (const uint32_t *)(slot + HOST_SPARSE_HDR);
		val[i] = slot + HOST_SPARSE_HDR + nnz * 4;
		at[i] = lower_bound(idx[i], nnz, lo);
		end[i] = lower_bound(idx[i], nnz, lo + n);
		total += end[i] - at[i];
	}
	/* the merged entries: indices (relative to lo), f32 sums, wire values */
	uint8_t *s = scratch(c, h, k, total * (4 + 4 + esz) + 8, msg, len);
	if (!s)
		return PBOX_ENOMEM;
	uint32_t *uidx = (uint32_t *)s;
	float *acc = (float *)(s + total * 4);
	uint8_t *uval = s + total * 8;
	size_t m = 0;
	for (;;) {
		uint64_t next = UINT64_MAX;
		for (uint32_t i = 0; i < L; i++)
			if (at[i] < end[i] && idx[i][at[i]] < next)
				next = idx[i][at[i]];
		if (next == UINT64_MAX)
			break;
		bool first = true;
		for (uint32_t i = 0; i < L; i++)
			if (at[i] < end[i] && idx[i][at[i]] == next) {
				float v = wide(val[i], at[i]++, k->dtype);
				acc[m] = first ? v : acc[m] + v;
				first = false;
			}
		uidx[m++] = (uint32_t)(next - lo);
	}
	if (k->dtype == WIRE_F32)
		memcpy(uval, acc, m * 4);
	else
		sum_narrow(uval, acc, m, k->dtype);
	k->on_lane = true;
	return pbox_allreduce_sparse(h->lane, k->key, n, (pbox_dtype)k->dtype, uidx, uval, m,
				     res + lo * esz);
}

/* HK_DENSE on a fleet lane, or of one chunk: the part's host sum into
 * dst, then its allreduce on the lane. */
static int sum_send(struct host *h, struct hkey *k, uint8_t *dst, const void *const *src)
{
	size_t n = k->hi - k->lo;

	sum_chosen()->fn[k->dtype](dst, src, h->lay.local_world, n);
	return pbox_allreduce(h->lane, k->key, dst, n, (pbox_dtype)k->dtype);
}

/* Copy part j's results from the result area res into r->buf: its
 * elements [got[j], upto) (relative to the part's start). */
static void copy_out(struct host *h, struct hkey *k, struct pbox_req *r, const uint8_t *res,
		     uint32_t j, size_t *got, size_t upto)
{
	size_t lo, hi, esz = wire_dtype_size(k->dtype);

	host_slice(k->count, h->lay.local_world, j, &lo, &hi);
	if (upto > hi - lo)
		upto = hi - lo;
	if (upto <= got[j])
		return;
	memcpy((uint8_t *)r->buf + (lo + got[j]) * esz, res + (lo + got[j]) * esz,
	       (upto - got[j]) * esz);
	got[j] = upto;
}

/* HK_DENSE: the part's allreduce on the lane, submitted first and fed as
 * the host sum fills it chunk by chunk, so the sum runs while the part's
 * first segments are on the wire (allreduce_fed). Then, until the lane's
 * call ends, the results out as they come: this part's as the lane
 * delivers them (published to the others: hgroup_publish), the other
 * parts' as their owners publish theirs; got[j]: part j's elements copied
 * out. The lane's progress thread rings the host group's bell at each
 * HOST_FEED_BYTES of results, the others ring it as they publish. */
static int sum_fed(struct host *h, struct hkey *k, struct pbox_req *r, uint8_t *res,
		   const void *const *src, uint64_t n, size_t *got)
{
	uint32_t L = h->lay.local_world, me = h->lay.local;
	size_t len = k->hi - k->lo, esz = wire_dtype_size(k->dtype);
	size_t chunk = HOST_FEED_BYTES / esz;
	uint8_t *dst = res + k->lo * esz;
	const void *at_src[PBOX_HOST_LOCAL_MAX];
	struct req_drain drain = { .fn = hgroup_ring, .arg = h->g, .step = chunk };
	pbox_req *lr;
	int rc = allreduce_fed(h->lane, k->key, dst, len, (pbox_dtype)k->dtype, &drain, &lr);

	if (rc < 0)
		return rc;
	for (size_t at = 0; at < len; at += chunk) {
		size_t m = len - at < chunk ? len - at : chunk;
		for (uint32_t i = 0; i < L; i++)
			at_src[i] = (const uint8_t *)src[i] + at * esz;
		sum_chosen()->fn[k->dtype](dst + at * esz, at_src, L, m);
		req_feed(h->lane, lr, at + m);
	}
	for (bool ended = false; !ended && k->count < HG_PUBLISH_MAX;) {
		uint32_t bell = hgroup_bell(h->g);
		ended = pbox_test(lr);
		size_t mine = got[me];
		copy_out(h, k, r, res, me, got, req_drained(lr));
		if (got[me] > mine)
			hgroup_publish(h->g, n, got[me]);
		for (uint32_t j = 0; j < L; j++)
			if (j != me)
				copy_out(h, k, r, res, j, got, hgroup_published(h->g, j, n));
		if (!ended)
			hgroup_bell_wait(h->g, bell, HOST_DRAIN_WAIT_MS);
	}
	return pbox_wait(lr);
}

/* This rank's part of r's call on its lane (module comment); in: what
 * the call takes from the shared memory, res: the result area. */
static int lane_part(pbox_client *c, struct host *h, struct hkey *k, struct pbox_req *r,
		     uint8_t *res, uint64_t n_call, size_t *got, uint64_t *aux, char *msg,
		     size_t len)
{
	uint32_t L = h->lay.local_world, me = h->lay.local;
	size_t lo = k->lo, n = k->hi - k->lo, esz = wire_dtype_size(k->dtype);
	size_t wesz = wire_dtype_size(k->wdtype);
	uint8_t *up = hgroup_slot(k->mem, k->stride, 0);   /* init, write: local rank 0's */
	const void *src[PBOX_HOST_LOCAL_MAX];
	int rc = 0;

	for (uint32_t i = 0; i < L; i++)   /* (this rank's own part: its buffer) */
		src[i] = i == me && r->src ? (const uint8_t *)r->src + lo * esz :
			 hgroup_slot(k->mem, k->stride, i) + lo * esz;
	switch (r->coll) {
	case HK_DENSE:
		k->on_lane = true;
		/* (a part of one chunk has nothing to overlap) */
		rc = h->lane->fleet || n * esz <= HOST_FEED_BYTES ?
			sum_send(h, k, res + lo * esz, src) :
			sum_fed(h, k, r, res, src, n_call, got);
		break;
	case HK_TOPK:
		sum_chosen()->fn[k->dtype](res + lo * esz, src, L, n);
		k->on_lane = true;
		rc = pbox_allreduce_topk(h->lane, k->key, res + lo * esz, n, (pbox_dtype)k->dtype,
					 &r->topk);
		break;
	case HK_HOSTSUM:
		sum_chosen()->fn[k->dtype](res + lo * esz, src, L, n);
		break;
	case HK_SPARSE:
		rc = sparse_part(c, h, k, res, msg, len);
		break;
	case HK_PUSH: {
		uint8_t *sum = scratch(c, h, k, n * esz, msg, len);
		if (!sum)
			return PBOX_ENOMEM;
		sum_chosen()->fn[k->dtype](sum, src, L, n);
		rc = pbox_push_pull(h->lane, k->key, sum, res + lo * wesz, n, (pbox_dtype)k->dtype);
		break;
	}
	case HK_INIT:
		rc = pbox_ps_init(h->lane, k->key, h->lay.host == 0 ? (const float *)up + lo : NULL,
				  res + lo * wesz);
		break;
	case HK_READ:
		rc = pbox_ps_read(h->lane, k->key, (pbox_ps_part)r->part, (float *)res + lo, n, aux);
		break;
	case HK_WRITE:
		rc = pbox_ps_write(h->lane, k->key, (pbox_ps_part)r->part, (const float *)up + lo,
				   n);
		break;
	case HK_STEPS:
		rc = pbox_ps_set_steps(h->lane, k->key, r->steps);
		break;
	}
	if (rc < 0) {
		char why[CLIENT_MSG_LEN];
		snprintf(why, sizeof(why), "local rank %u (rank %d): its lane job '%s': %s", me,
			 c->rank, h->lane_job, pbox_last_error(h->lane));
		hgroup_break(h->g, why);
		snprintf(msg, len, "job '%s' rank %d key %u: host level: lane job '%s': %s",
			 c->job, c->rank, k->key, h->lane_job, pbox_last_error(h->lane));
	}
	return rc;
}

/* A call's barrier tag (its kind << 8 | its dtype) in words. */
static void call_text(unsigned tag, char *out, size_t len)
{
	static const char *const kind[] = {
		[HK_DENSE] = "an allreduce", [HK_TOPK] = "a top-k call", [HK_SPARSE] = "a sparse call",
		[HK_HOSTSUM] = "a host sum", [HK_INIT] = "pbox_ps_init", [HK_PUSH] = "a PS push",
		[HK_READ] = "pbox_ps_read", [HK_WRITE] = "pbox_ps_write",
		[HK_STEPS] = "pbox_ps_set_steps",
	};
	unsigned k = tag >> 8;

	snprintf(out, len, "%s (%s)", k < sizeof(kind) / sizeof(kind[0]) && kind[k] ? kind[k] : "?",
		 wire_dtype_name(tag & 0xffu));
}

/* One call (module comment). 0, or an error with msg. */
static int run_call(pbox_client *c, struct host *h, struct pbox_req *r, char *msg, size_t len)
{
	uint32_t L = h->lay.local_world, me = h->lay.local;
	struct hkey *k = key_of(c, h, r, msg, len);

	if (!k) {
		hgroup_break(h->g, msg);
		return PBOX_EINVAL;
	}
	size_t esz = wire_dtype_size(k->dtype), wesz = wire_dtype_size(k->wdtype);
	unsigned tag = k->dtype | (unsigned)r->coll << 8;   /* the calls must match */
	uint64_t n = ++h->calls;
	uint8_t *res = hgroup_slot(k->mem, k->stride, L + (uint32_t)(n & 1));
	/* the inputs into this rank's slot: the parts the others sum (its
	 * own part it sums from its buffer) */
	if (r->coll == HK_DENSE || r->coll == HK_TOPK || r->coll == HK_HOSTSUM ||
	    r->coll == HK_PUSH) {
		uint8_t *slot = hgroup_slot(k->mem, k->stride, me);
		memcpy(slot, r->src, k->lo * esz);
		memcpy(slot + k->hi * esz, (const uint8_t *)r->src + k->hi * esz,
		       (k->count - k->hi) * esz);
	} else if (r->coll == HK_SPARSE) {
		uint8_t *slot = hgroup_slot(k->mem, k->stride, me);
		uint64_t nnz = r->sp_nnz;
		memcpy(slot, &nnz, sizeof(nnz));
		memcpy(slot + HOST_SPARSE_HDR, r->sp_idx, nnz * 4);
		memcpy(slot + HOST_SPARSE_HDR + nnz * 4, r->sp_val, nnz * esz);
	}
	else if ((r->coll == HK_INIT || r->coll == HK_WRITE) && r->src && me == 0)
		memcpy(hgroup_slot(k->mem, k->stride, 0), r->src, k->count * 4);
	int rc = hgroup_barrier(h->g, HG_ARRIVED, n, r->key, r->count, tag, call_text,
				c->opts.timeout_ms,
				&h->stop, msg, len);
	if (rc < 0)
		return rc;
	if (!k->unlinked) {   /* every member has it mapped */
		hgroup_key_unlink(h->g, r->key, k->count, key_mem_tag(k));
		k->unlinked = true;
	}
	uint64_t aux = 0;
	size_t got[PBOX_HOST_LOCAL_MAX] = { 0 };   /* each part's elements copied out */
	if (k->hi > k->lo && (rc = lane_part(c, h, k, r, res, n, got, &aux, msg, len)) < 0)
		return rc;
	bool sum_call = r->coll == HK_DENSE || r->coll == HK_TOPK || r->coll == HK_SPARSE ||
			r->coll == HK_HOSTSUM;
	if (sum_call)   /* its own part's result out while the others finish theirs */
		copy_out(h, k, r, res, me, got, SIZE_MAX);
	hgroup_set_aux(h->g, aux);
	rc = hgroup_barrier(h->g, HG_SUMMED, n, r->key, r->count, tag, call_text,
			    (uint64_t)c->opts.timeout_ms + HOST_LATE_MS, &h->stop, msg, len);
	if (rc < 0)
		return rc;
	/* the outputs: the rest of the result out of the result area */
	if (sum_call)
		for (uint32_t j = 0; j < L; j++)
			copy_out(h, k, r, res, j, got, SIZE_MAX);
	switch (r->coll) {
	case HK_PUSH:
	case HK_INIT:
		memcpy(r->buf, res, k->count * wesz);
		break;
	case HK_READ:
		memcpy(r->buf, res, k->count * 4);
		if (r->steps_out)
			*r->steps_out = hgroup_aux(h->g, 0);   /* (local rank 0 has a part) */
		break;
	}
	return 0;
}

static void *host_main(void *arg)
{
	pbox_client *c = arg;
	struct host *h = c->host;
	char msg[CLIENT_MSG_LEN];

	for (;;) {
		pthread_mutex_lock(&h->lock);
		while (!h->head && !h->stop)
			pthread_cond_wait(&h->cond, &h->lock);
		if (h->stop) {
			pthread_mutex_unlock(&h->lock);
			return NULL;   /* (host_close fails the queued calls) */
		}
		struct pbox_req *r = h->head;
		h->head = r->sub_next;
		if (!h->head)
			h->tail = NULL;
		r->sub_next = NULL;
		pthread_mutex_unlock(&h->lock);
		msg[0] = '\0';
		int rc = r->gk ? r->dev->host_in(c, r, msg, sizeof(msg)) : 0;
		if (rc < 0) {   /* (a device failure: the others must not wait for us) */
			char why[CLIENT_MSG_LEN];
			snprintf(why, sizeof(why), "local rank %u (rank %d): %s", h->lay.local,
				 c->rank, msg);
			hgroup_break(h->g, why);
		} else {
			rc = run_call(c, h, r, msg, sizeof(msg));
		}
		if (r->gk)   /* a device call: its copy back, the end of its copies */
			rc = r->dev->host_out(c, r, rc, msg, sizeof(msg));
		req_end(c, r, rc, msg);
	}
}

int host_connect(pbox_client *c)
{
	struct host_layout lay;
	bool on;
	int rc = layout(c, &lay, &on);

	if (rc < 0 || !on)
		return rc;
	struct host *h = calloc(1, sizeof(*h));
	if (!h)
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d: out of memory", c->job,
				    c->rank);
	h->lay = lay;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->klock, NULL);
	pthread_cond_init(&h->cond, NULL);
	snprintf(h->lane_job, sizeof(h->lane_job), "%s.lane%u", c->job, lay.local);
	c->host = h;
	rc = hgroup_open(c, &lay, &h->g);
	if (rc < 0)
		return rc;
	/* the lane: the caller's options as this client read them */
	pbox_opts o = c->opts;
	o.size = sizeof(o);
	o.join_secret = c->secret[0] ? c->secret : NULL;
	o.local_world = 1;
	o.local_rank = 0;
	if (o.key_bytes)   /* a lane holds 1/L of every key, rounded up per key */
		o.key_bytes = o.key_bytes / lay.local_world + (1u << 20);
	rc = client_connect_flat(c->control, h->lane_job, (int)lay.host, (int)lay.hosts, &o,
				 &h->lane);
	if (rc < 0)
		return client_error(c, rc, "job '%s' rank %d: host-local aggregation: lane job "
				    "'%s' (rank %u of %u): %s", c->job, c->rank, h->lane_job,
				    lay.host, lay.hosts, h->lane ? pbox_last_error(h->lane) :
				    pbox_strerror(rc));
	c->lane = h->lane;   /* pbox_stats counts the lane's traffic too */
	int e = pthread_create(&h->thread, NULL, host_main, c);
	if (e)
		return client_error(c, PBOX_ESYS, "job '%s' rank %d: cannot start the host "
				    "thread: %s", c->job, c->rank, strerror(e));
	h->started = true;
	return 0;
}

void host_close(pbox_client *c)
{
	struct host *h = c->host;

	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	__atomic_store_n(&h->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (h->g)
		hgroup_wake(h->g);
	if (h->started)
		pthread_join(h->thread, NULL);
	fail_queued(c, h);
	for (uint32_t i = 0; i < h->nkeys; i++) {
		if (h->keys[i]->mem)
			hgroup_key_unmap(h->g, h->keys[i]->mem, h->keys[i]->stride);
		free(h->keys[i]);
	}
	free(h->keys);
	free(h->scratch);
	hgroup_close(h->g);
	c->lane = NULL;
	pbox_close(h->lane);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->klock);
	pthread_mutex_destroy(&h->lock);
	free(h);
	c->host = NULL;
}

/* Queue r (filled) for the host thread: 0 and *req, or an error. */
static int host_queue(pbox_client *c, struct pbox_req *r, pbox_req **req)
{
	struct host *h = c->host;
	int rc = req_track(c, r);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&h->lock);
	if (h->tail)
		h->tail->sub_next = r;
	else
		h->head = r;
	h->tail = r;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->lock);
	*req = r;
	return 0;
}

/* A request of kind for key; NULL with c's message. */
static struct pbox_req *host_req(pbox_client *c, uint32_t key, unsigned kind)
{
	if (!c->host->started) {
		client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: the client is not "
			     "connected (pbox_connect failed)", c->job, c->rank, key);
		return NULL;
	}
	struct pbox_req *r = req_new(c, key, &op_host);
	if (r)
		r->coll = (uint8_t)kind;
	return r;
}

int host_check_buf(pbox_client *c, uint32_t key, const void *buf, size_t count,
		   pbox_dtype dtype, bool sparse)
{
	if (!buf || !count || !wire_dtype_size((unsigned)dtype))
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %s", c->job,
				    c->rank, key, !buf ? "the buffer is NULL" : !count ?
				    "count is 0" : "unknown dtype (use PBOX_F32, PBOX_F16 or "
				    "PBOX_BF16)");
	if (sparse && count > UINT32_MAX)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: a sparse key holds "
				    "at most %u elements (32-bit indices), not %zu", c->job,
				    c->rank, key, UINT32_MAX, count);
	if (count > SIZE_MAX / 8)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: count %zu is too "
				    "large", c->job, c->rank, key, count);
	return 0;
}

/* A request of kind on buf (count of dtype, in place), or NULL with c's
 * message. */
static struct pbox_req *buf_req(pbox_client *c, uint32_t key, unsigned kind, void *buf,
				size_t count, pbox_dtype dtype)
{
	struct pbox_req *r = host_req(c, key, kind);

	if (r) {
		r->buf = buf;
		r->src = buf;
		r->count = count;
		r->dtype = r->rdtype = (uint8_t)dtype;
	}
	return r;
}

int host_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		    pbox_req **req)
{
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce key %u: req is NULL", key);
	*req = NULL;
	int rc = host_check_buf(c, key, buf, count, dtype, false);
	if (rc < 0)
		return rc;
	struct pbox_req *r = buf_req(c, key, HK_DENSE, buf, count, dtype);
	return r ? host_queue(c, r, req) : PBOX_EINVAL;
}

int host_iallreduce_dev(pbox_client *c, uint32_t key, void *bounce, size_t count,
			pbox_dtype wire, const pbox_topk_opts *topk, struct gpu_key *gk,
			const struct req_dev_ops *dev, pbox_req **req)
{
	*req = NULL;
	struct pbox_req *r = buf_req(c, key, topk ? HK_TOPK : HK_DENSE, bounce, count, wire);
	if (!r) {
		dev->drop(c, gk);
		return PBOX_EINVAL;
	}
	if (topk)
		r->topk = *topk;
	r->gk = gk;   /* (req_track's failure frees r: dev->drop gives gk back) */
	r->dev = dev;
	return host_queue(c, r, req);
}

int host_iallreduce_topk(pbox_client *c, uint32_t key, void *buf, size_t count,
			 pbox_dtype dtype, const pbox_topk_opts *o, pbox_req **req)
{
	*req = NULL;
	struct pbox_req *r = buf_req(c, key, HK_TOPK, buf, count, dtype);
	if (!r)
		return PBOX_EINVAL;
	r->topk = *o;
	return host_queue(c, r, req);
}

int host_iallreduce_sparse(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
			   const uint32_t *idx, const void *val, size_t nnz, void *out,
			   pbox_req **req)
{
	size_t esz = wire_dtype_size((unsigned)dtype);

	*req = NULL;
	struct pbox_req *r = buf_req(c, key, HK_SPARSE, out, count, dtype);
	if (!r)
		return PBOX_EINVAL;
	r->src = NULL;   /* (the entries are its input) */
	uint8_t *own = malloc(nnz * (4 + esz) + 1);   /* (the caller may reuse its own) */
	if (!own) {
		req_free(r);
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory for "
				    "the sparse entries", c->job, c->rank, key);
	}
	memcpy(own, idx, nnz * 4);
	memcpy(own + nnz * 4, val, nnz * esz);
	r->sp_own = own;
	r->sp_idx = (const uint32_t *)own;
	r->sp_val = own + nnz * 4;
	r->sp_nnz = nnz;
	return host_queue(c, r, req);
}

int host_allreduce_host(pbox_client *c, uint32_t key, void *buf, size_t count,
			pbox_dtype dtype)
{
	struct pbox_req *r = buf_req(c, key, HK_HOSTSUM, buf, count, dtype);
	pbox_req *mine;

	if (!r)
		return PBOX_EINVAL;
	int rc = host_queue(c, r, &mine);
	return rc < 0 ? rc : pbox_wait(mine);
}

void host_layout_get(const pbox_client *c, uint32_t *local_rank, uint32_t *local_world)
{
	*local_rank = c->host ? c->host->lay.local : 0;
	*local_world = c->host ? c->host->lay.local_world : 1;
}

int host_topk_reset(pbox_client *c, uint32_t key)
{
	struct host *h = c->host;
	struct hkey *k = key_find(h, key);

	if (!k || k->kind != HKEY_TOPK)
		return 1;
	/* this rank's part's state is the lane's (none yet: nothing to clear) */
	int rc = k->on_lane ? pbox_topk_reset(h->lane, key) : 0;
	return rc < 0 ? client_error(c, rc, "job '%s' rank %d key %u: host level: lane job "
				     "'%s': %s", c->job, c->rank, key, h->lane_job,
				     pbox_last_error(h->lane)) : 0;
}

/* ---- PS keys: each rank's part is a PS key of its lane, whose mean is
 * over the whole world (pbox_optim.mean_over) ---- */

/* The host level's PS key, or NULL with c's message. */
static struct hkey *ps_key(pbox_client *c, uint32_t key)
{
	struct hkey *k = key_find(c->host, key);

	bool ps = k && k->kind == HKEY_PS;

	if (!ps)
		client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: not a PS key: declare it "
			     "with pbox_declare_optimizer first", c->job, c->rank, key);
	return ps ? k : NULL;
}

int host_declare_optimizer(pbox_client *c, uint32_t key, size_t count, pbox_dtype grad,
			   const pbox_optim *o)
{
	struct host *h = c->host;
	struct hkey *k = key_find(h, key);
	pbox_optim lo;

	if (k && (k->kind != HKEY_PS || k->count != count || k->dtype != (uint8_t)grad ||
		  k->wdtype != (uint8_t)o->weights_dtype))
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: host level: "
				    "declared as a %s key of %llu elements of %s, this call %zu of "
				    "%s", c->job, c->rank, key, hkey_kind_name[k->kind],
				    (unsigned long long)k->count, wire_dtype_name(k->dtype), count,
				    wire_dtype_name((unsigned)grad));
	memset(&lo, 0, sizeof(lo));
	memcpy(&lo, o, o->size < sizeof(lo) ? o->size : sizeof(lo));
	lo.size = sizeof(lo);
	if (!lo.mean_over)   /* the mean over the job's ranks, not the lane's hosts */
		lo.mean_over = (uint32_t)c->world;
	size_t a, b;
	host_slice(count, h->lay.local_world, h->lay.local, &a, &b);
	if (b > a) {
		int rc = pbox_declare_optimizer(h->lane, key, b - a, grad, &lo);
		if (rc < 0)
			return client_error(c, rc, "job '%s' rank %d key %u: host level: lane job "
					    "'%s': %s", c->job, c->rank, key, h->lane_job,
					    pbox_last_error(h->lane));
	}
	if (k)
		return 0;
	k = calloc(1, sizeof(*k));
	if (!k || key_add(h, k) < 0) {
		free(k);
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory",
				    c->job, c->rank, key);
	}
	*k = (struct hkey){ .key = key, .dtype = (uint8_t)grad,
			    .wdtype = (uint8_t)o->weights_dtype, .kind = HKEY_PS, .on_lane = b > a,
			    .count = count, .lo = a, .hi = b };
	return 0;
}

bool host_has_ps_key(pbox_client *c, uint32_t key)
{
	struct hkey *k = key_find(c->host, key);
	return k && k->kind == HKEY_PS;
}

int host_set_lr(pbox_client *c, uint32_t key, double lr)
{
	struct hkey *k = ps_key(c, key);

	if (!k)
		return PBOX_EINVAL;
	int rc = k->on_lane ? pbox_set_lr(c->host->lane, key, lr) : 0;
	return rc < 0 ? client_error(c, rc, "job '%s' rank %d key %u: host level: lane job "
				     "'%s': %s", c->job, c->rank, key, c->host->lane_job,
				     pbox_last_error(c->host->lane)) : 0;
}

/* A PS call of kind through the host thread, waited for (but the push). */
static int ps_call(pbox_client *c, uint32_t key, unsigned kind, const void *in, void *out,
		   unsigned part, uint64_t steps, uint64_t *steps_out, pbox_req **req)
{
	struct hkey *k = ps_key(c, key);

	if (!k)
		return PBOX_EINVAL;
	struct pbox_req *r = host_req(c, key, kind);
	if (!r)
		return PBOX_EINVAL;
	r->src = in;
	r->buf = out;
	r->count = k->count;
	r->dtype = k->dtype;
	r->rdtype = k->wdtype;
	r->part = (uint8_t)part;
	r->steps = steps;
	r->steps_out = steps_out;
	pbox_req *mine;
	int rc = host_queue(c, r, req ? req : &mine);
	return rc < 0 || req ? rc : pbox_wait(mine);
}

int host_ps_init(pbox_client *c, uint32_t key, const float *weights, void *weights_out)
{
	if (!weights_out)
		return client_error(c, PBOX_EINVAL, "pbox_ps_init key %u: weights_out is NULL", key);
	return ps_call(c, key, HK_INIT, c->rank == 0 ? weights : NULL, weights_out, 0, 0, NULL,
		       NULL);
}

int host_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		    size_t count, pbox_dtype dtype, pbox_req **req)
{
	struct hkey *k = ps_key(c, key);

	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_ipush_pull key %u: req is NULL", key);
	*req = NULL;
	if (!k)
		return PBOX_EINVAL;
	if (!grad || !weights_out || count != k->count || (uint8_t)dtype != k->dtype)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: pbox_ipush_pull: %s",
				    c->job, c->rank, key, !grad || !weights_out ? "a buffer is NULL"
				    : count != k->count ? "count differs from the declaration" :
				    "dtype differs from the declaration");
	return ps_call(c, key, HK_PUSH, grad, weights_out, 0, 0, NULL, req);
}

int host_ps_rw(pbox_client *c, uint32_t key, pbox_ps_part part, float *out, const float *in,
	       size_t count, uint64_t *steps)
{
	struct hkey *k = ps_key(c, key);

	if (!k)
		return PBOX_EINVAL;
	if ((!out && !in) || count != k->count)
		return client_error(c, PBOX_EINVAL, "pbox_ps_%s key %u: %s", in ? "write" : "read",
				    key, count != k->count ? "count differs from the declaration"
				    : "the buffer is NULL");
	if (in && c->host->lay.host != 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: host level: "
				    "pbox_ps_write is for the ranks of host 0 (0..%u), every one of "
				    "them (rank 0's data is written)", c->job, c->rank, key,
				    c->host->lay.local_world - 1);
	return ps_call(c, key, in ? HK_WRITE : HK_READ, in, out, part, 0, steps, NULL);
}

int host_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps)
{
	if (c->host->lay.host != 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: host level: "
				    "pbox_ps_set_steps is for the ranks of host 0 (0..%u), every "
				    "one of them", c->job, c->rank, key,
				    c->host->lay.local_world - 1);
	return ps_call(c, key, HK_STEPS, NULL, NULL, 0, steps, NULL, NULL);
}

int host_release(pbox_client *c, const uint32_t *keys, size_t n)
{
	struct host *h = c->host;
	uint32_t *flat = malloc((n ? n : 1) * sizeof(*flat)), *lane = malloc((n ? n : 1) *
									     sizeof(*lane));
	struct hkey **gone = calloc(n ? n : 1, sizeof(*gone));
	size_t nflat = 0, nlane = 0, ngone = 0;
	int rc = 0;

	if (!flat || !lane || !gone) {
		free(flat);
		free(lane);
		free(gone);
		return client_error(c, PBOX_ENOMEM, "pbox_release_keys: out of memory");
	}
	/* the host level's keys (no call of theirs in flight), and the rest */
	pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&h->klock);
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint32_t j = 0;
		while (j < h->nkeys && h->keys[j]->key != keys[i])
			j++;
		if (j == h->nkeys) {
			flat[nflat++] = keys[i];
			continue;
		}
		if (req_key_busy_locked(c, keys[i])) {
			rc = PBOX_EBUSY;
			break;
		}
		gone[ngone++] = h->keys[j];
	}
	if (rc == 0)   /* out of the table: their next call maps and declares afresh */
		for (size_t g = 0; g < ngone; g++)
			for (uint32_t j = 0; j < h->nkeys; j++)
				if (h->keys[j] == gone[g]) {
					h->keys[j] = h->keys[--h->nkeys];
					if (gone[g]->on_lane)
						lane[nlane++] = gone[g]->key;
					break;
				}
	pthread_mutex_unlock(&h->klock);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		free(flat);
		free(lane);
		free(gone);
		return client_error(c, rc, "job '%s' rank %d: pbox_release_keys: a call on a key "
				    "is still in flight (wait for it before releasing the key)",
				    c->job, c->rank);
	}
	for (size_t g = 0; g < ngone; g++) {
		if (gone[g]->mem)
			hgroup_key_unmap(h->g, gone[g]->mem, gone[g]->stride);
		client_forget_key(c, gone[g]->key);   /* (a device call's staging state) */
		free(gone[g]);
	}
	if (nlane && (rc = pbox_release_keys(h->lane, lane, nlane)) < 0)
		client_error(c, rc, "job '%s' rank %d: pbox_release_keys: lane job '%s': %s",
			     c->job, c->rank, h->lane_job, pbox_last_error(h->lane));
	if (rc == 0 && nflat)
		rc = release_keys_flat(c, flat, nflat);
	free(flat);
	free(lane);
	free(gone);
	return rc;
}
