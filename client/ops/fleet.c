/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fleet.c - one job over several boxes (fleet.h; docs/protocol.md "Fleet
 * placement", docs/architecture.md "A fleet of boxes").
 *
 * The fleet's client joins nothing itself: it holds a client per box
 * (c->subs, in list order), each joined to the job of the same name,
 * world and secret there with the fleet's placement hash (the box refuses
 * a rank whose list differs). Keys, by kind (fixed by a key's first call):
 *   - dense keys (allreduce, barrier, device allreduce), PS keys and top-k
 *     keys are cut into partitions by placement_compute, keys in the order of their
 *     first call (the same on every rank: torch declares in one order);
 *     partition i of the job's placements is key FLEET_PART_KEY + i on its
 *     box, so no two collide and every rank names them alike. A call is a
 *     call per partition on its box's client, gathered in one request
 *     (core/req.c req_group).
 *   - a top-k partition selects its density's share of its own entries
 *     (k = density x its count) with its own residual and momentum, so
 *     every box gets the entries of its partitions: a fleet selects per
 *     partition where one box selects over the whole key (the same bytes,
 *     another choice of entries).
 *   - collectives and sparse calls go whole to one box (the key id
 *     hashed over the boxes) under their own id, below FLEET_PART_KEY.
 * Each box's client does its own loss recovery, heartbeats and rejoin
 * (xfer/resume.c): the fleet adds nothing on the wire. Sums are the same
 * bits as one box's: each element is summed in rank order on its box.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/placement.h"
#include "client/ops/fleet.h"

#define FLEET_PART_KEY 0x80000000u   /* partition i is key FLEET_PART_KEY + i */

struct fkey {
	uint32_t key;
	uint8_t kind;                /* enum fleet_kind */
	uint8_t dtype;               /* PS: the gradients' */
	uint8_t wdtype;              /* PS: the weights' returned */
	uint64_t count;
	uint32_t nparts;
	struct fpart *parts;         /* partitioned kinds; a whole key: one, all of it */
};

struct fleet {
	pthread_mutex_t lock;        /* keys and placement (callers' threads) */
	unsigned n;
	struct place_box boxes[PLACE_MAX_BOXES];
	char *ids;                   /* the list's copy, cut at the commas */
	struct place_key *pkeys;     /* partitioned keys, in the order of their first call */
	uint32_t npkeys, pcap;
	struct fkey *keys;
	uint32_t nkeys, kcap;
};

bool fleet_listed(const char *control)
{
	return control && strchr(control, ',') != NULL;
}

/* Cut the list into the fleet's boxes (trimmed ids, weight 1). */
static int parse_list(pbox_client *c, struct fleet *f)
{
	f->ids = strdup(c->control);
	if (!f->ids)
		return client_error(c, PBOX_ENOMEM, "out of memory for the box list");
	for (char *s = f->ids, *next; s; s = next) {
		next = strchr(s, ',');
		if (next)
			*next++ = '\0';
		while (*s == ' ')
			s++;
		for (char *e = s + strlen(s); e > s && e[-1] == ' '; )
			*--e = '\0';
		if (!*s)
			return client_error(c, PBOX_EINVAL, "box list '%s': an empty entry "
					    "(boxes are host:port, comma-separated)", c->control);
		if (f->n == PLACE_MAX_BOXES)
			return client_error(c, PBOX_EINVAL, "box list: more than %d boxes",
					    PLACE_MAX_BOXES);
		f->boxes[f->n++] = (struct place_box){ .id = s, .weight = 1 };
	}
	return 0;
}

int fleet_connect(pbox_client *c, const pbox_opts *opts)
{
	struct fleet *f = calloc(1, sizeof(*f));
	struct placement p;
	char err[CLIENT_MSG_LEN], hex[PLACE_HASH_HEX];

	if (!f)
		return client_error(c, PBOX_ENOMEM, "out of memory for a fleet");
	pthread_mutex_init(&f->lock, NULL);
	c->fleet = f;
	int rc = parse_list(c, f);
	if (rc < 0)
		return rc;
	/* the list checked (a box twice, ...) and its hash, keys to come */
	if (placement_compute(&p, f->boxes, f->n, NULL, 0, PLACE_PART_BYTES_DEFAULT, err,
			      sizeof(err)) < 0)
		return client_error(c, PBOX_EINVAL, "box list '%s': %s", c->control, err);
	placement_hash_hex(placement_hash(&p, f->boxes, NULL), hex);
	placement_free(&p);
	c->subs = calloc(f->n, sizeof(*c->subs));
	if (!c->subs)
		return client_error(c, PBOX_ENOMEM, "out of memory for %u boxes", f->n);
	for (unsigned b = 0; b < f->n; b++) {
		rc = client_connect_box(f->boxes[b].id, c->job, c->rank, c->world, opts, hex,
					&c->subs[b]);
		c->nsubs = b + 1;
		if (rc < 0)
			return client_error(c, rc, "box %s (%u of %u): %s", f->boxes[b].id, b + 1,
					    f->n, c->subs[b] ? pbox_last_error(c->subs[b]) :
					    pbox_strerror(rc));
	}
	/* pbox_transport_info: every box's, the first's first (what a box's
	 * client would say: "xdp on eth0 ...") */
	size_t at = 0, cap = sizeof(c->tp.info);
	c->tp.info[0] = '\0';
	for (unsigned b = 0; b < f->n && at < cap; b++) {
		const char *info = pbox_transport_info(c->subs[b]);
		at += (size_t)(b ? snprintf(c->tp.info + at, cap - at, "; box %u of %u: %s",
					    b + 1, f->n, info) :
			       snprintf(c->tp.info, cap, "%s (box 1 of %u)", info, f->n));
	}
	return 0;
}

void fleet_close(pbox_client *c)
{
	struct fleet *f = c->fleet;

	for (unsigned b = 0; b < c->nsubs; b++)
		pbox_close(c->subs[b]);
	free(c->subs);
	c->subs = NULL;
	c->nsubs = 0;
	if (!f)
		return;
	for (uint32_t i = 0; i < f->nkeys; i++)
		free(f->keys[i].parts);
	free(f->keys);
	free(f->pkeys);
	free(f->ids);
	pthread_mutex_destroy(&f->lock);
	free(f);
	c->fleet = NULL;
}

static struct fkey *find_key(struct fleet *f, uint32_t key)
{
	for (uint32_t i = 0; i < f->nkeys; i++)
		if (f->keys[i].key == key)
			return &f->keys[i];
	return NULL;
}

static const char *kind_name(unsigned kind)
{
	return kind == FLEET_DENSE ? "dense (allreduce)" : kind == FLEET_PS ? "PS" :
	       kind == FLEET_COLL ? "collective" : kind == FLEET_TOPK ? "top-k" : "sparse";
}

static struct fkey *add_key(pbox_client *c, uint32_t key, unsigned kind, uint64_t count)
{
	struct fleet *f = c->fleet;

	if (f->nkeys == f->kcap) {
		uint32_t cap = f->kcap ? f->kcap * 2 : 16;
		struct fkey *k = realloc(f->keys, cap * sizeof(*k));
		if (!k)
			return NULL;
		f->keys = k;
		f->kcap = cap;
	}
	struct fkey *k = &f->keys[f->nkeys++];
	*k = (struct fkey){ .key = key, .kind = (uint8_t)kind, .count = count };
	return k;
}

/* The key's entry for a call of kind: found (it must be of that kind and
 * count), or made: placed now. NULL with c's message. Under f->lock. */
static struct fkey *key_for(pbox_client *c, uint32_t key, unsigned kind, uint64_t count,
			    unsigned elem)
{
	struct fleet *f = c->fleet;
	struct fkey *k = find_key(f, key);
	char err[CLIENT_MSG_LEN];

	if (k) {
		if (k->kind != kind) {
			client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: a %s key over this "
				     "fleet; a %s call needs a key of its own", c->job, c->rank, key,
				     kind_name(k->kind), kind_name(kind));
			return NULL;
		}
		if (count && k->count != count) {
			client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: declared with %llu "
				     "elements, this call has %llu (use another key for another "
				     "size)", c->job, c->rank, key, (unsigned long long)k->count,
				     (unsigned long long)count);
			return NULL;
		}
		return k;
	}
	if (kind == FLEET_COLL || kind == FLEET_SPARSE) {
		if (key >= FLEET_PART_KEY) {
			client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: over a fleet, keys of "
				     "collectives and sparse calls are below %u", c->job, c->rank,
				     key, FLEET_PART_KEY);
			return NULL;
		}
		k = add_key(c, key, kind, count);
		struct fpart *pt = k ? calloc(1, sizeof(*pt)) : NULL;
		if (!pt) {
			if (k)
				f->nkeys--;
			client_error(c, PBOX_ENOMEM, "out of memory for key %u", key);
			return NULL;
		}
		/* the same box on every rank: the key id, mixed, over the boxes */
		uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
		*pt = (struct fpart){ .sub = (uint32_t)((h >> 32) % f->n), .subkey = key,
				      .first = 0, .count = count };
		k->parts = pt;
		k->nparts = 1;
		return k;
	}
	/* a partitioned key: placed after those before it (they never move) */
	if (f->npkeys == f->pcap) {
		uint32_t cap = f->pcap ? f->pcap * 2 : 16;
		struct place_key *pk = realloc(f->pkeys, cap * sizeof(*pk));
		if (!pk) {
			client_error(c, PBOX_ENOMEM, "out of memory for key %u", key);
			return NULL;
		}
		f->pkeys = pk;
		f->pcap = cap;
	}
	/* (placed by its rank in first-call order: a key released and used
	 * again is placed anew, after the others) */
	f->pkeys[f->npkeys] = (struct place_key){ .key = f->npkeys, .count = count,
						  .elem = elem };
	struct placement p;
	if (placement_compute(&p, f->boxes, f->n, f->pkeys, f->npkeys + 1,
			      PLACE_PART_BYTES_DEFAULT, err, sizeof(err)) < 0) {
		client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: placing it: %s", c->job,
			     c->rank, key, err);
		return NULL;
	}
	uint32_t first = p.key_first[f->npkeys], n = p.key_first[f->npkeys + 1] - first;
	k = add_key(c, key, kind, count);
	struct fpart *parts = k ? calloc(n, sizeof(*parts)) : NULL;
	if (!parts) {
		if (k)
			f->nkeys--;
		placement_free(&p);
		client_error(c, PBOX_ENOMEM, "out of memory for key %u's %u partitions", key, n);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct place_part *pp = &p.parts[first + i];
		parts[i] = (struct fpart){ .sub = pp->box, .subkey = FLEET_PART_KEY + first + i,
					   .first = pp->first, .count = pp->count };
	}
	placement_free(&p);
	k->parts = parts;
	k->nparts = n;
	f->npkeys++;
	return k;
}

