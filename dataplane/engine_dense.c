/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_dense.c - dense and collective keys' layout: segments of whole
 * elements of the key's dtype, a collective key's slices cut on their own
 * (docs/protocol.md "Collective keys"). A dense round's checks and
 * completion (the rank-ordered N-way sum into the shadow copy, or a gather
 * key's owner's bytes) run per packet and per round inside engine.c's push:
 * they are inline in engine_internal.h (dense_check, dense_complete).
 *
 * Rules: these functions run on the control plane's thread, on memory it
 * owns and has not yet handed to an lcore (engine.h); they only compute
 * and lay out.
 */
#include "dataplane/engine_internal.h"

static inline uint32_t dense_elems(unsigned dtype, uint32_t seg_bytes)
{
	return seg_bytes / (uint32_t)wire_dtype_size(dtype);
}

uint32_t engine_key_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes)
{
	return key_layout_nsegs(count, dense_elems(dtype, seg_bytes), 1);
}

uint32_t engine_key_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk)
{
	return key_layout_nchunks(count, dense_elems(dtype, seg_bytes), segs_per_chunk, 1);
}

size_t engine_key_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk)
{
	return key_layout_bytes(count, dense_elems(dtype, seg_bytes), seg_bytes, segs_per_chunk,
				1);
}

struct engine_key *engine_key_init(void *mem, uint32_t key, uint64_t count,
				   unsigned dtype, uint32_t seg_bytes,
				   uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore)
{
	return key_layout_init(mem, key, count, dtype, dense_elems(dtype, seg_bytes),
			       segs_per_chunk, chunk_lcore, 1);
}

uint32_t engine_coll_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			   uint16_t nslices)
{
	return key_layout_nsegs(count, dense_elems(dtype, seg_bytes), nslices);
}

uint32_t engine_coll_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			     uint32_t segs_per_chunk, uint16_t nslices)
{
	return key_layout_nchunks(count, dense_elems(dtype, seg_bytes), segs_per_chunk, nslices);
}

size_t engine_coll_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			     uint32_t segs_per_chunk, uint16_t nslices)
{
	return key_layout_bytes(count, dense_elems(dtype, seg_bytes), seg_bytes, segs_per_chunk,
				nslices);
}

struct engine_key *engine_coll_key_init(void *mem, uint32_t key, uint64_t count,
					unsigned dtype, uint32_t seg_bytes,
					uint32_t segs_per_chunk, const uint8_t *chunk_lcore,
					unsigned coll, uint16_t root, uint16_t nslices)
{
	struct engine_key *k = key_layout_init(mem, key, count, dtype,
					       dense_elems(dtype, seg_bytes), segs_per_chunk,
					       chunk_lcore, nslices);
	k->coll = (uint8_t)coll;
	k->root = root;
	return k;
}
