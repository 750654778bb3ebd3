/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * note.h - where PBOX_DEBUG's lines go (note.c): its level, the sink
 * (stderr, or the file PBOX_DEBUG_FILE names, appended) and one-line
 * notes any room may write. Lines start with "pbox: ". Part of core; the
 * summaries at join and close are ops/debug.c's.
 */
#ifndef PBOX_CLIENT_NOTE_H
#define PBOX_CLIENT_NOTE_H

#include <stdio.h>

#include "client/core/knobs.h"

/* PBOX_DEBUG's level now: KNOB_DEBUG_OFF, _WARN or _INFO. */
int note_level(void);
/* The sink to write a block of lines to; give it back with note_done. */
FILE *note_sink(void);
void note_done(FILE *f);
/* One line "pbox: ..." when PBOX_DEBUG is at least level. */
void note(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
