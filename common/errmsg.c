/* SPDX-License-Identifier: BSD-3-Clause */
/* errmsg.c - a message into the caller's buffer, and its code. See errmsg.h. */
#include "common/errmsg.h"

#include <stdarg.h>
#include <stdio.h>

int errmsg(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return rc;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}
