/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recovery.h - the pure parts of libpbox's loss recovery and congestion
 * control (docs/protocol.md "Recovery" and "Congestion"): the send-order
 * list of in-flight window slots, RACK-style time-based loss detection,
 * and the AIMD window. No I/O, no clock reads, no allocation after init,
 * so it is unit tested on its own (tests/unit/test_client_recovery.c).
 *
 * RACK (after RFC 8985): a segment is lost when a segment sent after it
 * has its RESULT and it does not, one round trip of that later segment
 * plus a reordering allowance after it was sent. Results come back in
 * about the order the slowest rank sent, so a later segment completing
 * while this one has not means this one, or someone's PUSH of it, or its
 * RESULT, was lost. A segment the box said it has (WAIT) waits for other
 * ranks, not for us: it is lost, its RESULT that is, when a segment first
 * sent after it completes after the WAIT (rack_wait_due).
 *
 * AIMD: +1 segment per window of results. Marks act as in DCTCP: per round
 * trip, alpha follows the fraction of results flagged CE (gain 1/16) and a
 * round trip with marks takes the window times (1 - alpha/2), so a box
 * that marks now and then trims windows a little and one that marks
 * everything halves them. Times AIMD_BETA_LOSS when more than half a
 * window is found lost (RACK, NACKs, timeouts) within one round trip, at
 * most once per round trip. Never below floor nor above cap. A few losses
 * repaired in a round trip are taken for what random loss is, not for
 * congestion (as BBR).
 */
#ifndef PBOX_CLIENT_RECOVERY_H
#define PBOX_CLIENT_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#define SENDQ_NIL UINT32_MAX

/* Doubly linked list of slot indexes [0, cap) in order of last sending. */
struct sendq {
	uint32_t head, tail;
	uint32_t *prev, *next;   /* cap entries each */
	uint8_t *in;             /* cap flags: on the list */
};

int sendq_init(struct sendq *q, uint32_t cap);   /* 0 or PBOX_ENOMEM */
void sendq_free(struct sendq *q);
/* Put i at the tail (moving it there if it is on the list). */
void sendq_push(struct sendq *q, uint32_t i);
/* Take i off the list (nothing if it is not on it). */
void sendq_remove(struct sendq *q, uint32_t i);

static inline uint32_t sendq_first(const struct sendq *q)
{
	return q->head;
}

static inline uint32_t sendq_next(const struct sendq *q, uint32_t i)
{
	return q->next[i];
}

/* RACK's state: the latest sending time among segments delivered, and the
 * round trip of that delivery; for segments the box said it has (WAIT),
 * the latest first sending among segments delivered, when it came and its
 * place in the order of deliveries (a WAIT and a RESULT taken in one
 * receive burst share their time; their order is kept by count). */
struct rack {
	uint64_t xmit_ns;
	uint64_t rtt_ns;
	uint64_t order_ns;
	uint64_t order_at_ns;
	uint64_t delivered;     /* RESULTs counted by rack_on_order */
	uint64_t order_at_seq;  /* delivered when order_ns was set */
};

/* A RESULT came at now for a segment last sent at sent_ns. */
static inline void rack_on_delivery(struct rack *r, uint64_t sent_ns, uint64_t now)
{
	if (sent_ns >= r->xmit_ns && now >= sent_ns) {
		r->xmit_ns = sent_ns;
		r->rtt_ns = now - sent_ns;
	}
}

/* When a segment last sent at sent_ns and still without its RESULT counts
 * as lost: once a later one was delivered (UINT64_MAX while none was),
 * when it has waited longer than that one's round trip, or min_rtt_ns if
 * that is longer (a RESULT answered from the shadow copy comes back faster
 * than one that waited for the other ranks: its round trip says nothing of
 * theirs), plus the reordering allowance reo_ns. Until then a timer for
 * that time stands in for the retransmission timeout (RFC 8985's reorder
 * timer): the last segments of a call have nothing after them to
 * overtake them. */
static inline uint64_t rack_due(const struct rack *r, uint64_t sent_ns, uint64_t min_rtt_ns,
				uint64_t reo_ns)
{
	uint64_t rtt = r->rtt_ns > min_rtt_ns ? r->rtt_ns : min_rtt_ns;
	return sent_ns < r->xmit_ns ? sent_ns + rtt + reo_ns : UINT64_MAX;
}

/* A RESULT came at now for a segment first sent at first_ns (sent once or
 * not: the box completed its round either way). */
static inline void rack_on_order(struct rack *r, uint64_t first_ns, uint64_t now)
{
	r->delivered++;
	if (first_ns >= r->order_ns) {
		r->order_ns = first_ns;
		r->order_at_ns = now;
		r->order_at_seq = r->delivered;
	}
}

/* A WAIT's place in the order of deliveries: what rack_wait_due takes. */
static inline uint64_t rack_wait_seq(const struct rack *r)
{
	return r->delivered;
}

/*
 * When the RESULT of a segment the box said it has (a WAIT whose
 * rack_wait_seq was wait_seq), first sent at first_ns, counts as lost:
 * reo_ns after a segment first sent after it had its RESULT, if that came
 * after the WAIT (by order of arrival, not time); UINT64_MAX
 * while none has. The ranks the WAIT named send their segments in the
 * order every rank first sent them, so the box completes this round
 * before that later one; its RESULT not here by then means it was lost
 * (or a late rank's PUSH was: the query then gets another WAIT). Without
 * this, a lost RESULT of a waited segment costs the WAIT's pacing, which
 * grows with how long the round was open.
 */
static inline uint64_t rack_wait_due(const struct rack *r, uint64_t first_ns,
				     uint64_t wait_seq, uint64_t reo_ns)
{
	return first_ns < r->order_ns && r->order_at_seq > wait_seq ? r->order_at_ns + reo_ns
								    : UINT64_MAX;
}

struct aimd {
	uint64_t cwnd_fp;      /* segments x 65536 */
	uint32_t floor, cap;
	uint64_t hold_until_ns;  /* no decrease before (one round trip) */
	uint64_t epoch_ns;       /* start of the loss-counting round trip */
	uint32_t epoch_lost;     /* losses found in it */
	uint64_t mark_epoch_ns;  /* start of the mark-counting round trip */
	uint32_t acked, marked;  /* results and CE marks in it */
	uint32_t alpha;          /* smoothed marked fraction x AIMD_ALPHA_ONE */
};

#define AIMD_BETA_LOSS 70        /* percent kept on heavy loss or a timeout */
#define AIMD_ALPHA_ONE (1u << 20)

void aimd_init(struct aimd *a, uint32_t floor, uint32_t cap);
/* A RESULT at now, marked CE or not; rtt_ns the smoothed round trip. */
void aimd_on_result(struct aimd *a, uint64_t now, uint64_t rtt_ns, bool ce);
/* A congestion signal (timeout, heavy loss): times beta_pct/100 unless one came
 * within the last round trip (rtt_ns). True if the window went down. */
bool aimd_decrease(struct aimd *a, uint64_t now, uint64_t rtt_ns, unsigned beta_pct);
/* n segments found lost by RACK or a NACK: a decrease if more than half a
 * window is lost within one round trip. */
bool aimd_on_loss(struct aimd *a, uint64_t now, uint64_t rtt_ns, uint32_t n);

static inline uint32_t aimd_window(const struct aimd *a)
{
	return (uint32_t)(a->cwnd_fp >> 16);
}

#endif
