/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_watch.h - what jobs_watch.c offers the rest of the registry beyond
 * jobs.h (whose jobs_traffic it implements). For jobs.c only.
 */
#ifndef PBOX_JOBS_WATCH_H
#define PBOX_JOBS_WATCH_H

#include "control/jobs.h"

/* Stall watch, run by jobs_tick: abort jobs whose open rounds have made no
 * progress for their timeout (job.timeout_ms), or that a rank left with rounds open,
 * naming the ranks; and those whose ranks did not all join within
 * cfg.join_wait_ms. */
void jobs_watch(struct jobs *js);

#endif
