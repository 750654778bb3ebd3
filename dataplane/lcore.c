/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lcore.c - the DPDK poll loop of a data lcore: apply control messages,
 * rx burst -> parse -> (hand off | engine) -> results to every worker,
 * buffered tx flushed once per iteration; per iteration the engine's clock,
 * every LCORE_TICK_NS its timers (NACKs, rate periods), and before every
 * burst it handles whether the lcore is congested (one of its rx queues
 * standing, a quarter-full hand-off ring, or ports missing frames:
 * docs/protocol.md "Congestion").
 * No locks, no allocation beyond
 * mbufs, no system calls (except the opt-in idle sleep for shared
 * development machines, --idle-sleep-us).
 */
#include "dataplane/lcore.h"

#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include "common/drops.h"
#include "common/frame.h"
#include "dataplane/lcore_fanout.h"
#include "common/wire.h"

#define MSG_BURST 8
#define MSG_RING_SIZE 1024
#define HANDOFF_RING_SIZE 4096
#define TX_RETRIES 4
#define LCORE_TICK_NS 50000ull        /* engine_tick at most every 50 us */
#define CONGESTED_RING (HANDOFF_RING_SIZE / 4)

/* an lcore owns at most one rx queue per port (dp.c) */
_Static_assert(BOX_MAX_PORTS <= LCORE_MAX_RXQ, "rx queues per lcore");

static void release_mbuf(void *ctx, void *ref);

struct lcore_ctx *lcore_ctx_create(unsigned index, unsigned eal_id, int socket,
				   const struct dp_shared *sh,
				   const struct sum_kernels *sum)
{
	char name[RTE_RING_NAMESIZE];
	struct lcore_ctx *lc = rte_zmalloc_socket("lcore_ctx", sizeof(*lc),
						  RTE_CACHE_LINE_SIZE, socket);
	if (!lc)
		return NULL;
	lc->index = index;
	lc->eal_id = eal_id;
	lc->sh = sh;
	lc->txq = (uint16_t)index;
	lc->tsc_hz = rte_get_tsc_hz();
	engine_init(&lc->eng, (uint16_t)index, sum);
	engine_set_hold(&lc->eng, release_mbuf, lc);
	snprintf(name, sizeof(name), "pbox_msg%u", index);
	lc->msgs = rte_ring_create_elem(name, sizeof(struct engine_msg), MSG_RING_SIZE,
					socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "pbox_hand%u", index);
	lc->handoff = rte_ring_create(name, HANDOFF_RING_SIZE, socket, RING_F_SC_DEQ);
	if (!lc->msgs || !lc->handoff) {
		lcore_ctx_free(lc);
		return NULL;
	}
	return lc;
}

void lcore_ctx_free(struct lcore_ctx *lc)
{
	if (!lc)
		return;
	rte_ring_free(lc->msgs);
	rte_ring_free(lc->handoff);
	rte_free(lc);
}

static inline void drop(struct lcore_ctx *lc, struct rte_mbuf *m, int reason)
{
	lc->st.drops[reason]++;
	rte_pktmbuf_free(m);
}

static void flush_port(struct lcore_ctx *lc, uint16_t port)
{
	uint16_t n = lc->ntx[port], sent = 0;

	for (int t = 0; t < TX_RETRIES && sent < n; t++)
		sent += rte_eth_tx_burst(port, lc->txq, lc->tx[port] + sent, n - sent);
	lc->st.tx += sent;
	for (uint16_t i = sent; i < n; i++)
		drop(lc, lc->tx[port][i], DROP_TX_FULL);
	lc->ntx[port] = 0;
}

static inline void tx(struct lcore_ctx *lc, uint16_t port, struct rte_mbuf *m)
{
	lc->tx[port][lc->ntx[port]++] = m;
	if (lc->ntx[port] == LCORE_BURST)
		flush_port(lc, port);
}

