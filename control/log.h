/*
 * log.h - the control plane's log lines (stderr, which systemd's journal
 * keeps), filtered by --log-level. One line per event, naming job, rank and
 * key, so an operator can follow a job's life without a debugger.
 */
#ifndef PBOX_CTL_LOG_H
#define PBOX_CTL_LOG_H

#include "common/logline.h"
#include "control/box.h"

/* Syslog priorities (common/logline.h); smaller is more severe. */
enum ctl_log_level {
	CTL_LOG_ERROR = LOG_PRIO_ERR,
	CTL_LOG_WARN = LOG_PRIO_WARNING,
	CTL_LOG_NOTICE = LOG_PRIO_NOTICE,
	CTL_LOG_INFO = LOG_PRIO_INFO,
	CTL_LOG_DEBUG = LOG_PRIO_DEBUG,
};

/* Whether a line of this level is written: level <= box->cfg.log_level;
 * always with no box. */
bool ctl_log_enabled(const struct box *box, enum ctl_log_level level);

/* Print "pboxd: LEVEL: message\n" to stderr if level is enabled. */
void ctl_log(const struct box *box, enum ctl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
