/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_recovery.c - what the engine does about missing and late ranks
 * (docs/protocol.md "Recovery"): WAIT and NACK notices, engine_tick's
 * timers (byte-rate and lateness periods, the NACKs of rounds open longer
 * than their job's NACK delay, each rank's NACKs limited by a token
 * bucket) and the stall watch's readers of progress and lateness. The
 * NACK delay's sample and the congestion mark's fair-share test run per
 * completed round: they are inline in engine_internal.h (spread_sample,
 * over_share).
 *
 * Rules: engine_tick runs on the lcore between bursts and looks at most
 * ENGINE_TICK_SCAN slots per call; engine_job_progress and
 * engine_rank_lateness run on the control thread and only read.
 */
#include "dataplane/engine_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* ---- notices ---- */

/* A WAIT or NACK of slot sl's round for rank r. */
void fill_notice(struct engine_out *out, const struct engine *e,
		 const struct engine_job *j, const struct engine_slot *sl,
		 uint8_t type, uint16_t rank)
{
	uint64_t open_us = (e->now - sl->t_open) / 1000;

	out->job = j;
	out->hdr = (struct wire_msg){
		.type = type, .dtype = sl->key->dtype, .job = j->id, .token = j->token,
		.key = sl->key->key, .seg = sl->seg, .round = sl->round, .rank = rank,
	};
	/* the 64 ranks from the first missing one's word on (worlds up to
	 * 64: all of them, base 0) */
	struct rankset miss;
	rankset_missing(&miss, &sl->have, j->world);
	int first = rankset_next(&miss, 0, j->world);
	unsigned word = first < 0 ? 0 : (unsigned)first / 64;
	out->notice = (struct wire_notice){
		.missing = miss.w[word],
		.open_us = open_us > UINT32_MAX ? UINT32_MAX : (uint32_t)open_us,
		.base = word * 64,
	};
	out->payload = NULL;
	out->plen = 0;
	out->rank = rank;
}

/* ---- timers (engine_tick) ---- */

/* Close the byte-rate period of every job (and, every 10 s, its lateness
 * period) and sum the rates and weights of the jobs with traffic. */
static void roll_periods(struct engine *e)
{
	e->share_rate = e->share_weight = 0;
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		struct engine_job *j = &e->jobs[i];
		if (j->state != ENGINE_JOB_ACTIVE)
			continue;
		j->rate = (3 * j->rate + (j->rx_bytes - j->rate_mark)) / 4;
		j->rate_mark = j->rx_bytes;
		if (j->rate) {
			e->share_rate += j->rate;
			e->share_weight += j->weight;
		}
		if (e->now - j->late_period_at >= ENGINE_LATE_PERIOD_NS) {
			for (unsigned r = 0; r < j->world; r++) {
				j->ranks[r].late_max_ns[1] = j->ranks[r].late_max_ns[0];
				j->ranks[r].late_max_ns[0] = 0;
			}
			j->late_period_at = e->now;
		}
	}
	e->rate_at = e->now;
}

/* Take one of rank's NACK tokens (refilled one per ENGINE_NACK_REFILL_NS,
 * at most ENGINE_NACK_BURST); false if it has none. */
static bool nack_token(struct engine_rank *rk, uint64_t now)
{
	uint64_t add = (now - rk->nack_refill_at) / ENGINE_NACK_REFILL_NS;

	if (add) {
		uint64_t t = rk->nack_tokens + add;
		rk->nack_tokens = (uint16_t)(t > ENGINE_NACK_BURST ? ENGINE_NACK_BURST : t);
		rk->nack_refill_at += add * ENGINE_NACK_REFILL_NS;
	}
	if (rk->nack_tokens == 0)
		return false;
	rk->nack_tokens--;
	return true;
}

/* Whether missing rank rk is known to have sent past sl's segment: its
 * furthest PUSH of the same key and round is a later segment. */
static inline bool passed(const struct engine_rank *rk, const struct engine_slot *sl)
{
	return rk->last_key == sl->key->key && rk->last_round == sl->round &&
	       rk->last_seg > sl->seg;
}

/* NACK the missing ranks of a due slot that understand NACKs: at once
 * those seen past the segment (its PUSH was lost), the others (late, or
 * lost and sending something else since) only once the round has been
 * open ENGINE_NACK_BLIND delays. The next NACK of this round comes after
 * the job's delay doubled per NACK. */
static unsigned nack_slot(struct engine *e, struct engine_job *j, struct engine_slot *sl,
			  struct engine_out *outs)
{
	struct rankset miss;
	bool blind = e->now - sl->t_open >= ENGINE_NACK_BLIND * j->nack_delay_ns;
	unsigned n = 0;

