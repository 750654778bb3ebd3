/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * telemetry.c - the snapshot behind pboxd's DPDK telemetry commands (see
 * telemetry.h): what /pbox/stats, /pbox/jobs and /pbox/info answer, built
 * on the control thread from the live counters box_stats, job_list and
 * --metrics read, and published every TELEMETRY_MS. Keys are box_stats'
 * and job_list's names; DPDK's rule for keys ([A-Za-z0-9_/]) is why
 * ports, lcores and jobs are keyed by number (a job's name is its alias:
 * "/pbox/jobs,NAME" finds it).
 */
#include "control/telemetry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/drops.h"
#include "common/wire.h"
#include "control/jobs.h"
#include "control/jobs_nonfinite.h"
#include "control/log.h"
#include "control/tel_tree.h"

#ifndef PBOX_VERSION_STRING
#error "build with -DPBOX_VERSION_STRING=\"MAJOR.MINOR.PATCH\" (the Makefile does)"
#endif

static char *num(unsigned v, char *buf, size_t len)
{
	snprintf(buf, len, "%u", v);
	return buf;
}

static uint64_t load(const void *base, size_t off)
{
	return __atomic_load_n((const uint64_t *)((const char *)base + off), __ATOMIC_RELAXED);
}

/* ---- /pbox/stats ---- */

static void port_counters(struct tel_tree *t, const struct box *b, unsigned i)
{
	static const struct {
		const char *name;
		size_t off;
	} m[] = {
		{ "ipackets", offsetof(struct box_port_stats, ipackets) },
		{ "opackets", offsetof(struct box_port_stats, opackets) },
		{ "ibytes", offsetof(struct box_port_stats, ibytes) },
		{ "obytes", offsetof(struct box_port_stats, obytes) },
		{ "imissed", offsetof(struct box_port_stats, imissed) },
		{ "ierrors", offsetof(struct box_port_stats, ierrors) },
		{ "oerrors", offsetof(struct box_port_stats, oerrors) },
		{ "rx_nombuf", offsetof(struct box_port_stats, rx_nombuf) },
	};
	struct box_port_stats s = { 0 };
	char key[16];

	tel_dict(t, num(b->layout.ports[i].port, key, sizeof(key)), NULL);
	if (!b->dp.port_stats || b->dp.port_stats(b->dp.ctx, i, &s) < 0) {
		tel_str(t, "error", "counters unavailable");
	} else {
		for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++)
			tel_u64(t, m[k].name, *(const uint64_t *)((const char *)&s + m[k].off));
		tel_u64(t, "link_up", s.link_up != 0);
	}
	tel_end(t);
}

static void lcore_counters(struct tel_tree *t, const struct box *b, unsigned i, uint64_t *drops)
{
	static const struct lcore_stats zl;
	static const struct engine_counters ze;
#define L(f) { #f, 0, offsetof(struct lcore_stats, f) }
#define E(f) { #f, 1, offsetof(struct engine_counters, f) }
	static const struct {
		const char *name;
		int engine;
		size_t off;
	} m[] = {
		L(rx), L(tx), E(pushes), E(completes), E(dup_open), E(dup_done), E(retx),
		E(errors_sent), E(held), L(arp), L(icmp), L(handoff_out), L(handoff_in),
		L(busy_polls), L(idle_polls), L(busy_ns), L(csum_unfilled), L(probes), E(msgs), E(waits),
		E(nacks), E(nacks_limited), E(marks), E(updates), E(no_weights), E(nonfinite),
		E(skipped),
	};
#undef L
#undef E
	const struct lcore_stats *l = b->dp.lcore_stats ? b->dp.lcore_stats(b->dp.ctx, i) : NULL;
	const struct engine_counters *e = b->dp.engine_stats ? b->dp.engine_stats(b->dp.ctx, i) : NULL;
	char key[16];

	l = l ? l : &zl;
	e = e ? e : &ze;
	tel_dict(t, num(i, key, sizeof(key)), NULL);
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++)
		tel_u64(t, m[k].name, load(m[k].engine ? (const void *)e : (const void *)l, m[k].off));
	tel_end(t);
	for (int r = 1; r < DROP_COUNT; r++)
		drops[r] += __atomic_load_n(&l->drops[r], __ATOMIC_RELAXED);
}

static void stats(struct tel_tree *t, const struct box *b)
{
	uint64_t drops[DROP_COUNT] = { 0 };

	tel_u64(t, "uptime_s", (uint64_t)(clock_s() - b->start_time));
	tel_u64(t, "jobs", jobs_count(b->jobs));
	tel_dict(t, "ports", NULL);
	for (unsigned i = 0; i < b->layout.nports; i++)
		port_counters(t, b, i);
	tel_end(t);
	tel_dict(t, "lcores", NULL);
	for (unsigned i = 0; i < b->layout.nlcores; i++)
		lcore_counters(t, b, i, drops);
	tel_end(t);
	tel_dict(t, "drops", NULL);
	for (int r = 1; r < DROP_COUNT; r++)
		tel_u64(t, drop_name(r), drops[r]);
	tel_end(t);
}

/* ---- /pbox/jobs ---- */

