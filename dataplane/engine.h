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

#define ENGINE_MAX_JOBS   64  /* job table of one lcore; power of two */
#define ENGINE_MAX_WORLD  64  /* ranks per job: one bit each in a uint64_t */
#define ENGINE_MAX_LCORES 128 /* chunk owners are uint8_t lcore indexes */
#define ENGINE_NO_SLOT    0xFFFFu

/* Job ids: the low bits pick the lcore job-table entry, the rest is a
 * generation so a restarted job never matches an old one's packets. */
static inline unsigned engine_job_index(uint32_t job_id)
{
	return job_id & (ENGINE_MAX_JOBS - 1);
}

/* Per-segment state: owned by the lcore that owns the segment's chunk. */
struct engine_seg {
	uint32_t done;   /* last completed round, 0 = none */
	uint16_t slot;   /* contribution slot of the open round, or NO_SLOT */
	uint16_t pad;
};

/* A declared key. Built by the control plane in the job arena with
 * engine_key_init; immutable afterwards except segs[] and result, whose
 * entries belong to the lcore owning the chunk. */
struct engine_key {
	uint32_t key;
	uint8_t  dtype;
	uint8_t  pad[3];
	uint64_t count;          /* elements */
	uint32_t seg_elems;      /* elements per full segment */
	uint32_t nsegs;
	uint32_t segs_per_chunk;
	uint32_t nchunks;
	const uint8_t *chunk_lcore;  /* nchunks: lcore index owning each chunk */
	struct engine_seg *segs;     /* nsegs */
	uint8_t *result;             /* nsegs * seg_bytes: shadow copies */
};

/* A contribution slot: holds one open round of one segment. */
struct engine_slot {
	uint64_t have;            /* bit r: rank r's contribution is in */
	struct engine_key *key;
	uint32_t seg;
	uint32_t round;
	uint16_t nhave;
	uint8_t *data;            /* world * seg_bytes, rank r at r * seg_bytes */
	const void **src;         /* world: rank r's contribution (data or held) */
	void **ref;               /* world: held reference of rank r, or NULL */
};

struct engine_worker {
	uint32_t ip;      /* registered data address, host order; 0 = none yet */
	uint16_t port;    /* host order */
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
};

/* Gives back a reference passed to engine_push_ref (e.g. frees an mbuf). */
typedef void (*engine_release_fn)(void *ctx, void *ref);

struct engine {
	uint16_t lcore;                   /* this lcore's index */
	const struct sum_kernels *sum;
	engine_release_fn release;        /* NULL: always copy */
	void *release_ctx;
	struct engine_counters c;
	struct engine_job jobs[ENGINE_MAX_JOBS];
};

void engine_init(struct engine *e, uint16_t lcore, const struct sum_kernels *sum);

/* Keep contributions in place when engine_push_ref gets a reference;
 * release(ctx, ref) is called once for each reference kept. */
void engine_set_hold(struct engine *e, engine_release_fn release, void *ctx);

/* Apply one control message. Returns 0, or -EEXIST (install over a live
 * job), -ENOENT (no such job), -EINVAL (bad argument), -ENOSPC (key table
 * full). */
int engine_apply(struct engine *e, const struct engine_msg *m);

enum engine_verdict {
	ENGINE_ABSORBED = 0, /* kept or ignored; nothing to send */
	ENGINE_SEND_ALL,     /* a round completed: send out to every rank */
	ENGINE_SEND_ONE,     /* send out to out->rank (shadow copy) */
	ENGINE_SEND_ERROR,   /* send an ERROR (out->status) to out->rank */
};

/* What to send: one payload, addressed per rank from out->job->workers. */
struct engine_out {
	const struct engine_job *job;
	struct wire_msg hdr;     /* RESULT/ERROR header, rank to fill per dest */
	const void *payload;     /* hdr.count elements of hdr.dtype */
	uint16_t rank;           /* destination for SEND_ONE / SEND_ERROR */
	uint8_t held;            /* engine_push_ref kept ref (released later,
				    maybe already within the call) */
};

/*
 * Handle one decoded PUSH (m, from wire_decode) whose payload is at
 * payload, received from src_ip:src_port (host order). Returns an
 * enum engine_verdict >= 0 and fills *out, or a negative drop reason
 * (-DROP_*). Counts in e->c; drops are counted by the caller.
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

/* A job's progress on one lcore, for the control plane's stall watch. */
struct engine_progress {
	uint64_t completes;  /* segment rounds completed so far */
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

#endif
