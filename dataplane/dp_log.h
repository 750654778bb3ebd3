/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_log.h - pboxd's log type for DPDK code: one registered type, `pbox`,
 * so the EAL's --log-level=pbox:debug governs the daemon, lcores included.
 * Lines look like the control plane's ("pboxd: warn: ..."; common/logline.h)
 * and go to the stream dp_log_open installs (dataplane/dp.h).
 */
#ifndef PBOX_DP_LOG_H
#define PBOX_DP_LOG_H

#include <rte_log.h>

extern int dp_logtype;

/* Write one line at DPDK level `level` (RTE_LOG_WARNING, ...) if the
 * `pbox` type is at that level; the newline is added. Any lcore may call
 * it; it formats on the stack and writes to stderr (a system call). */
void dp_log(uint32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* DP_LOG(WARNING, "port %u: ...", id) */
#define DP_LOG(level, fmt, ...) dp_log(RTE_LOG_##level, fmt, ##__VA_ARGS__)

#endif
