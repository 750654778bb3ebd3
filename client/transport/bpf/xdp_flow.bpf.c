// SPDX-License-Identifier: BSD-3-Clause
/*
 * xdp_flow.bpf.c - the XDP program of libpbox's xdp transport (tp_xdp.c,
 * xdp_share.c): one per interface and process, whichever of the process's
 * AF_XDP sockets share it (a fleet's clients, one per box). It redirects
 * the frames of each socket's own pbox flow (UDP/IPv4 to its address and
 * port: a key of `flows`) to that socket (its `xsks` index), if they
 * arrived on the queue the socket is bound to, and passes every other
 * frame to the kernel. A frame of a flow on another queue passes too, so
 * the flow's UDP socket, bound to the same port, still receives it.
 * Headers are read from the first buffer only; frames may span several
 * (xdp.frags: jumbo frames with AF_XDP multi-buffer).
 *
 * Built with clang -target bpf and linked into libpbox as bytes
 * (client/Makefile.inc); xdp_share.c loads it with libbpf.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct flow_key {
	__u32 ip;      /* the socket's IPv4 address, network order */
	__u16 port;    /* its UDP port, network order */
	__u16 pad;     /* 0 */
};

struct flow_to {
	__u32 xsk;     /* its index in xsks */
	__u32 queue;   /* the receive queue it is bound to */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct flow_key);
	__type(value, struct flow_to);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp.frags")
int pbox_flow(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	struct flow_key k = { .ip = ip->daddr, .port = udp->dest, .pad = 0 };
	struct flow_to *to = bpf_map_lookup_elem(&flows, &k);
	if (!to || ctx->rx_queue_index != to->queue)
		return XDP_PASS;
	return bpf_redirect_map(&xsks, to->xsk, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
