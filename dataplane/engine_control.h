/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_control.h - the engine as the control plane sees it: what
 * dataplane/dp.h (the control plane's one header of dataplane/) gives it
 * of the engine, instead of all of engine.h, which includes this.
 *
 * The control plane lays out a job's engine memory and its keys in the
 * job's arena and builds them there (the limits, struct engine_job_desc,
 * the engine_*_mem_bytes and engine_*_init helpers and the keys'
 * structures, which it reads later: a PS key's weights for checkpoints,
 * its segments' rounds), hands them to the lcores as messages (struct
 * engine_msg), and reads what the lcores count (struct engine_counters,
 * engine_progress and engine_lateness, through struct box_dp). The
 * lcore's side (struct engine, engine_apply, engine_push, engine_tick,
 * ...) is in engine.h, which the control plane does not see.
 */
#ifndef PBOX_ENGINE_CONTROL_H
#define PBOX_ENGINE_CONTROL_H

#include "common/rankset.h"
#include <stddef.h>
#include <stdint.h>

#include "dataplane/optim.h"

#define ENGINE_MAX_JOBS   64  /* job table of one lcore; power of two */
#define ENGINE_MAX_WORLD  RANKSET_MAX /* ranks per job (common/rankset.h) */
#define ENGINE_MAX_LCORES 128 /* chunk owners are uint8_t lcore indexes */
#define ENGINE_NO_SLOT    0xFFFFu
#define ENGINE_WEIGHT_MAX 1000 /* a job's byte-rate weight against other jobs */

/* Job ids: the low bits pick the lcore job-table entry, the rest is a
 * generation so a restarted job never matches an old one's packets. */
static inline unsigned engine_job_index(uint32_t job_id)
{
	return job_id & (ENGINE_MAX_JOBS - 1);
}

/* Per-segment state: owned by the lcore that owns the segment's chunk. */
struct engine_seg {
	uint32_t done;   /* last completed round, the key's round0 = none */
	uint16_t slot;   /* contribution slot of the open round, or NO_SLOT */
	uint16_t skipped; /* PS: round done skipped its step (a non-finite
			     gradient, ENGINE_NF_SKIP): its RESULTs say so */
};

/*
 * What a PS round does when its summed gradient is not finite (a NaN or
 * +-Inf in any element; docs/protocol.md "Non-finite gradients"). Every
 * policy counts it (the job, and each rank whose own gradient was not
 * finite). 0 is the default.
 */
enum engine_nonfinite {
	ENGINE_NF_ABORT = 0, /* no step; the lcore stops the job (pushes are
				answered ERROR), the sender of the last
				contribution gets ERROR NONFINITE, and the
				control plane aborts the job naming the rank
				and key (engine_progress nf_*) */
	ENGINE_NF_SKIP,      /* no step for this segment round: the weights
				and optimizer state stay; the RESULT carries
				them with status SKIPPED */
	ENGINE_NF_PASS,      /* step anyway (what the box did before
				it had a policy) */
	ENGINE_NF_COUNT
};

/*
 * PS mode of a key (docs/protocol.md "PS keys"): the box keeps the key's
 * fp32 weights and optimizer state. The key's first round (round0 + 1)
 * is the init round (PUSHes flagged WIRE_FLAG_INIT: rank 0's fp32
 * weights, count 0 from the others, or count 0 from all when the weights
 * came from a checkpoint); every later round sums the gradients in rank
 * order in fp32, divides by the world (average), applies one optimizer
 * step (step step0 + round - round0 - 1, rank 0's learning rate) and sends the weights back in rdtype. A PS key
 * is laid out in 4-byte elements whatever its gradient dtype, so fp32
 * weights fit every segment. Built by the control plane with the key
 * (engine_ps_init); w and st[] belong to the lcores owning the chunks.
 */
