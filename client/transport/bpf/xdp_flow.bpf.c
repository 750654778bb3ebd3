// SPDX-License-Identifier: BSD-3-Clause
/*
 * xdp_flow.bpf.c - the XDP program of libpbox's xdp transport (tp_xdp.c):
 * it redirects the frames of one worker's own pbox flow (UDP/IPv4 to its
 * address and port, as set in `cfg`) to the AF_XDP socket of the receive
 * queue they arrived on, and passes every other frame to the kernel. A
 * queue without a socket passes too (bpf_redirect_map's fallback), so the
 * worker's UDP socket, bound to the same port, still receives what lands
 * there. Headers are read from the first buffer only; frames may span
 * several (xdp.frags: jumbo frames with AF_XDP multi-buffer).
 *
 * Built with clang -target bpf and linked into libpbox as bytes
 * (client/Makefile.inc); tp_xdp.c loads it with libbpf.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct flow_cfg {
	__u32 ip;      /* the worker's IPv4 address, network order */
	__u16 port;    /* its UDP port, network order */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct flow_cfg);
} cfg SEC(".maps");

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
	__u32 zero = 0;

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	struct flow_cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c || ip->daddr != c->ip || udp->dest != c->port)
		return XDP_PASS;
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
