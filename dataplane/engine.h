/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.h - the aggregation engine of one lcore. Pure C: no DPDK types, no
 * locks, no allocation, no system calls, so it runs the same inside pboxd's
 * lcore loop, in unit tests, in benchmarks and under a fuzzer.
 *
 * Ownership: one struct engine per data lcore, touched only by that lcore.
 * The control plane prepares all memory (job and key structures, in the
 * job's arena, with the engine_*_init helpers below) and hands it over as
 * messages that the lcore applies between bursts (engine_apply). After the
 * hand-over the control plane only reads counters.
 *
 * Round protocol per segment (docs/protocol.md "Rounds"):
 *   done = last completed round (0: none). A PUSH of round r:
 *     r == done+1 -> kept in a contribution slot; the last rank completes it:
 *                    sum in rank order into the shadow copy, done = r,
 *                    verdict ENGINE_SEND_ALL
 *     r == done   -> ENGINE_SEND_ONE with the shadow copy
 *     otherwise   -> dropped (stale_round / future_round)
 *   A duplicate of an open round from a rank whose PUSH carries
 *   WIRE_FLAG_NOTICE is answered with a WAIT naming the missing ranks
 *   (ENGINE_SEND_NOTICE); engine_tick NACKs the ranks still missing from a
 *   round open longer than the job's NACK delay (docs/protocol.md
 *   "Recovery").
 *
 * A collective key (broadcast, allgather, reduce_scatter) keeps these
 * rules; who sends a payload and who gets one back depends on the
 * segment's owner (enum engine_coll, docs/protocol.md "Collective keys").
 *
 * A sparse key's PUSH carries records of several segments (common/
 * sparse.h): each is handled as a PUSH of its segment under the rules
 * above; completion sums the ranks' records in rank order from +0 and the
 * shadow copy holds the result as one record; the answers of one PUSH are
 * drained with engine_next (docs/protocol.md "Sparse keys").
 *
 * Time: the caller sets the engine's clock (engine_clock, nanoseconds,
 * any origin) before each burst; the engine never reads a clock itself.
 *
 * Contributions are copied into the slot, or, when the caller passes a
 * reference to the packet holding them (engine_push_ref) and has set a
 * release function (engine_set_hold), kept in place: the slot remembers
 * the payload pointer and the reference, and the engine gives the
 * reference back through the release function once the round is summed
 * or the job is aborted or removed. Held payloads may be 2-byte aligned
 * only; the sum kernels load them unaligned.
 */
#ifndef PBOX_ENGINE_H
#define PBOX_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/drops.h"
#include "common/sum.h"
#include "common/wire.h"
#include "dataplane/optim.h"

#define ENGINE_MAX_JOBS   64  /* job table of one lcore; power of two */
#define ENGINE_MAX_WORLD  64  /* ranks per job: one bit each in a uint64_t */
#define ENGINE_MAX_LCORES 128 /* chunk owners are uint8_t lcore indexes */
#define ENGINE_NO_SLOT    0xFFFFu

/* Recovery and fairness constants (docs/protocol.md "Recovery"). */
#define ENGINE_NACK_MIN_NS     100000ull   /* NACK delay floor: 100 us */
#define ENGINE_NACK_MAX_NS     20000000ull /* ... and cap: 20 ms */
#define ENGINE_NACK_INIT_NS    1000000ull  /* before any measured round */
#define ENGINE_NACK_BACKOFF    10          /* re-NACK after delay << min(n, 10) ... */
#define ENGINE_NACK_GAP_MAX_NS 1000000000ull /* ... but at most 1 s later */
#define ENGINE_NACK_BLIND      8           /* x delay: NACK a rank not seen past
					      the segment (docs/protocol.md) */
#define ENGINE_NACK_BURST      64          /* NACK tokens per rank ... */
#define ENGINE_NACK_REFILL_NS  20000ull    /* ... one more every 20 us */
#define ENGINE_TICK_SCAN       512         /* slots looked at per engine_tick */
#define ENGINE_RATE_PERIOD_NS  1000000ull  /* job byte rates: 1 ms periods */
#define ENGINE_LATE_PERIOD_NS  10000000000ull /* lateness maximum: 10 s periods */
#define ENGINE_WEIGHT_MAX      1000

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
	uint16_t pad;
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
	uint8_t  average;        /* divide the gradient sum by the world */
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

