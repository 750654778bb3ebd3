/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.h - the control plane's log lines, filtered by --log-level. One line
 * per event, naming job, rank and key, so an operator can follow a job's
 * life without a debugger.
 *
 * Lines go to the box's sink (struct box_log_sink in control/box.h): in
 * pboxd that is the DPDK log type `pbox` (dataplane/dp.h, dp_log_write),
 * which writes them to stderr with journald priorities; without a sink
 * (unit tests) they go to stderr as "pboxd: LEVEL: message".
 *
 * Every message is passed through logline_escape after formatting: a
 * control character or a byte of invalid UTF-8 in it, wherever it came
 * from, is written as "\xNN". A line is always one line.
 */
#ifndef PBOX_CTL_LOG_H
#define PBOX_CTL_LOG_H

#include "common/logline.h"
#include "control/box.h"

/* Syslog priorities (common/logline.h); smaller is more severe. */
enum ctl_log_level {
	CTL_LOG_ERROR = LOG_PRIO_ERR,
	CTL_LOG_WARN = LOG_PRIO_WARNING,
	CTL_LOG_NOTICE = LOG_PRIO_NOTICE,   /* life cycle: banner, ready, stopping */
	CTL_LOG_INFO = LOG_PRIO_INFO,
	CTL_LOG_DEBUG = LOG_PRIO_DEBUG,
};

/* Whether a line of this level is written: level <= box->cfg.log_level;
 * always with no box. */
bool ctl_log_enabled(const struct box *box, enum ctl_log_level level);

/* Write one line if its level is enabled, through box->log or to stderr. */
void ctl_log(const struct box *box, enum ctl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The same, counted against TCP peer `peer` (NULL or all zero = none)
 * when no request is being served: a job's lines against the peer that
 * made it (--log-peer-burst). */
void ctl_log_peer(const struct box *box, const struct peer_addr *peer,
		  enum ctl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
