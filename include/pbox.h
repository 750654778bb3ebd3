/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pbox.h - the pbox client API (libpbox).
 *
 * A worker joins a job on a pbox aggregation box and sums buffers with the
 * other workers of the job:
 *
 *     pbox_client *c;
 *     int rc = pbox_connect("10.0.0.1:7470", "resnet", rank, 4, NULL, &c);
 *     if (rc == 0)
 *         rc = pbox_allreduce(c, 0, grads, n, PBOX_F32);   // in place
 *     if (rc < 0)
 *         fprintf(stderr, "pbox: %s\n", pbox_last_error(c));
 *     pbox_close(c);
 *
 * Every function returning int returns 0 on success or one of the negative
 * PBOX_E* codes below. pbox_strerror() names a code; pbox_last_error() gives
 * the detailed message of the client's last failure (which job, rank, key).
 * A client may be used from several threads; calls on one key must not
 * overlap. Ranks must start their calls on different keys in the same
 * order (as with NCCL): a client's window is shared by its calls in the
 * order they started, so two ranks starting large calls on two keys in
 * opposite orders can each fill its window with a key the other has not
 * sent yet, and both wait until the timeout. Buffers here are host memory; sums of GPU device buffers are
 * declared in pbox_cuda.h (same library, no CUDA needed to build).
 *
 * ABI rules (what lets the library grow without breaking its callers):
 *  - pbox_opts and pbox_stats only grow at their end; a field, once
 *    released, keeps its offset, type and meaning. Every pbox_opts field
 *    added later means "the default" when 0.
 *  - The caller tells the library how big its copy of a struct is: the
 *    size field of pbox_opts (set by pbox_opts_init), the size argument of
 *    pbox_get_stats_sized. The library reads and writes only that many
 *    bytes. pbox_opts_init and pbox_get_stats below are inline and pass
 *    sizeof as compiled into the caller, so C callers never write a size.
 *  - FFI bindings (Python's pbox package) cannot see sizeof: they call the
 *    *_sized functions with the size of their own declaration, and check at
 *    load time that pbox_version() and the struct sizes (pbox_opts_size()
 *    and the other *_size() functions) are the ones they were written for.
 *  - Exports: the functions these headers declare (each marked PBOX_API),
 *    nothing else. client/libpbox.map lists them by name under the release
 *    that added them (PBOX_0.10, PBOX_0.11, ...: libpbox.so's symbol
 *    versions); libpbox.a defines no other global symbol, so a program
 *    that links it statically may use any other name for its own.
 *  - Versions: MAJOR changes when the ABI breaks (the soname is
 *    libpbox.so.MAJOR), MINOR when it grows (functions or fields added),
 *    PATCH for fixes. Before 1.0 a MINOR change may break the ABI too
 *    (0.2.0 did: pbox_opts gained its size field, pbox_opts_init and
 *    pbox_get_stats became inline), so a program or binding written for
 *    0.y needs a library 0.y.z.
 */
#ifndef PBOX_H
#define PBOX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; the one source of pbox's version number (the
 * Makefile, the Python package's check and pboxd's box_status read it). */
#define PBOX_VERSION_MAJOR 0
#define PBOX_VERSION_MINOR 17
#define PBOX_VERSION_PATCH 0
/* The same as one number, comparable with pbox_version(). */
#define PBOX_VERSION ((PBOX_VERSION_MAJOR << 16) | (PBOX_VERSION_MINOR << 8) | \
		      PBOX_VERSION_PATCH)

/* Marks each function libpbox exports. The library is built with hidden
 * visibility (-fvisibility=hidden): a function of these headers without
 * PBOX_API would not be exported. client/libpbox.map lists the same
 * names, by the release that added them; tests/exports.sh checks that
 * headers, map and the built libraries agree. */
#if defined(__GNUC__)
#define PBOX_API __attribute__((visibility("default")))
#else
#define PBOX_API
#endif

typedef enum pbox_dtype {
	PBOX_F32  = 0, /* float */
	PBOX_F16  = 1, /* IEEE binary16 bit patterns in uint16_t */
	PBOX_BF16 = 2, /* bfloat16 bit patterns in uint16_t */
} pbox_dtype;

/* Error codes: all negative. */
enum {
	PBOX_OK        =  0,
	PBOX_EINVAL    = -1,  /* invalid argument */
	PBOX_ENOMEM    = -2,  /* out of memory */
	PBOX_ECONNECT  = -3,  /* cannot reach the box's control address */
	PBOX_EPROTO    = -4,  /* the box answered something unexpected */
	PBOX_EREJECTED = -5,  /* the box refused the request (limits, mismatch) */
	PBOX_ETIMEDOUT = -6,  /* no progress within the timeout */
	PBOX_EABORTED  = -7,  /* the job was aborted (a worker lost, operator) */
	PBOX_EBUSY     = -8,  /* this key already has a call in flight */
	PBOX_ECLOSED   = -9,  /* the connection to the box was lost */
	PBOX_ESYS      = -10, /* a system call failed (errno in the message), or
			       * the GPU library did (its reason in the message) */
	PBOX_ENOTSUP   = -11, /* the transport asked for, or the GPU path
			       * (pbox_cuda.h), cannot work here (no such device,
			       * driver, library or kernel support) */
	PBOX_EPERM     = -12, /* missing privileges (the xdp transport needs
			       * CAP_NET_RAW and CAP_BPF, or root) */
	PBOX_EAGAIN    = -13, /* the job dropped its calls in flight (a lost
			       * rank was replaced): make the call again
			       * (added in 0.12.0) */
};