/* engine_out.only when every rank gets the payload. */
#define ENGINE_ONLY_NONE 0xFFFFu

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

/* A contribution slot: holds one open round of one segment. */
struct engine_slot {
	uint64_t have;            /* bit r: rank r's contribution is in */
	struct engine_key *key;
	uint32_t seg;
	uint32_t round;
	uint16_t nhave;
	uint8_t  retx;            /* a RETX contribution or a NACK: not a clean
				     sample of the job's spread */
	uint8_t  nnack;           /* NACK rounds sent for this round */
	uint64_t t_open;          /* engine clock at the first contribution */
	uint64_t nack_at;         /* when the missing ranks are NACKed next */
	float    lr;              /* PS: rank 0's learning rate for this round */
	uint8_t *data;            /* world * seg_bytes, rank r at r * seg_bytes */
	const void **src;         /* world: rank r's contribution (data or held) */
	void **ref;               /* world: held reference of rank r, or NULL */
};

struct engine_worker {
	uint32_t ip;      /* registered data address, host order; 0 = none yet */
	uint16_t port;    /* host order */
};

/* What one lcore knows of one rank of a job beyond its address. */
struct engine_rank {
	uint8_t  notice;          /* its last PUSH carried WIRE_FLAG_NOTICE */
	uint32_t last_key, last_round, last_seg; /* its furthest PUSH of the
				     key and round it sent last */
	uint16_t nack_tokens;     /* NACKs it may still get now */
	uint64_t nack_refill_at;  /* clock of the last token refill */
	uint64_t nacks;           /* NACKs sent to it */
	/* lateness: how long the box waited for this rank after a round's
	 * first contribution (0 when it was the first) */
	uint64_t late_sum_ns;
	uint64_t late_n;
	uint64_t late_max_ns[2];  /* maximum of this period and the last */
};

enum engine_job_state {
	ENGINE_JOB_FREE = 0,  /* table entry unused */
	ENGINE_JOB_ACTIVE,    /* accepting pushes */
	ENGINE_JOB_ABORTED,   /* pushes answered with ERROR until removed */
};

/* One lcore's view of a job. */
struct engine_job {
	uint32_t id;
	uint8_t  state;          /* enum engine_job_state */
	uint16_t world;
	uint32_t seg_bytes;
	uint64_t token;
	struct engine_worker workers[ENGINE_MAX_WORLD];
	struct engine_key **keys; /* open-addressing table, key_cap entries */
	uint32_t key_cap;         /* power of two */
	uint32_t nkeys;
	struct engine_slot *slots;
	uint16_t *free_slots;     /* stack of free slot indexes */
	uint32_t nslots;
	uint32_t nfree;
	uint64_t completes;       /* segment rounds completed in this job */
	uint32_t weight;          /* byte-rate weight against other jobs, >= 1 */
	uint64_t rx_bytes;        /* contribution bytes accepted */
	uint64_t rate_mark;       /* rx_bytes at the start of the rate period */
	uint64_t rate;            /* bytes per rate period, smoothed */
	uint64_t spread_ns;       /* smoothed first-to-last contribution time of
				     clean rounds; 0 = none measured yet */
	uint64_t spread_dev_ns;   /* its smoothed mean deviation */
	uint64_t nack_delay_ns;   /* NACK a missing rank after this long */
	uint64_t late_period_at;  /* when the lateness period started */
	struct engine_rank ranks[ENGINE_MAX_WORLD];
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
};

