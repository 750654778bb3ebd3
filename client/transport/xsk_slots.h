/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xsk_slots.h - the transmit slots of an AF_XDP UMEM that several sockets
 * share (xdp_share.h): equal slots of consecutive chunks, one frame each,
 * sent as one descriptor per chunk it fills. A slot is free again once the
 * completion ring has returned every descriptor sent from it; the ring is
 * the UMEM's, shared by all its sockets, so a completion names its slot by
 * its address alone and whichever socket reaps the ring frees it, for all.
 *
 * Pure bookkeeping, no system calls (tests/unit/test_xsk_slots.c). Not
 * thread-safe: take, give and complete run under the share's lock. sent
 * is called by the socket that took the slot, without the lock, before
 * the descriptors are submitted: the slot is that socket's alone until the
 * kernel completes them, and the tx ring's release store and the
 * completion ring's acquire load order the write before any reaper reads it.
 */
#ifndef PBOX_CLIENT_TRANSPORT_XSK_SLOTS_H
#define PBOX_CLIENT_TRANSPORT_XSK_SLOTS_H

#include <stdint.h>

struct xsk_slots {
	uint64_t base;            /* UMEM offset of slot 0 */
	uint64_t slot_bytes;      /* chunks per slot x chunk size */
	uint32_t nslots;
	uint32_t nfree;
	uint32_t *free;           /* stack of free slot indices */
	uint8_t *pending;         /* per slot: descriptors sent, not yet completed */
	uint64_t stray;           /* completions naming no slot with one pending */
};

/* nslots slots of slot_bytes from UMEM offset base, all free: 0 or
 * PBOX_ENOMEM. */
int xsk_slots_init(struct xsk_slots *s, uint64_t base, uint64_t slot_bytes, uint32_t nslots);
void xsk_slots_fini(struct xsk_slots *s);

/* Up to want free slots into out: how many. */
uint32_t xsk_slots_take(struct xsk_slots *s, uint32_t *out, uint32_t want);

/* Slots taken and not sent, back to the pool. */
void xsk_slots_give(struct xsk_slots *s, const uint32_t *in, uint32_t n);

/* The UMEM offset of a slot's first chunk. */
static inline uint64_t xsk_slots_addr(const struct xsk_slots *s, uint32_t slot)
{
	return s->base + (uint64_t)slot * s->slot_bytes;
}

/* Slot `slot` (taken) went out as nd descriptors (1..255). */
static inline void xsk_slots_sent(struct xsk_slots *s, uint32_t slot, uint32_t nd)
{
	s->pending[slot] = (uint8_t)nd;
}

/* n completed descriptors' addresses: a slot whose last one is among them
 * is free. Addresses outside the slots, or of a slot with nothing pending,
 * are counted in stray and ignored. */
void xsk_slots_complete(struct xsk_slots *s, const uint64_t *addrs, uint32_t n);

#endif
