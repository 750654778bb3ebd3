/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peers.h - what the control plane keeps per peer address (IPv4 of a TCP
 * client): its open connections, against --max-conns-per-peer, the rate
 * at which it opens them, against --conn-rate-per-peer, and its log lines, against --log-peer-burst per PEERS_LOG_WINDOW_S, with a count
 * of the lines suppressed beyond it. A small table, linearly searched:
 * it holds at most one entry per connected address plus those with a
 * suppressed count still to report.
 */
#ifndef PBOX_PEERS_H
#define PBOX_PEERS_H

#include <stdint.h>

#define PEERS_LOG_WINDOW_S 10.0

struct peer {
	uint32_t ip;           /* host order */
	uint32_t conns;        /* open connections from it */
	uint32_t lines;        /* log lines in the current window */
	uint32_t suppressed;   /* beyond the burst, in the current window */
	double window;         /* start of the current window (CLOCK_MONOTONIC s) */
	double tokens;         /* connections it may open now (token bucket) */
	double refilled;       /* when tokens was last brought up to date */
};

struct peers {
	struct peer *v;
	unsigned n, cap;
};

/* 0 or -ENOMEM; cap entries at most. */
int peers_init(struct peers *p, unsigned cap);
void peers_free(struct peers *p);

/* The entry of ip, created if missing; NULL if the table is full. */
struct peer *peers_get(struct peers *p, uint32_t ip);

/* May the peer open one more connection now? Tokens refill at rate per
 * second up to burst; 1 (and one is taken) or 0. rate 0 = no limit. */
int peers_conn_allow(struct peer *e, double now, double rate, double burst);

/* May the peer log one more line now (burst lines per window)? 1, or 0
 * and the line is counted as suppressed. */
int peers_log_allow(struct peer *e, double now, unsigned burst);

/*
 * Close windows that ended before now: for each entry that suppressed
 * lines, call report(ctx, ip, count); drop entries with no connection and
 * nothing to report.
 */
void peers_sweep(struct peers *p, double now,
		 void (*report)(void *ctx, uint32_t ip, uint32_t suppressed), void *ctx);

#endif
