/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_impl.h - private to the GPU library (gpu/): its error helpers and
 * the launchers of its kernels. Included by the C files (compiled by the
 * C compiler against the CUDA runtime's C API) and by the .cu files
 * (nvcc), which define the launchers with C linkage.
 */
#ifndef PBOX_GPU_IMPL_H
#define PBOX_GPU_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "common/gpu_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors (lib.c): one message per thread, for last_error() ---- */

/* Sets this thread's message; returns err (a negative errno). */
int gpu_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* e as a negative errno (0 for cudaSuccess): ENOMEM, EINVAL, EAGAIN
 * (not ready), ENODEV (no usable device), else EIO. */
int gpu_errno(cudaError_t e);
/* 0 for cudaSuccess; else the message "what: <CUDA's name>: <CUDA's
 * text>" and gpu_errno(e). */
int gpu_cuda(cudaError_t e, const char *what);

/* ---- the ops of copy.c, topk_ef.c and dmabuf.c (common/gpu_ops.h has the contracts) ---- */

int gpu_copy_d2h(void *host, enum gpu_dtype host_dt, const void *dev, enum gpu_dtype dev_dt,
		 size_t count, void *stream);
int gpu_copy_h2d(void *dev, enum gpu_dtype dev_dt, const void *host, enum gpu_dtype host_dt,
		 size_t count, float scale, void *stream);
int gpu_topk_ef(float *e, const float *g, size_t n, size_t k, uint32_t *idx, float *val,
		size_t *m_out, void *stream);
int gpu_dmabuf_export(const void *p, size_t len, int *fd, void **base, size_t *size);

/* ---- the stream's device (lib.c) ---- */

/*
 * A call's work on its stream runs with the stream's device current:
 * CUDA launches a kernel only into a stream of the current device (else
 * cudaErrorInvalidResourceHandle), and libpbox enqueues its copies from
 * its progress thread, which starts with no device of its own, on streams
 * made on the caller's device. gpu_enter makes the stream's context (its
 * device) current on this thread if it is not; gpu_leave gives the
 * thread its previous context back, unless it had none: such a thread's
 * next CUDA call would bind device 0's primary context (memory on a GPU
 * the process does not use), so it keeps the stream's. Stream 0 and the
 * special handles (cudaStreamLegacy, cudaStreamPerThread) are the
 * current device's: nothing changes.
 */
struct gpu_on {
	void *prev;        /* the thread's context before (CUcontext) */
	int switched;      /* gpu_enter made the stream's context current */
	int dev;           /* the stream's device */
};

/* 0, or a negative errno with the message ("what: ...") set. */
int gpu_enter(void *stream, struct gpu_on *on, const char *what);
void gpu_leave(const struct gpu_on *on);

/* Device dev's number of multiprocessors (grid sizes), or a negative
 * errno with the message set. */
int gpu_sm_count(int dev);

/* ---- the cast kernel (cast.cu) ---- */

/* Enqueues dst[i] = (dst_dt) (src[i] * scale) for i < count on s, the
 * per-element code of common/elem.h (elem_cast); both pointers must be
 * usable on the device (device memory, or the device address of mapped
 * host memory). count > 0, sms > 0. */
cudaError_t gpu_cast_launch(void *dst, enum gpu_dtype dst_dt, const void *src,
			    enum gpu_dtype src_dt, size_t count, float scale, int sms,
			    cudaStream_t s);
/* cudaSuccess if this library has code the current device can run (its
 * SASS or the PTX it JIT-compiles), else cudaErrorNoKernelImageForDevice
 * or another error. */
cudaError_t gpu_kernels_runnable(void);

/* ---- the top-k kernels (topk.cu), steps of topk_ef.c's device search ---- */

/* Elements per thread block of the compaction: the granularity of the
 * per-tile counts. */
#define GPU_TOPK_TILE 2048

/* x[i] += g[i], i < n. */
cudaError_t gpu_topk_add(float *x, const float *g, size_t n, int sms, cudaStream_t s);
/* The sample (common/topk.h): s[b * TOPK_SAMPLE_BLOCK + i] =
 * x[b * stride + i] (+ g[...] if g). */
cudaError_t gpu_topk_sample(float *smp, const float *x, const float *g, size_t stride,
			    cudaStream_t s);
/* counts[j] += #{i < n: |x[i]| >= t[j]}, j < nt <= TOPK_MAX_THRESH
 * (counts zeroed by the caller). */
cudaError_t gpu_topk_count(const float *x, size_t n, const float *t, unsigned nt,
			   unsigned long long *counts, int sms, cudaStream_t s);
/* Per tile of GPU_TOPK_TILE elements (ntiles = n / TILE rounded up), with
 * add_g first x += g (stored): above[b] = #{|x[i]| >= hi}, inband[b] =
 * #{lo <= |x[i]| < hi}; above[ntiles] = inband[ntiles] = 0. */
cudaError_t gpu_topk_tiles(float *x, const float *g, int add_g, size_t n, float lo, float hi,
			   uint32_t *above, uint32_t *inband, cudaStream_t s);
/* Bytes of scratch gpu_topk_scan needs for n entries. */
cudaError_t gpu_topk_scan_bytes(size_t n, size_t *bytes);
/* out[j] = in[0] + ... + in[j - 1], j < n (exclusive prefix sum). */
cudaError_t gpu_topk_scan(void *tmp, size_t bytes, const uint32_t *in, uint32_t *out, size_t n,
			  cudaStream_t s);
/* The compaction, from the prefix sums of the tile counts: every i with
 * |x[i]| >= hi, and those with lo <= |x[i]| < hi while fewer than band
 * came before them, in index order; idx/val of the first cap. */
cudaError_t gpu_topk_write(const float *x, size_t n, float lo, float hi, size_t band,
			   size_t cap, const uint32_t *above_off, const uint32_t *inband_off,
			   uint32_t *idx, float *val, cudaStream_t s);
/* x[idx[j]] = 0, j < m. */
cudaError_t gpu_topk_zero(float *x, const uint32_t *idx, size_t m, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
