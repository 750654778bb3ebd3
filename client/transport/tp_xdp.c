/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tp_xdp.c - the xdp transport (transport.h): one AF_XDP socket on queue 0
 * of the interface toward the box, the worker writing and reading whole
 * Ethernet/IPv4/UDP frames itself (rawframe.h).
 *
 * Memory: one UMEM of XDP_CHUNK-byte chunks, shared by rx and tx:
 *   [ rx chunks: XDP_RX_CHUNKS, all preposted to the fill ring ]
 *   [ tx slots: nslots x slot_chunks contiguous chunks, one frame each ]
 * A frame longer than a chunk (jumbo MTU) is written contiguously into its
 * slot and sent as slot_chunks descriptors chained with XDP_PKT_CONTD;
 * received ones arrive chained the same way (AF_XDP multi-buffer, Linux
 * >= 6.6, XDP_USE_SG) and are copied into a staging area. Single-chunk
 * frames are read in place. Nothing is allocated after open.
 *
 * Steering: client/transport/bpf/xdp_flow.bpf.c, attached through a BPF link (it
 * goes away with the process, even on SIGKILL), native XDP where the
 * driver has it, else generic. It redirects only this worker's UDP flow;
 * everything else goes on to the kernel. Frames of the flow that land on
 * another queue (a multi-queue NIC without a steering rule) reach the UDP
 * socket that reserves the port: rx_burst drains it too.
 *
 * Zero-copy where the driver supports it (bind with XDP_ZEROCOPY, else
 * XDP_COPY: veth is copy mode). need_wakeup: the kernel is kicked
 * (sendto/recvfrom) only when the rings say it sleeps; in copy mode each
 * sendto moves at most 32 descriptors, so a burst kicks until the ring
 * drains.
 * busy_poll: SO_PREFER_BUSY_POLL with a budget, and rx_burst drives the
 * queue itself when the ring is empty.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "client/transport/net.h"
#include "client/transport/rawframe.h"

#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)      /* Linux 6.6 uapi; older headers lack it */
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif

#define XDP_CHUNK       4096u
#define XDP_HEADROOM    256u     /* XDP_PACKET_HEADROOM: the kernel's, before each received frame */
#define XDP_BUSY_TRIES  20u      /* a busy queue is tried again ... */
#define XDP_BUSY_PAUSE_US 10000u /* ... every 10 ms, for 0.2 s */
#define XDP_RX_CHUNKS   4096u    /* 16 MiB preposted for receive */
#define XDP_RING        4096u    /* fill, completion, rx and tx rings */
#define XDP_TX_CHUNKS   3072u    /* 12 MiB of tx slots */
#define XDP_RX_PEEK     256u     /* descriptors taken from the rx ring at once */
#define XDP_UDP_BURST   8u       /* datagrams taken from the port's UDP socket at once */
#define XDP_KICK_BATCH  32u      /* descriptors one copy-mode sendto moves (TX_BATCH_SIZE) */
#define XDP_ARP_WAIT_MS 1000
#define BUSY_POLL_US    20
#define BUSY_POLL_BUDGET 64

/* The program's bytes (generated from client/transport/bpf/xdp_flow.bpf.c). */
extern const unsigned char tp_xdp_prog[];
extern const size_t tp_xdp_prog_len;

struct flow_cfg {                /* the program's cfg map value */
	uint32_t ip;
	uint16_t port;
	uint16_t pad;
};

struct xdp_tp {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	uint8_t *area;
	size_t area_len;
	int xsk_fd;
	int udp_fd;                  /* reserves the port; receives what misses the socket */
	struct bpf_object *obj;
	int link_fd;
	struct netpath *np;          /* per endpoint: one interface and source, a next hop each */
	uint16_t port;
	const struct sockaddr_in *eps;
	unsigned neps;
	bool zerocopy, native, sg, busy_poll;
	bool skb_mode;                /* tp_config.xdp_skb: generic mode only */
	uint32_t frame_max;          /* the largest frame: MTU + Ethernet header */
	bool udp_ready;              /* poll saw udp_fd readable: drain it */
	/* tx slots */
	uint64_t tx_base;            /* UMEM offset of slot 0 */
	uint32_t slot_chunks, nslots, nfree;
	uint32_t *free_slots;        /* stack of free slot indices */
	uint8_t *pending;            /* descriptors of a slot not yet completed */
	/* rx */
	uint64_t *done;              /* chunks handed out last burst: back to the fill ring next */
	uint32_t ndone;
	uint8_t *stage;              /* multi-buffer frames, copied whole */
	size_t stage_frame;          /* bytes per staged frame */
	uint8_t *udp_buf;            /* XDP_UDP_BURST datagrams from udp_fd */
	size_t udp_len;
	struct tp_counters ctr;      /* relaxed atomics */
};