static int key_of(pbox_client *c, uint32_t key, unsigned kind, uint64_t count, unsigned elem,
		  struct fkey *out)
{
	struct fleet *f = c->fleet;

	pthread_mutex_lock(&f->lock);
	struct fkey *k = key_for(c, key, kind, count, elem);
	if (k)
		*out = *k;   /* (parts never change once placed) */
	pthread_mutex_unlock(&f->lock);
	return k ? 0 : PBOX_EINVAL;
}

int fleet_route(pbox_client *c, uint32_t key, unsigned kind, pbox_client **sub,
		uint32_t *subkey)
{
	struct fkey k;
	int rc = key_of(c, key, kind, 0, 1, &k);

	if (rc < 0)
		return rc;
	*sub = c->subs[k.parts[0].sub];
	*subkey = k.parts[0].subkey;
	return 0;
}

int fleet_wrap(pbox_client *c, pbox_client *sub, int rc, pbox_req **req)
{
	if (rc < 0)
		return client_error(c, rc, "box %s: %s", sub->control, pbox_last_error(sub));
	if (!req || !*req)
		return rc;
	struct pbox_req **kids = malloc(sizeof(*kids));
	if (!kids) {
		pbox_wait(*req);
		*req = NULL;
		return client_error(c, PBOX_ENOMEM, "out of memory for a call");
	}
	kids[0] = *req;
	*req = req_group(c, kids, 1);
	return *req ? 0 : PBOX_ENOMEM;
}

