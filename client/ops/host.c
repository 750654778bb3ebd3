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
 * key's shared memory; barrier 1; sum this member's part over the slots in
 * local rank order into result area (n & 1) and allreduce it on the lane;
 * barrier 2; copy the whole result out. A member that starts call n + 1
 * has passed barrier 2 of call n, which every member reached after
 * copying call n - 1's result out: two result areas need no third
 * barrier. Slots are rewritten only after barrier 2, when every part of
 * the call before was summed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/knobs.h"
#include "client/ops/host.h"
#include "common/sum.h"

#define HOST_STRIDE_ALIGN 4096u
#define HOST_LATE_MS      2000u   /* barrier 2 waits this past timeout_ms: a
				     member's lane call has timeout_ms of its
				     own and then names its failure */

struct hkey {                     /* a key's shared memory (host thread only) */
	uint32_t key;
	uint8_t dtype;
	bool unlinked;            /* its name is gone (every member mapped it) */
	bool on_lane;             /* this rank's part was declared on its lane */
	uint64_t count;
	size_t stride;
	void *mem;
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

/* The key's shared memory for this call: found (the same count and
 * dtype) or mapped now. */
static struct hkey *key_of(pbox_client *c, struct host *h, const struct pbox_req *r,
			   char *msg, size_t len)
{
	size_t esz = wire_dtype_size(r->dtype);
	struct hkey *k = NULL;

	pthread_mutex_lock(&h->klock);
	for (uint32_t i = 0; i < h->nkeys && !k; i++)
		if (h->keys[i]->key == r->key)
			k = h->keys[i];
	pthread_mutex_unlock(&h->klock);
	if (k) {
		if (k->count == r->count && k->dtype == r->dtype)
			return k;
		snprintf(msg, len, "job '%s' rank %d key %u: host level: declared with %llu "
			 "elements of %s, this call has %zu of %s (use another key for another "
			 "size)", c->job, c->rank, r->key, (unsigned long long)k->count,
			 wire_dtype_name(k->dtype), r->count, wire_dtype_name(r->dtype));
		return NULL;
	}
	size_t stride = (r->count * esz + HOST_STRIDE_ALIGN - 1) / HOST_STRIDE_ALIGN *
			HOST_STRIDE_ALIGN;
	k = calloc(1, sizeof(*k));
	void *mem = k ? hgroup_key_map(h->g, r->key, r->count, r->dtype, stride, msg, len) : NULL;
	if (!mem) {
		if (!k)
			snprintf(msg, len, "job '%s' rank %d key %u: out of memory", c->job,
				 c->rank, r->key);
		free(k);
		return NULL;
	}
	*k = (struct hkey){ .key = r->key, .dtype = r->dtype, .count = r->count,
			    .stride = stride, .mem = mem };
	pthread_mutex_lock(&h->klock);
	if (h->nkeys == h->kcap) {
		uint32_t cap = h->kcap ? h->kcap * 2 : 16;
		struct hkey **t = realloc(h->keys, cap * sizeof(*t));
		if (t) {
			h->keys = t;
			h->kcap = cap;
		}
	}
	bool added = h->nkeys < h->kcap;
	if (added)
		h->keys[h->nkeys++] = k;
	pthread_mutex_unlock(&h->klock);
	if (!added) {
		hgroup_key_unmap(h->g, mem, stride);
		free(k);
		snprintf(msg, len, "job '%s' rank %d key %u: out of memory", c->job, c->rank,
			 r->key);
		return NULL;
	}
	return k;
}

/* One call (module comment). 0, or an error with msg. */
static int run_call(pbox_client *c, struct host *h, struct pbox_req *r, char *msg, size_t len)
{
	uint32_t L = h->lay.local_world, me = h->lay.local;
	size_t esz = wire_dtype_size(r->dtype), bytes = r->count * esz;
	struct hkey *k = key_of(c, h, r, msg, len);

	if (!k) {
		hgroup_break(h->g, msg);
		return PBOX_EINVAL;
	}
	uint64_t n = ++h->calls;
	memcpy(hgroup_slot(k->mem, k->stride, me), r->buf, bytes);
	int rc = hgroup_barrier(h->g, HG_ARRIVED, n, r->key, r->count, r->dtype,
				c->opts.timeout_ms, &h->stop, msg, len);
	if (rc < 0)
		return rc;
	if (!k->unlinked) {   /* every member has it mapped */
		hgroup_key_unlink(h->g, r->key, r->count, r->dtype);
		k->unlinked = true;
	}
	uint8_t *res = hgroup_slot(k->mem, k->stride, L + (uint32_t)(n & 1));
	size_t lo, hi;
	host_slice(r->count, L, me, &lo, &hi);
	if (hi > lo) {
		const void *src[PBOX_HOST_LOCAL_MAX];
		for (uint32_t i = 0; i < L; i++)
			src[i] = hgroup_slot(k->mem, k->stride, i) + lo * esz;
		sum_chosen()->fn[r->dtype](res + lo * esz, src, L, hi - lo);
		k->on_lane = true;
		rc = pbox_allreduce(h->lane, r->key, res + lo * esz, hi - lo, (pbox_dtype)r->dtype);
		if (rc < 0) {
			char why[CLIENT_MSG_LEN];
			snprintf(why, sizeof(why), "local rank %u (rank %d): its lane job '%s': %s",
				 me, c->rank, h->lane_job, pbox_last_error(h->lane));
			hgroup_break(h->g, why);
			snprintf(msg, len, "job '%s' rank %d key %u: host level: lane job '%s': %s",
				 c->job, c->rank, r->key, h->lane_job, pbox_last_error(h->lane));
			return rc;
		}
	}
	rc = hgroup_barrier(h->g, HG_SUMMED, n, r->key, r->count, r->dtype,
			    (uint64_t)c->opts.timeout_ms + HOST_LATE_MS, &h->stop, msg, len);
	if (rc < 0)
		return rc;
	memcpy(r->buf, res, bytes);
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
		int rc = run_call(c, h, r, msg, sizeof(msg));
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
		hgroup_key_unmap(h->g, h->keys[i]->mem, h->keys[i]->stride);
		free(h->keys[i]);
	}
	free(h->keys);
	hgroup_close(h->g);
	pbox_close(h->lane);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->klock);
	pthread_mutex_destroy(&h->lock);
	free(h);
	c->host = NULL;
}

int host_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		    pbox_req **req)
{
	struct host *h = c->host;
	size_t esz = wire_dtype_size((unsigned)dtype);

	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce key %u: req is NULL", key);
	*req = NULL;
	if (!buf || !count || !esz)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %s", c->job,
				    c->rank, key, !buf ? "buf is NULL" : !count ? "count is 0" :
				    "unknown dtype (use PBOX_F32, PBOX_F16 or PBOX_BF16)");
	if (!h->started)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: the client is not "
				    "connected (pbox_connect failed)", c->job, c->rank, key);
	if (count > SIZE_MAX / 8)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: count %zu is too "
				    "large", c->job, c->rank, key, count);
	struct pbox_req *r = req_new(c, key, &op_host);
	if (!r)
		return PBOX_ENOMEM;
	r->buf = buf;
	r->src = buf;
	r->count = count;
	r->dtype = r->rdtype = (uint8_t)dtype;
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
		hgroup_key_unmap(h->g, gone[g]->mem, gone[g]->stride);
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
