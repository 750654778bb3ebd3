/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rx_fill.h - whether a data lcore's receive queues stand (docs/protocol.md
 * "Congestion"): a queue's run is its full bursts in a row, ended by a
 * burst under half full; the lcore's queues stand while their runs add up
 * to RX_FILL_RUN (about RX_FILL_RUN bursts waiting for the lcore, however
 * they spread over its queues). Pure: the lcore feeds it every burst's
 * count (lcore.c) and reads rx_fill_standing; unit tested on its own
 * (tests/unit/test_rx_fill.c).
 *
 * Each queue keeps its own run: an idle queue polled between busy ones
 * (an lcore owning the queues of several ports) does not end theirs.
 */
#ifndef PBOX_DATAPLANE_RX_FILL_H
#define PBOX_DATAPLANE_RX_FILL_H

#include <stdbool.h>
#include <stdint.h>

#define RX_FILL_MAX_QUEUES 32
#define RX_FILL_RUN 16          /* full bursts: burst x 16 waiting */

struct rx_fill {
	uint32_t total;                       /* the runs added up */
	uint16_t run[RX_FILL_MAX_QUEUES];     /* full bursts in a row, at most RX_FILL_RUN */
};

/* Queue q (< RX_FILL_MAX_QUEUES) gave n of at most burst packets. */
static inline void rx_fill_note(struct rx_fill *f, unsigned q, unsigned n, unsigned burst)
{
	if (n >= burst) {
		if (f->run[q] < RX_FILL_RUN) {
			f->run[q]++;
			f->total++;
		}
	} else if (n < burst / 2) {
		f->total -= f->run[q];
		f->run[q] = 0;
	}
}

/* Whether the lcore's queues stand. */
static inline bool rx_fill_standing(const struct rx_fill *f)
{
	return f->total >= RX_FILL_RUN;
}

#endif
