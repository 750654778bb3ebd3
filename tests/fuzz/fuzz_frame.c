/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_frame.c - the box's whole receive path up to the engine, on
 * arbitrary bytes: the input is one received Ethernet frame for a port
 * with a fixed IPv4 address. frame_parse classifies it; a FRAME_UDP
 * payload goes through wire_decode (and must re-encode to the same 40
 * header bytes); ARP and ICMP echo requests are turned into replies on an
 * exact-size copy, which must stay inside the received length and carry
 * valid checksums. ASan catches any read or write outside the frame.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/drops.h"
#include "common/frame.h"
#include "common/wire.h"

#define MY_IP 0xC6120001u /* 198.18.0.1 */

static const uint8_t my_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };

#include "tests/fuzz/fuzz_check.h"

static int frame_drop_ok(int r)
{
	return r == DROP_SHORT || r == DROP_NOT_IP || r == DROP_BAD_IP || r == DROP_FRAGMENT ||
	       r == DROP_NOT_MINE || r == DROP_NOT_UDP || r == DROP_BAD_LEN;
}

static int wire_drop_ok(int r)
{
	return r == DROP_BAD_LEN || r == DROP_BAD_MAGIC || r == DROP_BAD_VERSION ||
	       r == DROP_BAD_TYPE || r == DROP_BAD_DTYPE || r == DROP_BAD_FLAGS;
}

static void udp(const uint8_t *frame, size_t len, const struct frame_info *fi)
{
	struct wire_msg m;
	uint8_t hdr[WIRE_HDR_LEN];

	CHECK(fi->payload >= frame + FRAME_HDRS_LEN);
	CHECK(fi->payload_len <= len - (size_t)(fi->payload - frame));
	CHECK(fi->src_mac == frame + 6);
	CHECK(fi->dst_ip == MY_IP);

	int rc = wire_decode(fi->payload, fi->payload_len, &m);
	if (rc < 0) {
		CHECK(wire_drop_ok(-rc));
		return;
	}
	CHECK(rc == 0);
	CHECK(m.type >= WIRE_PUSH && m.type <= WIRE_NACK);
	CHECK(wire_dtype_size(m.dtype) != 0);
	CHECK((m.flags & ~WIRE_FLAGS_KNOWN) == 0);
	CHECK(m.plen == fi->payload_len - WIRE_HDR_LEN);
	if (m.type == WIRE_PROBE || m.type == WIRE_PROBE_ACK)
		CHECK(m.count == 0);   /* any padding */
	else if (m.type == WIRE_WAIT || m.type == WIRE_NACK) /* the notice body */
		CHECK(m.count == 0 && m.plen == WIRE_NOTICE_LEN);
	else if (m.flags & WIRE_FLAG_SPARSE) /* records, checked by common/sparse.h */
		CHECK((m.type == WIRE_PUSH || m.type == WIRE_RESULT) && m.count >= 1 &&
		      m.plen >= 8u * m.count && m.plen % 4 == 0);
	else
		CHECK(fi->payload_len == WIRE_HDR_LEN + (size_t)m.count * wire_dtype_size(m.dtype));
	wire_encode(hdr, &m);
	CHECK(memcmp(hdr, fi->payload, WIRE_HDR_LEN) == 0);
	if (m.type == WIRE_PROBE) {   /* the box's answer: the same datagram sent back */
		uint8_t *back = malloc(len);
		memcpy(back, frame, len);
		size_t n = frame_udp_reflect(back, len);
		CHECK(n <= len);
		struct frame_info ri;
		CHECK(frame_parse(back, n, fi->src_ip, &ri) == FRAME_UDP);
		CHECK(ri.src_ip == MY_IP && ri.dst_port == fi->src_port && ri.src_port == fi->dst_port);
		CHECK(frame_verify(back, n, FRAME_CSUM_IP | FRAME_CSUM_L4) >= 0); /* correct, or looks unfilled: accepted either way */
		free(back);
	}
}

static void arp(const uint8_t *frame, size_t len)
{
	uint8_t *c = malloc(len);
	struct frame_info fi;

	memcpy(c, frame, len);
	size_t n = frame_arp_reply(c, len, my_mac, MY_IP);
	CHECK(n <= len);
	CHECK(memcmp(c + 6, my_mac, 6) == 0);
	CHECK(memcmp(c, frame + 22, 6) == 0); /* to the requester's MAC */
	/* a reply is not a request for us: ignored */
	CHECK(frame_parse(c, n, MY_IP, &fi) == FRAME_IGNORE);
	free(c);
}

static void icmp(const uint8_t *frame, size_t len)
{
	uint8_t *c = malloc(len);

	memcpy(c, frame, len);
	size_t n = frame_icmp_reply(c, len);
	CHECK(n <= len);
	CHECK(n >= FRAME_HDRS_LEN - 8 + 4);
	CHECK(frame_csum(c + FRAME_ETH_LEN, 20) == 0);
	CHECK(c[FRAME_ETH_LEN + 20] == 0); /* echo reply */
	CHECK(frame_csum(c + FRAME_ETH_LEN + 20, n - FRAME_ETH_LEN - 20) == 0);
	CHECK(memcmp(c, frame + 6, 6) == 0 && memcmp(c + 6, frame, 6) == 0);
	free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_info fi;

	memset(&fi, 0, sizeof(fi));
	int k = frame_parse(data, size, MY_IP, &fi);
	if (k < 0) {
		CHECK(frame_drop_ok(-k));
		return 0;
	}
	if (k == FRAME_UDP || k == FRAME_ICMP_ECHO) {
		/* what the lcore checks in software: 0, a UDP checksum left
		 * to an offload (accepted), or bad_csum, never more */
		int v = frame_verify(data, size, FRAME_CSUM_IP | FRAME_CSUM_L4);
		CHECK(v == 0 || (v == FRAME_CSUM_UNFILLED && k == FRAME_UDP) || v == -DROP_BAD_CSUM);
	}
	switch (k) {
	case FRAME_UDP:
		udp(data, size, &fi);
		break;
	case FRAME_ARP:
		arp(data, size);
		break;
	case FRAME_ICMP_ECHO:
		icmp(data, size);
		break;
	case FRAME_IGNORE:
		break;
	default:
		CHECK(!"unknown frame kind");
	}
	return 0;
}
