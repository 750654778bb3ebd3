/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recovery.c - send-order list, RACK and AIMD of libpbox (recovery.h).
 */
#include "client/xfer/recovery.h"
#include "include/pbox.h"

#include <stdlib.h>
#include <string.h>

int sendq_init(struct sendq *q, uint32_t cap)
{
	q->head = q->tail = SENDQ_NIL;
	q->prev = calloc(cap ? cap : 1, sizeof(*q->prev));
	q->next = calloc(cap ? cap : 1, sizeof(*q->next));
	q->in = calloc(cap ? cap : 1, 1);
	if (!q->prev || !q->next || !q->in) {
		sendq_free(q);
		return PBOX_ENOMEM;
	}
	return 0;
}

void sendq_free(struct sendq *q)
{
	free(q->prev);
	free(q->next);
	free(q->in);
	q->prev = q->next = NULL;
	q->in = NULL;
	q->head = q->tail = SENDQ_NIL;
}

void sendq_remove(struct sendq *q, uint32_t i)
{
	if (!q->in[i])
		return;
	if (q->prev[i] != SENDQ_NIL)
		q->next[q->prev[i]] = q->next[i];
	else
		q->head = q->next[i];
	if (q->next[i] != SENDQ_NIL)
		q->prev[q->next[i]] = q->prev[i];
	else
		q->tail = q->prev[i];
	q->in[i] = 0;
}

void sendq_push(struct sendq *q, uint32_t i)
{
	sendq_remove(q, i);
	q->prev[i] = q->tail;
	q->next[i] = SENDQ_NIL;
	if (q->tail != SENDQ_NIL)
		q->next[q->tail] = i;
	else
		q->head = i;
	q->tail = i;
	q->in[i] = 1;
}

void aimd_init(struct aimd *a, uint32_t floor, uint32_t cap)
{
	memset(a, 0, sizeof(*a));
	a->floor = floor < cap ? floor : cap;
	a->cap = cap;
	a->cwnd_fp = (uint64_t)cap << 16;
}

static void clamp_window(struct aimd *a)
{
	if (a->cwnd_fp < (uint64_t)a->floor << 16)
		a->cwnd_fp = (uint64_t)a->floor << 16;
	if (a->cwnd_fp > (uint64_t)a->cap << 16)
		a->cwnd_fp = (uint64_t)a->cap << 16;
}

void aimd_on_result(struct aimd *a, uint64_t now, uint64_t rtt_ns, bool ce)
{
	uint64_t w = a->cwnd_fp >> 16;

	a->acked++;
	if (ce)
		a->marked++;
	else
		a->cwnd_fp += 65536 / (w ? w : 1);
	if (now >= a->mark_epoch_ns + rtt_ns) {
		uint32_t f = (uint32_t)((uint64_t)a->marked * AIMD_ALPHA_ONE / a->acked);
		a->alpha = (a->alpha * 15 + f) / 16;
		if (a->marked) {
			a->cwnd_fp -= a->cwnd_fp * a->alpha / (2 * AIMD_ALPHA_ONE);
		}
		a->mark_epoch_ns = now;
		a->acked = a->marked = 0;
	}
	clamp_window(a);
}

bool aimd_decrease(struct aimd *a, uint64_t now, uint64_t rtt_ns, unsigned beta_pct)
{
	if (now < a->hold_until_ns)
		return false;
	a->cwnd_fp = a->cwnd_fp * beta_pct / 100;
	clamp_window(a);
	a->hold_until_ns = now + rtt_ns;
	return true;
}

bool aimd_on_loss(struct aimd *a, uint64_t now, uint64_t rtt_ns, uint32_t n)
{
	if (now >= a->epoch_ns + rtt_ns) {
		a->epoch_ns = now;
		a->epoch_lost = 0;
	}
	a->epoch_lost += n;
	if ((uint64_t)a->epoch_lost * 2 <= (a->cwnd_fp >> 16))
		return false;
	a->epoch_lost = 0;
	return aimd_decrease(a, now, rtt_ns, AIMD_BETA_LOSS);
}
