/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_watch.c - nothing hangs silently: the box notices a worker that
 * stops contributing while keeping its control connection open (a stuck
 * process, a dead data path). A job whose open rounds make no progress for
 * --stall-timeout-ms is aborted with a reason naming the missing ranks and
 * one open round; the workers get it as job_aborted (and ERROR packets).
 * A rank that left the job (job_leave or its control connection closed)
 * while a round it has not contributed to is open can never complete that
 * round: the job is aborted at once, naming it. Ranks that have not joined
 * yet are waited for --join-wait-ms from the job's creation (ranks start
 * seconds apart), not by the stall watch; a job no rank joined within it
 * (job_create) is removed. Runs on the control thread from jobs_tick,
 * reading each lcore's engine_job_progress snapshot. Time the control
 * thread itself was held up (a long job_save) does not count against a
 * rank: its calls may have waited on that thread. Builds on jobs_core.c
 * only; jobs.c calls jobs_watch.
 */
#include "control/jobs_watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "control/jobs_core.h"
#include "control/log.h"

#define WATCH_HELD_S 0.5   /* a gap between runs this long: the thread was held */

/* Sum of a job's progress over every lcore. */
static void job_progress(const struct jobs *js, const struct job *j,
			 struct engine_progress *sum)
{
	const struct box_dp *dp = &js->box->dp;

	memset(sum, 0, sizeof(*sum));
	for (unsigned l = 0; l < js->box->layout.nlcores; l++) {
		struct engine_progress p;
		if (dp->job_progress(dp->ctx, l, j->id, &p) != 0)
			continue;
		sum->completes += p.completes;
		sum->rx_bytes += p.rx_bytes;
		rankset_or(&sum->missing, &sum->missing, &p.missing, j->world);
		if (p.open && !sum->open) {
			sum->key = p.key;
			sum->seg = p.seg;
			sum->round = p.round;
			sum->missing_all = p.missing_all;
		} else if (p.open) {
			rankset_and(&sum->missing_all, &sum->missing_all, &p.missing_all, j->world);
		}
		sum->open += p.open;
	}
}

void jobs_traffic(const struct jobs *js, const struct job *j, struct job_traffic *t)
{
	const struct box_dp *dp = &js->box->dp;
	struct engine_progress sum = { 0 };

	memset(t, 0, sizeof(*t));
	if (dp->job_progress)
		job_progress(js, j, &sum);
	t->rounds = sum.completes;
	t->bytes = sum.rx_bytes;
	for (unsigned l = 0; dp->rank_lateness && l < js->box->layout.nlcores; l++)
		for (uint16_t r = 0; r < j->world; r++) {
			struct engine_lateness late;
			if (dp->rank_lateness(dp->ctx, l, j->id, r, &late) == 0)
				t->nacks += late.nacks;
		}
}

/* "rank 2 stalled" / "ranks 1, 3 stalled" / "rank 3 never joined", or
 * "rank 2 " followed by what when what is given. The ranks that do not fit
 * in len are counted ("ranks 1, 2, ..., 20 and 43 more stalled"): the
 * cause always ends the text. */
static void describe(const struct job *j, const struct rankset *missing, const char *what,
		     char *buf, size_t len)
{
	unsigned count = 0, unjoined = 0, listed = 0;
	char tail[64], more[32];

	for (unsigned r = 0; r < j->world; r++)
		if (rankset_has(missing, r)) {
			count++;
			unjoined += !j->ranks[r].joined && !j->ranks[r].ip;
		}
	snprintf(tail, sizeof(tail), " %s", what ? what :
		 unjoined == count ? "never joined" : "stalled");
	/* room kept for the longest " and N more" and the cause */
	size_t keep = strlen(" and 1024 more") + strlen(tail) + 1;
	size_t n = (size_t)snprintf(buf, len, "%s", count == 1 ? "rank" : "ranks");
	for (unsigned r = 0; r < j->world && n < len; r++) {
		if (!rankset_has(missing, r))
			continue;
		char one[16];
		int w = snprintf(one, sizeof(one), "%s%u", listed ? ", " : " ", r);
		if (n + (size_t)w + keep > len && listed + 1 < count)
			break;
		n += (size_t)snprintf(buf + n, len - n, "%s", one);
		listed++;
	}
	more[0] = '\0';
	if (listed < count)
		snprintf(more, sizeof(more), " and %u more", count - listed);
	if (n < len)
		snprintf(buf + n, len - n, "%s%s", more, tail);
}

/* Ranks that have never joined. */
static void unjoined_ranks(const struct job *j, struct rankset *m)
{
	rankset_clear(m, j->world);
	for (unsigned r = 0; r < j->world; r++)
		if (!j->ranks[r].joined && !j->ranks[r].ip)
			rankset_add(m, r);
}