/* The calls of a partitioned key as one request: each started by start
 * (0 or its error) on its box; a failure waits for those started. */
static int over_parts(pbox_client *c, const struct fkey *k, fleet_part_fn start, void *arg,
		      pbox_req **req)
{
	struct pbox_req **kids = calloc(k->nparts, sizeof(*kids));

	if (!kids)
		return client_error(c, PBOX_ENOMEM, "out of memory for key %u's %u partitions",
				    k->key, k->nparts);
	for (uint32_t i = 0; i < k->nparts; i++) {
		pbox_client *sub = c->subs[k->parts[i].sub];
		int rc = start(sub, &k->parts[i], arg, &kids[i]);
		if (rc < 0) {
			client_error(c, rc, "box %s: %s", sub->control, pbox_last_error(sub));
			for (uint32_t o = 0; o < i; o++)
				pbox_wait(kids[o]);
			free(kids);
			return rc;
		}
	}
	*req = req_group(c, kids, k->nparts);
	return *req ? 0 : PBOX_ENOMEM;
}

/* ---- dense ---------------------------------------------------------------- */

struct dense_arg { uint8_t *buf; pbox_dtype dtype; size_t esz; };

static int part_allreduce(pbox_client *sub, const struct fpart *pt, void *arg, pbox_req **req)
{
	const struct dense_arg *a = arg;
	return pbox_iallreduce(sub, pt->subkey, a->buf + pt->first * a->esz, pt->count, a->dtype,
			       req);
}

