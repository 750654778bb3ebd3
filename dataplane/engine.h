/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.h - the aggregation engine of one lcore. Pure C: no DPDK types, no
 * locks, no allocation, no system calls, so it runs the same inside pboxd's
 * lcore loop, in unit tests, in benchmarks and under a fuzzer.
 *
 * Ownership: one struct engine per data lcore, touched only by that lcore.
 * The control plane prepares all memory (job and key structures, in the
 * job's arena, with the engine_*_init helpers of engine_control.h, which
 * is what the control plane sees of the engine) and hands it over as
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
#include "dataplane/engine_control.h"
#include "dataplane/optim.h"

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

/* engine_out.only when every rank gets the payload. */
#define ENGINE_ONLY_NONE 0xFFFFu

/* A contribution slot: holds one open round of one segment. */
struct engine_slot {
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
	/* Last: a small job's ranks are in its first word, on the cache
	 * lines of the fields above (the set is 128 bytes for 1,024 ranks) */
	struct rankset have;      /* the ranks whose contribution is in */
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
	uint64_t nonfinite;       /* PS: its gradients with a NaN or Inf */
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
	struct engine_worker *workers; /* world, in the job's memory */
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
	uint32_t floor;           /* ENGINE_MSG_JOB_RESET's base: rounds up to it
				     are old (never opened again; the last
				     done one is still answered), round
				     floor + 1 opens on any segment behind
				     it; 0 = never reset */
	uint8_t  nonfinite;       /* PS: enum engine_nonfinite */
	uint64_t nf_rounds;       /* PS: segment rounds whose gradient sum was not finite */
	uint64_t nf_skipped;      /* ... whose step was skipped */
	uint8_t  nf_abort;        /* ENGINE_NF_ABORT stopped the job here, at: */
	uint16_t nf_rank;         /* engine_progress's nf_* */
	uint32_t nf_key, nf_seg, nf_round;
	struct engine_rank *ranks;  /* world, in the job's memory */
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

/*
 * Read job_id's progress. Called from the control thread while the lcore
 * runs: the snapshot may be stale, never invalid (it only reads counters,
 * bitmaps and pointers into the job's memory, which outlives the job on
 * the lcore). Returns 0 or -ENOENT.
 */
int engine_job_progress(const struct engine *e, uint32_t job_id,
			struct engine_progress *p);

/* Read a rank's lateness and NACKs on this lcore, stale but valid as
 * engine_job_progress. Returns 0 or -ENOENT. */
int engine_rank_lateness(const struct engine *e, uint32_t job_id, uint16_t rank,
			 struct engine_lateness *l);

#endif
