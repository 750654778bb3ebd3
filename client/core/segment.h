/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment.h - the pure layout math of libpbox: how a key's buffer is cut
 * into segments (one packet each) and chunks (one box endpoint each), the
 * checks on a layout the box sent back from key_declare, the fixed pool of
 * in-flight window slots, the retransmission back-off and the per-segment
 * "result received" bitmap. No I/O and no locks, so it is unit tested on
 * its own (tests/unit/test_client_segment.c).
 *
 * Layout rules (docs/protocol.md "Segments, chunks and sizes"):
 *   seg_elems = seg_bytes / sizeof(dtype)
 *   nsegs     = ceil(count / seg_elems); only the last segment may be short
 *   segment s covers elements [s*seg_elems, min((s+1)*seg_elems, count))
 *   chunk of segment s = s / segs_per_chunk; chunk_ep[chunk] = endpoint
 */
#ifndef PBOX_CLIENT_SEGMENT_H
#define PBOX_CLIENT_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Layout of one declared key. chunk_ep is owned by whoever filled it.
 * A collective key of several slices (docs/protocol.md "Collective
 * keys") cuts each slice on its own: slice_segs segments of slice
 * elements; slice_segs 0 means one slice, the whole key. */
struct seg_layout {
	uint64_t count;          /* elements of the key */
	uint64_t slice;          /* elements per slice (slice_segs != 0) */
	uint32_t slice_segs;     /* segments per slice, 0: one slice */
	uint32_t elem;           /* bytes per element */
	uint32_t seg_elems;      /* elements per full segment */
	uint32_t nsegs;
	uint32_t segs_per_chunk;
	uint32_t nchunks;
	uint16_t *chunk_ep;      /* nchunks endpoint indexes (box_endpoints) */
};

/* Elements per segment for seg_bytes and a dtype; 0 if either is invalid
 * (dtype unknown, seg_bytes 0 or not a multiple of the element size). */
uint32_t seg_elems_of(uint32_t seg_bytes, unsigned dtype);

/* Segments needed for count elements (0 for count 0 or seg_elems 0). */
uint64_t seg_nsegs(uint64_t count, uint32_t seg_elems);

/* Chunks needed for nsegs segments (0 if segs_per_chunk is 0). */
uint64_t seg_nchunks(uint64_t nsegs, uint32_t segs_per_chunk);

/*
 * Whether a call of count elements of dtype can be carried with seg_bytes
 * payloads: count > 0, count * element size fits in size_t, and the
 * segment index fits the 32-bit wire field. 0 or PBOX_EINVAL (reason in
 * err).
 */
int seg_count_check(size_t count, unsigned dtype, uint32_t seg_bytes,
		    char *err, size_t errlen);

/*
 * Check a layout received from the box against what was declared (count,
 * dtype) and the job's seg_bytes, and that every chunk names one of neps
 * endpoints. 0, or PBOX_EPROTO with the first inconsistency named in err.
 */
int seg_layout_check(const struct seg_layout *l, uint64_t count, unsigned dtype,
		     uint32_t seg_bytes, unsigned neps, char *err, size_t errlen);

/* seg_layout_check for a key of nslices slices (l->slice and slice_segs
 * are set from count and seg_elems when it passes). */
int seg_layout_check_sliced(struct seg_layout *l, uint64_t count, unsigned dtype,
			    uint32_t seg_bytes, unsigned neps, uint32_t nslices,
			    char *err, size_t errlen);

/* First element of segment s. */
static inline uint64_t seg_first(const struct seg_layout *l, uint32_t s)
{
	if (l->slice_segs)
		return (uint64_t)(s / l->slice_segs) * l->slice +
		       (uint64_t)(s % l->slice_segs) * l->seg_elems;
	return (uint64_t)s * l->seg_elems;
}

/* Elements in segment s (< nsegs): seg_elems except a short last one
 * (of each slice). */
static inline uint32_t seg_len(const struct seg_layout *l, uint32_t s)
{
	uint64_t left = l->slice_segs ? l->slice - (uint64_t)(s % l->slice_segs) * l->seg_elems
				      : l->count - seg_first(l, s);
	return left < l->seg_elems ? (uint32_t)left : l->seg_elems;
}

/* The slice of segment s (0 for a key of one slice). */
static inline uint32_t seg_slice(const struct seg_layout *l, uint32_t s)
{
	return l->slice_segs ? s / l->slice_segs : 0;
}

/* Cut l (count, seg_elems set) into nslices slices of count / nslices
 * elements each cut on its own; nslices 1 leaves it one slice. Returns
 * the segments needed (0: nslices does not divide count). */
uint64_t seg_slices(struct seg_layout *l, uint32_t nslices);

/* Endpoint index owning segment s (< nsegs). */
static inline unsigned seg_endpoint(const struct seg_layout *l, uint32_t s)
{
	return l->chunk_ep[s / l->segs_per_chunk];
}

/* Retransmission timeout after nretx retransmissions since the last
 * progress: base doubled nretx times, capped at max (any one unit). */
uint32_t seg_rto_backoff(uint32_t base, uint32_t nretx, uint32_t max);

/*
 * Round-trip estimator of RFC 6298, in microseconds: the first sample R
 * sets srtt = R and rttvar = R/2; each later one rttvar = 3/4 rttvar +
 * 1/4 |srtt - R| then srtt = 7/8 srtt + 1/8 R; rto = srtt + 4 rttvar but
 * at least 2 srtt, clamped to [min_us, max_us]. The 2 srtt floor is
 * pbox's: an allreduce's round trips have a long tail (the last rank of a
 * round), and Karn's rule hides it from the estimate (the slow ones were
 * retransmitted), so rttvar alone shrinks until the tail is retransmitted.
 * Before any sample rto is the initial value.
 * The caller feeds only segments sent once (Karn's rule): the round trip of
 * a retransmitted segment is ambiguous. Here a "round trip" is from a PUSH
 * to its RESULT, so it includes the wait for the other ranks of the round.
 */
struct rtt_est {
	uint32_t srtt_us;
	uint32_t rttvar_us;
	uint32_t rto_us;
	uint32_t min_us, max_us;
	uint64_t nsamples;
};

void rtt_init(struct rtt_est *e, uint32_t initial_us, uint32_t min_us, uint32_t max_us);
void rtt_sample(struct rtt_est *e, uint32_t r_us);

/*
 * Bandwidth-delay product of the path, for the window: the largest
 * delivery rate of the last BDP_RATE_SAMPLES intervals (each at least one
 * srtt and 1 ms long) times the smallest round trip of the last
 * BDP_RTT_WINDOW_US. The window is twice that in segments (room for the
 * rate to grow: the max filter then sees it), clamped to [wmin, wmax].
 * Until both are known it is wmax. A round trip here can include the wait
 * for the slowest rank; the minimum is the path's, and a rank that is
 * ahead of the others only waits longer at the box, so its smaller window
 * does not slow the job.
 */
#define BDP_RATE_SAMPLES 8
#define BDP_RTT_WINDOW_US 10000000ull

struct bdp_est {
	uint32_t min_rtt_us;          /* 0 = none yet */
	uint64_t min_rtt_at_us;
	uint64_t rate[BDP_RATE_SAMPLES]; /* bytes per second */
	unsigned nrate;
	uint64_t ival_start_us, ival_bytes;
};

void bdp_init(struct bdp_est *b);
/* A result of `bytes` came at now_us; rtt_us is its round trip (0: not
 * measured, Karn); srtt_us the smoothed one (sets the interval). */
void bdp_on_result(struct bdp_est *b, uint64_t now_us, uint32_t bytes, uint32_t rtt_us,
		   uint32_t srtt_us);
/* 2 x BDP in segments of seg_bytes, clamped to [wmin, wmax]. */
uint32_t bdp_window(const struct bdp_est *b, uint32_t seg_bytes, uint32_t wmin, uint32_t wmax);

/*
 * The window: a fixed pool of cap slot indexes [0, cap), taken when a
 * segment is sent for the first time and put back when its result comes
 * (or its call ends). Take/put are O(1); nothing is allocated after init.
 */
struct seg_window {
	uint32_t cap;
	uint32_t nfree;
	uint32_t *free;          /* stack of free slot indexes */
};

/* 0, or PBOX_ENOMEM, or PBOX_EINVAL for cap 0. */
int seg_window_init(struct seg_window *w, uint32_t cap);
void seg_window_free(struct seg_window *w);

/* Take a free slot: true and *slot, or false if all cap are in flight. */
static inline bool seg_window_take(struct seg_window *w, uint32_t *slot)
{
	if (w->nfree == 0)
		return false;
	*slot = w->free[--w->nfree];
	return true;
}

/* Give a taken slot back. */
static inline void seg_window_put(struct seg_window *w, uint32_t slot)
{
	w->free[w->nfree++] = slot;
}

static inline uint32_t seg_window_inflight(const struct seg_window *w)
{
	return w->cap - w->nfree;
}

/* Bitmap of nsegs bits, one per segment: set once its result is in. */
static inline size_t seg_bitmap_words(uint32_t nsegs)
{
	return ((size_t)nsegs + 63) / 64;
}

static inline bool seg_bit(const uint64_t *bm, uint32_t s)
{
	return (bm[s / 64] >> (s % 64)) & 1;
}

static inline void seg_bit_set(uint64_t *bm, uint32_t s)
{
	bm[s / 64] |= (uint64_t)1 << (s % 64);
}

static inline void seg_bit_clear(uint64_t *bm, uint32_t s)
{
	bm[s / 64] &= ~(1ull << (s % 64));
}

/* Index of the first clear bit below nsegs, or nsegs if all are set. */
uint32_t seg_bitmap_first_clear(const uint64_t *bm, uint32_t nsegs);

#endif
