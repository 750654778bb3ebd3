/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c - encode and check the pbox packet header (docs/protocol.md).
 * Shared by box and client: the box checks every PUSH with wire_decode, the
 * client every RESULT.
 */
#include "common/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/drops.h"

static const char *const dtype_names[WIRE_NDTYPES] = { "f32", "f16", "bf16" };

const char *wire_dtype_name(unsigned dtype)
{
	return dtype < WIRE_NDTYPES ? dtype_names[dtype] : NULL;
}

int wire_dtype_parse(const char *name)
{
	for (unsigned i = 0; name && i < WIRE_NDTYPES; i++)
		if (strcmp(name, dtype_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

uint32_t wire_seg_bytes(uint32_t mtu)
{
	if (mtu < WIRE_IP_UDP_LEN + WIRE_HDR_LEN + WIRE_PAYLOAD_ALIGN)
		return 0;
	uint32_t b = (mtu - WIRE_IP_UDP_LEN - WIRE_HDR_LEN) / WIRE_PAYLOAD_ALIGN * WIRE_PAYLOAD_ALIGN;
	return b > WIRE_MAX_PAYLOAD ? WIRE_MAX_PAYLOAD : b;
}

static uint64_t be64(uint64_t v)
{
	return ((uint64_t)ntohl((uint32_t)v) << 32) | ntohl((uint32_t)(v >> 32));
}

int wire_decode(const void *buf, size_t len, struct wire_msg *m)
{
	struct wire_hdr h;

	if (len < sizeof(h))
		return -DROP_BAD_LEN;
	memcpy(&h, buf, sizeof(h));
	if (ntohl(h.magic) != WIRE_MAGIC)
		return -DROP_BAD_MAGIC;
	if (h.version != WIRE_VERSION)
		return -DROP_BAD_VERSION;
	if (h.type < WIRE_PUSH || h.type > WIRE_NACK)
		return -DROP_BAD_TYPE;
	size_t esz = wire_dtype_size(h.dtype);
	if (esz == 0)
		return -DROP_BAD_DTYPE;
	if ((h.flags & ~WIRE_FLAGS_KNOWN) || (h.reserved && h.type != WIRE_PUSH))
		return -DROP_BAD_FLAGS;
	m->type = h.type;
	m->dtype = h.dtype;
	m->flags = h.flags;
	m->job = ntohl(h.job);
	m->rank = ntohs(h.rank);
	m->count = ntohs(h.count);
	m->token = be64(h.token);
	m->key = ntohl(h.key);
	m->seg = ntohl(h.seg);
	m->round = ntohl(h.round);
	m->status = ntohs(h.status);
	m->arg = 0;
	if (m->type == WIRE_PUSH) { /* status and reserved are the argument */
		m->arg = ((uint32_t)m->status << 16) | ntohs(h.reserved);
		m->status = 0;
	}
	m->plen = (uint32_t)(len - sizeof(h));
	if (m->flags & WIRE_FLAG_SPARSE) {
		if (m->type != WIRE_PUSH && m->type != WIRE_RESULT)
			return -DROP_BAD_FLAGS;
		return m->count >= 1 && m->plen >= 8u * m->count && m->plen % 4 == 0
		       ? 0 : -DROP_BAD_LEN;
	}
	if (m->type == WIRE_PROBE || m->type == WIRE_PROBE_ACK)
		return m->count == 0 ? 0 : -DROP_BAD_LEN;   /* padding: the probe's size */
	if (m->type == WIRE_WAIT || m->type == WIRE_NACK)
		return m->count == 0 && len == sizeof(h) + WIRE_NOTICE_LEN ? 0 : -DROP_BAD_LEN;
	if (len != sizeof(h) + (size_t)m->count * esz)
		return -DROP_BAD_LEN;
	return 0;
}

void wire_encode(void *buf, const struct wire_msg *m)
{
	struct wire_hdr h = {
		.magic = htonl(WIRE_MAGIC),
		.version = WIRE_VERSION,
		.type = m->type,
		.dtype = m->dtype,
		.flags = m->flags,
		.job = htonl(m->job),
		.rank = htons(m->rank),
		.count = htons(m->count),
		.token = be64(m->token),
		.key = htonl(m->key),
		.seg = htonl(m->seg),
		.round = htonl(m->round),
		.status = htons(m->status),
		.reserved = 0,
	};
	if (m->type == WIRE_PUSH) {
		h.status = htons((uint16_t)(m->arg >> 16));
		h.reserved = htons((uint16_t)m->arg);
	}
	memcpy(buf, &h, sizeof(h));
}

void wire_notice_encode(void *buf, const struct wire_notice *n)
{
	uint8_t *p = buf;
	uint64_t missing = be64(n->missing);
	uint32_t open_us = htonl(n->open_us), base = htonl(n->base);

	memcpy(p, &missing, 8);
	memcpy(p + 8, &open_us, 4);
	memcpy(p + 12, &base, 4);
}

int wire_notice_decode(const void *buf, struct wire_notice *n)
{
	const uint8_t *p = buf;
	uint64_t missing;
	uint32_t open_us, base;

	memcpy(&missing, p, 8);
	memcpy(&open_us, p + 8, 4);
	memcpy(&base, p + 12, 4);
	n->missing = be64(missing);
	n->open_us = ntohl(open_us);
	n->base = ntohl(base);
	/* the window of 64 ranks starts at a multiple of 64 below 65536 */
	return n->base % 64 || n->base >= 65536 ? -DROP_BAD_FLAGS : 0;
}
