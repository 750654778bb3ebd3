/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * box_fixture.h - a struct box for control-plane unit tests: N ports x M
 * lcores of real engines (dataplane/engine.c) driven directly. post()
 * applies a message at once (or queues it, in deferred mode, until
 * fixture_drain), applied() counts what the engines took, and the memory
 * hooks count allocations so a test can prove nothing leaked.
 *
 * The deferred queue is one single-producer, single-consumer ring per
 * lcore and applied() is published with release/acquire, so the engines
 * may also run on threads of their own that take their messages with
 * fixture_drain_lcore (tests/unit/box_inproc.h); on_post wakes them.
 */
#ifndef PBOX_TEST_BOX_FIXTURE_H
#define PBOX_TEST_BOX_FIXTURE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "control/box.h"
#include "dataplane/engine.h"
#include "common/logline.h"
#include "common/sum.h"

#define FIX_MAX_LCORES 8
#define FIX_QUEUE 4096

struct fixture {
	struct box box;
	struct engine eng[FIX_MAX_LCORES];
	uint64_t applied[FIX_MAX_LCORES];     /* release store by the applier */
	int deferred;                         /* queue posts until fixture_drain */
	struct engine_msg queue[FIX_MAX_LCORES][FIX_QUEUE]; /* ring per lcore */
	unsigned qhead[FIX_MAX_LCORES];       /* next to apply (consumer's) */
	unsigned qtail[FIX_MAX_LCORES];       /* next free (producer's) */
	void (*on_post)(void *ctx, unsigned lcore); /* after a deferred post */
	void *on_post_ctx;
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
	if (rc < 0) { /* engines on threads of their own may fail at once */
		__atomic_fetch_add(&f->apply_errors, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&f->last_apply_rc, rc, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&f->applied[l], f->applied[l] + 1, __ATOMIC_RELEASE);
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
	unsigned tail = f->qtail[lcore];
	if (tail - __atomic_load_n(&f->qhead[lcore], __ATOMIC_ACQUIRE) == FIX_QUEUE)
		return -EAGAIN;
	f->queue[lcore][tail % FIX_QUEUE] = *m;
	__atomic_store_n(&f->qtail[lcore], tail + 1, __ATOMIC_RELEASE);
	if (f->on_post)
		f->on_post(f->on_post_ctx, lcore);
	return 0;
}

/* Apply up to max messages queued for lcore l, on the thread that owns
 * its engine; returns how many. */
static inline unsigned fixture_drain_lcore(struct fixture *f, unsigned l, unsigned max)
{
	unsigned head = f->qhead[l], n = 0;
	unsigned tail = __atomic_load_n(&f->qtail[l], __ATOMIC_ACQUIRE);

	for (; head != tail && n < max; head++, n++) {
		fixture_apply(f, l, &f->queue[l][head % FIX_QUEUE]);
		__atomic_store_n(&f->qhead[l], head + 1, __ATOMIC_RELEASE);
	}
	return n;
}

/* Apply every queued message. */
static inline void fixture_drain(struct fixture *f)
{
	for (unsigned l = 0; l < f->box.layout.nlcores; l++)
		fixture_drain_lcore(f, l, FIX_QUEUE);
}

static inline uint64_t fix_applied(void *ctx, unsigned lcore)
{
	return __atomic_load_n(&((struct fixture *)ctx)->applied[lcore], __ATOMIC_ACQUIRE);
}

/* Job memory: anonymous pages, zeroed and paid for only where touched (a
 * 256 MiB arena costs nothing until used; aligned_alloc + memset took
 * about a second each under ASan). ASan does not watch mmap, so the block
 * ends exactly at a PROT_NONE page: an overrun faults. */
static inline size_t fix_map_len(size_t bytes, size_t *off)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (bytes + 63) & ~(size_t)63;
	size_t pages = (len + pg - 1) / pg * pg;

	*off = pages - len;
	return pages + pg;
}

static inline void *fix_alloc(void *ctx, size_t bytes)
{
	struct fixture *f = ctx;
	size_t off, map = fix_map_len(bytes, &off);
	uint8_t *p;

	if (f->fail_alloc)
		return NULL;
	p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p + map - (size_t)sysconf(_SC_PAGESIZE), (size_t)sysconf(_SC_PAGESIZE),
		     PROT_NONE) < 0) {
		munmap(p, map);
		return NULL;
	}
	f->allocs++;
	f->live_bytes += bytes;
	return p + off;
}

static inline void fix_free(void *ctx, void *p, size_t bytes)
{
	struct fixture *f = ctx;
	size_t off, map = fix_map_len(bytes, &off);

	f->frees++;
	f->live_bytes -= bytes;
	munmap((uint8_t *)p - off, map);
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