struct engine_ps {
	struct optim_params opt;
	uint8_t  rdtype;         /* dtype of the weights in RESULTs */
	uint8_t  average;        /* divide the gradient sum by the world ... */
	uint32_t mean_over;      /* ... or by this many ranks if not 0 (a
				    host-local job's lanes: its whole world;
				    set by the control plane after init) */
	uint8_t  restored;       /* weights from a checkpoint: the init round keeps them */
	uint8_t  buf_written;    /* SGD: key_write gave the momentum buffer, so
				    a first step continues it (as torch does
				    with a loaded momentum_buffer) */
	uint64_t step0;          /* optimizer steps taken before this job */
	float   *w;              /* nsegs * seg_elems weights; the key's shadow
				    copies themselves when rdtype is f32 */
	float   *st[OPTIM_MAX_PLANES]; /* optim_planes(&opt) state arrays, like w */
	/* Weights written between steps (key_write) when w is the shadow
	 * copy: w must keep answering the last round's retransmissions, so
	 * segment s's written weights wait in staged while pending[s], and
	 * its next round takes them before it steps. NULL until the first
	 * such write (engine_ps_stage_init). */
	float   *staged;         /* like w */
	uint8_t *pending;        /* nsegs flags */
};

/*
 * What a key's rounds do (docs/protocol.md "Collective keys"). A key is
 * nslices slices of `slice` elements, each cut into slice_segs segments
 * of its own; the owner of segment s is rank root + s / slice_segs.
 */
enum engine_coll {
	ENGINE_COLL_SUM = 0, /* allreduce: all send, all get the sum (one slice) */
	ENGINE_COLL_GATHER,  /* broadcast (one slice, root's) and allgather (a
				slice per rank): the owner sends the segment,
				the others count 0; all get the owner's bytes */
	ENGINE_COLL_SCATTER, /* reduce_scatter (a slice per rank): all send,
				the owner gets the sum, the others count 0 */
};

/* A declared key. Built by the control plane in the job arena with
 * engine_key_init; immutable afterwards except segs[], result and the
 * PS arrays, whose entries belong to the lcore owning the chunk. */
struct engine_key {
	uint32_t key;
	uint8_t  dtype;          /* of the contributions (PS: the gradients) */
	uint8_t  sparse;         /* a sparse key (engine_sparse_key_init) */
	uint8_t  coll;           /* enum engine_coll */
	uint8_t  pad;
	uint16_t root;           /* owner of slice 0 (broadcast: its root) */
	uint64_t count;          /* elements */
	uint64_t slice;          /* elements per slice (count: one slice) */
	uint32_t slice_segs;     /* segments per slice */
	uint32_t seg_elems;      /* elements per full segment */
	uint32_t nsegs;
	uint32_t segs_per_chunk;
	uint32_t nchunks;
	uint32_t round0;         /* rounds of the key's earlier lives: its first
				    round is round0 + 1 (engine_key_set_round0) */
	const uint8_t *chunk_lcore;  /* nchunks: lcore index owning each chunk */
	struct engine_seg *segs;     /* nsegs */
	uint8_t *result;             /* nsegs * seg_bytes: shadow copies (a
					sparse key's: one record each) */
	struct engine_ps *ps;        /* PS mode, or NULL: the plain sum */
};

/* What the control plane prepares for one lcore when it admits a job. */
struct engine_job_desc {
	uint32_t id;
	uint64_t token;
	uint16_t world;
	uint32_t seg_bytes;
	void    *mem;       /* engine_job_mem_bytes(...) zeroed bytes, 64-aligned */
	uint32_t key_cap;   /* power of two, >= 2 * max keys per job */
	uint32_t nslots;    /* contribution slots for this lcore, <= 0xFFFF */
	uint32_t weight;    /* byte-rate weight, 1 .. ENGINE_WEIGHT_MAX (0: 1) */
};

/* Bytes one lcore needs for a job (key table, slots, slot data). */
size_t engine_job_mem_bytes(uint16_t world, uint32_t seg_bytes,
			    uint32_t key_cap, uint32_t nslots);

/* Bytes a key needs in the job arena (descriptor, owner map, segment
 * states, shadow copies), 64-aligned. */
size_t engine_key_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk);

