/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.c - a job's keys cut into partitions and spread over a fleet
 * of boxes by weighted rendezvous hashing with bounded loads; the rule is
 * in placement.h. Integers only (no floating point, whose library
 * functions may round differently on two ranks), so every rank computes
 * the same placement bit for bit.
 */
#include "client/core/placement.h"
#include "include/pbox.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull
#define GOLDEN     0x9e3779b97f4a7c15ull

static uint64_t fnv_bytes(uint64_t h, const void *buf, size_t n)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* v as 8 little-endian bytes, whatever the host's byte order. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return fnv_bytes(h, b, sizeof(b));
}

/* splitmix64's finalizer: every input bit reaches every output bit. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* The key's cap: a box of weight w holds at most ceil(n * w / wsum) of
 * a key's n partitions, so a large key is spread over every box. */
static bool key_cap_ok(uint32_t held, uint32_t n, uint32_t w, uint64_t wsum)
{
	return (uint64_t)held * wsum < (uint64_t)n * w;
}

static int check_boxes(const struct place_box *boxes, uint32_t nboxes, char *err, size_t errlen)
{
	if (nboxes == 0) {
		snprintf(err, errlen, "no boxes to place keys on");
		return PBOX_EINVAL;
	}
	if (nboxes > PLACE_MAX_BOXES) {
		snprintf(err, errlen, "%u boxes, at most %u", nboxes, PLACE_MAX_BOXES);
		return PBOX_EINVAL;
	}
	for (uint32_t i = 0; i < nboxes; i++) {
		if (!boxes[i].id || !boxes[i].id[0]) {
			snprintf(err, errlen, "box %u has no id", i);
			return PBOX_EINVAL;
		}
		if (boxes[i].weight == 0 || boxes[i].weight > PLACE_MAX_WEIGHT) {
			snprintf(err, errlen, "box %s has weight %u (1..%u)", boxes[i].id,
				 boxes[i].weight, PLACE_MAX_WEIGHT);
			return PBOX_EINVAL;
		}
		for (uint32_t j = 0; j < i; j++) {
			if (strcmp(boxes[i].id, boxes[j].id) == 0) {
				snprintf(err, errlen, "box %s is listed twice (entries %u and %u)",
					 boxes[i].id, j, i);
				return PBOX_EINVAL;
			}
		}
	}
	return 0;
}

/* Partitions of each key into nparts_of (and their sum into *total). */
static int check_keys(const struct place_key *keys, uint32_t nkeys, uint64_t part_bytes,
		      uint32_t *nparts_of, uint32_t *total, char *err, size_t errlen)
{
	uint64_t sum = 0;

	for (uint32_t k = 0; k < nkeys; k++) {
		const struct place_key *key = &keys[k];
		if (key->count == 0 || key->elem == 0) {
			snprintf(err, errlen, "key %u has %s 0", key->key,
				 key->count == 0 ? "count" : "element size");
			return PBOX_EINVAL;
		}
		if (part_bytes < key->elem) {
			snprintf(err, errlen, "partition size %llu bytes is smaller than key %u's "
				 "%u-byte elements", (unsigned long long)part_bytes, key->key,
				 key->elem);
			return PBOX_EINVAL;
		}
		uint64_t pe = part_bytes / key->elem;
		uint64_t n = key->count / pe + (key->count % pe != 0);
		if (n > UINT32_MAX || sum + n > UINT32_MAX) {
			snprintf(err, errlen, "key %u needs %llu partitions of %llu bytes: too many",
				 key->key, (unsigned long long)n, (unsigned long long)part_bytes);
			return PBOX_EINVAL;
		}
		nparts_of[k] = (uint32_t)n;
		sum += n;
	}
	/* after the counts, so a bad count is named before a duplicate */
	for (uint32_t k = 0; k < nkeys; k++) {
		for (uint32_t j = 0; j < k; j++) {
			if (keys[k].key == keys[j].key) {
				snprintf(err, errlen, "key %u is declared twice (entries %u and %u)",
					 keys[k].key, j, k);
				return PBOX_EINVAL;
			}
		}
	}
	*total = (uint32_t)sum;
	return 0;
}

/* One candidate (box, partition) of a key, by the box's score for it. */
struct pair {
	uint64_t score;
	uint32_t box, part;
	const char *id;
};

/* Best score first; equal scores by id then partition, never by the
 * box's index, which changes when a box is removed. */
static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int c;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	c = strcmp(x->id, y->id);
	if (c)
		return c;
	return x->part < y->part ? -1 : x->part > y->part;
}

