/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * arena.c - first-fit blocks of a job's memory (arena.h). The free list is
 * short (keys are released in groups, neighbours merge), so a linear scan
 * is the whole algorithm.
 */
#include "control/arena.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void arena_init(struct arena *a, uint64_t size, uint64_t reserved)
{
	memset(a, 0, sizeof(*a));
	a->size = size;
	a->reserved = a->top = a->used = reserved < size ? reserved : size;
}

void arena_fini(struct arena *a)
{
	free(a->free);
	memset(a, 0, sizeof(*a));
}

static void drop(struct arena *a, uint32_t i)
{
	memmove(&a->free[i], &a->free[i + 1], (size_t)(a->nfree - i - 1) * sizeof(a->free[0]));
	a->nfree--;
}

int arena_alloc(struct arena *a, uint64_t len, uint64_t *off)
{
	if (len == 0)
		return -EINVAL;
	for (uint32_t i = 0; i < a->nfree; i++) {
		struct arena_block *b = &a->free[i];
		if (b->len < len)
			continue;
		*off = b->off;
		b->off += len;
		b->len -= len;
		if (b->len == 0)
			drop(a, i);
		a->used += len;
		return 0;
	}
	if (a->size - a->top < len)
		return -ENOSPC;
	*off = a->top;
	a->top += len;
	a->used += len;
	return 0;
}

int arena_free(struct arena *a, uint64_t off, uint64_t len)
{
	uint32_t i = 0;

	if (len == 0)
		return 0;
	while (i < a->nfree && a->free[i].off < off)
		i++;
	/* i: the first free block after the freed one */
	int prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
	int next = i < a->nfree && off + len == a->free[i].off;
	if (prev && next) {
		a->free[i - 1].len += len + a->free[i].len;
		drop(a, i);
	} else if (prev) {
		a->free[i - 1].len += len;
	} else if (next) {
		a->free[i].off = off;
		a->free[i].len += len;
	} else if (off + len == a->top) {
		a->top = off;
	} else {
		if (a->nfree == a->cap) {
			uint32_t cap = a->cap ? 2 * a->cap : 16;
			struct arena_block *f = realloc(a->free, cap * sizeof(*f));
			if (!f)
				return -ENOMEM;
			a->free = f;
			a->cap = cap;
		}
		memmove(&a->free[i + 1], &a->free[i], (size_t)(a->nfree - i) * sizeof(*a->free));
		a->free[i] = (struct arena_block){ off, len };
		a->nfree++;
	}
	a->used -= len;
	/* a free block that reaches the top is the top */
	if (a->nfree && a->free[a->nfree - 1].off + a->free[a->nfree - 1].len == a->top) {
		a->top = a->free[a->nfree - 1].off;
		a->nfree--;
	}
	return 0;
}

uint64_t arena_largest(const struct arena *a)
{
	uint64_t best = a->size - a->top;

	for (uint32_t i = 0; i < a->nfree; i++)
		if (a->free[i].len > best)
			best = a->free[i].len;
	return best;
}
