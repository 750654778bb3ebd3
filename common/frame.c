/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frame.c - parse and build the few frame types the box speaks: ARP
 * (answer requests for our IPs), ICMP echo, and UDP/IPv4 carrying pbox.
 * Every length is checked before the byte it covers is read.
 */
#include "common/frame.h"

#include <arpa/inet.h>
#include <string.h>

#include "common/csum_impl.h"
#include "common/drops.h"

#define ETH_P_IPV4 0x0800
#define ETH_P_ARP  0x0806
#define IPPROTO_ICMP_ 1
#define IPPROTO_UDP_ 17

struct eth { uint8_t dst[6], src[6]; uint16_t type; } __attribute__((packed));
struct arp {
	uint16_t htype, ptype;
	uint8_t hlen, plen;
	uint16_t op;
	uint8_t sha[6];
	uint32_t spa;
	uint8_t tha[6];
	uint32_t tpa;
} __attribute__((packed));
struct ipv4 {
	uint8_t vihl, tos;
	uint16_t len, id, frag;
	uint8_t ttl, proto;
	uint16_t csum;
	uint32_t src, dst;
} __attribute__((packed));
struct udp { uint16_t sport, dport, len, csum; } __attribute__((packed));
struct icmp { uint8_t type, code; uint16_t csum; } __attribute__((packed));

_Static_assert(sizeof(struct eth) == 14, "eth");
_Static_assert(sizeof(struct arp) == 28, "arp");
_Static_assert(sizeof(struct ipv4) == 20, "ipv4");
_Static_assert(FRAME_HDRS_LEN == 14 + 20 + 8, "headers");

uint16_t frame_csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t sum = 0;

	for (; len > 1; len -= 2, b += 2)
		sum += (uint32_t)(b[0] << 8 | b[1]);
	if (len)
		sum += (uint32_t)b[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return htons((uint16_t)~sum);
}

uint64_t frame_csum_scalar(const void *p, size_t len, uint64_t sum)
{
	const uint8_t *b = p;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	for (; len >= 16; len -= 16, b += 16) {
		uint32_t w[4];
		memcpy(w, b, 16);
		s0 += w[0];
		s1 += w[1];
		s2 += w[2];
		s3 += w[3];
	}
	for (; len >= 4; len -= 4, b += 4) {
		uint32_t w;
		memcpy(&w, b, 4);
		s0 += w;
	}
	if (len >= 2) {
		uint16_t h;
		memcpy(&h, b, 2);
		s1 += h;
		len -= 2;
		b += 2;
	}
	if (len) {
		uint8_t last[2] = { b[0], 0 };
		uint16_t h;
		memcpy(&h, last, 2);
		s2 += h;
	}
	/* each s < 2^62 for any length a frame can have: no carry is lost */
	return sum + s0 + s1 + s2 + s3;
}

/*
 * frame_csum_partial is the AVX2 variant where the CPU has AVX2 (AVX-512
 * measured no faster: 32 bytes per cycle in cache both), chosen once when
 * the program is loaded (an ifunc; PBOX_KERNEL does not apply: every
 * variant gives the same sum). The resolver runs before the sanitizers'
 * runtimes start, so it is not instrumented.
 */
typedef uint64_t csum_fn(const void *, size_t, uint64_t);

__attribute__((used, no_sanitize_address, no_sanitize("undefined")))
static csum_fn *csum_resolve(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		return frame_csum_avx2;
	return frame_csum_scalar;
}

uint64_t frame_csum_partial(const void *p, size_t len, uint64_t sum)
	__attribute__((ifunc("csum_resolve")));

/* Fold a partial sum to 16 bits (memory order). */
static uint16_t csum_fold(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	return (uint16_t)s;
}

void frame_udp_csum(uint8_t *hdrs, size_t extra, uint64_t payload_sum)
{
	uint8_t *ip = hdrs + FRAME_ETH_LEN;
	uint8_t *udp = ip + 20;
	uint8_t pseudo[12];

	memcpy(pseudo, ip + 12, 8);    /* source and destination address */
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_UDP_;
	memcpy(pseudo + 10, udp + 4, 2); /* UDP length */
	udp[6] = udp[7] = 0;
	uint64_t s = frame_csum_partial(pseudo, sizeof(pseudo), payload_sum);
	s = frame_csum_partial(udp, 8 + extra, s);
	uint16_t c = (uint16_t)~csum_fold(s);
	if (c == 0)
		c = 0xFFFF; /* 0 means "no checksum" in UDP over IPv4 */
	memcpy(udp + 6, &c, 2);
}