	rankset_missing(&miss, &sl->have, j->world);
	for (int next = rankset_next(&miss, 0, j->world); next >= 0;
	     next = rankset_next(&miss, (unsigned)next + 1, j->world)) {
		uint16_t r = (uint16_t)next;
		struct engine_rank *rk = &j->ranks[r];
		if (!rk->notice || (!blind && !passed(rk, sl)))
			continue;
		if (!nack_token(rk, e->now)) {
			e->c.nacks_limited++;
			continue;
		}
		fill_notice(&outs[n++], e, j, sl, WIRE_NACK, r);
		rk->nacks++;
		e->c.nacks++;
	}
	if (n)   /* a round with a NACK is no sample of the ranks' spread */
		sl->retx = 1;
	if (sl->nnack < ENGINE_NACK_BACKOFF)
		sl->nnack++;
	uint64_t gap = j->nack_delay_ns << sl->nnack;
	sl->nack_at = e->now + (gap < ENGINE_NACK_GAP_MAX_NS ? gap : ENGINE_NACK_GAP_MAX_NS);
	return n;
}

unsigned engine_tick(struct engine *e, struct engine_out *outs, unsigned max)
{
	unsigned n = 0;

	if (e->now - e->rate_at >= ENGINE_RATE_PERIOD_NS)
		roll_periods(e);
	for (unsigned looked = 0; looked < ENGINE_TICK_SCAN; looked++) {
		struct engine_job *j = &e->jobs[e->scan_job];
		if (j->state != ENGINE_JOB_ACTIVE || j->nfree == j->nslots ||
		    e->scan_slot >= j->nslots) {
			e->scan_job = (e->scan_job + 1) % ENGINE_MAX_JOBS;
			e->scan_slot = 0;
			continue;
		}
		struct engine_slot *sl = &j->slots[e->scan_slot];
		/* congested: the missing PUSH may be in the queue */
		if (sl->key && e->now >= sl->nack_at && !e->congested) {
			if (max - n < j->world)
				break;
			n += nack_slot(e, j, sl, outs + n);
		}
		e->scan_slot++;
	}
	return n;
}

/* ---- stall watch (read from the control thread) ---- */

int engine_job_progress(const struct engine *e, uint32_t job_id,
			struct engine_progress *p)
{
	const struct engine_job *j = &e->jobs[engine_job_index(job_id)];

	memset(p, 0, sizeof(*p));
	if (j->state == ENGINE_JOB_FREE || j->id != job_id)
		return -ENOENT;
	p->completes = j->completes;
	p->rx_bytes = j->rx_bytes;
	p->nonfinite = j->nf_rounds;
	p->skipped = j->nf_skipped;
	if (__atomic_load_n(&j->nf_abort, __ATOMIC_ACQUIRE)) { /* then its fields */
		p->nf_abort = 1;
		p->nf_rank = j->nf_rank;
		p->nf_key = j->nf_key;
		p->nf_seg = j->nf_seg;
		p->nf_round = j->nf_round;
	}
	for (uint32_t s = 0; s < j->nslots; s++) {
		const struct engine_slot *sl = &j->slots[s];
		const struct engine_key *k = sl->key;
		if (!k)
			continue;
		if (p->open++ == 0) {
			p->key = k->key;
			p->seg = sl->seg;
			p->round = sl->round;
			rankset_fill(&p->missing_all, j->world);
		}
		struct rankset miss;
		rankset_missing(&miss, &sl->have, j->world);
		rankset_or(&p->missing, &p->missing, &miss, j->world);
		rankset_and(&p->missing_all, &p->missing_all, &miss, j->world);
	}
	return 0;
}

int engine_rank_lateness(const struct engine *e, uint32_t job_id, uint16_t rank,
			 struct engine_lateness *l)
{
	const struct engine_job *j = &e->jobs[engine_job_index(job_id)];

	memset(l, 0, sizeof(*l));
	if (j->state == ENGINE_JOB_FREE || j->id != job_id || rank >= j->world)
		return -ENOENT;
	const struct engine_rank *rk = &j->ranks[rank];
	l->n = rk->late_n;
	l->sum_ns = rk->late_sum_ns;
	l->max_ns = rk->late_max_ns[0] > rk->late_max_ns[1] ? rk->late_max_ns[0]
							    : rk->late_max_ns[1];
	l->nacks = rk->nacks;
	l->nonfinite = rk->nonfinite;
	return 0;
}
