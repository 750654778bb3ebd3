/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tel_tree.h - building one telemetry answer (struct dp_tel_answer,
 * dataplane/dp.h): a tree of dicts with u64 and string leaves, written in
 * order like JSON: tel_dict ... tel_end around a dict's members.
 *
 * Calls after a failure do nothing; tel_tree_finish reports the first
 * one. Keys must be 1-31 characters of [A-Za-z0-9_/] (DPDK telemetry's
 * rule); strings are cut to DP_TEL_STR_MAX - 1 bytes, and '"', '\' and
 * control characters in them become ' (DPDK 22.11 does not escape them).
 */
#ifndef PBOX_TEL_TREE_H
#define PBOX_TEL_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/dp.h"

#define TEL_TREE_DEPTH 8 /* dicts open at once, the top included */

struct tel_tree {
	struct dp_tel_answer a;
	unsigned cap;                  /* nodes allocated */
	size_t strs_cap;
	unsigned open[TEL_TREE_DEPTH]; /* indexes of the open dicts */
	unsigned depth;
	int err;                       /* first failure, 0 = none */
};

/* Start a tree: its top dict is open. */
void tel_tree_init(struct tel_tree *t);
/* Open a dict as member `name` of the open dict; alias (NULL = none) is
 * another name a query may give for it. */
void tel_dict(struct tel_tree *t, const char *name, const char *alias);
/* Close the dict opened last. */
void tel_end(struct tel_tree *t);
void tel_u64(struct tel_tree *t, const char *name, uint64_t v);
void tel_str(struct tel_tree *t, const char *name, const char *s);
/*
 * Close the top dict and hand the tree to *out (malloc'ed arrays, the
 * caller's now). Returns 0, or -ENOMEM, -EINVAL (a bad key), -E2BIG (more
 * than TEL_TREE_DEPTH dicts open) or -EPROTO (tel_end without a dict, or
 * dicts left open); on failure *out is zeroed and the tree freed.
 */
int tel_tree_finish(struct tel_tree *t, struct dp_tel_answer *out);
/* Free a tree that will not be finished. */
void tel_tree_free(struct tel_tree *t);

#endif
