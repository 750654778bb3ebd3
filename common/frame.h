/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frame.h - Ethernet/ARP/IPv4/ICMP/UDP parsing and building on plain byte
 * buffers. Pure C (no DPDK types) so the box's whole input path can be unit
 * tested and fuzzed: every frame a port receives goes through frame_parse
 * before anything else looks at it.
 */
#ifndef PBOX_FRAME_H
#define PBOX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FRAME_ETH_LEN 14
#define FRAME_HDRS_LEN 42 /* Ethernet + IPv4 (no options) + UDP */

enum frame_kind {
	FRAME_ARP = 1,   /* an ARP request for our address */
	FRAME_ICMP_ECHO, /* an ICMP echo request to our address */
	FRAME_UDP,       /* a UDP datagram to our address: see info */
	FRAME_IGNORE,    /* harmless traffic not for us (ARP replies, other ARP targets) */
};

struct frame_info {
	const uint8_t *src_mac;  /* into the frame */
	uint32_t src_ip, dst_ip; /* host order */
	uint16_t src_port, dst_port;
	const uint8_t *payload;  /* UDP payload */
	size_t payload_len;
};

/*
 * Classify a received frame of len bytes for a port whose IPv4 address is
 * my_ip (host order). Returns an enum frame_kind, or a negative drop reason
 * (-DROP_SHORT, -DROP_NOT_IP, -DROP_BAD_IP, -DROP_FRAGMENT, -DROP_NOT_MINE,
 * -DROP_NOT_UDP, -DROP_BAD_LEN). For FRAME_UDP, *fi describes the datagram.
 * Checksums are not looked at: see frame_verify.
 */
int frame_parse(const uint8_t *frame, size_t len, uint32_t my_ip,
		struct frame_info *fi);

/* Checksums frame_verify checks in software (where the port gave no
 * verdict): the IPv4 header's, and the UDP or ICMP one. */
enum { FRAME_CSUM_IP = 1, FRAME_CSUM_L4 = 2 };
/* frame_verify's verdict on a UDP checksum field that holds the sum of the
 * pseudo header only: what a sender leaves for its NIC's checksum offload
 * (Linux CHECKSUM_PARTIAL). A veth passes such datagrams on unfinished;
 * they are accepted and counted (lcore_stats.csum_unfilled). A correct
 * checksum of a datagram whose other bytes sum to zero looks the same
 * (one in 65536 payloads): accepted too. */
#define FRAME_CSUM_UNFILLED 1

/*
 * Verify the checksums named in `what` of a frame frame_parse classified
 * as FRAME_UDP or FRAME_ICMP_ECHO. A UDP checksum of 0 (sent without one,
 * RFC 768) passes. Returns 0, FRAME_CSUM_UNFILLED, or -DROP_BAD_CSUM
 * (-DROP_SHORT, -DROP_BAD_IP for a frame frame_parse would have refused).
 */
int frame_verify(const uint8_t *frame, size_t len, unsigned what);

/* Turn an ARP request (FRAME_ARP) in place into our reply. Returns the
 * length to send. */
size_t frame_arp_reply(uint8_t *frame, size_t len, const uint8_t my_mac[6],
		       uint32_t my_ip);

/* Turn an ICMP echo request (FRAME_ICMP_ECHO) in place into the echo reply.
 * Returns the length to send. */
size_t frame_icmp_reply(uint8_t *frame, size_t len);

/*
 * Turn a UDP datagram (FRAME_UDP, IPv4 without options) in place into the
 * same datagram sent back: Ethernet, IPv4 and UDP source and destination
 * swapped, TTL 64, IPv4 and UDP checksums computed anew (so the caller may
 * change payload bytes first). Returns the length to send.
 */
size_t frame_udp_reflect(uint8_t *frame, size_t len);

/* Write Ethernet + IPv4 + UDP headers (FRAME_HDRS_LEN bytes) for a UDP
 * payload of payload_len bytes; IPv4 checksum computed, UDP checksum 0. */
void frame_udp_headers(uint8_t *out, const uint8_t dst_mac[6],
		       const uint8_t src_mac[6], uint32_t src_ip, uint32_t dst_ip,
		       uint16_t src_port, uint16_t dst_port, size_t payload_len);

/* The Internet checksum (RFC 1071) of len bytes, in network order. */
uint16_t frame_csum(const void *p, size_t len);

/*
 * Add len bytes at p to a ones'-complement partial sum (not folded, not
 * complemented; in memory byte order, so no swaps). Pieces of one datagram
 * combine by adding their sums as long as each starts at an even offset
 * from the first; only the last may have odd length. Scalar or AVX2, by
 * the CPU (common/csum_impl.h); both return the same integer.
 */
uint64_t frame_csum_partial(const void *p, size_t len, uint64_t sum);

/*
 * Fill in the UDP checksum of the frame whose Ethernet/IPv4/UDP headers
 * frame_udp_headers wrote at hdrs: extra (may be 0) bytes that follow the
 * UDP header in the same buffer, then a payload whose frame_csum_partial
 * is payload_sum. Lets N copies of one payload with different headers
 * share one pass over it.
 */
void frame_udp_csum(uint8_t *hdrs, size_t extra, uint64_t payload_sum);

#endif
