/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_telemetry.h - pboxd's DPDK telemetry commands (/pbox/stats,
 * /pbox/jobs, /pbox/info), answered from the snapshot the control plane
 * publishes (dataplane/dp.h, "DPDK telemetry"). Used by dp.c.
 */
#ifndef PBOX_DP_TELEMETRY_H
#define PBOX_DP_TELEMETRY_H

#include <stddef.h>

#include "dataplane/dp.h"

/*
 * Register the commands, after the EAL is up. Returns 0 with the
 * telemetry socket's path in path, -ENOTSUP if the EAL runs without
 * telemetry (--no-telemetry: no socket), or the negative errno of
 * rte_telemetry_register_cmd; the message is in err.
 */
int dp_telemetry_open(char *path, size_t pathlen, char *err, size_t errlen);

/* Replace the published snapshot with s (taken over; NULL allowed). The
 * box_dp.tel_publish operation. ctx unused. */
void dp_telemetry_publish(void *ctx, struct dp_tel_snapshot *s);

/* Drop the snapshot: from now on the commands answer that pboxd stops. */
void dp_telemetry_close(void);

#endif
