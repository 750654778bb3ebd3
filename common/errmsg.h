/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * errmsg.h - the one error convention's helper: write a formatted message
 * for the caller into err and return the (negative) code, so a failure is
 * reported in one statement: return errmsg(err, errlen, -EINVAL, "...").
 */
#ifndef PBOX_ERRMSG_H
#define PBOX_ERRMSG_H

#include <stddef.h>

/* Format into err (errlen bytes; err may be NULL when errlen is 0) and
 * return rc. */
int errmsg(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