/* ---- privileges ----------------------------------------------------------- */

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

/* Is cap in the effective set? (false if it cannot be told) */
static bool cap_effective(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	return syscall(SYS_capget, &h, d) == 0 && has_cap(d, cap);
}

/* Checked before libbpf runs, so a worker without them falls back quietly
 * (libbpf would print its own errors) and the message names what is
 * missing. */
static int check_caps(char *err, size_t errlen)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	const int cap_bpf = 39;

	if (syscall(SYS_capget, &h, d) != 0)
		return 0; /* cannot tell: let the calls below say */
	bool raw = has_cap(d, CAP_NET_RAW), admin = has_cap(d, CAP_NET_ADMIN);
	bool bpf = has_cap(d, cap_bpf) || has_cap(d, CAP_SYS_ADMIN);
	if (raw && admin && bpf)
		return 0;
	snprintf(err, errlen, "needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF (or root); "
		 "missing%s%s%s", raw ? "" : " CAP_NET_RAW", admin ? "" : " CAP_NET_ADMIN",
		 bpf ? "" : " CAP_BPF");
	return PBOX_EPERM;
}

/* ---- set-up --------------------------------------------------------------- */

static int sys_err(int e, char *err, size_t errlen, const char *what, const char *ifname)
{
	snprintf(err, errlen, "%s on %s: %s", what, ifname, strerror(e));
	return e == EPERM || e == EACCES ? PBOX_EPERM
	       : e == EOPNOTSUPP || e == ENOTSUP || e == EINVAL || e == EBUSY ? PBOX_ENOTSUP
	       : PBOX_ESYS;
}

/* A received frame lands after the kernel's headroom: one longer than
 * what is left of a chunk takes two (multi-buffer, XDP_USE_SG), or the
 * kernel drops it. */
static bool rx_needs_sg(uint32_t frame_max)
{
	return frame_max > XDP_CHUNK - XDP_HEADROOM;
}

/* The kernel charges the UMEM to RLIMIT_MEMLOCK unless the process has
 * CAP_IPC_LOCK: say so before it refuses with a bare ENOBUFS. */
static int memlock_check(const struct xdp_tp *x, char *err, size_t errlen)
{
	struct rlimit rl;

	if (cap_effective(CAP_IPC_LOCK) || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= x->area_len)
		return 0;
	snprintf(err, errlen, "the AF_XDP UMEM (%zu MiB) exceeds the locked-memory limit "
		 "(ulimit -l: %llu KiB): raise it to %zu KiB or grant CAP_IPC_LOCK",
		 x->area_len >> 20, (unsigned long long)rl.rlim_cur >> 10, x->area_len >> 10);
	return PBOX_EPERM;
}