int fleet_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
		     pbox_dtype dtype, pbox_req **req)
{
	struct fkey k;
	size_t esz = wire_dtype_size(dtype);

	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce key %u: req is NULL", key);
	*req = NULL;
	if (!buf || !count || !esz)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce key %u: %s", key, !buf ?
				    "buf is NULL" : !count ? "count is 0" : "unknown dtype");
	int rc = key_of(c, key, FLEET_DENSE, count, (unsigned)esz, &k);
	if (rc < 0)
		return rc;
	struct dense_arg a = { .buf = buf, .dtype = dtype, .esz = esz };
	return over_parts(c, &k, part_allreduce, &a, req);
}

static int part_call(pbox_client *c, uint32_t key, unsigned kind, size_t count,
		     pbox_dtype dtype, fleet_part_fn start, void *arg, pbox_req **req)
{
	struct fkey k;
	size_t esz = wire_dtype_size(dtype);
	int rc = esz ? key_of(c, key, kind, count, (unsigned)esz, &k)
		     : client_error(c, PBOX_EINVAL, "key %u: unknown dtype", key);

	return rc < 0 ? rc : over_parts(c, &k, start, arg, req);
}

int fleet_dense_call(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		     fleet_part_fn start, void *arg, pbox_req **req)
{
	return part_call(c, key, FLEET_DENSE, count, dtype, start, arg, req);
}

/* ---- top-k ---------------------------------------------------------------- */

int fleet_topk_call(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		    fleet_part_fn start, void *arg, pbox_req **req)
{
	return part_call(c, key, FLEET_TOPK, count, dtype, start, arg, req);
}

int fleet_topk_reset(pbox_client *c, uint32_t key)
{
	struct fleet *f = c->fleet;
	struct fkey k = { .nparts = 0 };

	pthread_mutex_lock(&f->lock);
	struct fkey *e = find_key(f, key);
	if (e && e->kind == FLEET_TOPK)
		k = *e;
	pthread_mutex_unlock(&f->lock);
	if (!e || e->kind != FLEET_TOPK)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: not a top-k key",
				    c->job, c->rank, key);
	for (uint32_t i = 0; i < k.nparts; i++) {
		pbox_client *sub = c->subs[k.parts[i].sub];
		int rc = pbox_topk_reset(sub, k.parts[i].subkey);
		if (rc < 0)
			return client_error(c, rc, "box %s: %s", sub->control,
					    pbox_last_error(sub));
	}
	return 0;
}

