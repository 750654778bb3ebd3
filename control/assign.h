/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * assign.h - where the chunks of a key go: cut a key into segments and
 * chunks (docs/protocol.md "Segments, chunks and sizes") and hand each
 * chunk to one data endpoint (port, lcore), balancing bytes.
 *
 * Pure functions over caller-owned arrays: no allocation, no box state, so
 * the balance is easy to test and the same inputs always give the same
 * assignment.
 */
#ifndef PBOX_ASSIGN_H
#define PBOX_ASSIGN_H

#include <stdint.h>

#define ASSIGN_MAX_EPS 1024 /* endpoints one assignment can spread over */

/* How a key is cut. */
struct assign_geom {
	uint64_t count;          /* elements */
	unsigned dtype;          /* enum wire_dtype */
	uint32_t seg_bytes;      /* payload bytes of a full segment */
	uint32_t seg_elems;      /* elements of a full segment */
	uint32_t nsegs;
	uint32_t segs_per_chunk; /* max(1, chunk_bytes / seg_bytes) */
	uint32_t nchunks;
};

/*
 * Cut count elements of dtype into segments of seg_bytes and chunks of
 * about chunk_bytes. Returns 0, or -EINVAL if dtype is unknown, count is 0,
 * seg_bytes is 0 or not a multiple of 64, or the key needs 2^32 segments
 * or more.
 */
int assign_geom(uint64_t count, unsigned dtype, uint32_t seg_bytes,
		uint32_t chunk_bytes, struct assign_geom *g);

/* Payload bytes of chunk i (all full chunks are equal; the last may be
 * shorter). */
uint64_t assign_chunk_bytes(const struct assign_geom *g, uint32_t i);

/*
 * Give each of g->nchunks chunks an endpoint in [0, neps): largest chunk
 * first, each to the endpoint with the least load (ties: lowest index),
 * whose load then grows by the chunk's bytes. load[neps] carries the bytes
 * already placed on each endpoint (by earlier keys of every job), so many
 * small keys spread too. Writes chunk_ep[g->nchunks].
 * Returns 0, or -EINVAL if neps is 0 or above ASSIGN_MAX_EPS.
 */
int assign_chunks(const struct assign_geom *g, uint64_t *load, unsigned neps,
		  uint16_t *chunk_ep);

/* Take a key's chunks off the loads again (when its job is removed). */
void assign_release(const struct assign_geom *g, uint64_t *load, unsigned neps,
		    const uint16_t *chunk_ep);

#endif