/* The road from a worker to the box's data ports (pbox_opts.transport,
 * environment variable PBOX_TRANSPORT=auto|udp|xdp|verbs). All carry the
 * same wire format; docs/transports.md tells what each needs. */
typedef enum pbox_transport {
	PBOX_TRANSPORT_AUTO  = 0, /* the fastest that works here: verbs, xdp (only
				   * with zero-copy: copy mode is slower than udp),
				   * then udp; pbox_transport_info says why one was
				   * skipped */
	PBOX_TRANSPORT_UDP   = 1, /* the kernel's UDP stack: works everywhere */
	PBOX_TRANSPORT_XDP   = 2, /* AF_XDP socket on the interface toward the box */
	PBOX_TRANSPORT_VERBS = 3, /* RDMA raw-packet queue pair (rdma-core) */
} pbox_transport;

/* What the box does with a PS round whose summed gradient holds a NaN or
 * an Inf (pbox_opts.nonfinite, environment variable
 * PBOX_NONFINITE=abort|skip|pass; docs/protocol.md "Non-finite
 * gradients"). The job's creator (its first worker to join) sets it. */
typedef enum pbox_nonfinite {
	PBOX_NONFINITE_DEFAULT = 0, /* $PBOX_NONFINITE if set, else abort */
	PBOX_NONFINITE_ABORT   = 1, /* the job is aborted at once, its reason
				     * naming the rank and key; no weight
				     * changes (the box's default) */
	PBOX_NONFINITE_SKIP    = 2, /* that segment's step is skipped: its
				     * weights and optimizer state stay; the
				     * call succeeds and pbox_stats.ps_skipped
				     * counts it */
	PBOX_NONFINITE_PASS    = 3, /* stepped anyway: the NaN goes into the
				     * weights (pbox before 0.12) */
} pbox_nonfinite;

/*
 * Options of pbox_connect. Fill with pbox_opts_init, then set the fields
 * you want; 0 in a field means its default. The first layout (0.2.0,
 * size 24 bytes, up to udp_offload) is the smallest pbox_connect accepts.
 */
typedef struct pbox_opts {
	/* Bytes of this struct as the caller was compiled: set by
	 * pbox_opts_init, never by hand. pbox_connect reads only the fields
	 * that lie within it; later fields take their defaults. */
	uint32_t size;
	/* Total time without progress before a call fails with
	 * PBOX_ETIMEDOUT, and the job's timeout for late ranks if this worker
	 * creates the job (the first to join; capped by the box's
	 * --stall-timeout-ms): a rank that is alive but late (a checkpoint,
	 * an evaluation) is waited for this long, while one that is gone (its
	 * process ended, stopped or unreachable: no heartbeat) ends the job
	 * within seconds. pbox_opts_init sets it from the environment
	 * variable PBOX_TIMEOUT (milliseconds, or with an ms, s, m or h
	 * suffix: 30m), else 1800000 (30 min, as torch's Gloo and NCCL);
	 * 0 = that default, at most 2^31 - 1 (pbox_connect fails with
	 * PBOX_EINVAL beyond). (30 s before 0.12.0.) */
	uint32_t timeout_ms;
	/* Retransmission timeout until the first round trip is measured;
	 * then it adapts (RFC 6298: max(srtt + 4 rttvar, 2 srtt), 5 ms .. 1 s,
	 * doubled per retransmission of a segment up to 200 ms). 0 = default
	 * 20 ms. */
	uint32_t rto_ms;
	/* Most segments in flight at once over all keys; 0 = default 128. The
	 * window in use is twice the measured bandwidth-delay product, at
	 * least 64 (or this, if smaller) and at most this. */
	uint32_t window;
	/* MTU of the path to the box's data ports. 0 = automatic (default):
	 * the smaller of the box's MTU and the route's toward the box,
	 * confirmed at pbox_connect by a full-size probe that must come back
	 * (else 1500, with a warning on stderr); the environment variable
	 * PBOX_MTU sets it when this is 0. The job's segments fit the
	 * smallest MTU its first worker and the box report. */
	uint32_t mtu;
	/* 1: send runs of segments with UDP GSO and receive with UDP GRO where
	 * the kernel has them (fewer trips through the network stack). Only
	 * where the path cuts GSO sends into datagrams before the box sees
	 * them: a real NIC does; a veth straight to a box on net_af_packet
	 * does not unless the sender's end has `gso_max_segs 1`
	 * (docs/performance.md). 0 = off (default); the environment variable
	 * PBOX_UDP_OFFLOAD=1 turns it on too. */
	uint32_t udp_offload;
	/* The job's join secret (1..256 bytes of UTF-8, NUL-terminated, else
	 * PBOX_EINVAL; read during pbox_connect only). The first worker to
	 * join sets it; every other worker of the job must give the same,
	 * else pbox_connect fails with PBOX_EREJECTED. NULL = the environment variable PBOX_JOIN_SECRET,
	 * if set, else none. */
	const char *join_secret;
	/* The road to the box: a pbox_transport. 0 = PBOX_TRANSPORT_AUTO,
	 * unless the environment variable PBOX_TRANSPORT names one. A named
	 * transport that cannot work here fails pbox_connect (PBOX_ENOTSUP,
	 * PBOX_EPERM) with the reason; auto falls back and says why in
	 * pbox_transport_info. (Added in 0.3.0.) */
	uint32_t transport;
	/* 1: the xdp transport asks the kernel for preferred busy polling
	 * (SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET) and polls the socket in
	 * its receive loop instead of sleeping in poll(): lower latency for
	 * small calls, a busy core. 0 = off (default); PBOX_BUSY_POLL=1 turns
	 * it on too. (Added in 0.3.0.) */
	uint32_t busy_poll;
	/* Bytes of job memory on the box (keys, shadow copies, PS weights and
	 * state) to ask for if this worker creates the job (the first to
	 * join); capped by the box's --max-job-bytes. 0 = the environment
	 * variable PBOX_JOB_BYTES if set (bytes, or with a K, M, G or T
	 * suffix: 512M; else PBOX_EINVAL), else the box's default
	 * (--job-bytes). A declaration beyond it fails with PBOX_EREJECTED
	 * naming the bytes needed and left. (Added in 0.5.0.) */
	uint64_t job_bytes;
	/* Instead of job_bytes, when that is 0: ask for the box's engine
	 * memory for a job of this world (its contribution slots) plus this
	 * many bytes for keys, e.g. what a model's gradients need (Python:
	 * pbox.torch.key_bytes_for(model)). Capped like job_bytes. 0 = not
	 * used. (Added in 0.8.0.) */
	uint64_t key_bytes;
	/* What the box does with a PS round whose gradient sum is not finite,
	 * if this worker creates the job: a pbox_nonfinite. 0 = the
	 * environment variable PBOX_NONFINITE (abort, skip or pass; else
	 * PBOX_EINVAL), else abort. (Added in 0.12.0.) */
	uint32_t nonfinite;
	/* Host-local aggregation (docs/architecture.md "The host level"):
	 * the ranks of one host sum each pbox_allreduce among themselves
	 * through shared memory and send the box one contribution per host.
	 * local_world ranks run on this host: ranks host * local_world ..
	 * host * local_world + local_world - 1, this one local_rank among them
	 * (rank % local_world). 0 = the environment variables
	 * LOCAL_WORLD_SIZE and LOCAL_RANK (torchrun's) when both are set,
	 * else 1; 1 = off. PBOX_HOST_LOCAL=off (or 0) turns it off whatever
	 * these say. On, pbox_connect also joins the lane job "<job>.lane<l>"
	 * (l = local_rank) as rank host of world / local_world, and fails
	 * with PBOX_EINVAL naming the rank when local_world is above
	 * PBOX_HOST_LOCAL_MAX or does not divide the world, local_rank is not
	 * rank % local_world, or the job name is longer than 56 characters;
	 * with PBOX_EINVAL or PBOX_ETIMEDOUT when the host's ranks disagree
	 * on local_world, two claim one local rank, or one does not come
	 * within timeout_ms. (Added in 0.14.0.) */
	uint32_t local_rank;
	uint32_t local_world;
} pbox_opts;

