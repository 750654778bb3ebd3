/*
 * log.h - the control plane's log lines (stderr, which systemd's journal
 * keeps), filtered by --log-level. One line per event, naming job, rank and
 * key, so an operator can follow a job's life without a debugger.
 */
#ifndef PBOX_CTL_LOG_H
#define PBOX_CTL_LOG_H

#include "control/box.h"

enum ctl_log_level {
	CTL_LOG_ERROR = 0,
	CTL_LOG_WARN,
	CTL_LOG_INFO,
	CTL_LOG_DEBUG,
};

/* Level named by cfg->log_level ("error", "warn", "info", "debug"). */
enum ctl_log_level ctl_log_level(const struct box_config *cfg);

/* Print "pboxd: LEVEL: message\n" to stderr if level is enabled. */
void ctl_log(const struct box *box, enum ctl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