/* The join wait: 1 if it ended j (aborted or removed). */
static int join_watch(struct jobs *js, struct job *j, double now)
{
	uint32_t wait_ms = js->box->cfg.join_wait_ms;
	struct rankset missing;

	unjoined_ranks(j, &missing);
	if (j->empty_since && wait_ms && (now - j->empty_since) * 1000.0 >= wait_ms) {
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s (id %" PRIu32 "): every rank "
			     "left and none joined again within %" PRIu32 " ms; removed", j->name,
			     j->id, wait_ms);
		jobs_start_remove(js, j, "empty for the join wait");
		return 1;
	}
	if (rankset_empty(&missing, j->world) || !wait_ms || (now - j->created) * 1000.0 < wait_ms)
		return 0;
	char reason[sizeof(j->reason)];
	if (j->njoined == 0 && rankset_count(&missing, j->world) == j->world) {
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): no rank joined within %"
			PRIu32 " ms; removed", j->name, j->id, wait_ms);
		jobs_abort_job(js, j, "no rank joined within the join wait");
		return 1;
	}
	char who[128];
	describe(j, &missing, "never joined", who, sizeof(who));
	snprintf(reason, sizeof(reason), "%s within %" PRIu32 " ms (--join-wait-ms)", who, wait_ms);
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): %s", j->name, j->id, reason);
	jobs_abort_job(js, j, reason);
	return 1;
}

/* Ranks that joined and then left (not those lost and waited for). */
static void left_ranks(const struct job *j, struct rankset *m)
{
	rankset_clear(m, j->world);
	for (unsigned r = 0; r < j->world; r++)
		if (!j->ranks[r].joined && j->ranks[r].ip && !j->ranks[r].lost_at)
			rankset_add(m, r);
}

/* A lost rank nobody replaced within the job's window: 1 if it ended j. */
static int replace_watch(struct jobs *js, struct job *j, double now)
{
	for (unsigned r = 0; r < j->world; r++) {
		const struct job_rank *k = &j->ranks[r];
		if (!k->lost_at || (now - k->lost_at) * 1000.0 < j->replace_wait_ms)
			continue;
		char reason[sizeof(j->reason)];
		snprintf(reason, sizeof(reason), "rank %u lost (%.80s) and not replaced within "
			 "%" PRIu32 " ms", r, k->lost_why, j->replace_wait_ms);
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): %s",
			     j->name, j->id, reason);
		jobs_abort_job(js, j, reason);
		return 1;
	}
	return 0;
}

void jobs_watch(struct jobs *js)
{
	double now = clock_s();
	/* the control thread was held up (a long job_save): ranks whose
	 * calls waited on it meanwhile are not late by that time */
	double gap = js->watch_at ? now - js->watch_at : 0;

	js->watch_at = now;
	if (gap > WATCH_HELD_S)
		for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++)
			if (js->table[i] && js->table[i]->watch_since)
				js->table[i]->watch_since += gap;

	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		struct job *j = js->table[i];
		struct engine_progress p;
		if (!j || j->removing)
			continue;
		if (j->state == JOB_ABORTED) {   /* an operator's, waiting for a join */
			if (j->empty_since && js->box->cfg.join_wait_ms &&
			    (now - j->empty_since) * 1000.0 >= js->box->cfg.join_wait_ms)
				jobs_start_remove(js, j, "aborted, and no join within the join wait");
			continue;
		}
		if (join_watch(js, j, now) || replace_watch(js, j, now) || !js->box->dp.job_progress)
			continue;
		job_progress(js, j, &p);
		struct rankset gone, unjoined, late;
		left_ranks(j, &gone);
		rankset_and(&gone, &gone, &p.missing, j->world);
		if (p.open && !rankset_empty(&gone, j->world)) {
			char who[128], reason[sizeof(j->reason)];
			describe(j, &gone, "left the job", who, sizeof(who));
			snprintf(reason, sizeof(reason), "%s with rounds open"
				 " (key %" PRIu32 " segment %" PRIu32 " round %" PRIu32 ")",
				 who, p.key, p.seg, p.round);
			ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): %s",
				j->name, j->id, reason);
			jobs_abort_job(js, j, reason);
			continue;
		}
		/* the stall watch is for ranks that joined: the others have
		 * the join wait */
		unjoined_ranks(j, &unjoined);
		rankset_andnot(&p.missing, &p.missing, &unjoined, j->world);
		/* the late ranks: missing from every open round, else (each
		 * holds up some) every rank missing from one */
		rankset_and(&late, &p.missing_all, &p.missing, j->world);
		if (rankset_empty(&late, j->world))
			late = p.missing;
		if (p.open == 0 || rankset_empty(&p.missing, j->world) ||
		    p.completes != j->watch_completes || j->watch_since == 0) {
			j->watch_completes = p.completes;
			j->watch_since = now;
			if (p.open)
				j->waiting_for = late;
			else
				rankset_clear(&j->waiting_for, j->world);
			continue;
		}
		j->waiting_for = late;
		uint32_t limit_ms = j->timeout_ms;
		if (!limit_ms || (now - j->watch_since) * 1000.0 < limit_ms)
			continue;
		char who[128], reason[sizeof(j->reason)];
		describe(j, &late, NULL, who, sizeof(who));
		uint32_t waited_ds = (uint32_t)((now - j->watch_since) * 10.0);
		snprintf(reason, sizeof(reason),
			 "%.80s: no contribution for %" PRIu32 ".%" PRIu32 " s, the job's timeout (%"
			 PRIu32 ".%" PRIu32 " s; key %" PRIu32 " segment %" PRIu32 " round %" PRIu32
			 ")", who, waited_ds / 10, waited_ds % 10, limit_ms / 1000,
			 limit_ms / 100 % 10, p.key, p.seg, p.round);
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): %s", j->name, j->id, reason);
		jobs_abort_job(js, j, reason);
	}
}
