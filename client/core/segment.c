/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment.c - layout math of libpbox: segment and chunk counts, checks of a
 * box-supplied layout, the window slot pool, RTO back-off and the result
 * bitmap. Pure functions, see segment.h.
 */
#include "client/core/segment.h"
#include "include/pbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

uint32_t seg_elems_of(uint32_t seg_bytes, unsigned dtype)
{
	size_t esz = wire_dtype_size(dtype);

	if (esz == 0 || seg_bytes == 0 || seg_bytes % esz != 0)
		return 0;
	return seg_bytes / (uint32_t)esz;
}

uint64_t seg_nsegs(uint64_t count, uint32_t seg_elems)
{
	if (seg_elems == 0)
		return 0;
	return count / seg_elems + (count % seg_elems != 0);
}

uint64_t seg_nchunks(uint64_t nsegs, uint32_t segs_per_chunk)
{
	if (segs_per_chunk == 0)
		return 0;
	return nsegs / segs_per_chunk + (nsegs % segs_per_chunk != 0);
}

int seg_count_check(size_t count, unsigned dtype, uint32_t seg_bytes,
		    char *err, size_t errlen)
{
	size_t esz = wire_dtype_size(dtype);
	uint32_t seg_elems = seg_elems_of(seg_bytes, dtype);

	if (esz == 0) {
		snprintf(err, errlen, "unknown dtype %u (use PBOX_F32, PBOX_F16 or PBOX_BF16)", dtype);
		return PBOX_EINVAL;
	}
	if (count == 0) {
		snprintf(err, errlen, "count is 0");
		return PBOX_EINVAL;
	}
	if (count > SIZE_MAX / esz) {
		snprintf(err, errlen, "count %zu of %s overflows the address space",
			 count, wire_dtype_name(dtype));
		return PBOX_EINVAL;
	}
	if (seg_elems == 0) {
		snprintf(err, errlen, "segment size %u bytes cannot hold %s elements",
			 seg_bytes, wire_dtype_name(dtype));
		return PBOX_EINVAL;
	}
	if (seg_nsegs(count, seg_elems) > UINT32_MAX) {
		snprintf(err, errlen, "count %zu of %s needs more than 2^32 segments of %u bytes",
			 count, wire_dtype_name(dtype), seg_bytes);
		return PBOX_EINVAL;
	}
	return 0;
}

uint64_t seg_slices(struct seg_layout *l, uint32_t nslices)
{
	if (nslices == 0 || l->count % nslices || l->seg_elems == 0)
		return 0;
	if (nslices == 1) {
		l->slice = 0;
		l->slice_segs = 0;
		return seg_nsegs(l->count, l->seg_elems);
	}
	l->slice = l->count / nslices;
	uint64_t per = seg_nsegs(l->slice, l->seg_elems);
	if (per == 0 || per > UINT32_MAX)
		return 0;
	l->slice_segs = (uint32_t)per;
	return per * nslices;
}

static int layout_sizes_check(const struct seg_layout *l, uint64_t count, unsigned dtype,
			      uint32_t seg_bytes, uint32_t nslices, char *err, size_t errlen)
{
	uint32_t want_elems = seg_elems_of(seg_bytes, dtype);

	if (l->count != count) {
		snprintf(err, errlen, "count %llu, declared %llu",
			 (unsigned long long)l->count, (unsigned long long)count);
		return PBOX_EPROTO;
	}
	if (l->seg_elems != want_elems || want_elems == 0 || want_elems > UINT16_MAX) {
		snprintf(err, errlen, "seg_elems %u, expected %u for %u-byte segments of %s",
			 l->seg_elems, want_elems, seg_bytes,
			 wire_dtype_name(dtype) ? wire_dtype_name(dtype) : "?");
		return PBOX_EPROTO;
	}
	struct seg_layout cut = { .count = count, .seg_elems = want_elems };
	uint64_t want_segs = seg_slices(&cut, nslices);
	if (want_segs == 0 || l->nsegs != want_segs) {
		snprintf(err, errlen, "nsegs %u, expected %llu (%u slices)", l->nsegs,
			 (unsigned long long)want_segs, nslices);
		return PBOX_EPROTO;
	}
	if (l->segs_per_chunk == 0 || l->nchunks != seg_nchunks(l->nsegs, l->segs_per_chunk)) {
		snprintf(err, errlen, "%u chunks of %u segments do not cover %u segments",
			 l->nchunks, l->segs_per_chunk, l->nsegs);
		return PBOX_EPROTO;
	}
	return 0;
}

static int layout_check(const struct seg_layout *l, uint64_t count, unsigned dtype,
			uint32_t seg_bytes, unsigned neps, uint32_t nslices,
			char *err, size_t errlen)
{
	if (layout_sizes_check(l, count, dtype, seg_bytes, nslices, err, errlen) < 0)
		return PBOX_EPROTO;
	if (l->elem != wire_dtype_size(dtype)) {
		snprintf(err, errlen, "element size %u, expected %zu", l->elem,
			 wire_dtype_size(dtype));
		return PBOX_EPROTO;
	}
	for (uint32_t i = 0; i < l->nchunks; i++) {
		if (l->chunk_ep[i] >= neps) {
			snprintf(err, errlen, "chunk %u names endpoint %u of %u", i,
				 l->chunk_ep[i], neps);
			return PBOX_EPROTO;
		}
	}
	return 0;
}

