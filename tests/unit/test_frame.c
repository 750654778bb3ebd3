/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_frame.c - the box's frame parser and the ARP, ICMP and UDP frames it
 * builds: every drop reason, and every built frame parses back.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/csum_impl.h"
#include "common/drops.h"
#include "common/frame.h"

#define MY_IP 0xC6120001u   /* 198.18.0.1 */
#define PEER_IP 0xC6120002u
static const uint8_t my_mac[6] = { 2, 0, 0, 0, 0, 1 };
static const uint8_t peer_mac[6] = { 2, 0, 0, 0, 0, 2 };

static size_t udp_frame(uint8_t *f, size_t payload)
{
	frame_udp_headers(f, my_mac, peer_mac, PEER_IP, MY_IP, 40000, 47000, payload);
	memset(f + FRAME_HDRS_LEN, 0xAB, payload);
	return FRAME_HDRS_LEN + payload;
}

static void parse__udp_frame_built_by_us(void **state)
{
	(void)state;
	uint8_t f[256];
	struct frame_info fi;
	size_t n = udp_frame(f, 100);
	assert_int_equal(frame_parse(f, n, MY_IP, &fi), FRAME_UDP);
	assert_int_equal(fi.src_ip, PEER_IP);
	assert_int_equal(fi.dst_ip, MY_IP);
	assert_int_equal(fi.src_port, 40000);
	assert_int_equal(fi.dst_port, 47000);
	assert_int_equal(fi.payload_len, 100);
	assert_ptr_equal(fi.payload, f + FRAME_HDRS_LEN);
	assert_memory_equal(fi.src_mac, peer_mac, 6);
	assert_int_equal(frame_csum(f + 14, 20), 0); /* IPv4 checksum valid */
	/* Ethernet padding after the IP packet is allowed */
	assert_int_equal(frame_parse(f, n + 10, MY_IP, &fi), FRAME_UDP);
	assert_int_equal(fi.payload_len, 100);
}

/* The UDP checksum as a receiver checks it: pseudo header + datagram,
 * summed by the plain byte-wise frame_csum, must fold to 0. */
static uint16_t udp_verify(const uint8_t *f, size_t udplen)
{
	static uint8_t buf[12 + 10000];
	memcpy(buf, f + 14 + 12, 8);
	buf[8] = 0;
	buf[9] = 17;
	buf[10] = (uint8_t)(udplen >> 8);
	buf[11] = (uint8_t)udplen;
	memcpy(buf + 12, f + 34, udplen);
	return frame_csum(buf, 12 + udplen);
}

static void udp_csum__header_part_and_payload_sum_combine(void **state)
{
	(void)state;
	static uint8_t f[FRAME_HDRS_LEN + 9000];
	/* 40 bytes after the UDP header stand for pbox's header; every payload
	 * length, odd ones too, and payload bytes that force carries */
	static const size_t lens[] = { 0, 1, 2, 3, 63, 64, 1407, 1408, 8896, 8955 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t plen = lens[i], extra = 40;
		frame_udp_headers(f, my_mac, peer_mac, MY_IP, PEER_IP, 47000, 40001, extra + plen);
		for (size_t b = 0; b < extra + plen; b++)
			f[FRAME_HDRS_LEN + b] = (uint8_t)(i % 2 ? 0xFF : b * 131 + 7);
		uint64_t ps = frame_csum_partial(f + FRAME_HDRS_LEN + extra, plen, 0);
		frame_udp_csum(f, extra, ps);
		uint16_t c;
		memcpy(&c, f + 40, 2);
		assert_int_not_equal(c, 0);           /* 0 would mean "no checksum" */
		assert_int_equal(udp_verify(f, 8 + extra + plen), 0);
		/* one payload sum serves a second destination's headers */
		frame_udp_headers(f, my_mac, peer_mac, MY_IP, PEER_IP + 1, 47000, 40002, extra + plen);
		frame_udp_csum(f, extra, ps);
		assert_int_equal(udp_verify(f, 8 + extra + plen), 0);
		/* a flipped payload bit is caught */
		if (plen) {
			f[FRAME_HDRS_LEN + extra + plen / 2] ^= 0x10;
			assert_int_not_equal(udp_verify(f, 8 + extra + plen), 0);
		}
	}
}