int frame_verify(const uint8_t *frame, size_t len, unsigned what)
{
	const uint8_t *ip = frame + FRAME_ETH_LEN;
	struct ipv4 h;

	if (len < FRAME_ETH_LEN + sizeof(h))
		return -DROP_SHORT;
	memcpy(&h, ip, sizeof(h));
	size_t iplen = ntohs(h.len);
	if (iplen < sizeof(h) || FRAME_ETH_LEN + iplen > len)
		return -DROP_BAD_IP;
	if ((what & FRAME_CSUM_IP) && csum_fold(frame_csum_partial(ip, sizeof(h), 0)) != 0xFFFF)
		return -DROP_BAD_CSUM;
	if (!(what & FRAME_CSUM_L4))
		return 0;
	const uint8_t *l4 = ip + sizeof(h);
	size_t l4len = iplen - sizeof(h);
	uint64_t s = 0;
	if (h.proto == IPPROTO_UDP_) {
		struct udp u;
		if (l4len < sizeof(u))
			return -DROP_SHORT;
		memcpy(&u, l4, sizeof(u));
		if (u.csum == 0)
			return 0;  /* sent without a checksum (RFC 768) */
		uint8_t pseudo[12];
		memcpy(pseudo, ip + 12, 8);
		pseudo[8] = 0;
		pseudo[9] = IPPROTO_UDP_;
		memcpy(pseudo + 10, &u.len, 2);
		s = frame_csum_partial(pseudo, sizeof(pseudo), 0);
		/* The pseudo-header sum alone: the sender left the rest to a
		 * checksum offload that never ran (a veth passes it on). */
		if (u.csum == csum_fold(s))
			return FRAME_CSUM_UNFILLED;
	} else if (h.proto != IPPROTO_ICMP_) {
		return 0;
	}
	return csum_fold(frame_csum_partial(l4, l4len, s)) == 0xFFFF ? 0 : -DROP_BAD_CSUM;
}

/* Swap the frame's Ethernet and IPv4 source and destination, TTL 64,
 * IPv4 checksum anew: the headers of an answer. Returns the IPv4 header. */
static struct ipv4 turn_around(uint8_t *frame)
{
	struct eth e;
	struct ipv4 ip;
	uint8_t mac[6];

	memcpy(&e, frame, sizeof(e));
	memcpy(mac, e.dst, 6);
	memcpy(e.dst, e.src, 6);
	memcpy(e.src, mac, 6);
	memcpy(frame, &e, sizeof(e));
	memcpy(&ip, frame + FRAME_ETH_LEN, sizeof(ip));
	uint32_t a = ip.src;
	ip.src = ip.dst;
	ip.dst = a;
	ip.ttl = 64;
	ip.csum = 0;
	ip.csum = frame_csum(&ip, sizeof(ip));
	memcpy(frame + FRAME_ETH_LEN, &ip, sizeof(ip));
	return ip;
}

size_t frame_udp_reflect(uint8_t *frame, size_t len)
{
	struct ipv4 ip = turn_around(frame);
	struct udp u;
	uint8_t *l4 = frame + FRAME_ETH_LEN + sizeof(ip);
	memcpy(&u, l4, sizeof(u));
	uint16_t p = u.sport;
	u.sport = u.dport;
	u.dport = p;
	memcpy(l4, &u, sizeof(u));
	size_t iplen = ntohs(ip.len);
	size_t extra = iplen - sizeof(ip) - sizeof(u);
	frame_udp_csum(frame, extra, 0);
	return FRAME_ETH_LEN + iplen <= len ? FRAME_ETH_LEN + iplen : len;
}

static int parse_arp(const uint8_t *frame, size_t len, uint32_t my_ip)
{
	struct arp a;

	if (len < FRAME_ETH_LEN + sizeof(a))
		return -DROP_SHORT;
	memcpy(&a, frame + FRAME_ETH_LEN, sizeof(a));
	if (ntohs(a.htype) != 1 || ntohs(a.ptype) != ETH_P_IPV4 || a.hlen != 6 || a.plen != 4)
		return -DROP_BAD_IP;
	if (ntohs(a.op) == 1 && ntohl(a.tpa) == my_ip)
		return FRAME_ARP;
	return FRAME_IGNORE;
}

int frame_parse(const uint8_t *frame, size_t len, uint32_t my_ip,
		struct frame_info *fi)
{
	struct eth e;
	struct ipv4 ip;

