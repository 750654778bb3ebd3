/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * keys.c - the progress thread's table of keys: for every key this client
 * has used, its declaration state, layout, round counter, the call now
 * using it, and the per-segment arrays that call needs (allocated once per
 * key, reused by every round, so no allocation per call or per segment).
 * Open addressing with linear probing; keys live as long as the client.
 */
#include <stdlib.h>
#include <string.h>

#include "client/core/req.h"

void keytab_init(struct keytab *t)
{
	memset(t, 0, sizeof(*t));
}

static void key_free(struct key_state *ks)
{
	free(ks->lay.chunk_ep);
	free(ks->slot_of);
	free(ks->got);
	key_drop_shadow(ks);
	json_decref(ks->decl);
	free(ks);
}

void key_reset(struct key_state *ks)
{
	uint32_t key = ks->key, unsure = ks->unsure;

	free(ks->lay.chunk_ep);
	free(ks->slot_of);
	free(ks->got);
	key_drop_shadow(ks);
	json_decref(ks->decl);
	memset(ks, 0, sizeof(*ks));
	ks->key = key;
	ks->unsure = unsure;
	ks->phase = KEY_NEW;
}

void keytab_free(struct keytab *t)
{
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->tab[i])
			key_free(t->tab[i]);
	free(t->tab);
	keytab_init(t);
}

static uint32_t key_hash(uint32_t key)
{
	return key * 2654435761u;
}

struct key_state *keytab_find(const struct keytab *t, uint32_t key)
{
	if (t->cap == 0)
		return NULL;
	for (uint32_t i = key_hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct key_state *ks = t->tab[i];
		if (!ks || ks->key == key)
			return ks;
	}
}

static void insert(struct key_state **tab, uint32_t cap, struct key_state *ks)
{
	uint32_t i = key_hash(ks->key) & (cap - 1);

	while (tab[i])
		i = (i + 1) & (cap - 1);
	tab[i] = ks;
}

static int grow(struct keytab *t)
{
	uint32_t ncap = t->cap ? t->cap * 2 : 64;
	struct key_state **ntab = calloc(ncap, sizeof(*ntab));

	if (!ntab)
		return PBOX_ENOMEM;
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->tab[i])
			insert(ntab, ncap, t->tab[i]);
	free(t->tab);
	t->tab = ntab;
	t->cap = ncap;
	return 0;
}

struct key_state *keytab_get(struct keytab *t, uint32_t key)
{
	struct key_state *ks = keytab_find(t, key);

	if (ks)
		return ks;
	if ((t->n + 1) * 2 > t->cap && grow(t) < 0)
		return NULL;
	ks = calloc(1, sizeof(*ks));
	if (!ks)
		return NULL;
	ks->key = key;
	insert(t->tab, t->cap, ks);
	t->n++;
	return ks;
}

int key_set_layout(struct key_state *ks, struct seg_layout *lay)
{
	uint32_t *slot_of = calloc(lay->nsegs, sizeof(*slot_of));
	uint64_t *got = calloc(seg_bitmap_words(lay->nsegs), sizeof(*got));

	if (!slot_of || !got) {
		free(slot_of);
		free(got);
		return PBOX_ENOMEM;
	}
	free(ks->lay.chunk_ep);
	free(ks->slot_of);
	free(ks->got);
	ks->lay = *lay;
	lay->chunk_ep = NULL;
	ks->slot_of = slot_of;
	ks->got = got;
	ks->phase = KEY_READY;
	return 0;
}

int key_keep_shadow(struct key_state *ks)
{
	const struct seg_layout *l = &ks->lay;
	size_t bytes = (size_t)l->count * l->elem;

	key_drop_shadow(ks);
	ks->shadow = malloc(bytes ? bytes : 1);
	ks->shadow_round = calloc(l->nsegs ? l->nsegs : 1, sizeof(*ks->shadow_round));
	ks->final_due = calloc(seg_bitmap_words(l->nsegs) + 1, sizeof(*ks->final_due));
	if (!ks->shadow || !ks->shadow_round || !ks->final_due) {
		key_drop_shadow(ks);
		return PBOX_ENOMEM;
	}
	return 0;
}

void key_drop_shadow(struct key_state *ks)
{
	free(ks->shadow);
	free(ks->shadow_round);
	free(ks->final_due);
	ks->shadow = NULL;
	ks->shadow_round = NULL;
	ks->final_due = NULL;
	ks->nfinal = 0;
}

static const char *const coll_names[] = {
	[COLL_ALLREDUCE] = "allreduce", [COLL_BROADCAST] = "broadcast",
	[COLL_ALLGATHER] = "allgather", [COLL_REDUCE_SCATTER] = "reduce_scatter",
};

const char *key_coll_name(unsigned coll)
{
	return coll < sizeof(coll_names) / sizeof(coll_names[0]) ? coll_names[coll] : "?";
}