static void parse__drops_each_malformed_frame(void **state)
{
	(void)state;
	uint8_t f[256], g[256];
	struct frame_info fi;
	size_t n = udp_frame(f, 100);

	assert_int_equal(frame_parse(f, 13, MY_IP, &fi), -DROP_SHORT);
	assert_int_equal(frame_parse(f, 30, MY_IP, &fi), -DROP_SHORT);
	memcpy(g, f, n); g[12] = 0x86; g[13] = 0xDD; /* IPv6 */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_NOT_IP);
	memcpy(g, f, n); g[14] = 0x46; /* options */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_BAD_IP);
	memcpy(g, f, n); g[20] = 0x20; /* more fragments */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_FRAGMENT);
	memcpy(g, f, n); g[20] = 0x40; g[21] = 0x01; /* DF with an offset: a later fragment */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_FRAGMENT);
	assert_int_equal(frame_parse(f, n - 1, MY_IP, &fi), -DROP_BAD_IP); /* ip len > frame */
	assert_int_equal(frame_parse(f, n, MY_IP + 1, &fi), -DROP_NOT_MINE);
	memcpy(g, f, n); g[23] = 6; /* TCP */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_NOT_UDP);
	memcpy(g, f, n); g[39] ^= 1; /* udp length */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_BAD_LEN);
	memcpy(g, f, n); g[16] = 0; g[17] = 20 + 4; /* ip len too short for udp */
	assert_int_equal(frame_parse(g, n, MY_IP, &fi), -DROP_SHORT);
}

static size_t arp_request(uint8_t *f, uint32_t target)
{
	uint8_t a[42] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2, 0x08, 0x06,
		0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 2, 198, 18, 0, 2,
		0, 0, 0, 0, 0, 0 };
	uint32_t t = htonl(target);
	memcpy(a + 38, &t, 4);
	memcpy(f, a, sizeof(a));
	return sizeof(a);
}

static void arp__request_for_us_gets_reply(void **state)
{
	(void)state;
	uint8_t f[64];
	struct frame_info fi;
	size_t n = arp_request(f, MY_IP);
	assert_int_equal(frame_parse(f, n, MY_IP, &fi), FRAME_ARP);
	assert_int_equal(frame_arp_reply(f, n, my_mac, MY_IP), 42);
	assert_memory_equal(f, peer_mac, 6);            /* to the asker */
	assert_memory_equal(f + 6, my_mac, 6);
	assert_int_equal(f[21], 2);                      /* op reply */
	assert_memory_equal(f + 22, my_mac, 6);         /* sender hw = us */
	uint8_t ip[4] = { 198, 18, 0, 1 };
	assert_memory_equal(f + 28, ip, 4);
	assert_memory_equal(f + 32, peer_mac, 6);
	/* the reply itself, and requests for others, are ignored */
	assert_int_equal(frame_parse(f, n, MY_IP, &fi), FRAME_IGNORE);
	n = arp_request(f, MY_IP + 5);
	assert_int_equal(frame_parse(f, n, MY_IP, &fi), FRAME_IGNORE);
	assert_int_equal(frame_parse(f, 30, MY_IP, &fi), -DROP_SHORT);
}

static void icmp__echo_request_gets_valid_reply(void **state)
{
	(void)state;
	uint8_t f[128];
	frame_udp_headers(f, my_mac, peer_mac, PEER_IP, MY_IP, 0, 0, 16 - 8); /* 16-byte ICMP message */
	f[23] = 1; /* ICMP */
	f[24] = 0; f[25] = 0; /* recompute ip checksum */
	uint16_t c = frame_csum(f + 14, 20);
	memcpy(f + 24, &c, 2);
	uint8_t *icmp = f + 34;
	memset(icmp, 0x5A, 16);
	icmp[0] = 8; icmp[1] = 0; icmp[2] = icmp[3] = 0;
	c = frame_csum(icmp, 16);
	memcpy(icmp + 2, &c, 2);
	size_t n = 34 + 16;
	struct frame_info fi;
	assert_int_equal(frame_parse(f, n, MY_IP, &fi), FRAME_ICMP_ECHO);
	assert_int_equal(frame_icmp_reply(f, n), n);
	assert_int_equal(icmp[0], 0);
	assert_int_equal(frame_csum(icmp, 16), 0);
	assert_int_equal(frame_csum(f + 14, 20), 0);
	assert_memory_equal(f, peer_mac, 6);
	/* an echo reply is not answered */
	assert_int_equal(frame_parse(f, n, PEER_IP, &fi), -DROP_NOT_UDP);
}

/* Software checksums: right ones pass, one flipped bit in the IPv4 header,
 * the UDP header or payload, or the ICMP message is bad_csum; a UDP
 * checksum of 0 (none sent) passes; only the named checks are made. */
/* A byte-wise reference: 16-bit words in memory order, odd tail padded. */
static uint16_t fold_ref(const uint8_t *p, size_t len)
{
	uint64_t s = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		uint16_t h;
		memcpy(&h, p + i, 2);
		s += h;
	}
	if (len & 1) {
		uint8_t last[2] = { p[len - 1], 0 };
		uint16_t h;
		memcpy(&h, last, 2);
		s += h;
	}
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	return (uint16_t)s;
}

static uint16_t fold(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	return (uint16_t)s;
}

/* Every variant returns the same integer for every length and alignment,
 * and folds to the byte-wise reference (all-ones bytes: the most carries). */