	if (len < FRAME_ETH_LEN)
		return -DROP_SHORT;
	memcpy(&e, frame, sizeof(e));
	if (ntohs(e.type) == ETH_P_ARP)
		return parse_arp(frame, len, my_ip);
	if (ntohs(e.type) != ETH_P_IPV4)
		return -DROP_NOT_IP;
	if (len < FRAME_ETH_LEN + sizeof(ip))
		return -DROP_SHORT;
	memcpy(&ip, frame + FRAME_ETH_LEN, sizeof(ip));
	size_t iplen = ntohs(ip.len);
	if ((ip.vihl >> 4) != 4)
		return -DROP_BAD_IP;
	/* Someone else's packet (e.g. IGMP with Router Alert on a shared
	 * segment) is not_mine, whatever its options. */
	if (ntohl(ip.dst) != my_ip)
		return -DROP_NOT_MINE;
	if (ip.vihl != 0x45 || iplen < sizeof(ip) || FRAME_ETH_LEN + iplen > len)
		return -DROP_BAD_IP;
	if (ntohs(ip.frag) & 0x3FFF)   /* more fragments, or an offset */
		return -DROP_FRAGMENT;
	fi->src_mac = frame + 6;
	fi->src_ip = ntohl(ip.src);
	fi->dst_ip = my_ip;
	const uint8_t *l4 = frame + FRAME_ETH_LEN + sizeof(ip);
	size_t l4len = iplen - sizeof(ip);
	if (ip.proto == IPPROTO_ICMP_) {
		if (l4len < sizeof(struct icmp) || l4[0] != 8 || l4[1] != 0)
			return -DROP_NOT_UDP;
		return FRAME_ICMP_ECHO;
	}
	if (ip.proto != IPPROTO_UDP_)
		return -DROP_NOT_UDP;
	struct udp u;
	if (l4len < sizeof(u))
		return -DROP_SHORT;
	memcpy(&u, l4, sizeof(u));
	if (ntohs(u.len) != l4len)
		return -DROP_BAD_LEN;
	fi->src_port = ntohs(u.sport);
	fi->dst_port = ntohs(u.dport);
	fi->payload = l4 + sizeof(u);
	fi->payload_len = l4len - sizeof(u);
	return FRAME_UDP;
}

size_t frame_arp_reply(uint8_t *frame, size_t len, const uint8_t my_mac[6],
		       uint32_t my_ip)
{
	struct eth e;
	struct arp a;

	memcpy(&e, frame, sizeof(e));
	memcpy(&a, frame + FRAME_ETH_LEN, sizeof(a));
	memcpy(e.dst, a.sha, 6);
	memcpy(e.src, my_mac, 6);
	a.op = htons(2);
	memcpy(a.tha, a.sha, 6);
	a.tpa = a.spa;
	memcpy(a.sha, my_mac, 6);
	a.spa = htonl(my_ip);
	memcpy(frame, &e, sizeof(e));
	memcpy(frame + FRAME_ETH_LEN, &a, sizeof(a));
	(void)len;
	return FRAME_ETH_LEN + sizeof(a);
}

size_t frame_icmp_reply(uint8_t *frame, size_t len)
{
	struct ipv4 ip = turn_around(frame);

	size_t iplen = ntohs(ip.len);
	uint8_t *icmp = frame + FRAME_ETH_LEN + sizeof(ip);
	size_t icmplen = iplen - sizeof(ip);
	icmp[0] = 0; /* echo reply */
	icmp[2] = icmp[3] = 0;
	uint16_t c = frame_csum(icmp, icmplen);
	memcpy(icmp + 2, &c, 2);
	(void)len;
	return FRAME_ETH_LEN + iplen;
}

void frame_udp_headers(uint8_t *out, const uint8_t dst_mac[6],
		       const uint8_t src_mac[6], uint32_t src_ip, uint32_t dst_ip,
		       uint16_t src_port, uint16_t dst_port, size_t payload_len)
{
	struct eth e;
	struct ipv4 ip = {
		.vihl = 0x45, .len = htons((uint16_t)(20 + 8 + payload_len)),
		.frag = htons(0x4000), /* DF */
		.ttl = 64, .proto = IPPROTO_UDP_,
		.src = htonl(src_ip), .dst = htonl(dst_ip),
	};
	struct udp u = { .sport = htons(src_port), .dport = htons(dst_port),
			 .len = htons((uint16_t)(8 + payload_len)), .csum = 0 };

	memcpy(e.dst, dst_mac, 6);
	memcpy(e.src, src_mac, 6);
	e.type = htons(ETH_P_IPV4);
	ip.csum = frame_csum(&ip, sizeof(ip));
	memcpy(out, &e, sizeof(e));
	memcpy(out + FRAME_ETH_LEN, &ip, sizeof(ip));
	memcpy(out + FRAME_ETH_LEN + sizeof(ip), &u, sizeof(u));
}
