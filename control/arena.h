/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * arena.h - a job's memory as blocks: keys take a block each, first fit
 * from the freed blocks, else from the untouched top; a freed block merges
 * with its free neighbours and, at the top, lowers it. Offsets only: the
 * caller owns the memory (and zeroes a block before freeing it, so every
 * block handed out reads as zeros). Pure logic, unit-tested.
 */
#ifndef PBOX_CONTROL_ARENA_H
#define PBOX_CONTROL_ARENA_H

#include <stdint.h>

struct arena_block {
	uint64_t off, len;
};

struct arena {
	uint64_t size;             /* bytes under management */
	uint64_t reserved;         /* the first ones, taken for good */
	uint64_t top;              /* [top, size) was never handed out or came back */
	uint64_t used;             /* bytes in blocks handed out */
	struct arena_block *free;  /* below top, sorted by offset, never adjacent */
	uint32_t nfree, cap;
};

/* Manage size bytes, the first `reserved` of them taken for good. */
void arena_init(struct arena *a, uint64_t size, uint64_t reserved);
void arena_fini(struct arena *a);

/* A block of len > 0 bytes: 0 and *off, or -ENOSPC (no free block that
 * large: arena_largest says what fits) or -ENOMEM. */
int arena_alloc(struct arena *a, uint64_t len, uint64_t *off);

/* Give back a block arena_alloc returned. 0, or -ENOMEM (the free list
 * could not grow: the block is lost until the arena goes, and counted as
 * used). */
int arena_free(struct arena *a, uint64_t off, uint64_t len);

/* The largest block arena_alloc can return now. */
uint64_t arena_largest(const struct arena *a);

#endif