/* ---- PS -------------------------------------------------------------------- */

struct ps_arg {
	const uint8_t *in;           /* weights (init) or gradients */
	uint8_t *out;                /* weights returned */
	size_t in_esz, out_esz;
	pbox_dtype dtype;
	const pbox_optim *optim;
	double lr;
	int what;                    /* PS_DECLARE, PS_INIT, PS_PUSH, PS_LR */
};

enum { PS_DECLARE, PS_INIT, PS_PUSH, PS_LR };

/* The synchronous PS calls, partition by partition. */
static int ps_each(pbox_client *c, const struct fkey *k, const struct ps_arg *a)
{
	for (uint32_t i = 0; i < k->nparts; i++) {
		const struct fpart *pt = &k->parts[i];
		pbox_client *sub = c->subs[pt->sub];
		int rc = a->what == PS_DECLARE
				 ? pbox_declare_optimizer(sub, pt->subkey, pt->count, a->dtype,
							  a->optim)
			 : a->what == PS_INIT
				 ? pbox_ps_init(sub, pt->subkey,
						a->in ? (const float *)(a->in + pt->first * 4) : NULL,
						a->out + pt->first * a->out_esz)
				 : pbox_set_lr(sub, pt->subkey, a->lr);
		if (rc < 0)
			return client_error(c, rc, "box %s: %s", sub->control, pbox_last_error(sub));
	}
	return 0;
}

static int ps_key(pbox_client *c, uint32_t key, struct fkey *k)
{
	struct fleet *f = c->fleet;

	pthread_mutex_lock(&f->lock);
	struct fkey *e = find_key(f, key);
	if (e && e->kind == FLEET_PS)
		*k = *e;
	pthread_mutex_unlock(&f->lock);
	if (!e || e->kind != FLEET_PS)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: not a PS key: "
				    "declare it with pbox_declare_optimizer first", c->job,
				    c->rank, key);
	return 0;
}

int fleet_declare_optimizer(pbox_client *c, uint32_t key, size_t count, pbox_dtype grad,
			    const pbox_optim *o)
{
	struct fkey k;

	if (!o || !count || !wire_dtype_size(grad))
		return client_error(c, PBOX_EINVAL, "pbox_declare_optimizer key %u: %s", key,
				    !o ? "o is NULL" : !count ? "count is 0" : "unknown dtype");
	int rc = key_of(c, key, FLEET_PS, count, 4, &k);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->fleet->lock);
	struct fkey *e = find_key(c->fleet, key);
	e->dtype = (uint8_t)grad;
	e->wdtype = (uint8_t)o->weights_dtype;
	pthread_mutex_unlock(&c->fleet->lock);
	struct ps_arg a = { .what = PS_DECLARE, .dtype = grad, .optim = o };
	return ps_each(c, &k, &a);
}

int fleet_ps_init(pbox_client *c, uint32_t key, const float *weights, void *weights_out)
{
	struct fkey k;
	int rc = ps_key(c, key, &k);

	if (rc < 0)
		return rc;
	if (!weights_out)
		return client_error(c, PBOX_EINVAL, "pbox_ps_init key %u: weights_out is NULL", key);
	struct ps_arg a = { .what = PS_INIT, .in = (const uint8_t *)weights, .out = weights_out,
			    .out_esz = wire_dtype_size(k.wdtype) };
	return ps_each(c, &k, &a);
}

int fleet_set_lr(pbox_client *c, uint32_t key, double lr)
{
	struct fkey k;
	int rc = ps_key(c, key, &k);

	if (rc < 0)
		return rc;
	struct ps_arg a = { .what = PS_LR, .lr = lr };
	return ps_each(c, &k, &a);
}

static int part_push(pbox_client *sub, const struct fpart *pt, void *arg, pbox_req **req)
{
	const struct ps_arg *a = arg;
	return pbox_ipush_pull(sub, pt->subkey, a->in + pt->first * a->in_esz,
			       a->out + pt->first * a->out_esz, pt->count, a->dtype, req);
}