/* Ranks of one host in host-local aggregation, at most. */
#define PBOX_HOST_LOCAL_MAX 64

typedef struct pbox_client pbox_client;
typedef struct pbox_req pbox_req;

/*
 * Fill the first `size` bytes at opts with the defaults and set opts->size
 * = size: fields this library knows get their defaults, bytes beyond them
 * (a caller newer than the library) are zeroed. Returns 0, or PBOX_EINVAL
 * if opts is NULL or size is below the first layout (24) or above 4096
 * (then nothing is written). C callers use pbox_opts_init.
 */
PBOX_API int pbox_opts_init_sized(pbox_opts *opts, size_t size);

/* Fill *opts with the defaults (pbox_opts_init_sized with the caller's
 * sizeof). */
static inline void pbox_opts_init(pbox_opts *opts)
{
	(void)pbox_opts_init_sized(opts, sizeof(*opts));
}

/* sizeof(pbox_opts), sizeof(pbox_stats), sizeof(pbox_optim) and
 * sizeof(pbox_topk_opts) as this library was built, for FFI bindings that
 * declare the structs themselves (pbox_dev_opts_size: pbox_cuda.h). Every
 * struct whose fields these headers show has one. (pbox_topk_opts_size:
 * added in 0.11.0.) */
PBOX_API size_t pbox_opts_size(void);
PBOX_API size_t pbox_stats_size(void);
PBOX_API size_t pbox_optim_size(void);
PBOX_API size_t pbox_topk_opts_size(void);

/* This library's version, (MAJOR << 16) | (MINOR << 8) | PATCH: compare
 * with PBOX_VERSION, the version of the header a program was built with. */
PBOX_API unsigned pbox_version(void);
/* The same as static text, "MAJOR.MINOR.PATCH". */
PBOX_API const char *pbox_version_string(void);

/*
 * Join job `job` as `rank` of `world` workers through the box whose control
 * endpoint is `control` ("host:port"; NULL = $PBOX_CONTROL). The first
 * worker to join creates the job. opts may be NULL (defaults); else it
 * must have been filled by pbox_opts_init: opts->size below the first
 * layout (24) or above 4096, or non-zero bytes beyond the fields this
 * library knows (the caller set an option of a newer libpbox), are
 * PBOX_EINVAL with a message saying so.
 * Returns 0 and *c, or PBOX_EINVAL, PBOX_ENOMEM, PBOX_ECONNECT,
 * PBOX_EPROTO, PBOX_EREJECTED, PBOX_EABORTED, PBOX_ETIMEDOUT (no answer
 * within timeout_ms), PBOX_ECLOSED (the box closed the control connection
 * while joining), PBOX_ESYS. On failure *c is a client that holds only the
 * error message (read it with pbox_last_error, then pbox_close it), or NULL
 * if even that could not be allocated (PBOX_ENOMEM). c itself NULL:
 * PBOX_EINVAL, nothing else done.
 */
PBOX_API int pbox_connect(const char *control, const char *job, int rank, int world,
			  const pbox_opts *opts, pbox_client **c);

