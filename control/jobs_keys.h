/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_keys.h - what jobs_keys.c offers the rest of the registry beyond
 * jobs.h (whose key functions it implements: jobs_declare, jobs_release,
 * jobs_ps_stage, job_key_find, ...). For jobs.c only.
 */
#ifndef PBOX_JOBS_KEYS_H
#define PBOX_JOBS_KEYS_H

#include "control/jobs.h"

/* Finish the removals of j's released keys whose lcores applied their
 * KEY_REMOVE (memory back to the job), retry posts that found a full ring. */
void jobs_keys_tick(struct jobs *js, struct job *j);

/* Release every key of j for every rank (its last rank left an
 * operator's job): the lcores drop them as jobs_release does. */
void jobs_keys_release_all(struct jobs *js, struct job *j);

#endif