static void flush_all(struct lcore_ctx *lc)
{
	for (uint16_t p = 0; p < BOX_MAX_PORTS; p++)
		if (lc->ntx[p])
			flush_port(lc, p);
}

/* Where rank r of out's job is, as learned from its packets. */
static inline uint16_t dst_for(const struct lcore_ctx *lc, const struct engine_out *out,
			       uint16_t rank, uint16_t *port_id, struct fanout_dst *d)
{
	const struct dp_peer *peer = &lc->peers[engine_job_index(out->job->id)][rank];
	const struct engine_worker *w = &out->job->workers[rank];
	const struct dp_port *port = &lc->sh->ports[peer->port_id];

	*d = (struct fanout_dst){
		.dst_mac = peer->mac, .src_mac = port->mac, .src_ip = port->ip,
		.dst_ip = w->ip, .src_port = (uint16_t)(lc->sh->udp_base + lc->index),
		.dst_port = w->port,
	};
	*port_id = peer->port_id;
	return rank;
}

/* The partial UDP checksum of a result's payload in *sum, shared by every
 * rank's packet; NULL when results go out with checksum 0. */
static inline const uint64_t *payload_csum(const struct lcore_ctx *lc, const void *payload,
					   size_t plen, uint64_t *sum)
{
	if (!lc->sh->udp_csum)
		return NULL;
	*sum = frame_csum_partial(payload, plen, 0);
	return sum;
}

/* One RESULT/ERROR packet of out for one rank (a copy of the payload). */
static void send_one(struct lcore_ctx *lc, const struct engine_out *out, uint16_t rank)
{
	struct fanout_dst d;
	uint16_t pid;
	struct wire_msg h = out->hdr;
	size_t plen = out->plen;
	const void *payload = out->payload;
	uint8_t body[WIRE_NOTICE_LEN];

	h.rank = dst_for(lc, out, rank, &pid, &d);
	if (h.type == WIRE_WAIT || h.type == WIRE_NACK) {
		wire_notice_encode(body, &out->notice);
		payload = body;
		plen = sizeof(body);
	} else if (!payload) {
		plen = 0;
	}
	uint64_t sum;
	struct rte_mbuf *m = fanout_copy(lc->sh->ports[pid].pool, &d, &h, payload, plen,
					 payload_csum(lc, payload, plen, &sum));
	if (!m) {
		lc->st.drops[DROP_NO_MBUF]++;
		return;
	}
	tx(lc, pid, m);
}

/*
 * A completed round to every rank. Ranks on ports that send chained mbufs
 * share one payload mbuf (one copy) when the payload is large enough to be
 * worth it (dp_port.shared_min); others get their own copy.
 */
static void send_all(struct lcore_ctx *lc, const struct engine_out *out)
{
	struct rte_mbuf *pay = NULL;
	size_t plen = out->plen;
	uint64_t sum;
	const uint64_t *psum = payload_csum(lc, out->payload, plen, &sum);

	for (uint16_t r = 0; r < out->job->world; r++) {
		struct fanout_dst d;
		uint16_t pid;
		struct wire_msg h = out->hdr;
		h.rank = dst_for(lc, out, r, &pid, &d);
		if (!engine_rank_notice(out->job, r))
			h.flags &= (uint8_t)~WIRE_FLAG_CE; /* it would drop the result */
		const struct dp_port *port = &lc->sh->ports[pid];
		struct rte_mbuf *m = NULL;

		if (out->only != ENGINE_ONLY_NONE && r != out->only) {
			/* a scatter key: the header alone acknowledges */
			h.count = 0;
			uint64_t zero = 0;
			m = fanout_copy(port->pool, &d, &h, NULL, 0, psum ? &zero : NULL);
		} else if (port->hdr_pool && plen >= port->shared_min) {
			if (!pay)
				pay = fanout_payload(port->pool, out->payload, plen);
			if (pay)
				m = fanout_chain(port->hdr_pool, &d, &h, pay, psum);
		} else {
			m = fanout_copy(port->pool, &d, &h, out->payload, plen, psum);
		}
		if (!m) {
			lc->st.drops[DROP_NO_MBUF]++;
			continue;
		}
		tx(lc, pid, m);
	}
	if (pay)
		rte_pktmbuf_free(pay);      /* the indirect mbufs hold it now */
}