struct engine_msg {
	uint32_t type;
	uint32_t job;
	union {
		struct engine_job_desc desc;
		struct { uint16_t rank; uint16_t port; uint32_t ip; } worker;
		struct engine_key *key;
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
};

/* Records one sparse PUSH can hold (8 bytes at least each). */
#define ENGINE_SPARSE_MAX_RECS ((WIRE_MAX_PAYLOAD + 64) / 8)

/* What one record of a sparse PUSH did, for engine_next. */
struct engine_sparse_ev {
	uint32_t seg;
	int32_t  what;            /* ENGINE_SEND_ALL/ONE/NOTICE, or -DROP_* */
	struct wire_notice notice; /* NOTICE: the WAIT's body */
};

/* The answers of the last sparse PUSH, drained by engine_next. */
struct engine_sparse_out {
	const struct engine_job *job;
	const struct engine_key *key;
	struct wire_msg m;        /* the PUSH (round, rank) */
	uint8_t  ce;              /* its completed rounds go out marked */
	uint8_t  phase;           /* 0: completed (to all), 1: answered (to the
				     sender), 2: notices and drops, 3: done */
	uint32_t n, cur;          /* events, and the next one of this phase */
	struct engine_sparse_ev ev[ENGINE_SPARSE_MAX_RECS];
	uint8_t  pack[WIRE_MAX_PAYLOAD]; /* the records of one answer packet */
};

/* Gives back a reference passed to engine_push_ref (e.g. frees an mbuf). */
typedef void (*engine_release_fn)(void *ctx, void *ref);

struct engine {
	uint16_t lcore;                   /* this lcore's index */
	const struct sum_kernels *sum;
	engine_release_fn release;        /* NULL: always copy */
	void *release_ctx;
	struct engine_counters c;
	uint64_t now;                     /* clock, ns (engine_clock) */
	uint8_t congested;                /* engine_set_congested */
	uint64_t rate_at;                 /* start of the current rate period */
	uint64_t share_rate, share_weight; /* sums over jobs with traffic */
	uint32_t scan_job, scan_slot;     /* engine_tick's cursor */
	float ps_grad[WIRE_MAX_PAYLOAD / 4]; /* PS: one segment's gradient */
	float sp_acc[WIRE_MAX_PAYLOAD / 2];  /* sparse: one segment's sum, zero
						between completions */
	uint64_t sp_touched[WIRE_MAX_PAYLOAD / 2 / 64 + 1]; /* its entries in use */
	struct engine_sparse_out sp;        /* sparse: answers still to send */
	struct engine_job jobs[ENGINE_MAX_JOBS];
};

void engine_init(struct engine *e, uint16_t lcore, const struct sum_kernels *sum);

/* Set the engine's clock (ns, monotonic, any origin). */
static inline void engine_clock(struct engine *e, uint64_t now_ns)
{
	e->now = now_ns;
}

/* The caller's view of its queues: while set, completed rounds of jobs
 * at or above their weighted fair share of the lcore's byte rate go out
 * with WIRE_FLAG_CE to the ranks that understand it. */
static inline void engine_set_congested(struct engine *e, int on)
{
	e->congested = (uint8_t)(on != 0);
}

/* Keep contributions in place when engine_push_ref gets a reference;
 * release(ctx, ref) is called once for each reference kept. */
void engine_set_hold(struct engine *e, engine_release_fn release, void *ctx);

/* Apply one control message. Returns 0, or -EEXIST (install over a live
 * job), -ENOENT (no such job, or KEY_REMOVE of a key not installed here),
 * -EINVAL (bad argument), -ENOSPC (key table full). */
int engine_apply(struct engine *e, const struct engine_msg *m);

enum engine_verdict {
	ENGINE_ABSORBED = 0, /* kept or ignored; nothing to send */
	ENGINE_SEND_ALL,     /* a round completed: send out to every rank */
	ENGINE_SEND_ONE,     /* send out to out->rank (shadow copy) */
	ENGINE_SEND_ERROR,   /* send an ERROR (out->status) to out->rank */
	ENGINE_SEND_NOTICE,  /* send out->hdr (WAIT or NACK) with out->notice
				to out->rank */
};

/* What to send: one payload, addressed per rank from out->job->workers. */
struct engine_out {
	const struct engine_job *job;
	struct wire_msg hdr;     /* RESULT/ERROR header, rank to fill per dest */
	const void *payload;     /* plen bytes: hdr.count elements of hdr.dtype,
				    or (flag SPARSE) hdr.count records */
	uint32_t plen;
	struct wire_notice notice; /* body of a WAIT or NACK */
	uint16_t rank;           /* destination for SEND_ONE/ERROR/NOTICE */
	uint16_t only;           /* SEND_ALL: only this rank gets the payload, the
				    others the header with count 0 (a scatter
				    key's owner); ENGINE_ONLY_NONE: all get it */
	uint8_t held;            /* engine_push_ref kept ref (released later,
				    maybe already within the call) */
};

/*
 * Handle one decoded PUSH (m, from wire_decode) whose payload is at
 * payload, received from src_ip:src_port (host order). Returns an
 * enum engine_verdict >= 0 and fills *out, or a negative drop reason
 * (-DROP_*). Counts in e->c; drops are counted by the caller.
 * A sparse PUSH (WIRE_FLAG_SPARSE) may need several answers, and some of
 * its records may be dropped on their own (stale round, no slot): it
 * returns ENGINE_ABSORBED (or a drop of the whole packet) and its answers
 * come from engine_next, which the caller calls after every push until it
 * returns ENGINE_ABSORBED.
 */
int engine_push(struct engine *e, const struct wire_msg *m, const void *payload,
		uint32_t src_ip, uint16_t src_port, struct engine_out *out);

/*
 * engine_push, offering ref (the packet holding payload; NULL = copy).
 * If out->held is set on return the engine owns ref: the caller must not
 * free it nor touch payload again (the release may already have run when
 * the push completed the round). Otherwise ref stays the caller's.
 */
int engine_push_ref(struct engine *e, const struct wire_msg *m, const void *payload,
		    void *ref, uint32_t src_ip, uint16_t src_port, struct engine_out *out);

/*
 * The next answer of the last PUSH: a verdict with *out filled as
 * engine_push does (a RESULT's records packed into out->payload, valid
 * until the next call), a negative drop reason of one record, or
 * ENGINE_ABSORBED when nothing is left (at once after a dense PUSH).
 */
int engine_next(struct engine *e, struct engine_out *out);

/*
 * Timers, between bursts: roll the byte-rate and lateness periods and NACK
 * the ranks missing from rounds open longer than their job's NACK delay
 * (at most ENGINE_TICK_SCAN slots looked at per call, resuming where the
 * last call stopped; each rank's NACKs limited by its token bucket). Fills
 * up to max NACKs into outs (max >= ENGINE_MAX_WORLD) and returns how many.
 */
unsigned engine_tick(struct engine *e, struct engine_out *outs, unsigned max);

/* Whether rank of job gets WIRE_FLAG_CE and notices (its last PUSH said
 * it understands them). */
static inline int engine_rank_notice(const struct engine_job *j, uint16_t rank)
{
	return j->ranks[rank].notice;
}

/* A job's progress on one lcore, for the control plane's stall watch. */
struct engine_progress {
	uint64_t completes;  /* segment rounds completed so far */
	uint64_t rx_bytes;   /* contribution bytes accepted so far */
	uint32_t open;       /* rounds waiting for contributions */
	uint64_t missing;    /* bit r: rank r is missing from an open round */
	uint32_t key, seg, round; /* one open round (for messages), if open */
};

/*
 * Read job_id's progress. Called from the control thread while the lcore
 * runs: the snapshot may be stale, never invalid (it only reads counters,
 * bitmaps and pointers into the job's memory, which outlives the job on
 * the lcore). Returns 0 or -ENOENT.
 */
int engine_job_progress(const struct engine *e, uint32_t job_id,
			struct engine_progress *p);

/* A rank's lateness and NACKs on one lcore (control thread, stale but
 * valid as engine_job_progress). */
struct engine_lateness {
	uint64_t n;           /* contributions measured */
	uint64_t sum_ns;      /* total wait for this rank */
	uint64_t max_ns;      /* largest in the last 10 to 20 s */
	uint64_t nacks;       /* NACKs sent to it */
};

int engine_rank_lateness(const struct engine *e, uint32_t job_id, uint16_t rank,
			 struct engine_lateness *l);

#endif
