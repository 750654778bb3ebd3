/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xdp_share.h - what the xdp transports of one process on one interface
 * and queue share (xdp_share.c): the kernel lets several AF_XDP sockets
 * bind one (interface, queue) only if they share its UMEM
 * (XDP_SHARED_UMEM), with its fill and completion rings, each socket
 * keeping its own rx and tx rings; and an interface has one XDP program.
 * A fleet's clients (one per box, client/ops/fleet.c) reaching their boxes
 * through one interface are such sockets.
 *
 * The first socket on an (interface, queue) makes the share: the UMEM, its
 * rings, the XDP program (client/transport/bpf/xdp_flow.bpf.c) attached
 * through a BPF link; later ones join it; the last to leave frees it. The
 * program steers each socket's flow (its address and UDP port) to it.
 *
 * UMEM layout (4 KiB chunks):
 *   [ rx chunks: XDP_RX_CHUNKS, posted to the one fill ring; any socket's
 *     rx ring hands them out, its owner posts them back ]
 *   [ tx slots: a pool of slot_chunks-chunk slots (xsk_slots.h) that every
 *     socket takes from and the completion ring gives back to ]
 * The fill ring, the completion ring and the slot pool are used under
 * `lock`, a batch at a time (a burst's chunks, a burst's slots); each
 * socket's rx and tx rings are its own thread's alone.
 */
#ifndef PBOX_CLIENT_TRANSPORT_XDP_SHARE_H
#define PBOX_CLIENT_TRANSPORT_XDP_SHARE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "client/transport/rawframe.h"
#include "client/transport/xsk_slots.h"

#define XDP_CHUNK       4096u
#define XDP_HEADROOM    256u     /* XDP_PACKET_HEADROOM: the kernel's, before each received frame */
#define XDP_RX_CHUNKS   4096u    /* 16 MiB preposted for receive */
#define XDP_RING        4096u    /* fill, completion, rx and tx rings */
#define XDP_TX_CHUNKS   3072u    /* 12 MiB of tx slots */
#define XDP_MAX_SOCKETS 64u      /* per share: the program's xsks and flows maps */

/* A received frame lands after the kernel's headroom: one longer than
 * what is left of a chunk takes two (multi-buffer, XDP_USE_SG), or the
 * kernel drops it. */
static inline bool rx_needs_sg(uint32_t frame_max)
{
	return frame_max > XDP_CHUNK - XDP_HEADROOM;
}

struct xdp_share {
	/* fixed when made */
	uint64_t netns;              /* SO_NETNS_COOKIE of the namespace (0 if unknown) */
	int ifindex;
	uint32_t queue;
	char ifname[IF_NAMESIZE];
	uint8_t *area;               /* the UMEM */
	size_t area_len;
	struct xsk_umem *umem;
	uint32_t frame_max;          /* the largest frame a tx slot holds */
	bool sg, zerocopy, native;
	struct bpf_object *obj;
	int link_fd, flows_fd, xsks_fd;
	/* under lock */
	pthread_mutex_t lock;
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_slots slots;
	/* written under the registry's lock (xdp_share.c) */
	unsigned members;            /* atomic: read by xdp_share_members */
	uint64_t xsk_used;           /* xsks indices in use, a bit each (atomic:
					read by xdp_share_first) */
	struct xdp_share *next;
};

/* What a socket joining brings. */
struct xdp_member {
	const struct netpath *np;    /* its path: interface, source address */
	uint64_t netns;              /* its namespace's cookie (0 if unknown) */
	uint16_t port;               /* its flow's UDP port, host order */
	uint32_t frame_max;          /* its largest frame: MTU + Ethernet header */
	bool skb_mode;               /* generic XDP only (tp_config.xdp_skb): the first's wins */
};

/*
 * Bind an AF_XDP socket to queue 0 of m->np's interface, making the share
 * (first socket: UMEM, fill ring filled, program attached) or joining it,
 * and steer m's flow to it: *sh, *xsk (its rx and tx rings in *rx, *tx),
 * *idx (its xsks index, for xdp_share_unsteer), *others (the share's
 * other sockets, 0 for the first). Errors: PBOX_ENOTSUP
 * (the queue is another process's, no multi-buffer, the interface has
 * another XDP program, the share's frames are too small for m's),
 * PBOX_EPERM, PBOX_ENOMEM, PBOX_ESYS; err names the interface.
 */
int xdp_share_join(const struct xdp_member *m, struct xdp_share **sh, struct xsk_socket **xsk,
		   struct xsk_ring_cons *rx, struct xsk_ring_prod *tx, unsigned *idx,
		   unsigned *others, char *err, size_t errlen);

/* Stop steering the flow (ip network order, port host order) to socket
 * idx: its rx ring receives nothing new once this returns. */
void xdp_share_unsteer(struct xdp_share *sh, unsigned idx, uint32_t ip, uint16_t port);

/* Delete the socket and free xsks index idx; the last to leave frees the
 * share (program detached, UMEM unmapped). */
void xdp_share_leave(struct xdp_share *sh, struct xsk_socket *xsk, unsigned idx);

/* The sockets in the share now (any thread; may change right after). */
static inline unsigned xdp_share_members(const struct xdp_share *sh)
{
	return __atomic_load_n(&sh->members, __ATOMIC_RELAXED);
}

/* Whether socket idx is the share's first (the lowest xsks index in use,
 * any thread; may change right after): the one that reports what the
 * kernel counts per share, not per socket (frames dropped for an empty
 * fill ring), so that a fleet's sum of its sockets' counters has it once. */
static inline bool xdp_share_first(const struct xdp_share *sh, unsigned idx)
{
	uint64_t used = __atomic_load_n(&sh->xsk_used, __ATOMIC_RELAXED);
	return used && (unsigned)__builtin_ctzll(used) == idx;
}

/* Under sh->lock: the completion ring's addresses back to the slot pool. */
void xdp_share_reap_locked(struct xdp_share *sh);

#endif
