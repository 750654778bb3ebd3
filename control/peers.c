/* SPDX-License-Identifier: BSD-3-Clause */
/* peers.c - per peer address connection counts and log budgets. See peers.h. */
#include "control/peers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t V4_MAPPED[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

struct peer_addr peer_addr_of(const struct sockaddr *sa)
{
	struct peer_addr a = { { 0 } };

	if (sa->sa_family == AF_INET) {
		memcpy(a.b, V4_MAPPED, 12);
		memcpy(a.b + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(a.b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		if (memcmp(a.b, V4_MAPPED, 12) != 0)
			memset(a.b + 8, 0, 8);   /* the /64 */
	}
	return a;
}

const char *peer_addr_str(const struct peer_addr *a, char *buf, size_t len)
{
	char s[INET6_ADDRSTRLEN];
	int v4 = memcmp(a->b, V4_MAPPED, 12) == 0;

	if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? a->b + 12 : a->b, s, sizeof(s)))
		snprintf(s, sizeof(s), "?");
	snprintf(buf, len, v4 ? "%s" : "%s/64", s);
	return buf;
}

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

struct peer *peers_get(struct peers *p, const struct peer_addr *addr)
{
	for (unsigned i = 0; i < p->n; i++)
		if (memcmp(&p->v[i].addr, addr, sizeof(*addr)) == 0)
			return &p->v[i];
	if (p->n == p->cap)
		return NULL;
	p->v[p->n] = (struct peer){ .addr = *addr };
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
		 void (*report)(void *ctx, const struct peer_addr *addr, uint32_t suppressed),
		 void *ctx)
{
	for (unsigned i = 0; i < p->n;) {
		struct peer *e = &p->v[i];
		int ended = e->window == 0 || now - e->window >= PEERS_LOG_WINDOW_S;
		if (ended && e->suppressed) {
			report(ctx, &e->addr, e->suppressed);
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
