/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * telemetry.h - pboxd's counters as DPDK telemetry commands
 * (docs/operations.md "Telemetry"): /pbox/stats (ports, lcores, drops by
 * reason), /pbox/jobs (per job: state, ranks, rounds, bytes reduced,
 * NACKs) and /pbox/info (version, ports, lcores). The same counters as
 * box_stats, job_list and --metrics, under box_stats' and job_list's names.
 *
 * DPDK's telemetry thread cannot reach the control thread's job registry
 * (its callbacks take no context, and the registry is single-threaded),
 * so the control thread builds a snapshot every TELEMETRY_MS and
 * publishes it through box->dp.tel_publish (dataplane/dp.h), from
 * rpc_server_poll: a query sees counters up to TELEMETRY_MS plus one turn
 * of that loop old.
 */
#ifndef PBOX_TELEMETRY_H
#define PBOX_TELEMETRY_H

#include "control/box.h"
#include "dataplane/dp.h"

#define TELEMETRY_MS 200

/* The three answers of b's counters now, into *out (malloc'ed; the
 * caller's, or tel_publish's). 0, or -ENOMEM, or -EINVAL (a name DPDK
 * would refuse). */
int box_telemetry_build(const struct box *b, struct dp_tel_snapshot **out);

/* Free a snapshot that was not published. NULL is ignored. */
void box_telemetry_free(struct dp_tel_snapshot *s);

/* Every TELEMETRY_MS, build and publish a snapshot (nothing if telemetry
 * is off); a failure is logged once. Called from the control thread's
 * loop (rpc_server_poll). */
void box_telemetry_tick(struct box *b);

#endif
