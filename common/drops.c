/* SPDX-License-Identifier: BSD-3-Clause */
/* drops.c - names of the drop reasons in drops.h. */
#include "common/drops.h"

static const char *const names[DROP_COUNT] = {
	[DROP_NONE] = "none",
#define X(e, name, text) [DROP_##e] = name,
	DROP_REASONS(X)
#undef X
};

const char *drop_name(int reason)
{
	return reason >= 0 && reason < DROP_COUNT ? names[reason] : "?";
}