static int umem_create(struct xdp_tp *x, uint32_t frame_max, char *err, size_t errlen)
{
	int rc;

	x->frame_max = frame_max;
	x->sg = rx_needs_sg(frame_max);
	x->slot_chunks = (frame_max + XDP_CHUNK - 1) / XDP_CHUNK;
	x->nslots = XDP_TX_CHUNKS / x->slot_chunks;
	x->tx_base = (uint64_t)XDP_RX_CHUNKS * XDP_CHUNK;
	x->area_len = ((size_t)XDP_RX_CHUNKS + XDP_TX_CHUNKS) * XDP_CHUNK;
	x->area = mmap(NULL, x->area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (x->area == MAP_FAILED) {
		x->area = NULL;
		snprintf(err, errlen, "cannot map %zu bytes for the UMEM: %s", x->area_len,
			 strerror(errno));
		return PBOX_ENOMEM;
	}
	x->free_slots = calloc(x->nslots, sizeof(*x->free_slots));
	x->pending = calloc(x->nslots, 1);
	x->done = calloc(XDP_RX_PEEK, sizeof(*x->done));
	x->stage_frame = (size_t)x->slot_chunks * XDP_CHUNK;
	x->stage = malloc(TP_RX_BURST * x->stage_frame);
	x->udp_len = (WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 63) / 64 * 64;
	x->udp_buf = malloc(XDP_UDP_BURST * x->udp_len);
	if (!x->free_slots || !x->pending || !x->done || !x->stage || !x->udp_buf) {
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	for (uint32_t i = 0; i < x->nslots; i++)
		x->free_slots[i] = x->nslots - 1 - i;
	x->nfree = x->nslots;
	if ((rc = memlock_check(x, err, errlen)) < 0)
		return rc;
	struct xsk_umem_config uc = { .fill_size = XDP_RING, .comp_size = XDP_RING,
				      .frame_size = XDP_CHUNK, .frame_headroom = 0 };
	rc = xsk_umem__create(&x->umem, x->area, x->area_len, &x->fill, &x->comp, &uc);
	if (rc)
		return sys_err(-rc, err, errlen, "registering the AF_XDP UMEM", x->np[0].ifname);
	return 0;
}

/* Bind queue 0 in mode (zero-copy or copy): 0 or the libxdp error. A
 * socket closed just now frees its queue asynchronously, so a bind in
 * that window finds it busy (some 40 ms): tried again for a while. */
static int bind_mode(struct xdp_tp *x, uint16_t mode)
{
	struct xsk_socket_config sc = {
		.rx_size = XDP_RING, .tx_size = XDP_RING,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = (uint16_t)(mode | XDP_USE_NEED_WAKEUP | (x->sg ? XDP_USE_SG : 0)),
	};

	for (unsigned busy = 0;; busy++) {
		int rc = xsk_socket__create(&x->xsk, x->np[0].ifname, 0, x->umem, &x->rx, &x->tx,
					    &sc);
		if (rc == 0)
			return 0;
		x->xsk = NULL;
		if (rc != -EBUSY || busy == XDP_BUSY_TRIES)
			return rc;
		usleep(XDP_BUSY_PAUSE_US);
	}
}

/* Bind queue 0: zero-copy if the driver can, else copy; multi-buffer if
 * frames can exceed a chunk (rx_needs_sg). */
static int socket_create(struct xdp_tp *x, char *err, size_t errlen)
{
	static const uint16_t modes[] = { XDP_ZEROCOPY, XDP_COPY };
	int rc = 0;

	for (unsigned m = 0; m < 2; m++) {
		rc = bind_mode(x, modes[m]);
		if (rc == 0) {
			x->zerocopy = modes[m] == XDP_ZEROCOPY;
			x->xsk_fd = xsk_socket__fd(x->xsk);
			return 0;
		}
		if (rc == -EPERM || rc == -EACCES || rc == -EBUSY)
			break;
	}
	if (rc == -EINVAL && x->sg) {
		snprintf(err, errlen, "AF_XDP on %s refuses multi-buffer frames (XDP_USE_SG, "
			 "Linux >= 6.6), needed for MTU %u (frames over %u bytes)",
			 x->np[0].ifname, x->frame_max - 14, XDP_CHUNK - XDP_HEADROOM);
		return PBOX_ENOTSUP;
	}
	if (rc == -EBUSY) {
		snprintf(err, errlen, "queue 0 of %s already has an AF_XDP socket (another "
			 "worker on this interface?) for %u ms", x->np[0].ifname,
			 XDP_BUSY_TRIES * XDP_BUSY_PAUSE_US / 1000);
		return PBOX_ENOTSUP;
	}
	return sys_err(-rc, err, errlen, "creating the AF_XDP socket", x->np[0].ifname);
}

static int prog_attach(struct xdp_tp *x, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "pbox_xdp_flow");
	x->obj = bpf_object__open_mem(tp_xdp_prog, tp_xdp_prog_len, &oo);
	if (!x->obj) {
		int e = errno;
		x->obj = NULL;
		return sys_err(e, err, errlen, "opening the XDP program", x->np[0].ifname);
	}
	int rc = bpf_object__load(x->obj);
	if (rc)
		return sys_err(-rc, err, errlen, "loading the XDP program", x->np[0].ifname);
	struct bpf_program *p = bpf_object__find_program_by_name(x->obj, "pbox_flow");
	int cfg_fd = bpf_object__find_map_fd_by_name(x->obj, "cfg");
	int xsks_fd = bpf_object__find_map_fd_by_name(x->obj, "xsks");
	uint32_t zero = 0;
	struct flow_cfg fc = { .ip = x->np[0].src.s_addr, .port = htons(x->port) };
	if (!p || cfg_fd < 0 || xsks_fd < 0) {
		snprintf(err, errlen, "the XDP program lacks pbox_flow, cfg or xsks");
		return PBOX_ESYS;
	}
	if (bpf_map_update_elem(cfg_fd, &zero, &fc, BPF_ANY) ||
	    (rc = xsk_socket__update_xskmap(x->xsk, xsks_fd)) != 0)
		return sys_err(rc ? -rc : errno, err, errlen, "filling the XDP maps", x->np[0].ifname);
	/* Native first; generic where the driver has no XDP. */
	static const uint32_t modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	for (unsigned m = x->skb_mode ? 1 : 0; m < 2; m++) {
		LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = modes[m]);
		x->link_fd = bpf_link_create(bpf_program__fd(p), x->np[0].ifindex, BPF_XDP, &lo);
		if (x->link_fd >= 0) {
			x->native = modes[m] == XDP_FLAGS_DRV_MODE;
			return 0;
		}
		if (errno == EBUSY || errno == EEXIST) {
			snprintf(err, errlen, "%s already has an XDP program (another worker's, "
				 "or pboxd's): one xdp worker per interface", x->np[0].ifname);
			return PBOX_ENOTSUP;
		}
		if (errno == EPERM || errno == EACCES)
			break;
	}
	return sys_err(errno, err, errlen, "attaching the XDP program", x->np[0].ifname);
}

