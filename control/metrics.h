/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics.h - pboxd's counters for Prometheus (docs/operations.md
 * "Metrics"): `pboxd --metrics ADDR:PORT` serves GET /metrics in the text
 * exposition format 0.0.4: per port (packets, bytes, misses, errors), per
 * lcore (packets, polls, rounds, PS updates, notices), per job (rounds,
 * bytes reduced, NACKs, ranks), drops by reason; names and units by
 * Prometheus conventions (`pbox_..._total` counters, base units).
 *
 * The server runs on the control thread beside the JSON-RPC server and
 * never blocks it: non-blocking sockets, at most METRICS_MAX_CONNS
 * connections, each given METRICS_DEADLINE_MS to send its request and take
 * the answer, then closed. It reads the same live counters as box_stats.
 *
 * Per peer address (control/peers.h), as the control port: new
 * connections beyond --metrics-rate-per-peer a second are closed
 * unanswered, and a peer holding --metrics-conns-per-peer replaces its own
 * oldest; with every slot taken a new connection replaces the oldest of
 * the peer holding the most. A flood from one address leaves other
 * addresses' scrapes their answers.
 */
#ifndef PBOX_METRICS_H
#define PBOX_METRICS_H

#include <stddef.h>

#include "control/box.h"

#define METRICS_MAX_CONNS   16
#define METRICS_PEERS       256   /* peer addresses tracked at once */
#define METRICS_ACCEPTS_PER_POLL 64
#define METRICS_DEADLINE_MS 2000
#define METRICS_REQ_MAX     2048  /* bytes of a request's head we read */

struct metrics_server;

/* The exposition text of b's counters now, malloc'ed into *text (*len
 * bytes, NUL-terminated). 0 or -ENOMEM. */
int metrics_render(const struct box *b, char **text, size_t *len);

/* Listen on addr ("ADDR:PORT"; port 0 = any, *port gets it). 0 and *out,
 * or -errno with the message in err. */
int metrics_open(struct metrics_server **out, const struct box *b, const char *addr,
		 unsigned *port, char *err, size_t errlen);

/* Accept, read, answer and close what is ready, without blocking. */
void metrics_poll(struct metrics_server *m);

void metrics_close(struct metrics_server *m);

#endif
