/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * logline.h - pboxd's log lines, the part without DPDK: level names, the
 * line "pboxd: LEVEL: message", and the "<N>" prefix by which the journal
 * reads a line's syslog priority from a service's stderr (sd-daemon(3)).
 * The daemon's log stream (dataplane/dp_log.c) and the control plane's
 * stderr fallback (control/log.c) both format through it, so a line looks
 * the same whichever way it goes; unit tests check it without DPDK.
 */
#ifndef PBOX_LOGLINE_H
#define PBOX_LOGLINE_H

#include <stdbool.h>
#include <stddef.h>

/* Levels are syslog priorities (sd-daemon.h SD_ERR .. SD_DEBUG); a DPDK
 * log level is the priority + 1 (RTE_LOG_ERR = 4). Smaller is more severe. */
enum log_prio {
	LOG_PRIO_ERR = 3,
	LOG_PRIO_WARNING = 4,
	LOG_PRIO_NOTICE = 5,     /* the daemon's life: banner, ready, stopping */
	LOG_PRIO_INFO = 6,
	LOG_PRIO_DEBUG = 7,
};

/* "error", "warn", "notice", "info", "debug" (0..2: "crit"; beyond 7: "debug"). */
const char *logline_level_name(int prio);

/*
 * "PROG: LEVEL: MSG" into buf, without a newline; a notice is "PROG: MSG"
 * (the life-cycle lines scripts wait for, like "pboxd: ready"). Truncated
 * to fit; returns what snprintf returns.
 */
int logline_format(char *buf, size_t len, const char *prog, int prio, const char *msg);

/*
 * in into out (cap >= 1 bytes, always terminated), every byte a terminal
 * or a log reader could take for structure written as "\xNN": control
 * characters (below 0x20, 0x7f) and bytes that are not part of valid
 * UTF-8 (overlong forms, surrogates, beyond U+10FFFF, truncated sequences).
 * Valid UTF-8 and printable ASCII pass as they are. A log line holds text
 * from outside (job names, abort reasons, method names): escaped, it is
 * always one line that cannot forge another or move the cursor. Truncated
 * to fit at a character boundary; returns the bytes written.
 */
size_t logline_escape(char *out, size_t cap, const char *in);

/*
 * Copy in[0..n) to out (cap >= 8 bytes) with "<prio>" in front of every
 * line, as the journal wants it. *at_start says whether in starts a line,
 * and is updated for the next call, so a line split over calls gets one
 * prefix. Copies as much as fits: returns the input bytes consumed (at
 * least one when n > 0) and sets *outlen to the bytes written.
 */
size_t logline_prefix(char *out, size_t cap, size_t *outlen, int prio,
		      const char *in, size_t n, bool *at_start);

/*
 * Whether fd is the journal's stream: journal_stream is the value of
 * $JOURNAL_STREAM ("DEVICE:INODE", set by systemd for a service whose
 * stderr or stdout is the journal) and names fd's file. NULL or a
 * malformed value is false.
 */
bool logline_is_journal(const char *journal_stream, int fd);

#endif
