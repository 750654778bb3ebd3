/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rankset.h - a set of ranks of one job (0 .. RANKSET_MAX - 1), a bit
 * each in RANKSET_WORDS 64-bit words: which ranks' contributions a round
 * holds, which ranks are missing, declared or gone. Operations that scan
 * take the job's world so they touch only the words it uses
 * (rankset_words): a job of 4 ranks costs what one word did.
 */
#ifndef PBOX_COMMON_RANKSET_H
#define PBOX_COMMON_RANKSET_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define RANKSET_MAX   1024
#define RANKSET_WORDS (RANKSET_MAX / 64)

struct rankset {
	uint64_t w[RANKSET_WORDS];
};

/* Words a job of world ranks uses. */
static inline unsigned rankset_words(unsigned world)
{
	return (world + 63) / 64;
}

static inline void rankset_clear(struct rankset *s, unsigned world)
{
	s->w[0] = 0;   /* a job of up to 64 ranks: one store, no call */
	if (world > 64)
		memset(s->w + 1, 0, (rankset_words(world) - 1) * sizeof(uint64_t));
}

/* Every rank below world. */
static inline void rankset_fill(struct rankset *s, unsigned world)
{
	unsigned n = rankset_words(world);

	memset(s->w, 0xff, n * sizeof(uint64_t));
	if (world % 64)
		s->w[n - 1] = (1ull << (world % 64)) - 1;
}

static inline bool rankset_has(const struct rankset *s, unsigned r)
{
	return s->w[r / 64] >> (r % 64) & 1;
}

static inline void rankset_add(struct rankset *s, unsigned r)
{
	s->w[r / 64] |= 1ull << (r % 64);
}

static inline void rankset_del(struct rankset *s, unsigned r)
{
	s->w[r / 64] &= ~(1ull << (r % 64));
}

static inline bool rankset_empty(const struct rankset *s, unsigned world)
{
	for (unsigned i = 0; i < rankset_words(world); i++)
		if (s->w[i])
			return false;
	return true;
}

static inline bool rankset_equal(const struct rankset *a, const struct rankset *b,
				 unsigned world)
{
	return memcmp(a->w, b->w, rankset_words(world) * sizeof(uint64_t)) == 0;
}

/* d = a | b, a & b, a & ~b (over world's words; d may be a or b). */
static inline void rankset_or(struct rankset *d, const struct rankset *a,
			      const struct rankset *b, unsigned world)
{
	for (unsigned i = 0; i < rankset_words(world); i++)
		d->w[i] = a->w[i] | b->w[i];
}

static inline void rankset_and(struct rankset *d, const struct rankset *a,
			       const struct rankset *b, unsigned world)
{
	for (unsigned i = 0; i < rankset_words(world); i++)
		d->w[i] = a->w[i] & b->w[i];
}

static inline void rankset_andnot(struct rankset *d, const struct rankset *a,
				  const struct rankset *b, unsigned world)
{
	for (unsigned i = 0; i < rankset_words(world); i++)
		d->w[i] = a->w[i] & ~b->w[i];
}

/* The ranks below world not in s. */
static inline void rankset_missing(struct rankset *d, const struct rankset *s, unsigned world)
{
	struct rankset all;

	rankset_fill(&all, world);
	rankset_andnot(d, &all, s, world);
}

/* The first rank in s at or after from, or -1. */
static inline int rankset_next(const struct rankset *s, unsigned from, unsigned world)
{
	for (unsigned r = from; r < world; ) {
		uint64_t w = s->w[r / 64] >> (r % 64);
		if (w)
			return (int)(r + (unsigned)__builtin_ctzll(w));
		r = (r / 64 + 1) * 64;
	}
	return -1;
}

static inline unsigned rankset_count(const struct rankset *s, unsigned world)
{
	unsigned n = 0;

	for (unsigned i = 0; i < rankset_words(world); i++)
		n += (unsigned)__builtin_popcountll(s->w[i]);
	return n;
}

#endif
