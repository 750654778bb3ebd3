/*
 * box_fixture.h - a struct box for control-plane unit tests: N ports x M
 * lcores of real engines (dataplane/engine.c) driven directly. post()
 * applies a message at once (or queues it, in deferred mode, until
 * fixture_drain), applied() counts what the engines took, and the memory
 * hooks count allocations so a test can prove nothing leaked.
 */
#ifndef PBOX_TEST_BOX_FIXTURE_H
#define PBOX_TEST_BOX_FIXTURE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/box.h"
#include "dataplane/engine.h"
#include "common/logline.h"
#include "common/sum.h"

#define FIX_MAX_LCORES 8
#define FIX_QUEUE 4096

struct fixture {
	struct box box;
	struct engine eng[FIX_MAX_LCORES];
	uint64_t applied[FIX_MAX_LCORES];
	int deferred;                         /* queue posts until fixture_drain */
	struct engine_msg queue[FIX_MAX_LCORES][FIX_QUEUE];
	unsigned qlen[FIX_MAX_LCORES];
	unsigned full_posts;                  /* next N posts answer -EAGAIN */
	unsigned apply_errors;                /* engine_apply results < 0 */
	int last_apply_rc;
	unsigned allocs, frees;
	size_t live_bytes;
	int fail_alloc;                       /* mem_alloc returns NULL */
	struct lcore_stats lstats[FIX_MAX_LCORES];
};

static inline void fixture_apply(struct fixture *f, unsigned l, const struct engine_msg *m)
{
	int rc = engine_apply(&f->eng[l], m);
	if (rc < 0) {
		f->apply_errors++;
		f->last_apply_rc = rc;
	}
	f->applied[l]++;
}

static inline int fix_post(void *ctx, unsigned lcore, const struct engine_msg *m)
{
	struct fixture *f = ctx;

	if (lcore >= f->box.layout.nlcores)
		return -EINVAL;
	if (f->full_posts) {
		f->full_posts--;
		return -EAGAIN;
	}
	if (!f->deferred) {
		fixture_apply(f, lcore, m);
		return 0;
	}
	if (f->qlen[lcore] == FIX_QUEUE)
		return -EAGAIN;
	f->queue[lcore][f->qlen[lcore]++] = *m;
	return 0;
}

/* Apply every queued message. */
static inline void fixture_drain(struct fixture *f)
{
	for (unsigned l = 0; l < f->box.layout.nlcores; l++) {
		for (unsigned i = 0; i < f->qlen[l]; i++)
			fixture_apply(f, l, &f->queue[l][i]);
		f->qlen[l] = 0;
	}
}

static inline uint64_t fix_applied(void *ctx, unsigned lcore)
{
	return ((struct fixture *)ctx)->applied[lcore];
}

static inline void *fix_alloc(void *ctx, size_t bytes)
{
	struct fixture *f = ctx;
	void *p;

	if (f->fail_alloc)
		return NULL;
	p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	if (!p)
		return NULL;
	memset(p, 0, bytes);
	f->allocs++;
	f->live_bytes += bytes;
	return p;
}

static inline void fix_free(void *ctx, void *p, size_t bytes)
{
	struct fixture *f = ctx;
	f->frees++;
	f->live_bytes -= bytes;
	free(p);
}

static inline const struct lcore_stats *fix_lstats(void *ctx, unsigned l)
{
	return &((struct fixture *)ctx)->lstats[l];
}

static inline const struct engine_counters *fix_estats(void *ctx, unsigned l)
{
	return &((struct fixture *)ctx)->eng[l].c;
}

static inline int fix_port_stats(void *ctx, unsigned port, struct box_port_stats *out)
{
	struct fixture *f = ctx;
	if (port >= f->box.layout.nports)
		return -ENODEV;
	memset(out, 0, sizeof(*out));
	out->ipackets = 100 + port;
	out->link_up = 1;
	return 0;
}

/* A box of nports data ports (198.18.0.1+p) x nlcores engines, MTU 1500,
 * default limits, log level "error". */
static inline struct fixture *fixture_new(unsigned nports, unsigned nlcores)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct box *b = &f->box;

	box_config_defaults(&b->cfg);
	b->cfg.log_level = LOG_PRIO_ERR;
	b->dp = (struct box_dp){
		.ctx = f, .post = fix_post, .applied = fix_applied, .mem_alloc = fix_alloc,
		.mem_free = fix_free, .lcore_stats = fix_lstats, .engine_stats = fix_estats,
		.port_stats = fix_port_stats,
	};
	b->layout.nports = nports;
	b->layout.nlcores = nlcores;
	b->layout.mtu = 1500;
	b->layout.kernel = "scalar";
	for (unsigned p = 0; p < nports; p++) {
		b->layout.ports[p] = (struct box_port_info){ .port = (uint16_t)p, .ip = 0xC6120001u + p,
						      .prefix = 24, .mtu = 1500, .rx_queues = 1,
						      .steering = "ring" };
		snprintf(b->layout.ports[p].name, sizeof(b->layout.ports[p].name), "net_test%u", p);
	}
	for (unsigned l = 0; l < nlcores; l++) {
		b->layout.lcores[l] = (struct box_lcore_info){ .eal_id = l + 1, .index = l };
		engine_init(&f->eng[l], (uint16_t)l, sum_by_name("scalar"));
	}
	for (unsigned p = 0; p < nports; p++)
		for (unsigned l = 0; l < nlcores; l++)
			b->layout.eps[b->layout.neps++] = (struct box_endpoint){
				.ip = b->layout.ports[p].ip, .udp_port = (uint16_t)(b->cfg.udp_base + l),
				.port = (uint16_t)p, .lcore = (uint16_t)l };
	return f;
}

static inline void fixture_free(struct fixture *f)
{
	free(f);
}

#endif
