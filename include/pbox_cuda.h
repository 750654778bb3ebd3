/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pbox_cuda.h - sums of GPU device buffers through a pbox box (libpbox,
 * docs/gpu.md). Needs no CUDA header: a stream is passed as void *, the
 * value of a cudaStream_t (NULL: the legacy default stream).
 *
 *     #include <pbox.h>
 *     #include <pbox_cuda.h>
 *
 *     pbox_dev_opts o;
 *     pbox_dev_opts_init(&o);
 *     o.scale = 1.0 / world;                 // the mean, as DDP wants it
 *     pbox_req *r;
 *     rc = pbox_iallreduce_dev(c, key, grads_on_device, n, PBOX_F32, stream, &o, &r);
 *     ... enqueue more work on any stream, compute on the host ...
 *     rc = pbox_wait(r);   // returns once the sum is ordered on `stream`:
 *                          // work enqueued on it afterwards sees the sum
 *
 * libpbox never links CUDA. The first device call of a client loads the
 * GPU library with dlopen: $PBOX_GPU_LIB if set, else libpbox-gpu.so.1
 * (built by `make gpu`). Without it, or without a CUDA device, the call
 * fails with PBOX_ENOTSUP and pbox_last_error() says which ("no GPU
 * library: libpbox-gpu.so.1: cannot open shared object file ...", "no
 * CUDA device: ..."). Host calls (pbox.h) never load it.
 *
 * How a device call runs: the sum waits, on the GPU, for the work enqueued
 * on `stream` before the call (an event), then copies the buffer to a
 * page-locked host slab of the key (allocated at the key's first device
 * call, reused by every later one) chunk by chunk, casting to the wire
 * dtype on the way. Each chunk's segments go to the box as soon as the
 * chunk is on the host; each chunk goes back (scaled, cast to the
 * buffer's dtype) as soon as all its results are in. So the copies in
 * both directions overlap the box's rounds, and neither the caller nor
 * libpbox waits for the device on the host. With GPUDirect RDMA (the
 * verbs transport, pbox_dev_opts.gpudirect) the NIC reads the segments
 * from the device buffer itself and the copy to the host goes away.
 */
#ifndef PBOX_CUDA_H
#define PBOX_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "pbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Options of a device call. Fill with pbox_dev_opts_init (the defaults),
 * then set fields. Grows only at its end, as pbox_opts; the first layout
 * (0.8.0) is 24 bytes.
 */
typedef struct pbox_dev_opts {
	/* Bytes of this struct as the caller was compiled: set by
	 * pbox_dev_opts_init, never by hand. */
	uint32_t size;
	/* The pbox_dtype sent to the box and summed there; -1 (default): the
	 * buffer's own. Another one halves (f32 -> f16/bf16) or doubles the
	 * bytes on the wire; the cast runs in the device-to-host copy, and
	 * the result is cast back to the buffer's dtype on its way back. A
	 * key's dtype on the box is its wire dtype. */
	int32_t wire_dtype;
	/* The sum is multiplied by scale (in binary32) on its way back into
	 * the buffer: 1 (default) keeps the sum, 1.0 / world gives the mean.
	 * Must be finite. With scale 1 and wire_dtype the buffer's, the
	 * buffer gets the box's bits exactly. */
	double scale;
	/* Staging chunk in wire bytes (rounded down to whole segments, at
	 * least one and at most the buffer's: any value is valid): the unit
	 * that is copied, sent, and copied back. 0 = default 1 MiB. Fixed by
	 * a key's first device call. */
	uint64_t chunk_bytes;
	/* (Added in 0.9.0.) GPUDirect RDMA (docs/gpu.md): the NIC reads the
	 * buffer's segments from GPU memory, with no copy to the host (the
	 * results still come back through the slab). Possible with the verbs
	 * transport on a NIC that computes checksums, a GPU whose memory it
	 * can register (dma-buf or nvidia-peermem), and wire_dtype the
	 * buffer's own. PBOX_GPUDIRECT_DEFAULT (what pbox_dev_opts_init
	 * sets): the environment's PBOX_GPUDIRECT (off, auto, on), else
	 * auto. */
	int32_t gpudirect;
} pbox_dev_opts;

enum {
	PBOX_GPUDIRECT_DEFAULT = -1,
	PBOX_GPUDIRECT_OFF = 0,    /* always stage through host memory */
	PBOX_GPUDIRECT_AUTO = 1,   /* when possible, else stage (pbox_stats counts which) */
	PBOX_GPUDIRECT_ON = 2,     /* required: the call fails with the reason otherwise */
};

/* Fill the first size bytes at o with the defaults (as
 * pbox_opts_init_sized): 0, or PBOX_EINVAL if o is NULL or size is below
 * the first layout (24) or above 4096. */
PBOX_API int pbox_dev_opts_init_sized(pbox_dev_opts *o, size_t size);

static inline int pbox_dev_opts_init(pbox_dev_opts *o)
{
	return pbox_dev_opts_init_sized(o, sizeof(*o));
}

/* sizeof(pbox_dev_opts) as this library was built, for FFI bindings (as
 * pbox_opts_size). (Added in 0.11.0.) */
PBOX_API size_t pbox_dev_opts_size(void);

/*
 * Load and initialise the GPU library for c now (the first device call
 * does it otherwise); a later call returns at once. The library is loaded
 * and initialised once per process (per file), then shared by every
 * client. Returns 0, or PBOX_ENOTSUP with pbox_last_error(c) naming the
 * cause: the library missing (dlopen's reason), not a pbox GPU library,
 * of another ABI, no CUDA driver or no CUDA device. c NULL: PBOX_EINVAL.
 */
PBOX_API int pbox_gpu_init(pbox_client *c);

/*
 * Start the in-place sum of dev, count elements of dtype in device memory,
 * over all ranks (as pbox_iallreduce: every rank uses the same key, count
 * and wire dtype). Ordered after the work enqueued on stream before the
 * call; returns at once with *req. Until pbox_wait(*req) has returned, no
 * work may write dev, nor read it expecting the sum. pbox_wait returns
 * once the sum is ordered on stream (work enqueued on stream afterwards
 * sees it; the host sees it after synchronising the stream), and frees
 * req. pbox_test(req) returning 1 orders it too.
 *
 * The pinned host slab of a key is count wire elements, allocated by its
 * first device call and reused by every later one; calls on one key must
 * not overlap (a second one before pbox_wait of the first: PBOX_EBUSY).
 * If the call fails, pbox_wait still orders stream after every copy it
 * enqueued: dev then holds the sum in some chunks and the original
 * values in others.
 *
 * With the host level on (pbox_opts.local_world; docs/architecture.md
 * "The host level") the call goes through it as pbox_iallreduce of a
 * host buffer of the wire dtype does (the same order and bits), its data
 * copied through the key's slab (docs/gpu.md "Through the host level");
 * a call that fails there leaves dev as it was (a fleet's client too,
 * since 0.16.0: its lanes are fleets). It goes to the box flat instead
 * with opts->gpudirect (or PBOX_GPUDIRECT) PBOX_GPUDIRECT_ON.
 *
 * opts NULL: the defaults. Returns 0, or PBOX_EINVAL (dev not device
 * memory, dev NULL, count 0, a dtype or wire_dtype unknown, scale not
 * finite, opts->size bad, another chunk_bytes than the key's first
 * call, a key of pbox_iallreduce_topk_dev), PBOX_ENOTSUP (pbox_gpu_init's
 * causes), PBOX_ESYS (the GPU library failed, or could not tell whether
 * dev is device memory: its reason in the message), and the codes of
 * pbox_iallreduce. Errors found later (pbox_wait) are those of
 * pbox_allreduce and PBOX_ESYS.
 */
PBOX_API int pbox_iallreduce_dev(pbox_client *c, uint32_t key, void *dev, size_t count,
				 pbox_dtype dtype, void *stream, const pbox_dev_opts *opts,
				 pbox_req **req);

/* pbox_iallreduce_dev and pbox_wait: returns once the sum is ordered on
 * stream (the host does not wait for the device). */
PBOX_API int pbox_allreduce_dev(pbox_client *c, uint32_t key, void *dev, size_t count,
				pbox_dtype dtype, void *stream, const pbox_dev_opts *opts);

/*
 * Top-k sparse allreduce of a float32 device buffer (pbox_allreduce_topk's
 * rules, docs/gpu.md "Top-k on the device"): the selection runs on the
 * GPU, on stream after the work enqueued there: about topk->density *
 * count entries of dev + the key's residual (error feedback, kept in
 * device memory: count floats per key, made by its first call) by
 * magnitude; those go to the box, and the dense sum over all ranks,
 * times opts->scale, is written back into dev, ordered on stream as
 * pbox_iallreduce_dev's. The calling thread waits for the selection on
 * the host (the search reads its counts back between passes) before the
 * call returns; the sum's copy back is not waited for.
 * With the host level on, the buffer is staged
 * through the key's slab instead and the host level's top-k call runs on
 * it (each local rank selects from its part of the host's sum on the CPU,
 * the residual in host memory), with the same result as
 * pbox_allreduce_topk of a host buffer (docs/gpu.md "Through the host
 * level"; since 0.16.0).
 *
 * topk: density (error_feedback must be 1, momentum 0); opts: scale and
 * chunk_bytes (wire_dtype default or PBOX_F32; gpudirect does not apply:
 * the entries go from pinned host memory). pbox_topk_reset zeroes the
 * residual before the key's next call. Returns 0, PBOX_EINVAL (those
 * limits, dev not device memory, a key of pbox_iallreduce_dev, and
 * pbox_allreduce_topk's), PBOX_EBUSY (a device call on the key is in
 * flight), PBOX_ENOTSUP (pbox_gpu_init's causes), PBOX_ESYS (the GPU
 * library failed, or could not tell whether dev is device memory).
 */
PBOX_API int pbox_iallreduce_topk_dev(pbox_client *c, uint32_t key, float *dev, size_t count,
				      void *stream, const pbox_topk_opts *topk,
				      const pbox_dev_opts *opts, pbox_req **req);
PBOX_API int pbox_allreduce_topk_dev(pbox_client *c, uint32_t key, float *dev, size_t count,
				     void *stream, const pbox_topk_opts *topk,
				     const pbox_dev_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
