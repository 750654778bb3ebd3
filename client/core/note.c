/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * note.c - PBOX_DEBUG's level and sink, and one-line notes (note.h).
 * Nothing here is per packet: callers note a state once (a call that
 * starts waiting for a late rank), not each time it holds.
 */
#include "client/core/note.h"

#include <stdarg.h>

int note_level(void)
{
	uint64_t v;

	knob_value(NULL, KNOB_DEBUG, &v);   /* (never fails: off) */
	return (int)v;
}

FILE *note_sink(void)
{
	const char *path = knob_text(KNOB_DEBUG_FILE);
	FILE *f = path && *path ? fopen(path, "a") : NULL;

	return f ? f : stderr;
}

void note_done(FILE *f)
{
	if (f != stderr)
		fclose(f);
	else
		fflush(f);
}

void note(int level, const char *fmt, ...)
{
	va_list ap;

	if (note_level() < level)
		return;
	FILE *f = note_sink();
	fputs("pbox: ", f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	note_done(f);
}
