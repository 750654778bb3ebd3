/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs.h - the job registry: admission, ranks, keys, abort and removal.
 *
 * The registry owns every job's control-plane state and its arena: one
 * block of box->dp.mem_alloc(max_bytes) allocated at admission and carved
 * by a bump allocator into each lcore's engine job memory and, later, the
 * declared keys. It reaches the lcores only through box->dp.post (and must
 * be the only poster: it counts posts per lcore to know, from
 * box->dp.applied, when a removed job's memory is no longer used).
 *
 * Single-threaded: called from pboxd's main lcore (the RPC server) only.
 * Every function returning int returns 0 or a negative errno and, on
 * failure, writes a message naming job, rank, key and sizes into err.
 * Structures below are read-only outside jobs*.c.
 */
#ifndef PBOX_JOBS_H
#define PBOX_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "control/arena.h"
#include "control/assign.h"
#include "control/box.h"
#include "dataplane/dp.h"

#define JOB_NAME_MAX 63
#define JOB_SECRET_MAX 256   /* join secret bytes (common/secret.h's bound) */
#define JOB_RESTORE_MAX 1024 /* bytes of a checkpoint directory's path */
#define KEY_RELEASE_MAX 1024 /* keys one key_release may name */

/*
 * Job states. Order: FORMING -> ACTIVE -> ABORTED, or FORMING -> ABORTED.
 * ABORTED is terminal. Independently of the state a job may be *removing*
 * (every rank left, or aborted with no session left): it is then gone from
 * lookups and listings and waits for its lcores to let go of its memory.
 */
enum job_state {
	JOB_FORMING = 0, /* admitted; not every rank has joined yet */
	JOB_ACTIVE,      /* every rank has joined (at some point) */
	JOB_ABORTED,     /* lcores answer ERROR; reason says why */
};

/* An aborted job is listed (job_list, job_status: its reason) until no
 * session is left or this long after the abort, whichever is first; then
 * it is removed and its slot and memory freed. */
#define JOB_ABORT_LINGER_S 10

struct job_rank {
	uint8_t joined;     /* joined and not left */
	uint32_t ip;        /* data address, host order (kept after leave) */
	uint16_t port;
	uint32_t mtu;
	void *session;      /* RPC connection that joined; NULL once gone */
	uint32_t heartbeat_ms; /* its worker sends a line at least this often
				  (job_join's heartbeat_ms), 0 = never promised */
	double lost_at;     /* lost (process gone) in a job that waits for a
			       replacement: since when; 0 = not lost */
	char lost_why[112]; /* ... and why ("control connection closed") */
};

/* PS mode of a key as declared (docs/rpc.md "key_declare"). */
struct job_ps {
	struct optim_params opt;
	unsigned rdtype;           /* dtype of the weights the box returns */
	int average;               /* 1: the gradient is the mean over ranks */
	uint32_t mean_over;        /* ... over this many ranks, 0 = the job's world
				      (a host-local job's lanes: its whole world) */
};

struct job_key {
	uint32_t key;
	uint8_t dtype;             /* declared (PS: of the gradients) */
	uint8_t is_ps;             /* PS key: ps holds its optimizer */
	uint8_t sparse;            /* sparse key (docs/protocol.md "Sparse keys") */
	uint8_t coll;              /* enum job_coll (docs/protocol.md
				      "Collective keys") */
	uint16_t root;             /* a broadcast key's root */
	struct job_ps ps;
	uint16_t first_rank;       /* rank that declared it first */
	struct rankset declared;   /* the ranks that declared it */
	struct assign_geom geom;
	uint16_t *chunk_ep;        /* geom.nchunks endpoint indexes (box->eps) */
	struct engine_key *ek;     /* in the job arena */
	size_t bytes;              /* arena bytes it took */
	uint64_t off;              /* ... at this offset */
	size_t stage_bytes;        /* PS, f32 weights: the stage for written
				      weights (engine_ps staged), 0 until the
				      first write of them (jobs_ps_stage) */
	uint64_t stage_off;        /* ... at this offset of the arena */
	struct rankset released;   /* the ranks that released it (key_release) */
	uint32_t nreleased;        /* ... how many */
	uint64_t *remove_mark;     /* every rank released: per lcore, the posted
				      count incl. its KEY_REMOVE (0 = not
				      posted there yet); NULL while live */
};

/* A removed key's block on its way back to the job (jobs_keys_tick). */
struct job_zeroing {
	uint64_t off, len;         /* the block */
	uint64_t done;             /* bytes of it zeroed so far */
	uint8_t last;              /* its key's last block: the key is gone after it */
};

struct job {
	char name[JOB_NAME_MAX + 1];
	uint32_t id;
	uint64_t token;
	enum job_state state;
	uint16_t world;
	uint16_t njoined;          /* ranks joined and not left */
	uint32_t seg_bytes;
	uint64_t max_bytes;        /* arena size */
	struct arena mem;          /* the arena's blocks: engine memory, keys */
	uint32_t weight;           /* byte-rate weight against other jobs */
	uint8_t nonfinite;         /* PS gradients that are not finite: enum
				      engine_nonfinite (jobs_nonfinite.h) */
	uint8_t *arena;
	struct job_rank ranks[ENGINE_MAX_WORLD];
	struct job_key *keys;      /* nkeys, in declaration order (a removed
				      key's place goes to the last one) */
	uint32_t nkeys, keys_cap;
	uint32_t keys_removing;    /* keys waiting for the lcores' KEY_REMOVE, or
				      for their blocks to be zeroed */
	struct job_zeroing *zeroing; /* removed keys' blocks being zeroed, a
				      piece per tick, before they go back */
	uint32_t nzeroing, zeroing_cap;
	uint32_t keys_releasing;   /* keys some ranks (not all) released */
	uint32_t round_hwm;        /* highest round a removed key may have
				      opened (its last completed + 1): a key
				      declared later numbers its rounds from
				      above it (docs/protocol.md "Rounds") */
	uint32_t *key_index;       /* open addressing: index+1, 0 = empty */
	uint32_t key_index_cap;    /* power of two >= 2 * max_keys */
	char reason[192];          /* abort reason, "" if none */
	char join_secret[JOB_SECRET_MAX + 1]; /* "" = none; never reported */
	char restore[JOB_RESTORE_MAX + 1]; /* PS keys load their checkpoints from
				      this directory ("" = start fresh) */
	uint32_t join_secret_len;
	uint64_t placement;        /* the key placement's hash the first rank
				      that gave one joined with (job_join's
				      "placement"); valid if placement_rank >= 0 */
	int32_t placement_rank;    /* that rank, -1: none given yet */
	double created;            /* CLOCK_MONOTONIC s: the join wait counts from here */
	uint8_t kept;              /* made by job_create: outlives its ranks,
				      until job_abort or empty for --join-wait-ms */
	double empty_since;        /* an operator's job: when its last rank left
				      (0 = a rank is joined, or none ever was) */
	double aborted_at;         /* CLOCK_MONOTONIC s of the abort (JOB_ABORT_LINGER_S) */
	struct peer_addr log_peer; /* TCP peer that created it: its lines count there,
				      and it counts against that peer's budgets */
	uint8_t by_operator;       /* created by an operator (job_create, or over the
				      Unix socket): may use the reserve, no peer budget */
	int removing;
	uint32_t replace_wait_ms;  /* a lost rank is waited for this long for a
				      process that joins in its place (0: a
				      lost rank aborts the job) */
	uint32_t resets;           /* ranks replaced so far */
	uint32_t reset_base;       /* the last reset's base: rounds start over at
				      reset_base + 1 (0 = never reset) */
	uint32_t reset_rank;       /* ... for the replacement of this rank */
	uint8_t resetting;         /* its JOB_RESET posted, not yet applied by
				      every lcore (jobs_tick finishes it) */
	uint64_t reset_mark[BOX_MAX_LCORES]; /* posted count incl. the RESET */
	uint32_t timeout_ms;       /* how long it waits for a late rank (its
				      creator's timeout_ms, capped by
				      --stall-timeout-ms); 0 = forever */
	uint64_t watch_completes;  /* stall watch: completes when last seen */
	double watch_since;        /* ... and since when (CLOCK_MONOTONIC s) */
	struct rankset waiting_for; /* ranks its open rounds wait for (joined
				      ranks only; 0 = none) since watch_since */
	uint64_t remove_mark[BOX_MAX_LCORES]; /* posted count incl. REMOVE, 0 = not posted */
	struct job_restoring **restoring; /* PS keys whose checkpoint is being
				      read (jobs_keys.c): built in the arena,
				      not yet in keys[] nor on the lcores */
	uint32_t nrestoring, restoring_cap;
};

struct jobs;

/* A job's reset, for its sessions (docs/rpc.md "job_reset"): why, the
 * round every key starts over after (base: the next is base + 1), and per
 * key the last round every segment of it is done with (a call on that
 * round or before is complete at the box; later ones were dropped). */
struct jobs_reset_note {
	const char *reason;        /* "rank 2 was replaced: call again" */
	uint32_t base;
	uint32_t nkeys;
	const uint32_t (*done)[2]; /* {key, round} */
};

/* Called for each live session of a job when it is aborted (reset NULL),
 * or when one of its ranks was replaced and every lcore dropped the job's
 * open rounds (reset: what they need to go on). */
typedef void (*jobs_notify_fn)(void *ctx, void *session, const struct job *j,
			       const struct jobs_reset_note *reset);

/* Create an empty registry for box. 0 or -ENOMEM. */
int jobs_open(struct box *box, struct jobs **out);
/* Free every job and the registry. Call only once the lcores no longer run
 * (their memory is freed without waiting for them). NULL is ignored. */
void jobs_close(struct jobs *js);
void jobs_set_notify(struct jobs *js, jobs_notify_fn fn, void *ctx);

/*
 * Admit job `name` with `world` ranks and an arena of max_bytes (0: the
 * box default; above the box limit: capped), segments sized for mtu (0:
 * the box MTU), with a byte-rate weight against other jobs (0: 1; at most
 * ENGINE_WEIGHT_MAX). Installs it on every lcore. Returns 0 and *out, or
 * -EINVAL (bad name, world outside [1, max_world], MTU too small),
 * -EEXIST (name in use), -ENOSPC (too many jobs, or max_bytes cannot hold
 * the engine memory), -ENOMEM (the box has no memory for it), -EAGAIN (an
 * lcore's message ring stayed full).
 */
/* A job's contribution slots per lcore (open segment rounds): --slots, but
 * no more than JOB_SLOT_DATA_BYTES of copied contributions hold
 * (world x seg_bytes each), and at least JOB_SLOTS_MIN: a job of 1,024
 * ranks does not take 2 GiB per lcore. */
#define JOB_SLOT_DATA_BYTES (128ull << 20)
#define JOB_SLOTS_MIN       16
uint32_t jobs_slots(const struct box_config *cfg, uint32_t world, uint32_t seg_bytes);

int jobs_create(struct jobs *js, const char *name, uint32_t world,
		uint64_t max_bytes, uint32_t mtu, uint32_t weight,
		const struct job **out, char *err, size_t errlen);

/* Whether dir can be a restore directory (absolute path of a directory
 * on the box): 0 or -EINVAL with the message in err. */
int jobs_restore_dir_check(const char *dir, char *err, size_t errlen);

/* Make job j (forming: no key declared yet) restore its PS keys from the
 * checkpoints in dir (an absolute path of an existing directory). 0 or
 * -EINVAL / -EBUSY (keys declared already) with the message in err. */
int jobs_set_restore(struct jobs *js, const struct job *j, const char *dir,
		     char *err, size_t errlen);

/*
 * Whether the next job admitted is an operator's (job_create's handler sets
 * it around jobs_create; a job made over the Unix socket is an operator's
 * anyway). An operator's job may take the --reserved-jobs and
 * --reserved-job-bytes and is counted against no peer.
 */
void jobs_admit_as_operator(struct jobs *js, int on);

struct jobs_join_args {
	const char *name;
	uint32_t rank, world;
	uint32_t ip;        /* data address, host order */
	uint16_t port;
	uint32_t mtu;       /* 0: 1500 */
	void *session;      /* the joining connection */
	const char *join_secret; /* NULL = none given */
	uint64_t max_bytes; /* job memory if this join creates the job; 0 = the
			       box's default (--job-bytes) */
	uint64_t key_bytes; /* max_bytes 0: the job's engine memory plus this
			       (0 = not used) */
	uint32_t nonfinite;  /* the job's nonfinite policy if this join creates
				it (enum engine_nonfinite; 0: abort) */
	uint32_t timeout_ms; /* the job's timeout if this join creates it (0:
				the box's bound, --stall-timeout-ms) */
	uint32_t heartbeat_ms; /* the worker promises a line at least this
				  often (0: none promised) */
	uint32_t replace_wait_ms; /* the job's replacement window if this join
				     creates it (0: none) */
	const char *placement; /* hash of the rank's key placement over a fleet
				  (16 hex digits), NULL: not checked */
};

/*
 * Join (creating the job if it does not exist, with the joiner's world,
 * MTU and join secret). A job with a join secret admits only joiners that
 * give the same one, and a job without one only joiners that give none.
 * Returns 0 and *out, or -EACCES (join secret missing or wrong), -EINVAL
 * (world differs from the job's,
 * rank outside [0, world), MTU too small for the job's segments, data
 * address 0 or used by another rank, placement not 16 hex digits or not
 * the one the job's first rank that gave one joined with), -EEXIST (rank
 * already joined),
 * -ENOSPC, -ENOMEM, -EAGAIN (as jobs_create), -ECONNABORTED (job aborted).
 */
int jobs_join(struct jobs *js, const struct jobs_join_args *a,
	      const struct job **out, char *err, size_t errlen);

/*
 * Rank leaves; when no rank is left the job is removed. session must be
 * the one that joined (NULL: any). Returns 0, -ENOENT (no such job),
 * -EINVAL (rank not joined), -EACCES (joined on another connection).
 */
int jobs_leave(struct jobs *js, uint32_t job_id, uint32_t rank, void *session,
	       char *err, size_t errlen);

/* j was made by an operator (job_create): it outlives its ranks. When the
 * last one leaves, its keys are released (the next group declares them
 * afresh: PS keys from its restore directory) and it waits --join-wait-ms
 * for a join before it is removed; if it is aborted, the next join makes
 * it again with the same world, memory, weight, timeout, join secret and
 * restore directory. */
void jobs_set_kept(struct jobs *js, const struct job *j);

/* A job's timeout for a late rank: timeout_ms (0: none given) capped by
 * the box's --stall-timeout-ms. */
uint32_t jobs_timeout(const struct jobs *js, uint32_t timeout_ms);
/* Set a job's replacement window (job_create's replace_wait_ms): a rank
 * whose process is lost is waited for this long for a process that joins
 * with its rank (and the job's secret); then the job's open rounds are
 * dropped, its keys' rounds start over and the other ranks' sessions get
 * job_reset. 0: a lost rank aborts the job. */
void jobs_set_replace_wait(struct jobs *js, const struct job *j, uint32_t ms);
/* Set a job's timeout (job_create's): jobs_timeout of timeout_ms. */
void jobs_set_timeout(struct jobs *js, const struct job *j, uint32_t timeout_ms);

/* Give a job without joiners a join secret (job_create's). 0, or -EINVAL
 * (longer than JOB_SECRET_MAX), -EEXIST (a rank joined already). */
int jobs_set_join_secret(struct jobs *js, const struct job *j, const char *secret,
			 char *err, size_t errlen);

struct jobs_declare_args {
	uint32_t job_id;
	uint32_t rank;
	uint32_t key;
	uint64_t count;     /* elements */
	unsigned dtype;     /* enum wire_dtype */
	void *session;      /* the calling connection: must be the rank's */
	const struct job_ps *ps; /* PS key (checked), or NULL: a plain sum */
	bool sparse;        /* a sparse key (not with ps) */
	unsigned coll;      /* enum job_coll (not with ps or sparse;
			       allgather and reduce_scatter: count a
			       multiple of the world) */
	uint16_t root;      /* broadcast's root, < world */
	uint32_t resume_round; /* 0, or (a rank resuming after a box restart)
				  the lowest round it holds a result of: a
				  key this declaration makes starts after
				  resume_round - 1 (not with ps or sparse) */
	bool defer_restore; /* a PS key that restores from a checkpoint:
			       read it off the control thread (JOBS_PENDING);
			       false: read it here, at once */
};

/* What a key's rounds do (docs/protocol.md "Collective keys"). */
enum job_coll {
	JOB_ALLREDUCE = 0,  /* the sum to every rank (every other kind of key) */
	JOB_BROADCAST,      /* root's data to every rank */
	JOB_ALLGATHER,      /* every rank's slice to every rank */
	JOB_REDUCE_SCATTER, /* slice i of the sum to rank i */
	JOB_NCOLL
};

/* key_declare's name of a collective and back: 0 or -EINVAL; NULL for
 * an unknown one. */
int jobs_coll_parse(const char *name, unsigned *coll);
const char *jobs_coll_name(unsigned coll);

/*
 * Declare a key. The first declaration creates it in the arena, assigns
 * its chunks and installs it on the owning lcores; later ones must match.
 * Returns 0 and *out, or -ENOENT (no such job), -ECONNABORTED (aborted),
 * -EACCES (the rank was joined by another connection),
 * -EINVAL (rank not joined, dtype unknown, count 0 or larger than the job,
 * count/dtype differ from the first declaration), -ENOSPC (key limit, or
 * arena exhausted: the message says how much is left), -EAGAIN.
 */
int jobs_declare(struct jobs *js, const struct jobs_declare_args *a,
		 const struct job_key **out, char *err, size_t errlen);

/*
 * A PS key restored from a checkpoint (the job's restore directory, or
 * --checkpoint-dir) with a->defer_restore: jobs_declare answers
 * JOBS_PENDING and its file is read and checked on a reader thread
 * (control/ckpt_load.h); the ranks that declare the key meanwhile (the
 * same declaration) get JOBS_PENDING too and wait for that one read.
 * jobs_restores_poll (control thread, every poll) ends the reads: a key
 * read whole is installed and fn gets it (k, rc 0: each waiting
 * declaration is answered as if it had been answered at once); a read
 * that failed, ran past --checkpoint-timeout-ms (-ETIMEDOUT naming the
 * file), or whose job was aborted fails with its message (k NULL, rc <
 * 0, the same message for every waiting declaration) and leaves no key.
 * jobs_restore_pending: 1 while job_id's key is being read.
 */
#define JOBS_PENDING 1
typedef void (*jobs_restored_fn)(void *ctx, const struct job *j, uint32_t key,
				 const struct job_key *k, int rc, const char *msg);
void jobs_restores_poll(struct jobs *js, jobs_restored_fn fn, void *ctx);
int jobs_restore_pending(const struct jobs *js, uint32_t job_id, uint32_t key);

/*
 * key_release: rank gives back keys[0..n) (docs/rpc.md). A key every rank
 * has released leaves the lcores (KEY_REMOVE) and its memory returns to
 * the job once they applied it (jobs_tick). The keys this call was the
 * last to release go into removed[] (room for n), their number into
 * *nremoved. 0, or -ENOENT (no job, no such key), -EINVAL (rank
 * not joined, a key already released by the rank), -EACCES,
 * -ECONNABORTED, -ENOMEM; on an error nothing was released.
 */
int jobs_release(struct jobs *js, uint32_t job_id, uint32_t rank, const void *session,
		 const uint32_t *keys, uint32_t n, uint32_t *removed, uint32_t *nremoved,
		 char *err, size_t errlen);

/*
 * Before rank 0 first writes PS key k's weights while they are its
 * results (weights_dtype f32): give the key a stage in the job's arena
 * (engine_ps_stage_init), kept until the key is removed. 0 (also when
 * it has one or needs none), or -ENOSPC naming the bytes it needs.
 */
int jobs_ps_stage(struct jobs *js, const struct job *j, const struct job_key *k,
		  char *err, size_t errlen);

/* The round a declaration of k answers as its first (key_declare's
 * first_round): k's round0 + 1, or a reset's base + 1 while the lcores
 * apply it. */
uint32_t jobs_first_round(const struct job *j, const struct job_key *k);

/* "live", "releasing" (some ranks released it), "removing" (all did:
 * waiting for the lcores). */
const char *job_key_state(const struct job_key *k);

/*
 * Abort job `name` with reason: the lcores answer its packets with ERROR,
 * its sessions are notified, and it is removed once no session is left.
 * Aborting an aborted job is a no-op. Returns 0 or -ENOENT.
 */
int jobs_abort(struct jobs *js, const char *name, const char *reason,
	       char *err, size_t errlen);

/* A connection closed: every rank it holds is lost (its job is aborted
 * with "rank R lost (control connection closed)" unless that rank left).
 * js NULL is ignored. */
void jobs_session_closed(struct jobs *js, void *session);

/* A connection whose worker promised heartbeats fell silent (rpc_server's
 * sweep): every rank it holds is lost, its job aborted with "rank R lost:
 * why". js NULL is ignored. */
void jobs_session_lost(struct jobs *js, void *session, const char *why);

/* 1 if session holds a rank of a live job, one not aborted (it may stay
 * silent while the job runs), else 0. */
int jobs_session_holds(const struct jobs *js, const void *session);

/* The shortest heartbeat interval session promised for a rank of a live
 * job (job_join's heartbeat_ms), 0 if none. */
uint32_t jobs_session_heartbeat(const struct jobs *js, const void *session);

/* Periodic work: finish removals whose lcores have applied the REMOVE
 * (then the arena is freed), retry REMOVE posts that found a full ring.
 * js NULL is ignored. */
void jobs_tick(struct jobs *js);

const struct job *jobs_find(const struct jobs *js, const char *name);
const struct job *jobs_find_id(const struct jobs *js, uint32_t id);
/* Live (not removing) jobs in table order: start with prev = NULL. */
const struct job *jobs_next(const struct jobs *js, const struct job *prev);
const struct job_key *job_key_find(const struct job *j, uint32_t key);

/* A job's traffic summed over the lcores (jobs_watch.c): segment rounds
 * completed, contribution bytes reduced, NACKs sent to its ranks. */
struct job_traffic {
	uint64_t rounds, bytes, nacks;
};
void jobs_traffic(const struct jobs *js, const struct job *j, struct job_traffic *t);

unsigned jobs_count(const struct jobs *js);     /* live jobs */
unsigned jobs_removing(const struct jobs *js);  /* waiting for lcores */
/* Endpoint loads (bytes of declared chunks per box->eps entry). */
const uint64_t *jobs_ep_load(const struct jobs *js);

/* "forming", "active", "aborted". */
const char *job_state_name(enum job_state s);

/* 1 if name is 1-63 characters of [A-Za-z0-9._-]. */
int job_name_valid(const char *name);

#endif
