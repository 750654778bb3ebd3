/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl_top.h - what pboxctl_top.c offers pboxctl.c: `pboxctl top`.
 */
#ifndef PBOX_PBOXCTL_TOP_H
#define PBOX_PBOXCTL_TOP_H

#include "tools/pboxctl_common.h"

/* pboxctl top: rates per port, lcore and job every interval_ms, count
 * frames (0 = until interrupted); the screen is redrawn on a terminal.
 * EXIT_OK, or the exit code of a call that failed. */
int cmd_top(struct ctl *c, unsigned interval_ms, unsigned count);

#endif
