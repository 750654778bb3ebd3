/*
 * dp_log.h - pboxd's log type for DPDK code: one registered type, `pbox`,
 * so the EAL's --log-level=pbox:debug governs the daemon, lcores included.
 */
#ifndef PBOX_DP_LOG_H
#define PBOX_DP_LOG_H

#include <rte_log.h>

extern int dp_logtype;

/* DP_LOG(WARNING, "port %u: ...", id): one line, "pboxd: " in front. */
#define DP_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, dp_logtype, "pboxd: " fmt "\n", ##__VA_ARGS__)

#endif