static uint64_t box_score(const struct place_box *bx, uint64_t box_h, uint32_t key, uint32_t part)
{
	uint64_t kp = mix64(((uint64_t)key << 32 | part) ^ GOLDEN), best = 0;

	for (uint32_t j = 0; j < bx->weight; j++) {
		uint64_t s = mix64(mix64(box_h + (uint64_t)(j + 1) * GOLDEN) ^ kp);
		if (s > best)
			best = s;
	}
	return best;
}

/* Scratch of place_key, sized for the largest key. */
struct scratch {
	struct pair *pairs;          /* nboxes x nparts of the key */
	uint32_t *held;              /* nboxes: the key's partitions on each */
	uint64_t *room;              /* nboxes: bytes each may still take */
	uint8_t *done;               /* nparts of the key */
};

/* Place the n partitions of one key (parts[first..first+n)); *placed is
 * the bytes of the keys before it. */
static void place_key(struct placement *p, const struct place_box *boxes, const uint64_t *box_h,
		      const struct place_key *key, uint32_t first, uint32_t n, uint64_t wsum,
		      uint64_t *placed, struct scratch *sc)
{
	uint64_t pe = p->part_bytes / key->elem, kbytes = key->count * key->elem;
	uint32_t nb = p->nboxes;

	for (uint32_t i = 0; i < n; i++) {
		struct place_part *pp = &p->parts[first + i];
		pp->part = i;
		pp->first = i * pe;
		pp->count = key->count - pp->first < pe ? key->count - pp->first : pe;
		sc->done[i] = 0;
	}
	/* the fleet's cap: a box's weighted share of the bytes placed once
	 * this key is, plus slack; the room is what it may still take */
	for (uint32_t b = 0; b < nb; b++) {
		u128 cap = (u128)(*placed + kbytes) * boxes[b].weight * (100 + PLACE_SLACK_PCT) /
			   ((u128)wsum * 100) + (u128)PLACE_SLACK_PARTS * p->part_bytes;
		sc->room[b] = cap > p->box_bytes[b] ? (uint64_t)(cap - p->box_bytes[b]) : 0;
		sc->held[b] = 0;
	}
	size_t np = 0;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t b = 0; b < nb; b++)
			sc->pairs[np++] = (struct pair){ .score = box_score(&boxes[b], box_h[b], key->key, i),
							 .box = b, .part = i, .id = boxes[b].id };
	qsort(sc->pairs, np, sizeof(*sc->pairs), pair_cmp);

	/* best pairs first: a partition goes to the best-scoring box that
	 * is within the key's cap and has room */
	uint32_t left = n;
	for (size_t j = 0; j < np && left; j++) {
		const struct pair *pr = &sc->pairs[j];
		struct place_part *pp = &p->parts[first + pr->part];
		uint64_t s = pp->count * key->elem;
		uint32_t b = pr->box;
		if (sc->done[pr->part] || !key_cap_ok(sc->held[b], n, boxes[b].weight, wsum) ||
		    s > sc->room[b])
			continue;
		pp->box = b;
		sc->done[pr->part] = 1;
		sc->held[b]++;
		sc->room[b] -= s;
		p->box_bytes[b] += s;
		left--;
	}
	/* what no box has room for: to the box within the key's cap whose
	 * bytes over weight would be smallest, ties to the better score */
	for (uint32_t i = 0; i < n && left; i++) {
		struct place_part *pp = &p->parts[first + i];
		uint64_t s = pp->count * key->elem, best_score = 0;
		int least = -1;
		if (sc->done[i])
			continue;
		for (uint32_t b = 0; b < nb; b++) {
			if (!key_cap_ok(sc->held[b], n, boxes[b].weight, wsum))
				continue;
			uint64_t sco = box_score(&boxes[b], box_h[b], key->key, i);
			u128 mine = (u128)(p->box_bytes[b] + s) * (least < 0 ? 1 : boxes[least].weight);
			u128 theirs = least < 0 ? 0 : (u128)(p->box_bytes[least] + s) * boxes[b].weight;
			if (least < 0 || mine < theirs || (mine == theirs && sco > best_score)) {
				least = (int)b;
				best_score = sco;
			}
		}
		pp->box = (uint32_t)least;   /* some box is under the key's cap */
		sc->done[i] = 1;
		sc->held[least]++;
		p->box_bytes[least] += s;
		left--;
	}
	*placed += kbytes;
}

static void scratch_free(struct scratch *sc)
{
	free(sc->pairs);
	free(sc->held);
	free(sc->room);
	free(sc->done);
}