/* Lay out a key in mem (engine_key_mem_bytes, zeroed, 64-aligned); the
 * chunk owners are copied from chunk_lcore (nchunks entries, see
 * engine_key_nchunks). Returns the key. */
struct engine_key *engine_key_init(void *mem, uint32_t key, uint64_t count,
				   unsigned dtype, uint32_t seg_bytes,
				   uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore);

/* Number the rounds of k (from any *_key_init, not yet installed) from
 * round0 + 1: a key declared again after a release starts above every
 * round of its earlier lives, so a delayed packet of those is stale,
 * never taken for one of the new life (docs/protocol.md "Rounds"). */
void engine_key_set_round0(struct engine_key *k, uint32_t round0);

/* Rounds of k completed in this life, from a segment's done. */
static inline uint32_t engine_key_rounds(const struct engine_key *k, uint32_t done)
{
	return done - k->round0;
}

/* Bytes a PS key needs beyond engine_key_mem_bytes (laid out as f32),
 * 64-aligned. */
size_t engine_ps_mem_bytes(uint64_t count, uint32_t seg_bytes, unsigned planes,
			   unsigned rdtype);

/* Bytes of a PS key's stage for written weights (engine_ps staged and
 * pending), 64-aligned; engine_ps_stage_init lays it out in mem (zeroed)
 * while the key is installed: the lcores see it from the first pending
 * flag set after. */
size_t engine_ps_stage_bytes(const struct engine_key *k);
void engine_ps_stage_init(struct engine_key *k, void *mem);

/* Make k (from engine_key_init with dtype WIRE_F32) a PS key whose
 * gradients come as grad_dtype, its PS state laid out in mem
 * (engine_ps_mem_bytes, zeroed, 64-aligned), before it is installed.
 * Returns the PS state (the caller may fill w and st[] and set restored
 * and step0 from a checkpoint before installing). */
struct engine_ps *engine_ps_init(void *mem, struct engine_key *k,
				 const struct optim_params *opt, unsigned grad_dtype,
				 unsigned rdtype, int average);

/*
 * Sparse keys (docs/protocol.md "Sparse keys"): laid out with
 * sparse_seg_elems(seg_bytes) elements per segment; contributions and
 * shadow copies are records (common/sparse.h). The same contract as
 * engine_key_mem_bytes and engine_key_init otherwise.
 */
size_t engine_sparse_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			       uint32_t segs_per_chunk);
struct engine_key *engine_sparse_key_init(void *mem, uint32_t key, uint64_t count,
					  unsigned dtype, uint32_t seg_bytes,
					  uint32_t segs_per_chunk,
					  const uint8_t *chunk_lcore);

/*
 * Collective keys (docs/protocol.md "Collective keys"): a dense key of
 * nslices slices (count a multiple of it: 1 for broadcast, the world for
 * allgather and reduce_scatter) whose rounds do coll (enum engine_coll)
 * with slice 0 owned by root. The same contract as engine_key_mem_bytes
 * and engine_key_init otherwise; nslices 1 with ENGINE_COLL_SUM is
 * engine_key_init's key.
 */
size_t engine_coll_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			     uint32_t segs_per_chunk, uint16_t nslices);
struct engine_key *engine_coll_key_init(void *mem, uint32_t key, uint64_t count,
					unsigned dtype, uint32_t seg_bytes,
					uint32_t segs_per_chunk, const uint8_t *chunk_lcore,
					unsigned coll, uint16_t root, uint16_t nslices);
uint32_t engine_coll_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			   uint16_t nslices);
uint32_t engine_coll_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			     uint32_t segs_per_chunk, uint16_t nslices);

/* The rank owning segment s of k (its slice's; meaningless for SUM). */
static inline uint16_t engine_seg_owner(const struct engine_key *k, uint32_t s)
{
	return (uint16_t)(k->root + s / k->slice_segs);
}

uint32_t engine_key_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes);
uint32_t engine_key_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk);

