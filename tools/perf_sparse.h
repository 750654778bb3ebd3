/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_sparse.h - pbox-perf's sparse modes (docs/protocol.md "Sparse
 * keys"): --sparse D calls pbox_allreduce_sparse with entries every rank
 * can predict for every rank (about a fraction D of the elements, small
 * integer values), so --check verifies every element of the dense sum;
 * --topk D calls pbox_allreduce_topk on a gradient of distinct values
 * (perf_sparse_fill: a hash of rank, index and iteration shaped like a
 * normal distribution, as top-k selection sees real gradients), and
 * --check replays every rank's selection with error feedback (pbox_topk
 * on each rank's residual plus gradient) to verify the sum; --topk-local
 * L makes it hierarchical (pbox_topk_opts.local_size L, local_rank rank %
 * L: hosts of L consecutive ranks) and the replay sums each host's
 * gradients first and selects once per host. f32 only.
 */
#ifndef PBOX_PERF_SPARSE_H
#define PBOX_PERF_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "include/pbox.h"

enum perf_sparse_mode { PERF_DENSE = 0, PERF_SPARSE, PERF_TOPK };

struct perf_sparse {
	int mode;            /* enum perf_sparse_mode */
	double density;
	int rank, world, check;
	int local;           /* --topk-local: ranks per host (0: flat) */
	int host;            /* --local: ranks per host of the host level (0, 1: off) */
	size_t count;        /* the size these buffers are for */
	size_t n;            /* --sparse: this rank's entries in idx/val */
	uint32_t *idx;
	float *val;
	float *resid;        /* --topk --check: world x count replayed residuals */
	uint32_t key;        /* the key resid is for (keyed: resid holds one) */
	int keyed;
	float *expect;       /* count: the sum the check expects */
	double select_us;    /* --topk: time in pbox_iallreduce_topk (the
				selection and submission) of the calls */
	double call_us;      /* --topk: time of the whole calls */
	unsigned calls;      /* (pbox-perf counts the timed calls of a size) */
};

/* --topk: this rank's gradient of iteration it into buf (count f32).
 * pbox-perf fills it before the first call of a size and, with --check,
 * before every call; otherwise each call reduces the last one's sum in
 * place, as the dense runs and bench/compare's Gloo and OpenMPI do (a
 * refill of every element would take CPU time from the other ranks'
 * timed calls on a shared machine). */
void perf_sparse_fill(const struct perf_sparse *p, float *buf, size_t count, int it);

/* Before the call of iteration it on key (untimed): this rank's entries
 * (--sparse) and, for --check, the expected sum (--topk: the replayed
 * residuals start from zero on a new key, as the library's do, whatever
 * the count). 0 or PBOX_ENOMEM. */
int perf_sparse_prepare(struct perf_sparse *p, uint32_t key, size_t count, int it);
/* The call on key: buf (count f32) holds this rank's gradient (--topk) and
 * gets the sum. 0 or a pbox error. */
int perf_sparse_call(pbox_client *c, struct perf_sparse *p, uint32_t key, float *buf,
		     size_t count);

/* Elements of buf differing from the expected sum (the first on stderr). */
size_t perf_sparse_wrong(const struct perf_sparse *p, const float *buf, size_t count, int it);

void perf_sparse_free(struct perf_sparse *p);

#endif