/* The engine is done with a packet it held (see engine_push_ref). */
static void release_mbuf(void *ctx, void *ref)
{
	struct lcore_ctx *lc = ctx;

	lc->held--;
	rte_pktmbuf_free(ref);
}

/* A pbox datagram for this lcore: validate, aggregate, answer. The
 * contribution stays in its mbuf (no copy) if its port allows it and the
 * lcore holds fewer than hold_max mbufs; else it is copied, so rx never
 * runs dry. */
/* A path MTU probe goes back as it came, same size (docs/protocol.md
 * "PROBE"): no job needed, no amplification. */
static void answer_probe(struct lcore_ctx *lc, struct rte_mbuf *m, const struct frame_info *fi)
{
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);

	((uint8_t *)fi->payload)[offsetof(struct wire_hdr, type)] = WIRE_PROBE_ACK;
	m->data_len = (uint16_t)frame_udp_reflect(frame, rte_pktmbuf_data_len(m));
	m->pkt_len = m->data_len;
	lc->st.probes++;
	tx(lc, m->port, m);
}

static void handle_push(struct lcore_ctx *lc, struct rte_mbuf *m,
			const struct frame_info *fi)
{
	struct wire_msg msg;
	struct engine_out out;
	uint8_t src_mac[6];
	uint16_t port_id = m->port;
	int rc = wire_decode(fi->payload, fi->payload_len, &msg);

	if (rc == 0 && msg.type == WIRE_PROBE) {
		answer_probe(lc, m, fi);
		return;
	}
	memcpy(src_mac, fi->src_mac, 6);      /* m may be released by the push */
	if (rc == 0)
		rc = engine_push_ref(&lc->eng, &msg, fi->payload + WIRE_HDR_LEN,
				     lc->sh->ports[port_id].hold && lc->held < lc->hold_max ? m : NULL,
				     fi->src_ip, fi->src_port, &out);
	if (rc < 0) {
		drop(lc, m, -rc);
		return;
	}
	/* Token and source checked: remember where this rank is. */
	struct dp_peer *peer = &lc->peers[engine_job_index(msg.job)][msg.rank];
	memcpy(peer->mac, src_mac, 6);
	peer->port_id = port_id;
	if (out.held)
		lc->held++;
	else
		rte_pktmbuf_free(m);

	/* a sparse PUSH's answers (and dropped records) come from engine_next */
	do {
		if (rc < 0)
			lc->st.drops[-rc]++;
		else if (rc == ENGINE_SEND_ALL)
			send_all(lc, &out);
		else if (rc != ENGINE_ABSORBED)
			send_one(lc, &out, out.rank);
	} while ((rc = engine_next(&lc->eng, &out)) != ENGINE_ABSORBED);
}

/*
 * Checksums: a verdict of the port (GOOD, BAD, or NONE = valid but not
 * filled in) is taken as it is; where the port gave none (UNKNOWN, as on
 * net_af_packet), frame_verify checks in software. Returns the
 * FRAME_CSUM_* checks left to software, or -1 if the port flagged one bad.
 */
