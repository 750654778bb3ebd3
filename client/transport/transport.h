/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * transport.h - how libpbox's send/receive engine (client/xfer/) reaches the
 * box's data ports. One small vtable, one implementation per road:
 *
 *   udp    the kernel's UDP stack (udp.c): works everywhere;
 *   xdp    an AF_XDP socket on the interface toward the box (tp_xdp.c):
 *          the worker writes Ethernet/IPv4/UDP itself, an XDP program
 *          steers only its own flow to the socket (needs CAP_NET_RAW and
 *          CAP_BPF, or root);
 *   verbs  an RDMA raw-packet queue pair (tp_verbs.c): the same frames
 *          through a NIC's verbs interface, steered by a flow rule.
 *
 * All three carry the same wire format (docs/protocol.md): the box cannot
 * tell them apart. The contract every implementation keeps:
 *   - tx_burst sends n datagrams in one call. The wire header is encoded
 *     from p[i].hdr, the payload read from p[i].payload before tx_burst
 *     returns (it may be the caller's buffer: no copy is kept). A datagram
 *     the road has no room for after a short wait is dropped and counted
 *     (tp_counters.tx_dropped): retransmission repairs it. Only a hard
 *     failure (the interface went away, the socket broke) is an error.
 *   - rx_burst returns up to max received pbox datagrams (wire header +
 *     payload, without the Ethernet/IP/UDP headers) without blocking; they
 *     stay valid until the next rx_burst or close, each with its sender's
 *     address and port (the frame's IPv4/UDP headers, or the socket's).
 *     Frames that are not well-formed UDP/IPv4 to this worker's address
 *     and port, or fail their checksums, are counted (rx_bad) and never
 *     returned.
 *   - poll_fds names the descriptors that become readable when rx_burst
 *     has something; the progress thread poll()s them and tells the
 *     transport which were readable (polled) before calling rx_burst.
 *   - Nothing is allocated after open (but by mem_reg).
 *   - GPUDirect (verbs only; mem_reg NULL elsewhere): mem_reg registers a
 *     range of device memory with the NIC and gives it an mkey. A tp_pkt
 *     whose mkey is set has its payload in that range: the NIC reads it
 *     itself, after tx_burst returned, until the send completes; the
 *     caller keeps the range mapped until mem_dereg (bytes changed in the
 *     meantime only make a retransmitted copy stale, which the box drops
 *     for a round it has completed).
 * Errors: 0 or a negative PBOX_* code, with a message in err.
 */
#ifndef PBOX_CLIENT_TRANSPORT_TRANSPORT_H
#define PBOX_CLIENT_TRANSPORT_TRANSPORT_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"
#include "include/pbox.h"

#define TP_MAX_FDS 2
/* The most datagrams a caller takes from one rx_burst (xdp stages that
 * many frames' copies). */
#define TP_RX_BURST 64

/* One datagram to send. */
struct tp_pkt {
	struct wire_msg hdr;
	const void *payload;      /* hdr.count elements' bytes, read during tx_burst */
	uint32_t len;             /* payload bytes */
	uint16_t ep;              /* index into tp_config.eps */
	uint32_t mkey;            /* 0: payload is host memory; else mem_reg's key of
				   * the device memory holding it (GPUDirect) */
};

/* One received pbox datagram and who sent it (xfer takes a RESULT, WAIT,
 * NACK or ERROR only from the box endpoint its segment belongs to). */
struct tp_dgram {
	const uint8_t *data;
	uint32_t len;
	uint32_t src_ip;          /* the sender's IPv4 address, network order */
	uint16_t src_port;        /* the sender's UDP port, network order */
};

struct tp_counters {
	uint64_t tx_dgrams;       /* datagrams handed to the road */
	uint64_t tx_dropped;      /* ... dropped for lack of room (retransmitted later) */
	uint64_t rx_dgrams;       /* pbox datagrams returned by rx_burst */
	uint64_t rx_bad;          /* frames refused: not ours, truncated, bad checksum */
	uint64_t rx_lost;         /* frames the road lost before us (AF_XDP rx ring or
				   * fill ring empty; 0 where the road cannot tell) */
	uint64_t gso_sends;       /* udp: sends carrying several datagrams */
	uint64_t gro_receives;    /* udp: receives holding several datagrams */
	uint64_t wakeups;         /* xdp/verbs: system calls made to kick the NIC */
};

/* Counters are written by the progress thread and read by pbox_get_stats
 * in any thread: relaxed atomics, whole struct snapshots. */
static inline void tp_ctr_add(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline void tp_counters_load(const struct tp_counters *in, struct tp_counters *out)
{
	const uint64_t *i = (const uint64_t *)in;
	uint64_t *o = (uint64_t *)out;

	for (size_t k = 0; k < sizeof(*out) / sizeof(uint64_t); k++)
		o[k] = __atomic_load_n(&i[k], __ATOMIC_RELAXED);
}

/* What open needs to know. */
struct tp_config {
	const struct sockaddr_in *eps; /* the box's data endpoints, by index */
	unsigned neps;
	uint32_t max_dgram;       /* largest pbox datagram (wire header + payload) */
	uint32_t mtu;             /* IPv4 MTU of the path (frames are mtu + 14 bytes) */
	int udp_offload;          /* udp: GSO/GRO (pbox_opts.udp_offload) */
	int busy_poll;            /* xdp: SO_PREFER_BUSY_POLL (pbox_opts.busy_poll) */
	int xdp_skb;              /* xdp: attach in generic (skb) mode only, not native
				   * first (PBOX_XDP_MODE=skb) */
};

/* Device memory registered with the NIC (GPUDirect RDMA). */
struct tp_mem_src {
	void *base;               /* device address, whole host pages */
	size_t size;
	int dmabuf_fd;            /* the GPU library's dma-buf of it, or -1 */
};

struct tp_mem {
	void *handle;             /* the transport's (struct ibv_mr *) */
	uint32_t mkey;            /* for tp_pkt.mkey; never 0 */
	const char *how;          /* "dma-buf" or "nvidia-peermem" */
};

struct transport;

struct transport_ops {
	const char *name;         /* "udp", "xdp", "verbs" */
	int (*tx_burst)(struct transport *t, const struct tp_pkt *p, unsigned n,
			char *err, size_t errlen);
	int (*rx_burst)(struct transport *t, struct tp_dgram *d, unsigned max,
			char *err, size_t errlen);
	unsigned (*poll_fds)(const struct transport *t, int fds[TP_MAX_FDS]);
	/* revents[i] of poll_fds' fds[i] after a poll (NULL: not needed) */
	void (*polled)(struct transport *t, const short *revents, unsigned n);
	void (*counters)(const struct transport *t, struct tp_counters *out);
	void (*close)(struct transport *t);
	/*
	 * GPUDirect: register src for the NIC to read: through its dma-buf
	 * (ibv_reg_dmabuf_mr) when it has one, else by address (ibv_reg_mr,
	 * which device memory passes only with nvidia-peermem). 0 with *m,
	 * or PBOX_ENOTSUP with why (the NIC cannot checksum frames it does
	 * not see, or neither way registers). Any thread; NULL where the road
	 * cannot (udp, xdp: the CPU writes every frame).
	 */
	int (*mem_reg)(struct transport *t, const struct tp_mem_src *src, struct tp_mem *m,
		       char *err, size_t errlen);
	void (*mem_dereg)(struct transport *t, struct tp_mem *m);
};

struct transport {
	const struct transport_ops *ops;  /* NULL when closed */
	pbox_transport kind;
	uint16_t port;            /* local UDP port, host order (job_join's data_port) */
	struct in_addr src;       /* local IPv4 address (job_join's data_ip) */
	char info[512];           /* one line: what is in use, e.g. "xdp on eth0 queue 0 ..." */
	/* Set by an opener whose transport works but should not be auto's
	 * choice (why, one clause): auto closes it and goes on. */
	char auto_veto[160];
	void *priv;               /* the implementation's state */
};

/*
 * Open the transport `kind` toward cfg's endpoints. PBOX_TRANSPORT_AUTO
 * tries verbs, then xdp, then udp, and writes why each faster one was
 * skipped into t->info after what it chose. A named kind that cannot work
 * here fails: PBOX_ENOTSUP (no such device or support compiled in),
 * PBOX_EPERM (missing privileges), PBOX_ESYS, PBOX_ENOMEM; err says what
 * is missing.
 */
int transport_open(struct transport *t, pbox_transport kind, const struct tp_config *cfg,
		   char *err, size_t errlen);
void transport_close(struct transport *t);

/* The implementations' openers (tp_*.c); same contract as transport_open
 * for one kind. */
int tp_udp_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen);
int tp_xdp_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen);
int tp_verbs_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen);

/* "udp", "xdp", "verbs", "auto"; NULL for a value outside the enum. */
const char *transport_name(pbox_transport kind);
/* Parse a name as above: the kind, or -1. */
int transport_parse(const char *name);

#endif