int placement_compute(struct placement *p, const struct place_box *boxes, uint32_t nboxes,
		      const struct place_key *keys, uint32_t nkeys, uint64_t part_bytes,
		      char *err, size_t errlen)
{
	uint32_t total = 0, most = 1;
	uint32_t *nparts_of = NULL;
	uint64_t *box_h = NULL;
	struct scratch sc = { 0 };
	int rc;

	memset(p, 0, sizeof(*p));
	rc = check_boxes(boxes, nboxes, err, errlen);
	if (rc < 0)
		return rc;
	if (nkeys && !keys) {
		snprintf(err, errlen, "%u keys but no key list", nkeys);
		return PBOX_EINVAL;
	}
	nparts_of = calloc(nkeys ? nkeys : 1, sizeof(*nparts_of));
	if (!nparts_of)
		goto nomem;
	rc = check_keys(keys, nkeys, part_bytes, nparts_of, &total, err, errlen);
	if (rc < 0) {
		free(nparts_of);
		return rc;
	}
	for (uint32_t k = 0; k < nkeys; k++)
		if (nparts_of[k] > most)
			most = nparts_of[k];

	p->nboxes = nboxes;
	p->nkeys = nkeys;
	p->nparts = total;
	p->part_bytes = part_bytes;
	p->parts = calloc(total ? total : 1, sizeof(*p->parts));
	p->key_first = calloc((size_t)nkeys + 1, sizeof(*p->key_first));
	p->box_bytes = calloc(nboxes, sizeof(*p->box_bytes));
	box_h = calloc(nboxes, sizeof(*box_h));
	sc.pairs = calloc((size_t)most * nboxes, sizeof(*sc.pairs));
	sc.held = calloc(nboxes, sizeof(*sc.held));
	sc.room = calloc(nboxes, sizeof(*sc.room));
	sc.done = calloc(most, sizeof(*sc.done));
	if (!p->parts || !p->key_first || !p->box_bytes || !box_h || !sc.pairs || !sc.held ||
	    !sc.room || !sc.done)
		goto nomem;

	uint64_t wsum = 0, placed = 0;
	for (uint32_t i = 0; i < nboxes; i++) {
		box_h[i] = mix64(fnv_bytes(FNV_OFFSET, boxes[i].id, strlen(boxes[i].id)));
		wsum += boxes[i].weight;
	}
	uint32_t first = 0;
	for (uint32_t k = 0; k < nkeys; k++) {
		p->key_first[k] = first;
		for (uint32_t i = 0; i < nparts_of[k]; i++)
			p->parts[first + i].key_index = k;
		place_key(p, boxes, box_h, &keys[k], first, nparts_of[k], wsum, &placed, &sc);
		first += nparts_of[k];
	}
	p->key_first[nkeys] = first;
	p->hash = placement_hash(p, boxes, keys);
	free(nparts_of);
	free(box_h);
	scratch_free(&sc);
	return 0;

nomem:
	free(nparts_of);
	free(box_h);
	scratch_free(&sc);
	placement_free(p);
	snprintf(err, errlen, "out of memory placing %u keys on %u boxes", nkeys, nboxes);
	return PBOX_ENOMEM;
}

void placement_free(struct placement *p)
{
	free(p->parts);
	free(p->key_first);
	free(p->box_bytes);
	memset(p, 0, sizeof(*p));
}

uint64_t placement_hash(const struct placement *p, const struct place_box *boxes,
			const struct place_key *keys)
{
	static const char tag[] = "pbox-placement-1";
	uint64_t h = fnv_bytes(FNV_OFFSET, tag, sizeof(tag) - 1);

	h = fnv_u64(h, p->nboxes);
	for (uint32_t i = 0; i < p->nboxes; i++) {
		size_t len = strlen(boxes[i].id);
		h = fnv_u64(h, len);
		h = fnv_bytes(h, boxes[i].id, len);
		h = fnv_u64(h, boxes[i].weight);
	}
	h = fnv_u64(h, p->part_bytes);
	h = fnv_u64(h, p->nkeys);
	for (uint32_t k = 0; k < p->nkeys; k++) {
		h = fnv_u64(h, keys[k].key);
		h = fnv_u64(h, keys[k].count);
		h = fnv_u64(h, keys[k].elem);
	}
	h = fnv_u64(h, p->nparts);
	for (uint32_t i = 0; i < p->nparts; i++) {
		h = fnv_u64(h, p->parts[i].first);
		h = fnv_u64(h, p->parts[i].count);
		h = fnv_u64(h, p->parts[i].box);
	}
	return h;
}

void placement_hash_hex(uint64_t h, char out[PLACE_HASH_HEX])
{
	snprintf(out, PLACE_HASH_HEX, "%016llx", (unsigned long long)h);
}
