/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl_fleet.h - what pboxctl_fleet.c offers pboxctl.c: `jobs` and
 * `job show NAME` over a fleet of boxes (--box a,b,...).
 */
#ifndef PBOX_PBOXCTL_FLEET_H
#define PBOX_PBOXCTL_FLEET_H

#include "tools/pboxctl_common.h"

/* Split c->boxes into targets as --control/--socket take them: 0, or
 * EXIT_USAGE with the reason printed (an empty, malformed or repeated
 * box). */
int fleet_check(const struct ctl *c);

/* The jobs on every box of c->boxes (name NULL), or the one job name:
 * per box its state, keys, bytes and rates over interval_ms, and a
 * totals line per job. A box that cannot be reached or answers an error
 * is named, the others still shown. EXIT_OK, EXIT_UNREACHABLE if a box
 * could not be reached, else EXIT_FAILED if one answered an error (or,
 * for one job, none has it). */
int cmd_fleet_jobs(struct ctl *c, const char *name, unsigned interval_ms);

#endif
