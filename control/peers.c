/* SPDX-License-Identifier: BSD-3-Clause */
/* peers.c - per peer address connection counts and log budgets. See peers.h. */
#include "control/peers.h"

#include <errno.h>
#include <stdlib.h>

int peers_init(struct peers *p, unsigned cap)
{
	p->v = calloc(cap, sizeof(*p->v));
	p->n = 0;
	p->cap = p->v ? cap : 0;
	return p->v ? 0 : -ENOMEM;
}

void peers_free(struct peers *p)
{
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
}

struct peer *peers_get(struct peers *p, uint32_t ip)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->v[i].ip == ip)
			return &p->v[i];
	if (p->n == p->cap)
		return NULL;
	p->v[p->n] = (struct peer){ .ip = ip };
	return &p->v[p->n++];
}

int peers_conn_allow(struct peer *e, double now, double rate, double burst)
{
	if (rate <= 0)
		return 1;
	if (e->refilled == 0) {
		e->tokens = burst;
	} else {
		e->tokens += (now - e->refilled) * rate;
		if (e->tokens > burst)
			e->tokens = burst;
	}
	e->refilled = now;
	if (e->tokens < 1.0)
		return 0;
	e->tokens -= 1.0;
	return 1;
}

int peers_log_allow(struct peer *e, double now, unsigned burst)
{
	if (e->window == 0 || now - e->window >= PEERS_LOG_WINDOW_S) {
		if (e->suppressed)   /* not yet reported by a sweep: keep counting */
			return e->suppressed++, 0;
		e->window = now;
		e->lines = 0;
	}
	if (e->lines < burst) {
		e->lines++;
		return 1;
	}
	e->suppressed++;
	return 0;
}

void peers_sweep(struct peers *p, double now,
		 void (*report)(void *ctx, uint32_t ip, uint32_t suppressed), void *ctx)
{
	for (unsigned i = 0; i < p->n;) {
		struct peer *e = &p->v[i];
		int ended = e->window == 0 || now - e->window >= PEERS_LOG_WINDOW_S;
		if (ended && e->suppressed) {
			report(ctx, e->ip, e->suppressed);
			e->suppressed = 0;
			e->window = now;
			e->lines = 0;
		}
		if (e->conns == 0 && e->suppressed == 0 && ended &&
		    (e->refilled == 0 || now - e->refilled > PEERS_LOG_WINDOW_S)) {
			*e = p->v[--p->n];   /* no longer needed */
			continue;
		}
		i++;
	}
}
