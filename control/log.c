/* log.c - level-filtered control-plane log lines through the box's sink,
 * or stderr without one. See log.h. */
#include "control/log.h"

#include <stdarg.h>
#include <stdio.h>

bool ctl_log_enabled(const struct box *box, enum ctl_log_level level)
{
	return !box || (int)level <= box->cfg.log_level;
}

void ctl_log(const struct box *box, enum ctl_log_level level, const char *fmt, ...)
{
	char msg[1024], line[1100];
	va_list ap;

	if (!ctl_log_enabled(box, level))
		return;
	if (box && box->log_peer && box->log_gate.allow &&
	    !box->log_gate.allow(box->log_gate.ctx, box->log_peer))
		return;   /* over this peer's budget: counted, reported later */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (box && box->log.write) {
		box->log.write(box->log.ctx, (int)level, msg);
		return;
	}
	logline_format(line, sizeof(line), "pboxd", (int)level, msg);
	fprintf(stderr, "%s\n", line);
}