static inline int csum_left(const struct rte_mbuf *m)
{
	uint64_t ip = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
	uint64_t l4 = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;

	if (ip == RTE_MBUF_F_RX_IP_CKSUM_BAD || l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		return -1;
	return (ip == RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN ? FRAME_CSUM_IP : 0) |
	       (l4 == RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN ? FRAME_CSUM_L4 : 0);
}

/* Every received frame: classify, answer ARP/ICMP, route UDP to its owner
 * (handed: it came through the owner's hand-off ring, verified). */
static void handle_rx(struct lcore_ctx *lc, struct rte_mbuf *m, int handed)
{
	const struct dp_port *port = &lc->sh->ports[m->port];
	struct frame_info fi;

	if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
		drop(lc, m, DROP_BAD_LEN);
		return;
	}
	/* a handed-off datagram was verified (and counted) by the lcore
	 * that received it: its owner checks no checksum again */
	int verify = handed ? 0 : csum_left(m);
	if (verify < 0) {
		drop(lc, m, DROP_BAD_CSUM);
		return;
	}
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	uint32_t len = rte_pktmbuf_data_len(m);
	int kind = frame_parse(frame, len, port->ip, &fi);
	/* Longer than the port's MTU: a datagram the kernel reassembled
	 * before the PMD saw it (net_af_packet), never a pbox packet, nor an
	 * echo request the port could answer (its reply would not fit). */
	if ((kind == FRAME_UDP || kind == FRAME_ICMP_ECHO) && len > port->mtu + FRAME_ETH_LEN)
		kind = -DROP_FRAGMENT;
	if ((kind == FRAME_UDP || kind == FRAME_ICMP_ECHO) && verify) {
		verify = frame_verify(frame, len, (unsigned)verify);
		if (verify < 0)
			kind = verify;
		else if (verify == FRAME_CSUM_UNFILLED)
			lc->st.csum_unfilled++;
	}
	switch (kind) {
	case FRAME_UDP: {
		unsigned owner = (unsigned)(uint16_t)(fi.dst_port - lc->sh->udp_base);
		if (owner >= lc->sh->nlcores) {
			drop(lc, m, DROP_BAD_PORT);
		} else if (owner == lc->index || handed) {
			handle_push(lc, m, &fi);
		} else if (rte_ring_enqueue(lc->sh->lcores[owner]->handoff, m) != 0) {
			drop(lc, m, DROP_RING_FULL);
		} else {
			lc->st.handoff_out++;
		}
		return;
	}
	case FRAME_ARP:
		m->data_len = m->pkt_len = (uint32_t)frame_arp_reply(frame, m->data_len, port->mac, port->ip);
		lc->st.arp++;
		tx(lc, m->port, m);
		return;
	case FRAME_ICMP_ECHO:
		m->data_len = m->pkt_len = (uint32_t)frame_icmp_reply(frame, m->data_len);
		lc->st.icmp++;
		tx(lc, m->port, m);
		return;
	case FRAME_IGNORE:
		rte_pktmbuf_free(m);
		return;
	default:
		drop(lc, m, -kind);
		return;
	}
}

/*
 * Apply every control message queued so far: a PUSH sent after an RPC's
 * answer must find what the control plane posted before answering, however
 * many messages are queued. Bounded by one ring's worth, since the control
 * plane posts far more slowly than the lcore drains.
 */
static unsigned apply_msgs(struct lcore_ctx *lc)
{
	struct engine_msg ms[MSG_BURST];
	unsigned total = 0, n;

	do {
		n = rte_ring_dequeue_burst_elem(lc->msgs, ms, sizeof(ms[0]), MSG_BURST, NULL);
		for (unsigned i = 0; i < n; i++) {
			if (ms[i].type == ENGINE_MSG_JOB_INSTALL || ms[i].type == ENGINE_MSG_JOB_REMOVE)
				memset(lc->peers[engine_job_index(ms[i].job)], 0,
				       sizeof(lc->peers[0]));
			engine_apply(&lc->eng, &ms[i]);
		}
		total += n;
	} while (n == MSG_BURST && total < MSG_RING_SIZE);
	if (total)
		__atomic_store_n(&lc->applied, lc->applied + total, __ATOMIC_RELEASE);
	return total;
}