static void jobs(struct tel_tree *t, const struct box *b)
{
	char key[16];

	for (const struct job *j = jobs_next(b->jobs, NULL); j; j = jobs_next(b->jobs, j)) {
		struct job_traffic tr;
		jobs_traffic(b->jobs, j, &tr);
		tel_dict(t, num(j->id, key, sizeof(key)), j->name);
		tel_str(t, "job", j->name);
		tel_u64(t, "job_id", j->id);
		tel_str(t, "state", job_state_name(j->state));
		tel_u64(t, "world", j->world);
		tel_u64(t, "joined", j->njoined);
		tel_u64(t, "keys", j->nkeys);
		tel_u64(t, "bytes_used", j->mem.used);
		tel_u64(t, "max_bytes", j->max_bytes);
		tel_u64(t, "weight", j->weight);
		tel_u64(t, "rounds", tr.rounds);
		tel_u64(t, "bytes_reduced", tr.bytes);
		tel_u64(t, "nacks", tr.nacks);
		struct job_nonfinite nf;
		jobs_nonfinite_counts(b->jobs, j, &nf);
		tel_str(t, "nonfinite", jobs_nonfinite_name(j->nonfinite));
		tel_u64(t, "nonfinite_rounds", nf.rounds);
		tel_u64(t, "skipped_rounds", nf.skipped);
		if (j->reason[0])
			tel_str(t, "reason", j->reason);
		tel_end(t);
	}
}

/* ---- /pbox/info ---- */

static void info(struct tel_tree *t, const struct box *b)
{
	char key[16], s[64];

	tel_str(t, "version", PBOX_VERSION_STRING);
	tel_u64(t, "protocol", WIRE_VERSION);
	tel_str(t, "kernel", b->layout.kernel ? b->layout.kernel : "?");
	tel_u64(t, "uptime_s", (uint64_t)(clock_s() - b->start_time));
	tel_dict(t, "ports", NULL);
	for (unsigned i = 0; i < b->layout.nports; i++) {
		const struct box_port_info *p = &b->layout.ports[i];
		tel_dict(t, num(p->port, key, sizeof(key)), NULL);
		tel_str(t, "name", p->name);
		snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", p->mac[0], p->mac[1],
			 p->mac[2], p->mac[3], p->mac[4], p->mac[5]);
		tel_str(t, "mac", s);
		snprintf(s, sizeof(s), "%u.%u.%u.%u/%u", p->ip >> 24, (p->ip >> 16) & 255,
			 (p->ip >> 8) & 255, p->ip & 255, p->prefix);
		tel_str(t, "ip", s);
		tel_u64(t, "mtu", p->mtu);
		tel_u64(t, "rx_queues", p->rx_queues);
		tel_str(t, "steering", p->steering ? p->steering : "?");
		tel_str(t, "contributions", p->hold ? "held" : "copied");
		if (p->numa_node >= 0)
			tel_u64(t, "numa_node", (uint64_t)p->numa_node);
		tel_end(t);
	}
	tel_end(t);
	tel_dict(t, "lcores", NULL);
	for (unsigned i = 0; i < b->layout.nlcores; i++) {
		const struct box_lcore_info *l = &b->layout.lcores[i];
		tel_dict(t, num(i, key, sizeof(key)), NULL);
		tel_u64(t, "lcore", l->eal_id);
		tel_u64(t, "udp_port", (uint64_t)b->cfg.udp_base + l->index);
		if (l->socket >= 0)
			tel_u64(t, "socket", (uint64_t)l->socket);
		if (l->cpu >= 0)
			tel_u64(t, "cpu", (uint64_t)l->cpu);
		tel_u64(t, "hold_max", l->hold_max);
		tel_end(t);
	}
	tel_end(t);
}

/* ---- the snapshot ---- */

void box_telemetry_free(struct dp_tel_snapshot *s)
{
	if (!s)
		return;
	for (unsigned c = 0; c < DP_TEL_NCMDS; c++) {
		free(s->answer[c].nodes);
		free(s->answer[c].strs);
	}
	free(s);
}

int box_telemetry_build(const struct box *b, struct dp_tel_snapshot **out)
{
	static void (*const fill[DP_TEL_NCMDS])(struct tel_tree *, const struct box *) = {
		[DP_TEL_STATS] = stats, [DP_TEL_JOBS] = jobs, [DP_TEL_INFO] = info,
	};
	struct dp_tel_snapshot *s = calloc(1, sizeof(*s));
	int rc = s ? 0 : -ENOMEM;

	for (unsigned c = 0; rc == 0 && c < DP_TEL_NCMDS; c++) {
		struct tel_tree t;
		tel_tree_init(&t);
		fill[c](&t, b);
		rc = tel_tree_finish(&t, &s->answer[c]);
	}
	if (rc != 0) {
		box_telemetry_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void box_telemetry_tick(struct box *b)
{
	double now = clock_s();
	struct dp_tel_snapshot *s;

	if (!b->dp.tel_publish || (now - b->tel_watch.at) * 1000.0 < TELEMETRY_MS)
		return;
	b->tel_watch.at = now;
	int rc = box_telemetry_build(b, &s);
	if (rc < 0) {
		if (!b->tel_watch.failed)
			ctl_log(b, CTL_LOG_WARN, "telemetry: cannot build the counters' "
				"snapshot: %s; queries see older counters", strerror(-rc));
		b->tel_watch.failed = 1;
		return;
	}
	b->tel_watch.failed = 0;
	b->dp.tel_publish(b->dp.ctx, s);
}
