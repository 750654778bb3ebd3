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

/* The length of the valid UTF-8 sequence at s (a lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;   /* the second byte's range */

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

size_t logline_escape(char *out, size_t cap, const char *in)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;

	if (cap == 0)
		return 0;
	while (*s) {
		size_t n = *s >= 0x80 ? utf8_len(s) : 1;
		if (n == 1 && *s >= 0x20 && *s != 0x7f) {
			if (cap - o < 2)
				break;
			out[o++] = (char)*s++;
		} else if (n > 1) {
			if (cap - o < n + 1)
				break;
			memcpy(out + o, s, n);
			o += n;
			s += n;
		} else {
			if (cap - o < 5)
				break;
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*s >> 4];
			out[o++] = hex[*s & 15];
			s++;
		}
	}
	out[o] = '\0';
	return o;
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