static void fill_all(struct xdp_tp *x)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&x->fill, XDP_RX_CHUNKS, &idx) != XDP_RX_CHUNKS)
		return; /* cannot happen: the ring holds XDP_RING >= XDP_RX_CHUNKS */
	for (uint32_t i = 0; i < XDP_RX_CHUNKS; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) = (uint64_t)i * XDP_CHUNK;
	xsk_ring_prod__submit(&x->fill, XDP_RX_CHUNKS);
}

static void busy_poll_on(struct xdp_tp *x)
{
	int one = 1, us = BUSY_POLL_US, budget = BUSY_POLL_BUDGET;

	x->busy_poll = setsockopt(x->xsk_fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) == 0 &&
		       setsockopt(x->xsk_fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us)) == 0 &&
		       setsockopt(x->xsk_fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget)) == 0;
}

static void xdp_free(struct xdp_tp *x)
{
	if (x->link_fd >= 0)
		close(x->link_fd);
	if (x->xsk)
		xsk_socket__delete(x->xsk);
	if (x->umem)
		xsk_umem__delete(x->umem);
	if (x->obj)
		bpf_object__close(x->obj);
	if (x->area)
		munmap(x->area, x->area_len);
	if (x->udp_fd >= 0)
		close(x->udp_fd);
	free(x->free_slots);
	free(x->pending);
	free(x->done);
	free(x->stage);
	free(x->udp_buf);
	free(x->np);
	free(x);
}

/* ---- tx ------------------------------------------------------------------- */

/* Free the slots whose descriptors have all completed. */
static void reap(struct xdp_tp *x)
{
	uint32_t idx, n = xsk_ring_cons__peek(&x->comp, XDP_RING, &idx);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = *xsk_ring_cons__comp_addr(&x->comp, idx + i);
		uint32_t s = (uint32_t)((a - x->tx_base) / ((uint64_t)x->slot_chunks * XDP_CHUNK));
		if (a >= x->tx_base && s < x->nslots && x->pending[s] && --x->pending[s] == 0)
			x->free_slots[x->nfree++] = s;
	}
	xsk_ring_cons__release(&x->comp, n);
}