static void csum__variants_agree_at_every_length_and_offset(void **state)
{
	static uint8_t buf[70016];
	uint32_t x = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	int avx2 = __builtin_cpu_supports("avx2");
	for (int fill = 0; fill < 2; fill++) {
		if (fill)
			memset(buf, 0xFF, sizeof(buf));
		for (size_t off = 0; off < 8; off++)
			for (size_t len = 0; len <= 600; len++) {
				uint64_t s = frame_csum_scalar(buf + off, len, 7);
				assert_int_equal(fold(s), fold(fold_ref(buf + off, len) + 7u));
				assert_true(frame_csum_partial(buf + off, len, 7) == s);
				if (avx2)
					assert_true(frame_csum_avx2(buf + off, len, 7) == s);
			}
		const size_t big[] = { 1408, 8896, 9000, 65535, 70000 };
		for (size_t k = 0; k < sizeof(big) / sizeof(big[0]); k++) {
			uint64_t s = frame_csum_scalar(buf + 3, big[k], 0);
			assert_int_equal(fold(s), fold_ref(buf + 3, big[k]));
			assert_true(frame_csum_partial(buf + 3, big[k], 0) == s);
			if (avx2)
				assert_true(frame_csum_avx2(buf + 3, big[k], 0) == s);
		}
	}
}

static void verify__checksums_in_software(void **state)
{
	(void)state;
	uint8_t f[256], g[256];
	size_t n = udp_frame(f, 101);  /* odd length */
	uint64_t s = frame_csum_partial(f + FRAME_HDRS_LEN, 101, 0);
	frame_udp_csum(f, 0, s);
	const unsigned both = FRAME_CSUM_IP | FRAME_CSUM_L4;

	assert_int_equal(frame_verify(f, n, both), 0);
	memcpy(g, f, n); g[14 + 8] ^= 1;   /* ttl: ip checksum now wrong */
	assert_int_equal(frame_verify(g, n, both), -DROP_BAD_CSUM);
	assert_int_equal(frame_verify(g, n, FRAME_CSUM_L4), 0);
	memcpy(g, f, n); g[FRAME_HDRS_LEN + 50] ^= 0x10;   /* payload */
	assert_int_equal(frame_verify(g, n, both), -DROP_BAD_CSUM);
	assert_int_equal(frame_verify(g, n, FRAME_CSUM_IP), 0);
	memcpy(g, f, n); g[34] ^= 1;   /* source port */
	assert_int_equal(frame_verify(g, n, FRAME_CSUM_L4), -DROP_BAD_CSUM);
	memcpy(g, f, n); g[FRAME_HDRS_LEN + 50] ^= 0x10; g[40] = g[41] = 0;  /* no checksum */
	assert_int_equal(frame_verify(g, n, both), 0);
	/* the pseudo-header sum alone, as Linux leaves it for an offload */
	uint8_t pseudo[12];
	memcpy(pseudo, f + 26, 8);
	pseudo[8] = 0; pseudo[9] = 17; memcpy(pseudo + 10, f + 38, 2);
	uint64_t ps = frame_csum_partial(pseudo, 12, 0);
	while (ps >> 16)
		ps = (ps & 0xFFFF) + (ps >> 16);
	uint16_t p16 = (uint16_t)ps;
	memcpy(g, f, n); memcpy(g + 40, &p16, 2);
	assert_int_equal(frame_verify(g, n, both), FRAME_CSUM_UNFILLED);

	/* ICMP echo */
	frame_udp_headers(f, my_mac, peer_mac, PEER_IP, MY_IP, 0, 0, 16 - 8);
	f[23] = 1;
	f[24] = f[25] = 0;
	uint16_t c = frame_csum(f + 14, 20);
	memcpy(f + 24, &c, 2);
	memset(f + 34, 0x5A, 16);
	f[34] = 8; f[35] = 0; f[36] = f[37] = 0;
	c = frame_csum(f + 34, 16);
	memcpy(f + 36, &c, 2);
	assert_int_equal(frame_verify(f, 50, both), 0);
	memcpy(g, f, 50); g[40] ^= 4;
	assert_int_equal(frame_verify(g, 50, both), -DROP_BAD_CSUM);
	memcpy(g, f, 50); g[14 + 10] ^= 0x80;   /* ip checksum field */
	assert_int_equal(frame_verify(g, 50, both), -DROP_BAD_CSUM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse__udp_frame_built_by_us),
		cmocka_unit_test(udp_csum__header_part_and_payload_sum_combine),
		cmocka_unit_test(parse__drops_each_malformed_frame),
		cmocka_unit_test(arp__request_for_us_gets_reply),
		cmocka_unit_test(icmp__echo_request_gets_valid_reply),
		cmocka_unit_test(verify__checksums_in_software),
		cmocka_unit_test(csum__variants_agree_at_every_length_and_offset),
	};
	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