int seg_layout_check(const struct seg_layout *l, uint64_t count, unsigned dtype,
		     uint32_t seg_bytes, unsigned neps, char *err, size_t errlen)
{
	return layout_check(l, count, dtype, seg_bytes, neps, 1, err, errlen);
}

uint32_t seg_rto_backoff(uint32_t base, uint32_t nretx, uint32_t max)
{
	uint64_t rto = base;

	for (uint32_t i = 0; i < nretx && rto < max; i++)
		rto *= 2;
	return rto > max ? max : (uint32_t)rto;
}

static uint32_t clamp_u32(uint64_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

void rtt_init(struct rtt_est *e, uint32_t initial_us, uint32_t min_us, uint32_t max_us)
{
	*e = (struct rtt_est){ .min_us = min_us, .max_us = max_us > min_us ? max_us : min_us };
	e->rto_us = clamp_u32(initial_us, e->min_us, e->max_us);
}

void rtt_sample(struct rtt_est *e, uint32_t r_us)
{
	if (e->nsamples++ == 0) {
		e->srtt_us = r_us;
		e->rttvar_us = r_us / 2;
	} else {
		uint32_t diff = e->srtt_us > r_us ? e->srtt_us - r_us : r_us - e->srtt_us;
		e->rttvar_us = (uint32_t)(((uint64_t)e->rttvar_us * 3 + diff) / 4);
		e->srtt_us = (uint32_t)(((uint64_t)e->srtt_us * 7 + r_us) / 8);
	}
	uint64_t rto = (uint64_t)e->srtt_us + 4ull * e->rttvar_us;
	if (rto < 2ull * e->srtt_us)
		rto = 2ull * e->srtt_us;
	e->rto_us = clamp_u32(rto, e->min_us, e->max_us);
}

void rtt_backoff(struct rtt_est *e)
{
	e->rto_us = clamp_u32(2ull * e->rto_us, e->min_us, e->max_us);
}

void bdp_init(struct bdp_est *b)
{
	memset(b, 0, sizeof(*b));
}

void bdp_on_result(struct bdp_est *b, uint64_t now_us, uint32_t bytes, uint32_t rtt_us,
		   uint32_t srtt_us)
{
	if (rtt_us && (b->min_rtt_us == 0 || rtt_us <= b->min_rtt_us ||
		       now_us - b->min_rtt_at_us > BDP_RTT_WINDOW_US)) {
		b->min_rtt_us = rtt_us;
		b->min_rtt_at_us = now_us;
	}
	if (b->ival_start_us == 0) {
		b->ival_start_us = now_us;
		b->ival_bytes = 0;
	}
	b->ival_bytes += bytes;
	uint64_t len = now_us - b->ival_start_us;
	if (len >= 1000 && len >= srtt_us) {
		b->rate[b->nrate++ % BDP_RATE_SAMPLES] = b->ival_bytes * 1000000ull / len;
		b->ival_start_us = now_us;
		b->ival_bytes = 0;
	}
}

uint32_t bdp_window(const struct bdp_est *b, uint32_t seg_bytes, uint32_t wmin, uint32_t wmax)
{
	uint64_t rate = 0;
	unsigned n = b->nrate < BDP_RATE_SAMPLES ? b->nrate : BDP_RATE_SAMPLES;

	if (wmin > wmax)
		wmin = wmax;

	for (unsigned i = 0; i < n; i++)
		if (b->rate[i] > rate)
			rate = b->rate[i];
	if (rate == 0 || b->min_rtt_us == 0 || seg_bytes == 0)
		return wmax;
	uint64_t w = (2 * rate * b->min_rtt_us / 1000000ull + seg_bytes - 1) / seg_bytes;
	return w < wmin ? wmin : w > wmax ? wmax : (uint32_t)w;
}

int seg_window_init(struct seg_window *w, uint32_t cap)
{
	w->cap = cap;
	w->nfree = 0;
	w->free = cap ? calloc(cap, sizeof(*w->free)) : NULL;
	if (!w->free)
		return cap ? PBOX_ENOMEM : PBOX_EINVAL;
	/* Hand out low indexes first: slot 0 is on top of the stack. */
	for (uint32_t i = cap; i-- > 0;)
		w->free[w->nfree++] = i;
	return 0;
}

void seg_window_free(struct seg_window *w)
{
	free(w->free);
	w->free = NULL;
	w->cap = w->nfree = 0;
}

uint32_t seg_bitmap_first_clear(const uint64_t *bm, uint32_t nsegs)
{
	size_t nw = seg_bitmap_words(nsegs);

	for (size_t i = 0; i < nw; i++) {
		if (bm[i] != UINT64_MAX) {
			uint32_t s = (uint32_t)(i * 64) + (uint32_t)__builtin_ctzll(~bm[i]);
			return s < nsegs ? s : nsegs;
		}
	}
	return nsegs;
}

int seg_layout_check_sliced(struct seg_layout *l, uint64_t count, unsigned dtype,
			    uint32_t seg_bytes, unsigned neps, uint32_t nslices,
			    char *err, size_t errlen)
{
	if (layout_check(l, count, dtype, seg_bytes, neps, nslices, err, errlen) < 0)
		return PBOX_EPROTO;
	seg_slices(l, nslices);
	return 0;
}