/*
 * Sum buf (count elements of dtype) over all ranks, in place. Blocks until
 * the sum is in buf. Every rank must use the same key with the same count
 * and dtype. Returns 0 or PBOX_EINVAL, PBOX_EREJECTED (size or dtype differs
 * from another rank's), PBOX_EBUSY, PBOX_ETIMEDOUT, PBOX_EABORTED,
 * PBOX_ECLOSED, PBOX_ENOMEM, PBOX_ESYS.
 */
PBOX_API int pbox_allreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
			    pbox_dtype dtype);

/*
 * Start the same sum and return at once with *req; buf must stay valid and
 * untouched until pbox_wait(req) returns. Returns 0, or the codes of
 * pbox_allreduce for failures found before starting.
 */
PBOX_API int pbox_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
			     pbox_dtype dtype, pbox_req **req);

/*
 * Collectives on the box (docs/protocol.md "Collective keys"). Each is
 * exact and loss-tolerant as pbox_allreduce is, and declares its key on
 * first use for that collective: a key serves one collective, one size
 * and one dtype for the client's life (another use: PBOX_EINVAL; ranks
 * that disagree: PBOX_EREJECTED, naming both). Every rank calls the same
 * collective with the same key, count and dtype. Returns 0 or the codes
 * of pbox_allreduce; the i-forms start the call and return at once with
 * *req, their buffers untouched until pbox_wait(req) returns.
 *
 * broadcast: root's buf (count elements) into every rank's buf, bit for
 * bit; only root's data crosses the network toward the box (the others
 * send 40-byte queries). root outside [0, world): PBOX_EINVAL.
 */
PBOX_API int pbox_broadcast(pbox_client *c, uint32_t key, void *buf, size_t count,
			    pbox_dtype dtype, int root);
PBOX_API int pbox_ibroadcast(pbox_client *c, uint32_t key, void *buf, size_t count,
			     pbox_dtype dtype, int root, pbox_req **req);

/*
 * allgather: every rank's in (count elements) into out (world * count
 * elements), rank r's at out + r * count, bit for bit. in may be
 * out + rank * count (in place); otherwise they must not overlap.
 */
PBOX_API int pbox_allgather(pbox_client *c, uint32_t key, const void *in, void *out,
			    size_t count, pbox_dtype dtype);
PBOX_API int pbox_iallgather(pbox_client *c, uint32_t key, const void *in, void *out,
			     size_t count, pbox_dtype dtype, pbox_req **req);

/*
 * reduce_scatter: in holds world * count elements; out (count elements)
 * gets elements [rank * count, (rank + 1) * count) of the sum over all
 * ranks, summed as pbox_allreduce sums. Each rank receives only its own
 * slice of the sum. in and out must not overlap.
 */
PBOX_API int pbox_reduce_scatter(pbox_client *c, uint32_t key, const void *in, void *out,
				 size_t count, pbox_dtype dtype);
PBOX_API int pbox_ireduce_scatter(pbox_client *c, uint32_t key, const void *in, void *out,
				  size_t count, pbox_dtype dtype, pbox_req **req);

/*
 * Barrier: returns when every rank has called it (a one-element sum on
 * key, which then serves barriers only). Codes of pbox_allreduce.
 */
PBOX_API int pbox_barrier(pbox_client *c, uint32_t key);

/*
 * Give back keys[0..n) (1 <= n <= 1024) this rank will not use again, so
 * the box can free their memory (docs/rpc.md "key_release"). Collective,
 * like a key's first use: a key is removed once every rank has released
 * it, and a rank may release a key it never used, so all ranks can run
 * the same code. Blocks until the box has recorded this rank's release
 * (one round trip, bounded by the timeout). PBOX_EBUSY if a call on one
 * of the keys is in flight (wait for it first); PBOX_EREJECTED naming the
 * key if the job has no such key or this rank released it already.
 * Afterwards a key's next call declares it afresh, with any size or
 * collective (a top-k key's residual and momentum go with the release),
 * once every rank has released it (until then the call waits,
 * within its timeout). A release that timed out may still be recorded by
 * the box: until its answer comes, calls on its keys return PBOX_EBUSY.
 */
PBOX_API int pbox_release_keys(pbox_client *c, const uint32_t *keys, size_t n);

/* Wait for req, free it and return its result (codes of pbox_allreduce). */
PBOX_API int pbox_wait(pbox_req *req);

/* Test without blocking: 1 if req is finished (then pbox_wait returns at
 * once), 0 if not. */
PBOX_API int pbox_test(pbox_req *req);

/*
 * PS mode (docs/pytorch.md "PS mode"): the box keeps a key's fp32 weights
 * and its optimizer's state, workers push gradients and get the updated
 * weights back in the same round trip. Per key, in this order, on every
 * rank:
 *
 *     pbox_optim o;
 *     pbox_optim_init(&o, PBOX_OPTIM_SGD);
 *     o.lr = 0.1; o.momentum = 0.9; o.nesterov = 1;
 *     pbox_declare_optimizer(c, key, n, PBOX_F32, &o);
 *     pbox_ps_init(c, key, rank == 0 ? weights : NULL, weights);
 *     for (each step) {
 *         ... compute grads ...
 *         pbox_set_lr(c, key, schedule(step));             // optional
 *         pbox_push_pull(c, key, grads, weights, n, PBOX_F32);
 *     }
 *
 * The box sums the gradients in rank order, divides the sum by the world
 * (as DDP averages; o.sum = 1 keeps the sum), applies the update in fp32
 * exactly once per round whatever the loss, and every rank gets the same
 * weights, bit for bit.
 */