int fleet_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		     size_t count, pbox_dtype dtype, pbox_req **req)
{
	struct fkey k;

	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_ipush_pull key %u: req is NULL", key);
	*req = NULL;
	int rc = ps_key(c, key, &k);
	if (rc < 0)
		return rc;
	if (!grad || !weights_out || count != k.count || !wire_dtype_size(dtype))
		return client_error(c, PBOX_EINVAL, "pbox_ipush_pull key %u: %s", key,
				    !grad || !weights_out ? "a buffer is NULL" :
				    count != k.count ? "count differs from the declaration" :
				    "unknown dtype");
	struct ps_arg a = { .in = grad, .out = weights_out, .in_esz = wire_dtype_size(dtype),
			    .out_esz = wire_dtype_size(k.wdtype), .dtype = dtype };
	return over_parts(c, &k, part_push, &a, req);
}

int fleet_ps_rw(pbox_client *c, uint32_t key, pbox_ps_part part, float *out,
		const float *in, size_t count, uint64_t *steps)
{
	struct fkey k;
	int rc = ps_key(c, key, &k);

	if (rc < 0)
		return rc;
	if ((!out && !in) || count != k.count)
		return client_error(c, PBOX_EINVAL, "pbox_ps_%s key %u: %s", in ? "write" : "read",
				    key, count != k.count ? "count differs from the declaration"
				    : "the buffer is NULL");
	for (uint32_t i = 0; i < k.nparts; i++) {
		const struct fpart *pt = &k.parts[i];
		pbox_client *sub = c->subs[pt->sub];
		uint64_t s = 0;
		rc = in ? pbox_ps_write(sub, pt->subkey, part, in + pt->first, pt->count)
			: pbox_ps_read(sub, pt->subkey, part, out + pt->first, pt->count, &s);
		if (rc < 0)
			return client_error(c, rc, "box %s: %s", sub->control, pbox_last_error(sub));
		if (steps && i == 0)
			*steps = s;
	}
	return 0;
}

int fleet_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps)
{
	struct fkey k;
	int rc = ps_key(c, key, &k);

	for (uint32_t i = 0; rc == 0 && i < k.nparts; i++) {
		pbox_client *sub = c->subs[k.parts[i].sub];
		rc = pbox_ps_set_steps(sub, k.parts[i].subkey, steps);
		if (rc < 0)
			client_error(c, rc, "box %s: %s", sub->control, pbox_last_error(sub));
	}
	return rc;
}

/* ---- release ---------------------------------------------------------------- */

int fleet_release(pbox_client *c, const uint32_t *keys, size_t n)
{
	struct fleet *f = c->fleet;
	int first = 0;

	if (!keys && n)
		return client_error(c, PBOX_EINVAL, "pbox_release_keys: keys is NULL");
	for (unsigned b = 0; b < c->nsubs; b++) {
		uint32_t *sk = NULL;
		size_t m = 0;
		pthread_mutex_lock(&f->lock);
		for (size_t i = 0; i < n; i++) {
			struct fkey *k = find_key(f, keys[i]);
			for (uint32_t p = 0; k && p < k->nparts; p++) {
				if (k->parts[p].sub != b)
					continue;
				uint32_t *t = realloc(sk, (m + 1) * sizeof(*sk));
				if (!t)
					break;
				sk = t;
				sk[m++] = k->parts[p].subkey;
			}
		}
		pthread_mutex_unlock(&f->lock);
		int rc = m ? pbox_release_keys(c->subs[b], sk, m) : 0;
		free(sk);
		if (rc < 0 && !first)
			first = client_error(c, rc, "box %s: %s", c->subs[b]->control,
					     pbox_last_error(c->subs[b]));
	}
	/* a released key is placed afresh at its next call: the placement of
	 * the others stays (partition keys are not used twice) */
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; first == 0 && i < n; i++) {
		struct fkey *k = find_key(f, keys[i]);
		if (!k)
			continue;
		free(k->parts);
		*k = f->keys[--f->nkeys];
	}
	pthread_mutex_unlock(&f->lock);
	return first;
}
