/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * keys.h - the key table of the progress thread (keys.c): per key, its
 * declaration, its layout (segment.h) and its round state, which outlive
 * the calls on it. Part of core.
 */
#ifndef PBOX_CLIENT_CORE_KEYS_H
#define PBOX_CLIENT_CORE_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "client/core/segment.h"
#include "include/pbox.h"

enum key_phase {
	KEY_NEW = 0,      /* never declared, or the declaration failed */
	KEY_DECLARING,    /* key_declare sent, no answer yet */
	KEY_READY,        /* layout known; rounds can run */
};

struct pbox_req;

struct key_state {
	uint32_t key;
	uint8_t phase;               /* enum key_phase */
	uint8_t dtype;               /* as declared (PS: the gradients') */
	bool is_ps;                  /* declared with an optimizer */
	bool restored;               /* PS: the box has weights from a checkpoint */
	bool sparse;                 /* a sparse key (op_sparse calls only) */
	uint8_t coll;                /* enum key_coll */
	uint16_t root;               /* COLL_BROADCAST's root */
	uint8_t rdtype;              /* PS: dtype of the weights returned */
	uint64_t count;              /* as declared */
	pbox_optim optim;            /* PS: the optimizer as declared (lr: the
				        first declaration's; pushes carry c->lrs') */
	struct seg_layout lay;       /* valid when READY */
	uint32_t round;              /* rounds started so far */
	uint32_t first_round;        /* key_declare's first_round: a PS key's
				        init round (READY) */
	struct pbox_req *req;        /* the call now using the key, or NULL */
	uint32_t *slot_of;           /* nsegs: window slot + 1 of a segment in flight */
	uint64_t *got;               /* nsegs bits: result of this round in */
	uint32_t unsure;             /* key_write / key_release calls on it that
				        timed out, their answers still to come:
				        what the box did is unknown, so calls
				        on the key get PBOX_EBUSY meanwhile */
	/* resuming after a lost box (xfer/resume.c, docs/protocol.md
	 * "Resuming after a box restart"): a dense key's latest result of
	 * each segment, which another rank may still lack */
	uint8_t *shadow;             /* lay.count elements (NULL: none kept) */
	uint32_t *shadow_round;      /* nsegs: the round shadow holds, 0 none */
	uint64_t *final_due;         /* nsegs bits: FINAL pushes not yet answered */
	uint32_t nfinal;             /* bits set in final_due */
	uint64_t final_ns;           /* next sending of those */
	bool resuming;               /* its resume key_declare awaits its answer */
	json_t *decl;                /* key_declare's params as last sent, for
				        declaring it again (job_id replaced) */
};

struct keytab {
	struct key_state **tab;      /* open addressing, cap entries */
	uint32_t cap;                /* power of two */
	uint32_t n;
};

void keytab_init(struct keytab *t);
void keytab_free(struct keytab *t);
struct key_state *keytab_find(const struct keytab *t, uint32_t key);
/* Find or add (phase KEY_NEW); NULL if out of memory. */
struct key_state *keytab_get(struct keytab *t, uint32_t key);
/* Install a checked layout (takes lay.chunk_ep) and allocate the per-
 * segment arrays. 0 or PBOX_ENOMEM. */
int key_set_layout(struct key_state *ks, struct seg_layout *lay);
/* Back to KEY_NEW, as never used (pbox_release_keys): its next call
 * declares it afresh. Its unsure count stays. */
void key_reset(struct key_state *ks);
/* Keep ks's latest results (ks->shadow, its rounds, the FINAL bitmap) for
 * its layout, dropping any earlier: 0 or PBOX_ENOMEM (none kept). */
int key_keep_shadow(struct key_state *ks);
/* Free ks's shadow (none kept). */
void key_drop_shadow(struct key_state *ks);

/* What a key's rounds do (docs/protocol.md "Collective keys"); the
 * numbering is key_declare's order. */
enum key_coll {
	COLL_ALLREDUCE = 0,
	COLL_BROADCAST,
	COLL_ALLGATHER,
	COLL_REDUCE_SCATTER,
};

/* key_declare's name of a collective ("allreduce", "broadcast", ...). */
const char *key_coll_name(unsigned coll);

/* The rank owning segment s of ks: its slice's (broadcast: the root). */
static inline int key_seg_owner(const struct key_state *ks, uint32_t s)
{
	return ks->root + (int)seg_slice(&ks->lay, s);
}

/* Whether this rank sends segment s's data (a gather key's segment is
 * its owner's; the others send a query of count 0). */
static inline bool key_sends_data(const struct key_state *ks, uint32_t s, int rank)
{
	return (ks->coll != COLL_BROADCAST && ks->coll != COLL_ALLGATHER) ||
	       key_seg_owner(ks, s) == rank;
}

/* Whether this rank gets segment s's data back (a scatter key's sum goes
 * to the owner; the others get a header of count 0). */
static inline bool key_gets_data(const struct key_state *ks, uint32_t s, int rank)
{
	return ks->coll != COLL_REDUCE_SCATTER || key_seg_owner(ks, s) == rank;
}

#endif
