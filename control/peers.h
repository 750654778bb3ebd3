/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peers.h - what the control plane keeps per peer address of a TCP client:
 * its open connections, against --max-conns-per-peer, the rate at which it
 * opens them, against --conn-rate-per-peer, and its log lines, against
 * --log-peer-burst per PEERS_LOG_WINDOW_S, with a count of the lines
 * suppressed beyond it. A small table, linearly searched: it holds at most
 * one entry per connected address plus those with a suppressed count still
 * to report.
 *
 * A peer address is an IPv4 address, or an IPv6 client's /64 (one host
 * holds a whole /64, so its other addresses are the same peer). An IPv4
 * client reaching a dual-stack listener (as ::ffff:a.b.c.d) is its IPv4
 * address.
 */
#ifndef PBOX_PEERS_H
#define PBOX_PEERS_H

#include <stddef.h>
#include <stdint.h>

struct sockaddr;

#define PEERS_LOG_WINDOW_S 10.0

/* The key: 16 bytes, IPv4 as ::ffff:a.b.c.d, IPv6 with its low 64 bits 0;
 * all zero (::, never a client's) = no peer (the Unix socket). */
struct peer_addr {
	uint8_t b[16];
};

/* The peer address of a connected socket's sockaddr (AF_INET or AF_INET6),
 * else no peer. */
struct peer_addr peer_addr_of(const struct sockaddr *sa);
static inline int peer_addr_is_none(const struct peer_addr *a)
{
	for (int i = 0; i < 16; i++)
		if (a->b[i])
			return 0;
	return 1;
}
/* "a.b.c.d" or "2001:db8:1:2::/64" into buf (48 bytes are enough). */
const char *peer_addr_str(const struct peer_addr *a, char *buf, size_t len);

struct peer {
	struct peer_addr addr;
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

/* The entry of addr, created if missing; NULL if the table is full. */
struct peer *peers_get(struct peers *p, const struct peer_addr *addr);

/* May the peer open one more connection now? Tokens refill at rate per
 * second up to burst; 1 (and one is taken) or 0. rate 0 = no limit. */
int peers_conn_allow(struct peer *e, double now, double rate, double burst);

/* May the peer log one more line now (burst lines per window)? 1, or 0
 * and the line is counted as suppressed. */
int peers_log_allow(struct peer *e, double now, unsigned burst);

/*
 * Close windows that ended before now: for each entry that suppressed
 * lines, call report(ctx, addr, count); drop entries with no connection
 * and nothing to report.
 */
void peers_sweep(struct peers *p, double now,
		 void (*report)(void *ctx, const struct peer_addr *addr, uint32_t suppressed),
		 void *ctx);

#endif
