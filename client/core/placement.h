/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.h - where a job's keys live in a fleet of boxes: each key is
 * cut into partitions (contiguous element ranges, each a key of its own
 * on one box) and each partition is given a box. Pure integer math, no
 * I/O: every rank computes the same placement from the same input, with
 * no message (docs/protocol.md "Fleet placement"); the placement's hash
 * is what ranks send at job_join so a box refuses a rank that differs.
 * Unit tested in tests/unit/test_placement.c.
 *
 * The rule, key by key in declaration order (a key's placement depends
 * only on the boxes, the partition size and the keys declared before it,
 * so a key declared later never moves an earlier one):
 *   1. a key of count elements of elem bytes is cut into partitions of
 *      part_elems = floor(part_bytes / elem) elements, the last short;
 *   2. every box scores every partition of the key by weighted
 *      rendezvous hashing: a box of weight w draws w 64-bit hashes of
 *      (box id, key id, partition index) and scores the largest, so it
 *      scores best with probability w / W (W the sum of the weights);
 *   3. the (box, partition) pairs are taken best score first; a
 *      partition goes to the box of its first pair that is within
 *      - the key's cap: at most ceil(nparts * w / W) of the key's
 *        partitions on a box of weight w, so a large key uses every
 *        box evenly, and
 *      - the fleet's cap: the box's bytes at most its weighted share of
 *        the bytes of this key and the keys before it, times
 *        1 + PLACE_SLACK_PCT / 100, plus PLACE_SLACK_PARTS partitions;
 *   4. a partition no box has room for goes to the box within the key's
 *      cap whose bytes over weight would be smallest (ties to the better
 *      score).
 * Losing or adding a box changes the scores only where that box is or
 * becomes first, and the caps only by the share; the movement this
 * costs is measured in the test and written in docs/protocol.md.
 */
#ifndef PBOX_CLIENT_CORE_PLACEMENT_H
#define PBOX_CLIENT_CORE_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* Default partition size in bytes (docs/protocol.md "Fleet placement"
 * says why this one). */
#define PLACE_PART_BYTES_DEFAULT (512u * 1024)
/* How far over its share a box may fill before the next-scoring one
 * is used: in percent of the share, plus whole partitions. */
#define PLACE_SLACK_PCT 4
#define PLACE_SLACK_PARTS 1
#define PLACE_MAX_BOXES 128
#define PLACE_MAX_WEIGHT 100
#define PLACE_HASH_HEX 17     /* 16 hex digits and a NUL */

/* One box of the fleet: its id as the ranks list it ("host:port"), and
 * its capacity weight (1..PLACE_MAX_WEIGHT; 1 when all are alike). */
struct place_box {
	const char *id;
	uint32_t weight;
};

/* One key as declared: its id, element count and element size. */
struct place_key {
	uint32_t key;
	uint64_t count;
	uint32_t elem;
};

/* One partition: elements [first, first + count) of keys[key_index]. */
struct place_part {
	uint32_t key_index;
	uint32_t part;               /* index within its key */
	uint64_t first;
	uint64_t count;
	uint32_t box;                /* index into the boxes */
};

struct placement {
	uint32_t nboxes, nkeys, nparts;
	uint64_t part_bytes;
	struct place_part *parts;    /* by key in declaration order, then index */
	uint32_t *key_first;         /* nkeys + 1: key i's partitions are
				        parts[key_first[i] .. key_first[i + 1]) */
	uint64_t *box_bytes;         /* nboxes: bytes placed on each box */
	uint64_t hash;               /* placement_hash's, of this placement */
};

/*
 * Place nkeys keys (declaration order) over nboxes boxes (in the order
 * the ranks list them) with partitions of part_bytes. 0 and *p filled
 * (placement_free releases it), or PBOX_EINVAL with the reason in err:
 * no boxes, more than PLACE_MAX_BOXES, a box without id, an id listed
 * twice, a weight 0 or above PLACE_MAX_WEIGHT, a key of count 0 or
 * element size 0, a key id declared twice, part_bytes smaller than a
 * key's element size, a key of more than 2^32 partitions; or
 * PBOX_ENOMEM.
 */
int placement_compute(struct placement *p, const struct place_box *boxes, uint32_t nboxes,
		      const struct place_key *keys, uint32_t nkeys, uint64_t part_bytes,
		      char *err, size_t errlen);

void placement_free(struct placement *p);

/* The hash ranks send at job_join: 64-bit FNV-1a over a version tag,
 * the boxes (ids and weights, in order), part_bytes, the keys and every
 * partition's range and box, each integer as little-endian bytes. */
uint64_t placement_hash(const struct placement *p, const struct place_box *boxes,
			const struct place_key *keys);

/* h as 16 lower-case hex digits (what job_join's "placement" carries). */
void placement_hash_hex(uint64_t h, char out[PLACE_HASH_HEX]);

#endif
