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
 * connections (the oldest is dropped for a new one), each given
 * METRICS_DEADLINE_MS to send its request and take the answer, then
 * closed. It reads the same live counters as box_stats.
 */
#ifndef PBOX_METRICS_H
#define PBOX_METRICS_H

#include <stddef.h>

#include "control/box.h"

#define METRICS_MAX_CONNS   8
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