typedef enum pbox_optim_kind {
	PBOX_OPTIM_SGD   = 1, /* torch.optim.SGD: momentum, dampening, nesterov,
			       * weight_decay */
	PBOX_OPTIM_ADAM  = 2, /* torch.optim.Adam: betas, eps, weight_decay (L2) */
	PBOX_OPTIM_ADAMW = 3, /* torch.optim.AdamW: decoupled weight_decay */
} pbox_optim_kind;

/* An optimizer and its hyperparameters, with PyTorch's meanings. Fill with
 * pbox_optim_init (PyTorch's defaults for the kind), then set fields.
 * Grows only at its end, as pbox_opts: a size beyond this library's is
 * accepted while the bytes it does not know are 0, else
 * pbox_declare_optimizer fails with PBOX_EINVAL naming the byte. */
typedef struct pbox_optim {
	uint32_t size;          /* set by pbox_optim_init, never by hand */
	uint32_t kind;          /* pbox_optim_kind */
	double lr;              /* learning rate of the first step (then
				 * pbox_set_lr); SGD 0.01, Adam(W) 0.001 */
	double momentum;        /* SGD, 0 .. 1 (exclusive): 0 */
	double dampening;       /* SGD, 0 .. 1: 0 */
	double weight_decay;    /* >= 0: SGD and Adam 0, AdamW 0.01 */
	double beta1, beta2;    /* Adam(W), 0 .. 1 (exclusive): 0.9, 0.999 */
	double eps;             /* Adam(W), > 0: 1e-8 */
	uint32_t nesterov;      /* SGD, 0 or 1 (needs momentum > 0 and
				 * dampening 0, as PyTorch): 0 */
	uint32_t sum;           /* 0: the gradient is the mean over the ranks
				 * (default); 1: their sum */
	uint32_t weights_dtype; /* pbox_dtype of the weights the box returns:
				 * PBOX_F32 (0, default) or the gradients' */
	uint32_t mean_over;     /* the mean's divisor: 0 (default) the job's
				 * world; else this many ranks (the host level
				 * declares its lanes' keys with the whole
				 * world). (Added in 0.14.0.) */
} pbox_optim;

/* Fill the first size bytes at o with kind's defaults (PBOX_EINVAL for
 * an unknown kind or a size below 80 or above 4096); o->size gets size.
 * The bytes beyond this library's sizeof(pbox_optim) are zeroed: a caller
 * built with a newer header that sets a field there is refused by
 * pbox_declare_optimizer, never silently ignored. */
PBOX_API int pbox_optim_init_sized(pbox_optim *o, size_t size, pbox_optim_kind kind);

static inline int pbox_optim_init(pbox_optim *o, pbox_optim_kind kind)
{
	return pbox_optim_init_sized(o, sizeof(*o), kind);
}

/*
 * Declare key as a PS key of count weights, whose gradients come as
 * grad_dtype, with optimizer o. Every rank declares it with the same
 * arguments (else PBOX_EREJECTED naming the difference). The box takes the
 * memory for the weights and state now: PBOX_EREJECTED with the bytes
 * needed if the job's memory cannot hold them. A key is either PS or
 * plain (pbox_allreduce) for the client's life. Declared again on this
 * rank with the same count, dtypes and optimizer (kind and
 * hyperparameters; lr may differ), it returns 0 without asking the box
 * again; anything else returns PBOX_EINVAL naming the difference and
 * changes nothing (pbox_release_keys, then a declaration afresh, changes
 * a key's optimizer). A declaration that returns 0 sets the learning
 * rate the key's pushes carry to o->lr, as pbox_set_lr does; one that
 * fails leaves it. Blocks until the box answered. Returns 0 or the codes
 * of pbox_allreduce.
 */
PBOX_API int pbox_declare_optimizer(pbox_client *c, uint32_t key, size_t count,
				    pbox_dtype grad_dtype, const pbox_optim *o);

/*
 * The first round of a PS key: rank 0 uploads its weights (count fp32,
 * weights non-NULL), the others pass NULL and wait for them; every rank
 * then gets the box's copy in weights_out (count elements of
 * o.weights_dtype). If the job was started from a checkpoint holding the
 * key (docs/operations.md), the box keeps the checkpoint's weights and
 * rank 0's are ignored. Once per declaration: after the key's first round
 * has started, it fails at once with PBOX_EINVAL and takes no round
 * (pbox_ps_write loads weights into a running key). Returns 0 or the
 * codes of pbox_allreduce.
 */
PBOX_API int pbox_ps_init(pbox_client *c, uint32_t key, const float *weights, void *weights_out);

/*
 * One optimizer step on a PS key: push count gradients (dtype as
 * declared), block until the updated weights are in weights_out (count
 * elements of o.weights_dtype). grad and weights_out may be the same
 * buffer only if their dtypes are. A push before pbox_ps_init fails with
 * PBOX_EINVAL and nothing is applied. Returns 0 or the codes of
 * pbox_allreduce.
 */
PBOX_API int pbox_push_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
			    size_t count, pbox_dtype dtype);

/* pbox_push_pull without blocking: both buffers must stay valid and
 * untouched until pbox_wait(*req) returns. */
PBOX_API int pbox_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
			     size_t count, pbox_dtype dtype, pbox_req **req);

/* The learning rate the following pushes of key carry (a schedule sets
 * it every step; it travels in each PUSH, no round trip to the box). lr
 * must be finite and >= 0. The box uses rank 0's. */
PBOX_API int pbox_set_lr(pbox_client *c, uint32_t key, double lr);

