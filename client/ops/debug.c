/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * debug.c - libpbox's diagnostics for users (docs/pytorch.md
 * "Diagnostics"): with PBOX_DEBUG=WARN or INFO in the environment, a
 * client writes one block of lines to stderr (or to the file
 * PBOX_DEBUG_FILE names, appended) when it joins: library version, job,
 * rank, control and data endpoints, MTU and segment size, transport,
 * window; at INFO also a failed join's reason and, at pbox_close, a
 * summary of its calls and round trips (and of its device calls: how
 * many went GPUDirect, why others were staged). WARN writes only what points to
 * trouble: a failed join, retransmissions, timeouts, datagrams from
 * elsewhere than the box (foreign_packets). Nothing is written
 * per call or per packet.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/core/note.h"
#include "client/ops/ops.h"

enum { DBG_OFF = KNOB_DEBUG_OFF, DBG_WARN = KNOB_DEBUG_WARN, DBG_INFO = KNOB_DEBUG_INFO };

void client_debug_joined(const pbox_client *c, int rc)
{
	int lv = note_level();
	char ip[INET_ADDRSTRLEN];

	if (lv == DBG_OFF || (lv == DBG_WARN && rc == 0))
		return;
	FILE *f = note_sink();
	if (rc < 0) {
		fprintf(f, "pbox: libpbox %s: job '%s' rank %d/%d: pbox_connect failed: %s (%s)\n",
			pbox_version_string(), c->job, c->rank, c->world, pbox_strerror(rc),
			c->last_err);
		note_done(f);
		return;
	}
	fprintf(f, "pbox: libpbox %s: job '%s' (id %u) rank %d/%d, control %s\n",
		pbox_version_string(), c->job, c->job_id, c->rank, c->world, c->control);
	for (unsigned i = 0; i < c->neps; i++)
		fprintf(f, "pbox:   box endpoint %u: %s:%u\n", i,
			inet_ntop(AF_INET, &c->eps[i].sin_addr, ip, sizeof(ip)) ? ip : "?",
			ntohs(c->eps[i].sin_port));
	fprintf(f, "pbox:   data from %s:%u, MTU %u, segments of %u bytes (chunks %u), "
		"window %u, timeout %u ms\n",
		inet_ntop(AF_INET, &c->tp.src, ip, sizeof(ip)) ? ip : "?", c->tp.port,
		c->opts.mtu, c->seg_bytes, c->chunk_bytes, c->opts.window, c->opts.timeout_ms);
	fprintf(f, "pbox:   transport: %s\n", pbox_transport_info(c));
	note_done(f);
}

void client_debug_closing(const pbox_client *c)
{
	int lv = note_level();
	pbox_stats s;

	if (lv == DBG_OFF || !c->joined)
		return;
	client_stats(c, &s);
	int trouble = s.retransmits || s.timeouts || s.foreign_packets;
	if (lv == DBG_WARN && !trouble)
		return;
	FILE *f = note_sink();
	fprintf(f, "pbox: job '%s' rank %d closing: %llu calls, %llu packets out, %llu in; "
		"round trip %llu us (+- %llu, %llu samples), timeout %llu us, window %llu\n",
		c->job, c->rank, (unsigned long long)s.calls, (unsigned long long)s.pkts_sent,
		(unsigned long long)s.pkts_recv, (unsigned long long)s.srtt_us,
		(unsigned long long)s.rttvar_us, (unsigned long long)s.rtt_samples,
		(unsigned long long)s.rto_us, (unsigned long long)s.window);
	fprintf(f, "pbox:   %s%llu retransmitted (%llu fast, %llu after a timeout), %llu NACKs, "
		"%llu WAITs, %llu congestion marks, %llu duplicate results, %llu bad packets, "
		"%llu from elsewhere than the box\n",
		trouble ? "WARN: " : "", (unsigned long long)s.retransmits,
		(unsigned long long)s.fast_retransmits, (unsigned long long)s.timeouts,
		(unsigned long long)s.nacks, (unsigned long long)s.waits,
		(unsigned long long)s.ce_marks, (unsigned long long)s.dup_results,
		(unsigned long long)s.bad_packets, (unsigned long long)s.foreign_packets);
	client_ext_summary(c, f);   /* (device calls) */
	note_done(f);
}