/* Messages from the control plane, applied by the owning lcore. */
enum engine_msg_type {
	ENGINE_MSG_JOB_INSTALL = 1, /* desc */
	ENGINE_MSG_WORKER_SET,      /* rank, ip, port */
	ENGINE_MSG_KEY_INSTALL,     /* key */
	ENGINE_MSG_JOB_ABORT,       /* stop aggregating, answer ERROR */
	ENGINE_MSG_JOB_REMOVE,      /* forget the job; acked so memory can go */
	ENGINE_MSG_KEY_REMOVE,      /* key (installed here): forget it and any
				       open round of it; acked so its memory can go */
	ENGINE_MSG_JOB_RESET,       /* round0: a rank was replaced: drop every
				       open round of the job; rounds up to
				       round0 never open again, and round0 + 1
				       is every segment's next (a segment's
				       last done round is still answered) */
	ENGINE_MSG_JOB_NONFINITE,   /* nonfinite: the job's PS policy (enum
				       engine_nonfinite; ENGINE_NF_ABORT from
				       install until this) */
};

struct engine_msg {
	uint32_t type;
	uint32_t job;
	union {
		struct engine_job_desc desc;
		struct { uint16_t rank; uint16_t port; uint32_t ip; } worker;
		struct engine_key *key;
		uint32_t round0;
		uint8_t nonfinite;
	} u;
};

struct engine_counters {
	uint64_t pushes;      /* contributions accepted */
	uint64_t completes;   /* segment rounds completed */
	uint64_t dup_open;    /* duplicates of an open round, ignored */
	uint64_t dup_done;    /* duplicates of a done round, answered */
	uint64_t retx;        /* pushes flagged RETX by the worker */
	uint64_t errors_sent; /* pushes answered with ERROR (aborted job) */
	uint64_t msgs;        /* control messages applied */
	uint64_t held;        /* contributions kept in place, not copied */
	uint64_t waits;       /* WAIT notices sent */
	uint64_t nacks;       /* NACKs sent */
	uint64_t nacks_limited; /* NACKs not sent: the rank's tokens ran out */
	uint64_t marks;       /* completed rounds sent with WIRE_FLAG_CE */
	uint64_t updates;     /* PS: segment rounds whose optimizer step ran */
	uint64_t no_weights;  /* PS: gradients before the weights, answered ERROR */
	uint64_t nonfinite;   /* PS: segment rounds whose gradient sum was not finite */
	uint64_t skipped;     /* PS: ... of them whose step was skipped */
	uint64_t finals;      /* FINAL pushes (results from before a box
				 restart) taken or answered */
};

/* A job's progress on one lcore, for the control plane's stall watch. */
struct engine_progress {
	uint64_t completes;  /* segment rounds completed so far */
	uint64_t rx_bytes;   /* contribution bytes accepted so far */
	uint32_t open;       /* rounds waiting for contributions */
	struct rankset missing;    /* ranks missing from an open round */
	struct rankset missing_all; /* ranks missing from every open round
				 (the late ones; the others may only be
				 behind in their window) */
	uint32_t key, seg, round; /* one open round (for messages), if open */
	uint64_t nonfinite;  /* PS: segment rounds whose gradient sum was not finite */
	uint64_t skipped;    /* PS: ... whose step was skipped (ENGINE_NF_SKIP) */
	/* ENGINE_NF_ABORT: the lcore stopped the job at its first such round */
	uint8_t  nf_abort;
	uint16_t nf_rank;    /* the lowest rank whose own gradient was not
				finite, ENGINE_NF_NO_RANK: only the sum was */
	uint32_t nf_key, nf_seg, nf_round;
};

#define ENGINE_NF_NO_RANK 0xFFFFu

/* A rank's lateness and NACKs on one lcore (control thread, stale but
 * valid as engine_job_progress). */
struct engine_lateness {
	uint64_t n;           /* contributions measured */
	uint64_t sum_ns;      /* total wait for this rank */
	uint64_t max_ns;      /* largest in the last 10 to 20 s */
	uint64_t nacks;       /* NACKs sent to it */
	uint64_t nonfinite;   /* PS: its gradients with a NaN or Inf (segment rounds) */
};

#endif