/* What pbox_ps_read and pbox_ps_write access of a PS key. */
typedef enum pbox_ps_part {
	PBOX_PS_WEIGHTS = 0, /* the fp32 weights */
	PBOX_PS_STATE0  = 1, /* SGD: momentum_buffer; Adam(W): exp_avg */
	PBOX_PS_STATE1  = 2, /* Adam(W): exp_avg_sq */
} pbox_ps_part;

/*
 * Read a PS key's weights or optimizer state from the box into out (count
 * floats: the key's count), between this rank's steps (no call of its own
 * on the key in flight: then no round can complete, whatever the other
 * ranks do); *steps (may be NULL) gets the optimizer steps they hold. Any
 * rank.
 * Goes through the control connection in 32 KiB pieces: for checkpoints,
 * not per step. Returns 0 or PBOX_EINVAL (no such part for the
 * optimizer), PBOX_EREJECTED (no weights yet), and the codes of
 * pbox_allreduce.
 */
PBOX_API int pbox_ps_read(pbox_client *c, uint32_t key, pbox_ps_part part, float *out,
			  size_t count, uint64_t *steps);

/*
 * Rank 0 only, between its steps: overwrite a PS key's weights or state
 * on the box with in (count floats: the key's count), e.g. to load a
 * checkpoint into a running job; written weights are the next step's
 * start (reads show them at once; a rank still waiting for the last
 * step's result gets that step's weights, as rank 0 did). Weights that
 * return as f32 wait for that step in a stage of the key's size in the
 * job's memory, taken at the first write of them: PBOX_EREJECTED naming
 * the bytes when the job has no room. pbox_ps_set_steps sets the
 * optimizer steps taken (the next step is steps + 1: Adam's bias
 * correction; PBOX_EINVAL above INT64_MAX). Returns 0 or the codes of
 * pbox_ps_read. A write that timed
 * out may still be applied by the box: until its answer comes, calls on
 * the key return PBOX_EBUSY (retry them), so none runs beside it.
 */
PBOX_API int pbox_ps_write(pbox_client *c, uint32_t key, pbox_ps_part part, const float *in,
			   size_t count);
PBOX_API int pbox_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps);

/*
 * Sparse keys (docs/protocol.md "Sparse keys"): each rank sends only the
 * entries it selects, the box sums them in rank order (absent entries are
 * zero) and every rank gets the same dense sum, bit for bit. A key is
 * sparse from its first sparse call on and stays so for the client's life.
 *
 *     pbox_topk_opts t;
 *     pbox_topk_opts_init(&t);
 *     t.density = 0.01;                  // send 1% of the entries
 *     pbox_allreduce_topk(c, key, grads, n, PBOX_F32, &t);   // in place
 *
 * pbox_allreduce_topk selects the largest magnitudes (pbox_topk) of the
 * gradient plus what earlier calls did not send (error feedback: the
 * residual, kept per key in the client), sends them and writes the dense
 * sum into buf.
 *
 * Hierarchical top-k (local_size > 1): the ranks rank - local_rank ..
 * rank - local_rank + local_size - 1 run on one host and sum their
 * gradients densely through shared memory first (in local rank order);
 * the first of them (local_rank 0, the leader) alone keeps the residual,
 * selects from the host's sum and sends entries; the others send empty
 * contributions. Every rank still gets the dense sum over all ranks from
 * the box. Every rank of the group must pass the same local_size and call
 * on the same keys; a group member that does not come within the
 * client's timeout_ms fails the call (PBOX_ETIMEDOUT naming it) and
 * breaks the key's group for all (PBOX_EABORTED). The shared memory,
 * (local_size + 1) x count floats per key, is in /dev/shm while the key's
 * group is being set up (docs/architecture.md "Hierarchical top-k").
 */
typedef struct pbox_topk_opts {
	uint32_t size;           /* set by pbox_topk_opts_init, never by hand */
	uint32_t error_feedback; /* 1 (default): keep what was not sent (the
				  * residual) and add it to the next call's
				  * gradient; 0: drop it */
	double density;          /* fraction of the entries sent, (0, 1];
				  * default 0.01 */
	double momentum;         /* momentum correction (Lin et al., Deep
				  * Gradient Compression, 2018): 0 (default) off,
				  * else the momentum in (0, 1), accumulated on
				  * the worker before selection and cleared where
				  * sent; then the optimizer takes no momentum */
	uint32_t local_rank;     /* hierarchical top-k (below): this rank's */
	uint32_t local_size;     /* place among the local_size ranks of its host;
				  * local_size 0 or 1 (default): every rank
				  * selects and sends on its own */
} pbox_topk_opts;

/* Ranks of one host in a hierarchical top-k group, at most. */
#define PBOX_TOPK_LOCAL_MAX 64

/* Fill the first size bytes at o with the defaults and set o->size =
 * size, as pbox_opts_init_sized (PBOX_EINVAL for a size below 24 or above
 * 4096). A size beyond this library's is accepted by the calls while the
 * bytes it does not know are 0, else they fail with PBOX_EINVAL naming
 * the byte. */
PBOX_API int pbox_topk_opts_init_sized(pbox_topk_opts *o, size_t size);

static inline int pbox_topk_opts_init(pbox_topk_opts *o)
{
	return pbox_topk_opts_init_sized(o, sizeof(*o));
}

