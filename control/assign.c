/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * assign.c - key geometry and greedy chunk-to-endpoint balancing (PHub's
 * "largest first, to the least loaded"). A binary min-heap over endpoints,
 * ordered by (load, index), keeps a key of n chunks at O(n log endpoints).
 */
#include "control/assign.h"

#include <errno.h>
#include <string.h>

#include "common/wire.h"

int assign_geom(uint64_t count, unsigned dtype, uint32_t seg_bytes,
		uint32_t chunk_bytes, struct assign_geom *g)
{
	size_t esz = wire_dtype_size(dtype);

	if (esz == 0 || count == 0 || seg_bytes == 0 || seg_bytes % WIRE_PAYLOAD_ALIGN)
		return -EINVAL;
	/* rounded up without count + elems - 1, which wraps for a count
	 * near 2^64 into a few segments */
	uint64_t elems = seg_bytes / esz;
	uint64_t nsegs = count / elems + (count % elems != 0);
	if (nsegs > UINT32_MAX)
		return -EINVAL;
	memset(g, 0, sizeof(*g));
	g->count = count;
	g->dtype = dtype;
	g->seg_bytes = seg_bytes;
	g->seg_elems = (uint32_t)(seg_bytes / esz);
	g->nsegs = (uint32_t)nsegs;
	g->segs_per_chunk = chunk_bytes / seg_bytes ? chunk_bytes / seg_bytes : 1;
	g->nchunks = (uint32_t)((nsegs + g->segs_per_chunk - 1) / g->segs_per_chunk);
	return 0;
}

uint64_t assign_chunk_bytes(const struct assign_geom *g, uint32_t i)
{
	uint64_t per = (uint64_t)g->segs_per_chunk * g->seg_elems;
	uint64_t first = (uint64_t)i * per;

	if (first >= g->count)
		return 0;
	uint64_t n = g->count - first < per ? g->count - first : per;
	return n * wire_dtype_size(g->dtype);
}

/* ---- min-heap of endpoint indexes by (load, index) ---- */

struct heap {
	uint16_t ep[ASSIGN_MAX_EPS];
	unsigned n;
	const uint64_t *load;
};

static int before(const struct heap *h, uint16_t a, uint16_t b)
{
	return h->load[a] < h->load[b] || (h->load[a] == h->load[b] && a < b);
}

static void sift_down(struct heap *h, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && before(h, h->ep[l], h->ep[m]))
			m = l;
		if (r < h->n && before(h, h->ep[r], h->ep[m]))
			m = r;
		if (m == i)
			return;
		uint16_t t = h->ep[i];
		h->ep[i] = h->ep[m];
		h->ep[m] = t;
		i = m;
	}
}

static void heap_build(struct heap *h, const uint64_t *load, unsigned neps)
{
	h->load = load;
	h->n = neps;
	for (unsigned i = 0; i < neps; i++)
		h->ep[i] = (uint16_t)i;
	for (unsigned i = neps / 2; i-- > 0;)
		sift_down(h, i);
}

/* Place bytes on the least-loaded endpoint; returns it. */
static uint16_t heap_place(struct heap *h, uint64_t *load, uint64_t bytes)
{
	uint16_t ep = h->ep[0];
	load[ep] += bytes;
	sift_down(h, 0);
	return ep;
}

int assign_chunks(const struct assign_geom *g, uint64_t *load, unsigned neps,
		  uint16_t *chunk_ep)
{
	struct heap h; /* 2 KiB */

	if (neps == 0 || neps > ASSIGN_MAX_EPS)
		return -EINVAL;
	heap_build(&h, load, neps);
	/* Largest first: only the last chunk can be smaller than the others,
	 * so the order is chunks 0..n-2 (equal, by index), then chunk n-1. */
	for (uint32_t i = 0; i < g->nchunks; i++)
		chunk_ep[i] = heap_place(&h, load, assign_chunk_bytes(g, i));
	return 0;
}

void assign_release(const struct assign_geom *g, uint64_t *load, unsigned neps,
		    const uint16_t *chunk_ep)
{
	for (uint32_t i = 0; i < g->nchunks; i++) {
		uint64_t b = assign_chunk_bytes(g, i);
		if (chunk_ep[i] < neps)
			load[chunk_ep[i]] -= load[chunk_ep[i]] < b ? load[chunk_ep[i]] : b;
	}
}