static bool tx_ring_empty(struct xdp_tp *x)
{
	return xsk_prod_nb_free(&x->tx, XDP_RING) == XDP_RING;
}

/* Let the kernel send what the tx ring holds: in copy mode a sendto moves
 * up to XDP_KICK_BATCH descriptors (a jumbo frame takes three), so kick
 * until the ring drains, bounded by what it holds. A descriptor left in
 * the ring waits for the next burst's kick: at the end of a window that
 * is the retransmission timeout. */
static int kick(struct xdp_tp *x, char *err, size_t errlen)
{
	unsigned tries = (XDP_RING - xsk_prod_nb_free(&x->tx, XDP_RING)) / XDP_KICK_BATCH + 4;

	while (tries-- > 0 && xsk_ring_prod__needs_wakeup(&x->tx) && !tx_ring_empty(x)) {
		tp_ctr_add(&x->ctr.wakeups, 1);
		if (sendto(x->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
			continue;
		if (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR) {
			reap(x);
			continue;
		}
		if (errno == ENETDOWN || errno == ENXIO) {
			snprintf(err, errlen, "AF_XDP send on %s: %s (the interface went down or "
				 "away)", x->np[0].ifname, strerror(errno));
			return PBOX_ESYS;
		}
		/* others are transient: retransmission repairs what was lost */
		break;
	}
	return 0;
}

static int xdp_tx_burst(struct transport *t, const struct tp_pkt *p, unsigned n, char *err,
			size_t errlen)
{
	struct xdp_tp *x = t->priv;
	unsigned sent = 0, queued = 0;
	size_t slot_bytes = (size_t)x->slot_chunks * XDP_CHUNK;

	reap(x);
	for (unsigned i = 0; i < n; i++) {
		size_t flen = RAWFRAME_HDRS + WIRE_HDR_LEN + (size_t)p[i].len;
		uint32_t nd = (uint32_t)((flen + XDP_CHUNK - 1) / XDP_CHUNK), idx;
		if (flen > slot_bytes) {   /* larger than the MTU the transport was opened for */
			tp_ctr_add(&x->ctr.tx_dropped, 1);
			continue;
		}
		if (x->nfree == 0 || xsk_ring_prod__reserve(&x->tx, nd, &idx) != nd) {
			/* full: hand over what is queued, take back what completed */
			xsk_ring_prod__submit(&x->tx, queued);
			queued = 0;
			int rc = kick(x, err, errlen);
			if (rc < 0)
				return rc;
			reap(x);
			if (x->nfree == 0 || xsk_ring_prod__reserve(&x->tx, nd, &idx) != nd) {
				tp_ctr_add(&x->ctr.tx_dropped, 1);
				continue;
			}
		}
		uint32_t s = x->free_slots[--x->nfree];
		uint64_t base = x->tx_base + (uint64_t)s * slot_bytes;
		rawframe_build(x->area + base, &x->np[p[i].ep], x->port, &x->eps[p[i].ep], &p[i].hdr,
			       p[i].payload, p[i].len);
		for (uint32_t d = 0; d < nd; d++) {
			struct xdp_desc *xd = xsk_ring_prod__tx_desc(&x->tx, idx + d);
			xd->addr = base + (uint64_t)d * XDP_CHUNK;
			xd->len = d + 1 < nd ? XDP_CHUNK : (uint32_t)(flen - (size_t)d * XDP_CHUNK);
			xd->options = d + 1 < nd ? XDP_PKT_CONTD : 0;
		}
		x->pending[s] = (uint8_t)nd;
		queued += nd;
		sent++;
	}
	xsk_ring_prod__submit(&x->tx, queued);
	int rc = kick(x, err, errlen);
	if (rc < 0)
		return rc;
	tp_ctr_add(&x->ctr.tx_dgrams, sent);
	return (int)sent;
}

/* ---- rx ------------------------------------------------------------------- */

static void refill(struct xdp_tp *x)
{
	uint32_t idx;

	if (x->ndone == 0)
		return;
	if (xsk_ring_prod__reserve(&x->fill, x->ndone, &idx) != x->ndone)
		return; /* cannot happen: every rx chunk fits the ring; kept for next time */
	for (uint32_t i = 0; i < x->ndone; i++)
		*xsk_ring_prod__fill_addr(&x->fill, idx + i) = x->done[i];
	xsk_ring_prod__submit(&x->fill, x->ndone);
	x->ndone = 0;
	if (xsk_ring_prod__needs_wakeup(&x->fill)) {
		tp_ctr_add(&x->ctr.wakeups, 1);
		recvfrom(x->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	}
}

static void accept_frame(struct xdp_tp *x, const uint8_t *f, size_t len, struct tp_dgram *d,
			 unsigned *n)
{
	struct tp_dgram *o = &d[*n];

	if (rawframe_parse(f, len, &x->np[0], x->port, &o->data, &o->len, &o->src_ip,
			   &o->src_port) < 0) {
		tp_ctr_add(&x->ctr.rx_bad, 1);
		return;
	}
	(*n)++;
}

/* Datagrams that reached the port's UDP socket instead (another queue). */
static unsigned drain_udp(struct xdp_tp *x, struct tp_dgram *d, unsigned max)
{
	unsigned n = 0;

	while (n < max && n < XDP_UDP_BURST) {
		uint8_t *b = x->udp_buf + (size_t)n * x->udp_len;
		struct sockaddr_in from = { 0 };
		socklen_t fl = sizeof(from);
		ssize_t r = recvfrom(x->udp_fd, b, x->udp_len, MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &fl);
		if (r < 0) {
			x->udp_ready = false;   /* drained: wait for poll to say more */
			break;
		}
		if ((size_t)r > x->udp_len) {
			tp_ctr_add(&x->ctr.rx_bad, 1);
			continue;
		}
		d[n++] = (struct tp_dgram){ .data = b, .len = (uint32_t)r,
					    .src_ip = from.sin_addr.s_addr,
					    .src_port = from.sin_port };
	}
	return n;
}

static int xdp_rx_burst(struct transport *t, struct tp_dgram *d, unsigned max, char *err,
			size_t errlen)
{
	struct xdp_tp *x = t->priv;
	uint32_t idx, got, used = 0;
	unsigned n = 0, staged = 0;

	(void)err;
	(void)errlen;
	refill(x);
	got = xsk_ring_cons__peek(&x->rx, XDP_RX_PEEK - x->ndone, &idx);
	while (used < got && n < max && staged < TP_RX_BURST) {
		/* one frame: descriptors up to the first without XDP_PKT_CONTD */
		uint32_t nd = 0;
		while (used + nd < got &&
		       (xsk_ring_cons__rx_desc(&x->rx, idx + used + nd)->options & XDP_PKT_CONTD))
			nd++;
		if (used + nd >= got)
			break;   /* its last part is not in the ring yet: next time */
		nd++;
		const struct xdp_desc *first = xsk_ring_cons__rx_desc(&x->rx, idx + used);
		if (nd == 1) {
			accept_frame(x, xsk_umem__get_data(x->area, first->addr), first->len, d, &n);
		} else {
			uint8_t *st = x->stage + (size_t)staged++ * x->stage_frame;
			size_t off = 0;
			bool fits = true;
			for (uint32_t k = 0; k < nd; k++) {
				const struct xdp_desc *xd = xsk_ring_cons__rx_desc(&x->rx, idx + used + k);
				fits = fits && off + xd->len <= x->stage_frame;
				if (fits)
					memcpy(st + off, xsk_umem__get_data(x->area, xd->addr), xd->len);
				off += xd->len;
			}
			if (fits)
				accept_frame(x, st, off, d, &n);
			else
				tp_ctr_add(&x->ctr.rx_bad, 1);
		}
		for (uint32_t k = 0; k < nd; k++) /* chunk base: aligned mode masks offsets */
			x->done[x->ndone++] = xsk_ring_cons__rx_desc(&x->rx, idx + used + k)->addr &
					      ~(uint64_t)(XDP_CHUNK - 1);
		used += nd;
	}
	/* peek moved the ring's cached consumer past all it returned: give
	 * back what is left for the next burst (else those frames are skipped
	 * for good, their chunks never refilled, and the kernel, seeing them
	 * unconsumed, keeps the socket readable) */
	xsk_ring_cons__cancel(&x->rx, got - used);
	xsk_ring_cons__release(&x->rx, used);
	if (n == 0) {
		if (x->busy_poll) {   /* drive the queue ourselves */
			tp_ctr_add(&x->ctr.wakeups, 1);
			recvfrom(x->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		}
		if (x->udp_ready)
			n = drain_udp(x, d, max);
	}
	tp_ctr_add(&x->ctr.rx_dgrams, n);
	return (int)n;
}

/* ---- the rest of the vtable ----------------------------------------------- */

static unsigned xdp_poll_fds(const struct transport *t, int fds[TP_MAX_FDS])
{
	const struct xdp_tp *x = t->priv;

	fds[0] = x->xsk_fd;
	fds[1] = x->udp_fd;
	return 2;
}

static void xdp_polled(struct transport *t, const short *revents, unsigned n)
{
	struct xdp_tp *x = t->priv;

	if (n > 1 && (revents[1] & POLLIN))
		x->udp_ready = true;
}

static void xdp_counters(const struct transport *t, struct tp_counters *out)
{
	const struct xdp_tp *x = t->priv;
	struct xdp_statistics st;
	socklen_t sl = sizeof(st);

	tp_counters_load(&x->ctr, out);
	if (getsockopt(x->xsk_fd, SOL_XDP, XDP_STATISTICS, &st, &sl) == 0) {
		out->rx_lost += st.rx_dropped + st.rx_ring_full + st.rx_fill_ring_empty_descs;
		out->tx_dropped += st.tx_invalid_descs;
		out->rx_bad += st.rx_invalid_descs;
	}
}

static void xdp_close(struct transport *t)
{
	xdp_free(t->priv);
}

static const struct transport_ops xdp_ops = {
	.name = "xdp",
	.tx_burst = xdp_tx_burst,
	.rx_burst = xdp_rx_burst,
	.poll_fds = xdp_poll_fds,
	.polled = xdp_polled,
	.counters = xdp_counters,
	.close = xdp_close,
};

int tp_xdp_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen)
{
	int rc = check_caps(err, errlen);
	if (rc < 0)
		return rc;
	struct xdp_tp *x = calloc(1, sizeof(*x));
	if (!x) {
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	x->link_fd = x->udp_fd = x->xsk_fd = -1;
	x->eps = cfg->eps;
	x->neps = cfg->neps;
	x->skb_mode = cfg->xdp_skb != 0;
	if (!(x->np = calloc(cfg->neps, sizeof(*x->np)))) {
		free(x);
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	if ((rc = netpath_resolve_eps(x->eps, x->neps, XDP_ARP_WAIT_MS, "xdp", x->np, err,
				      errlen)) == 0 &&
	    (rc = udp_reserve_port(&x->udp_fd, &x->port, err, errlen)) == 0) {
		uint32_t mtu = cfg->mtu > x->np[0].mtu ? cfg->mtu : x->np[0].mtu;
		rc = umem_create(x, mtu + 14, err, errlen);
	}
	if (rc == 0 && (rc = socket_create(x, err, errlen)) == 0) {
		fill_all(x);
		rc = prog_attach(x, err, errlen);
	}
	if (rc < 0) {
		xdp_free(x);
		return rc;
	}
	if (cfg->busy_poll)
		busy_poll_on(x);
	t->priv = x;
	t->ops = &xdp_ops;
	t->port = x->port;
	t->src = x->np[0].src;
	if (!x->zerocopy)
		snprintf(t->auto_veto, sizeof(t->auto_veto), "%s has no zero-copy AF_XDP (copy "
			 "mode measured slower than udp: docs/performance.md)", x->np[0].ifname);
	snprintf(t->info, sizeof(t->info), "xdp on %s queue 0 (%s XDP, %s%s%s)", x->np[0].ifname,
		 x->native ? "native" : "generic", x->zerocopy ? "zero-copy" : "copy mode",
		 x->sg ? ", multi-buffer" : "", x->busy_poll ? ", busy poll" : "");
	return 0;
}
