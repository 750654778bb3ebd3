/* SPDX-License-Identifier: BSD-3-Clause */
/* logline.c - pboxd's log line format and journal prefixes. See logline.h. */
#include "common/logline.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const level_names[] = {
	"crit", "crit", "crit", "error", "warn", "notice", "info", "debug",
};

const char *logline_level_name(int prio)
{
	if (prio < 0)
		prio = 0;
	if (prio > LOG_PRIO_DEBUG)
		prio = LOG_PRIO_DEBUG;
	return level_names[prio];
}

int logline_format(char *buf, size_t len, const char *prog, int prio, const char *msg)
{
	if (prio == LOG_PRIO_NOTICE)
		return snprintf(buf, len, "%s: %s", prog, msg);
	return snprintf(buf, len, "%s: %s: %s", prog, logline_level_name(prio), msg);
}

size_t logline_prefix(char *out, size_t cap, size_t *outlen, int prio,
		      const char *in, size_t n, bool *at_start)
{
	size_t i = 0, o = 0;

	if (prio < 0 || prio > LOG_PRIO_DEBUG)
		prio = LOG_PRIO_INFO;
	while (i < n) {
		if (*at_start) {
			if (cap - o < 4)        /* "<N>" and at least one byte */
				break;
			out[o++] = '<';
			out[o++] = (char)('0' + prio);
			out[o++] = '>';
			*at_start = false;
		}
		if (o == cap)
			break;
		out[o++] = in[i];
		*at_start = in[i++] == '\n';
	}
	*outlen = o;
	return i;
}

bool logline_is_journal(const char *journal_stream, int fd)
{
	uintmax_t dev, ino;
	struct stat st;
	int used = 0;

	if (!journal_stream || sscanf(journal_stream, "%ju:%ju%n", &dev, &ino, &used) != 2 ||
	    journal_stream[used] != '\0')
		return false;
	if (fstat(fd, &st) != 0)
		return false;
	return (uintmax_t)st.st_dev == dev && (uintmax_t)st.st_ino == ino;
}