/*
 * Sparse allreduce of buf (count elements of dtype, in place): select
 * about density * count entries of buf + residual by magnitude, send
 * them, and write the sum over all ranks (dense, absent entries zero)
 * into buf. o NULL: the defaults. f16/bf16 gradients are selected in fp32
 * and their rounding error stays in the residual (none for a value sent
 * as an infinity). Infinities and NaNs are the largest magnitudes (a NaN
 * counts as +inf): sent first, so every rank's sum shows them, as a
 * dense allreduce's would, and they leave nothing in the residual (more
 * than about density * count of them leave by that many a call, in index
 * order). Returns 0, PBOX_EINVAL
 * (density not in (0, 1], momentum not in [0, 1), count above
 * UINT32_MAX, the key declared dense or of another size or dtype), or
 * the codes of pbox_allreduce. With error feedback the selection moves
 * the gradient out of buf into the residual (buf is zero until the
 * result arrives), so a submission that fails after it (out of memory, a
 * failed client: nothing was sent) leaves buf zero and all of the
 * gradient in the residual, where the next call on the key finds it.
 */
PBOX_API int pbox_allreduce_topk(pbox_client *c, uint32_t key, void *buf, size_t count,
				 pbox_dtype dtype, const pbox_topk_opts *o);

/* pbox_allreduce_topk without blocking: buf must stay valid and untouched
 * until pbox_wait(*req) returns. The selection runs before it returns. */
PBOX_API int pbox_iallreduce_topk(pbox_client *c, uint32_t key, void *buf, size_t count,
				  pbox_dtype dtype, const pbox_topk_opts *o, pbox_req **req);

/*
 * Sparse allreduce of nnz index/value pairs: idx strictly increasing and
 * below count, val nnz elements of dtype; out (count elements) gets the
 * dense sum over all ranks. nnz may be 0. Returns 0, PBOX_EINVAL (indices
 * unsorted, repeated or out of range, the key declared dense or of
 * another size or dtype), or the codes of pbox_allreduce.
 */
PBOX_API int pbox_allreduce_sparse(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
				   const uint32_t *idx, const void *val, size_t nnz, void *out);

/*
 * With the host level (pbox_opts.local_world, LOCAL_WORLD_SIZE), the
 * sparse and top-k calls go through the host too (docs/architecture.md
 * "The host level"): pbox_allreduce_sparse sums the entries of a host's
 * ranks in local rank order (an index's values in f32, rounded once to
 * the dtype) and sends the box one set of entries per host; the result is
 * the same sum over all ranks in the order (host, local rank).
 * pbox_allreduce_topk (local_size 1) selects from the host's sum: local
 * rank l takes part l of the key (the parts of the dense call), adds its
 * residual and momentum of that part, and sends density x the part's
 * count of its entries, so a host sends density x count entries in all,
 * as one rank does without the host level. Each part keeps its own
 * residual (pbox_topk_reset clears this rank's).
 */

/* pbox_allreduce_sparse without blocking: out must stay valid and
 * untouched until pbox_wait(*req) returns; idx and val may be reused at
 * once (they are copied before it returns). */
PBOX_API int pbox_iallreduce_sparse(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
				    const uint32_t *idx, const void *val, size_t nnz, void *out,
				    pbox_req **req);

/*
 * The sum of buf (count elements of dtype, in place) over the ranks of
 * this rank's host only, in local rank order, the same bits on each of
 * them; nothing goes to a box. Every local rank calls it on the same key
 * in the same order as its other calls of the host level; a key used so
 * is for host sums only. Without the host level (one rank a host) buf is
 * left as it is. For a caller that sums on the host and selects once per
 * host (the Python package's top-k engine): the host's sum, a selection
 * by one local rank, its entries in pbox_allreduce_sparse (the others
 * passing none). Returns 0, PBOX_EINVAL, or the codes of pbox_allreduce.
 * (Added in 0.16.0.)
 */
PBOX_API int pbox_allreduce_host(pbox_client *c, uint32_t key, void *buf, size_t count,
				 pbox_dtype dtype);

/* This rank's place in its host under the host level: *local_rank of
 * *local_world ranks; 0 of 1 without it (off, or one rank a host).
 * Returns 0 or PBOX_EINVAL (a NULL argument). (Added in 0.16.0.) */
PBOX_API int pbox_host_layout(const pbox_client *c, uint32_t *local_rank,
			      uint32_t *local_world);

/* Forget key's residual (and momentum): the next pbox_allreduce_topk
 * starts from zero. Returns 0 or PBOX_EINVAL (not a top-k key). */
PBOX_API int pbox_topk_reset(pbox_client *c, uint32_t key);

/* Entries pbox_topk may return for k: what idx and val must hold. */
#define PBOX_TOPK_MAX(k) ((k) + (k) / 8 + 1)

/*
 * Top-k by magnitude on the CPU (MSTopK's threshold search, AVX2/AVX-512
 * when the CPU has them): about k of the n entries of x with the largest
 * |x[i]|, k - k/8 <= *m <= k + k/8 (all n when k >= n), indices strictly
 * increasing, into idx and val (PBOX_TOPK_MAX(k) entries each). A NaN's
 * magnitude counts as +inf's: NaNs and infinities come first. Needs no
 * client. Returns 0 or PBOX_EINVAL (NULL
 * pointers, n above UINT32_MAX).
 */
PBOX_API int pbox_topk(const float *x, size_t n, size_t k, uint32_t *idx, float *val, size_t *m);

/* Leave the job and free c. NULL is ignored. */
PBOX_API void pbox_close(pbox_client *c);

/* Static text naming an error code. */
PBOX_API const char *pbox_strerror(int rc);

/* The code's name as static text, as this header spells it: "PBOX_OK",
 * "PBOX_EINVAL", ... "PBOX_EAGAIN"; "PBOX_E?" (not an identifier, so no
 * code's name) for a value that is no code. For messages and bindings,
 * which then need no copy of the names. (Added in 0.11.0.) */
PBOX_API const char *pbox_err_name(int rc);

