/* SPDX-License-Identifier: BSD-3-Clause */
/* log.c - level-filtered control-plane log lines through the box's sink,
 * or stderr without one, control characters and invalid UTF-8 escaped.
 * See log.h. */
#include "control/log.h"

#include <stdarg.h>
#include <stdio.h>

bool ctl_log_enabled(const struct box *box, enum ctl_log_level level)
{
	return !box || (int)level <= box->cfg.log_level;
}

static void vlog(const struct box *box, const struct peer_addr *peer, enum ctl_log_level level,
		 const char *fmt, va_list ap)
{
	char raw[1024], msg[1024], line[1100];

	if (!ctl_log_enabled(box, level))
		return;
	if (box && peer && !peer_addr_is_none(peer) && box->log_gate.allow &&
	    !box->log_gate.allow(box->log_gate.ctx, peer))
		return;   /* over this peer's budget: counted, reported later */
	vsnprintf(raw, sizeof(raw), fmt, ap);
	/* every line is escaped here, so no caller can let outside text (a
	 * job name, an abort reason, a method name) forge a line */
	logline_escape(msg, sizeof(msg), raw);
	if (box && box->log.write) {
		box->log.write(box->log.ctx, (int)level, msg);
		return;
	}
	logline_format(line, sizeof(line), "pboxd", (int)level, msg);
	fprintf(stderr, "%s\n", line);
}

void ctl_log(const struct box *box, enum ctl_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(box, box ? &box->log_peer : NULL, level, fmt, ap);
	va_end(ap);
}

void ctl_log_peer(const struct box *box, const struct peer_addr *peer,
		  enum ctl_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(box, box && !peer_addr_is_none(&box->log_peer) ? &box->log_peer : peer, level, fmt,
	     ap);
	va_end(ap);
}