/* Nanoseconds from the TSC, for the engine's clock. */
static inline uint64_t tsc_ns(const struct lcore_ctx *lc)
{
	return (uint64_t)((unsigned __int128)rte_get_tsc_cycles() * 1000000000u / lc->tsc_hz);
}

/* Congestion, judged before each burst is handled, the handed-off ones
 * too (an lcore without rx queues gets all its packets so): one of its rx
 * queues standing (rx_fill.h), a quarter-full hand-off ring, or ports that
 * miss frames (the control thread's word, ports_watch.c). */
static inline void note_congestion(struct lcore_ctx *lc)
{
	engine_set_congested(&lc->eng, rx_fill_standing(&lc->fill) ||
				       rte_ring_count(lc->handoff) >= CONGESTED_RING ||
				       lc->sh->rx_missing);
}

/* The engine's timers: NACKs for rounds waiting too long on a rank. */
static void tick(struct lcore_ctx *lc, uint64_t now)
{
	struct engine_out outs[LCORE_BURST + ENGINE_MAX_WORLD];
	unsigned n;

	lc->tick_at = now;
	do {
		n = engine_tick(&lc->eng, outs, RTE_DIM(outs));
		for (unsigned i = 0; i < n; i++)
			send_one(lc, &outs[i], outs[i].rank);
	} while (n > LCORE_BURST);
}

static unsigned poll_burst(struct lcore_ctx *lc, struct rte_mbuf **pkts,
			   unsigned n, int handed)
{
	for (unsigned i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		handle_rx(lc, pkts[i], handed);
	}
	return n;
}

/*
 * The poll loop. Per packet it costs engine_push (bench/engine_bench) plus,
 * per completed round, one fan-out (bench/fanout_bench) and the PMD's
 * burst; the cycles per packet are in docs/performance.md.
 */
int lcore_main(void *arg)
{
	struct lcore_ctx *lc = arg;
	const struct dp_shared *sh = lc->sh;
	struct rte_mbuf *pkts[LCORE_BURST];

	/*
	 * Control messages are applied after each non-empty burst is taken
	 * and before it is handled. The control thread posts a job or key
	 * install and only then answers the RPC, so a PUSH sent after the
	 * answer finds its install in the ring by the time it is polled, even
	 * when the lcore was descheduled between draining the ring and polling
	 * rx. With nothing received, the ring is drained once per loop.
	 */
	while (!*sh->quit) {
		unsigned work = 0;
		/* one clock read per iteration: the engine's time for its
		 * bursts and the timers (a burst's worth of staleness) */
		uint64_t now = tsc_ns(lc);
		engine_clock(&lc->eng, now);
		for (unsigned q = 0; q < lc->nrxq; q++) {
			uint16_t n = rte_eth_rx_burst(lc->rxq[q].port_id, lc->rxq[q].queue,
						      pkts, LCORE_BURST);
			lc->st.rx += n;
			rx_fill_note(&lc->fill, q, n, LCORE_BURST);
			note_congestion(lc);
			if (n)
				work += apply_msgs(lc) + poll_burst(lc, pkts, n, 0);
		}
		unsigned h = rte_ring_dequeue_burst(lc->handoff, (void **)pkts, LCORE_BURST, NULL);
		lc->st.handoff_in += h;
		note_congestion(lc);   /* also for the timers below */
		if (h)
			work += apply_msgs(lc) + poll_burst(lc, pkts, h, 1);
		if (!work)
			work = apply_msgs(lc);
		if (now - lc->tick_at >= LCORE_TICK_NS)
			tick(lc, now);
		flush_all(lc);
		if (work) {
			lc->st.busy_polls++;
			lc->st.busy_ns += tsc_ns(lc) - now;
		} else {
			lc->st.idle_polls++;
			if (sh->idle_sleep_us)
				rte_delay_us_sleep(sh->idle_sleep_us);
		}
	}
	flush_all(lc);
	return 0;
}
