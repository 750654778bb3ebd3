/* SPDX-License-Identifier: BSD-3-Clause */
/* tp_verbs.c - placeholder while the verbs transport is written. */
#include <stdio.h>
#include "client/transport.h"

int tp_verbs_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen)
{
	(void)t; (void)cfg;
	snprintf(err, errlen, "not built yet");
	return PBOX_ENOTSUP;
}
