/* log.c - level-filtered control-plane log lines on stderr. See log.h. */
#include "control/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const level_names[] = { "error", "warn", "info", "debug" };

enum ctl_log_level ctl_log_level(const struct box_config *cfg)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcmp(cfg->log_level, level_names[i]) == 0)
			return (enum ctl_log_level)i;
	return CTL_LOG_INFO;
}

void ctl_log(const struct box *box, enum ctl_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (box && level > ctl_log_level(&box->cfg))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "pboxd: %s: %s\n", level_names[level], line);
}
