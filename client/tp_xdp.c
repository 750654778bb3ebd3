/* SPDX-License-Identifier: BSD-3-Clause */
/* tp_xdp.c - placeholder while the xdp transport is written. */
#include <stdio.h>
#include "client/transport.h"

int tp_xdp_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen)
{
	(void)t; (void)cfg;
	snprintf(err, errlen, "not built yet");
	return PBOX_ENOTSUP;
}
