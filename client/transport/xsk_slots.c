/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xsk_slots.c - the shared UMEM's transmit slots (xsk_slots.h): a stack of
 * free ones, and per slot the descriptors still out.
 */
#include <stdlib.h>
#include <string.h>

#include "client/transport/xsk_slots.h"
#include "include/pbox.h"

int xsk_slots_init(struct xsk_slots *s, uint64_t base, uint64_t slot_bytes, uint32_t nslots)
{
	memset(s, 0, sizeof(*s));
	s->free = calloc(nslots ? nslots : 1, sizeof(*s->free));
	s->pending = calloc(nslots ? nslots : 1, 1);
	if (!s->free || !s->pending) {
		xsk_slots_fini(s);
		return PBOX_ENOMEM;
	}
	s->base = base;
	s->slot_bytes = slot_bytes;
	s->nslots = nslots;
	/* slot 0 on top: the first frames go to the start of the range */
	for (uint32_t i = 0; i < nslots; i++)
		s->free[i] = nslots - 1 - i;
	s->nfree = nslots;
	return 0;
}

void xsk_slots_fini(struct xsk_slots *s)
{
	free(s->free);
	free(s->pending);
	s->free = NULL;
	s->pending = NULL;
	s->nslots = s->nfree = 0;
}

uint32_t xsk_slots_take(struct xsk_slots *s, uint32_t *out, uint32_t want)
{
	uint32_t n = want < s->nfree ? want : s->nfree;

	for (uint32_t i = 0; i < n; i++)
		out[i] = s->free[--s->nfree];
	return n;
}

void xsk_slots_give(struct xsk_slots *s, const uint32_t *in, uint32_t n)
{
	for (uint32_t i = 0; i < n && s->nfree < s->nslots; i++)
		s->free[s->nfree++] = in[i];
}

void xsk_slots_complete(struct xsk_slots *s, const uint64_t *addrs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = addrs[i];
		uint64_t k = a >= s->base && s->slot_bytes ? (a - s->base) / s->slot_bytes
							    : UINT64_MAX;
		if (k >= s->nslots || s->pending[k] == 0) {
			s->stray++;
			continue;
		}
		if (--s->pending[k] == 0)
			s->free[s->nfree++] = (uint32_t)k;
	}
}