/* Detailed message of the last failure of a call this thread made on c:
 * threads sharing c each read their own. If this thread had none on c
 * (or failed on another client since), c's latest failure from any
 * thread (a copy); "" if none. Valid until this thread's next call on c
 * or its next pbox_last_error on another client. */
PBOX_API const char *pbox_last_error(const pbox_client *c);

/* One line naming the transport in use and how it runs, e.g. "xdp on
 * eth0 queue 0 (native XDP, copy mode); verbs skipped: no RDMA device",
 * with the reason each faster transport was skipped when auto chose.
 * A fleet's client gives every box's, the first box's first: "... (box 1
 * of 2); box 2 of 2: ...". Static for c's life; "" before pbox_connect
 * succeeded. */
PBOX_API const char *pbox_transport_info(const pbox_client *c);

/* Counters of one client, for tools and tests. Grows at its end (fields
 * only appended); the first layout (0.2.0) is the 13 counters below, 104
 * bytes. */
typedef struct pbox_stats {
	uint64_t pkts_sent;
	uint64_t pkts_recv;
	uint64_t retransmits;
	uint64_t dup_results;   /* results for segments already complete */
	uint64_t bad_packets;   /* received datagrams that failed checks */
	uint64_t calls;         /* calls completed that moved data: allreduce,
				 * collectives, sparse, PS steps (not
				 * declarations, PS reads/writes, releases) */
	uint64_t rtt_samples;   /* round trips measured (segments sent once) */
	uint64_t srtt_us;       /* smoothed PUSH -> RESULT round trip */
	uint64_t rttvar_us;     /* its mean deviation */
	uint64_t rto_us;        /* current retransmission timeout */
	uint64_t gso_sends;     /* sends that carried several datagrams (UDP GSO) */
	uint64_t gro_receives;  /* receives that held several datagrams (UDP GRO) */
	uint64_t window;        /* segments allowed in flight now: 2 x the measured
				 * bandwidth-delay product, 64 .. pbox_opts.window */
	uint64_t mtu;           /* the MTU this client joined with (pbox_opts.mtu,
				 * or found: see pbox_opts.mtu) */
	uint64_t seg_bytes;     /* payload bytes of a full segment in the job */
	/* (Added in 0.3.0.) */
	uint64_t transport;     /* the pbox_transport in use */
	uint64_t tx_dropped;    /* datagrams the transport had no room for (sent
				 * again by retransmission) */
	uint64_t rx_lost;       /* frames the transport lost before libpbox saw
				 * them (AF_XDP rings full; 0 where unknown) */
	uint64_t wakeups;       /* system calls made to kick the NIC (xdp, verbs) */
	/* (Added in 0.4.0: docs/protocol.md "Recovery".) */
	uint64_t nacks;         /* NACKs received: the box lacked our contribution */
	uint64_t waits;         /* WAITs received: the box had it, others were missing */
	uint64_t fast_retransmits; /* resent on a NACK or by RACK, before any timeout */
	uint64_t timeouts;      /* resent because a timeout passed with the box silent */
	uint64_t ce_marks;      /* results marked congested by the box */
	/* (Added in 0.6.0.) */
	uint64_t bytes_sent;    /* pbox datagram bytes sent (header + payload;
				 * UDP, IP and Ethernet headers not counted) */
	uint64_t bytes_recv;    /* pbox datagram bytes received and accepted
				 * (checked; not a duplicate result) */
	uint64_t sparse_entries; /* entries sent by sparse calls (first copies) */
	uint64_t key_bytes;     /* the job's memory on the box for keys (what
				 * its first rank reserved, less the engine's
				 * part): declarations take from it,
				 * pbox_release_keys gives back. (0.8.0) */
	/* (Added in 0.9.0.) Device calls (pbox_cuda.h) whose segments the
	 * NIC read from GPU memory (GPUDirect RDMA), and those staged
	 * through pinned host memory. */
	uint64_t gpu_direct_calls;
	uint64_t gpu_staged_calls;
	/* (Added in 0.12.0.) PS segments whose step the box skipped: their
	 * gradient sum held a NaN or Inf and the job's nonfinite policy is
	 * skip (pbox_nonfinite); the weights returned are those before. */
	uint64_t ps_skipped;
	/* (Added in 0.12.0.) Datagrams with this job's token that came from
	 * another address or port than the box endpoint their segment
	 * belongs to: forged or misrouted, dropped unread. */
	uint64_t foreign_packets;
	/* (Added in 0.13.0.) Times this client rejoined its job after the
	 * control connection was lost (a box restart: PBOX_RESUME), and the
	 * FINAL pushes it sent then: results of its dense keys that other
	 * ranks may have lacked (docs/reliability.md "A box restart"). */
	uint64_t rejoins;
	uint64_t finals_sent;
} pbox_stats;

/*
 * Copy c's counters into the first `size` bytes at out: those that fit (a
 * caller older than the library gets the ones it has), and zeros for any
 * beyond the library's (a caller newer than the library); nothing past
 * out + size is written. Returns 0, or PBOX_EINVAL
 * if out is NULL or size is below the first layout (104) or above 4096
 * (nothing written), or if c is NULL (out zeroed up to size). Over a
 * fleet the counters are summed over its boxes' clients, and with the
 * host level the lane's are added; the round trip, window, MTU, segment
 * size and transport are the first box's flat client's.
 */
PBOX_API int pbox_get_stats_sized(const pbox_client *c, pbox_stats *out, size_t size);

/* pbox_get_stats_sized with the caller's sizeof. */
static inline int pbox_get_stats(const pbox_client *c, pbox_stats *out)
{
	return pbox_get_stats_sized(c, out, sizeof(*out));
}

#ifdef __cplusplus
}
#endif
#endif
