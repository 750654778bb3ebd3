/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_ops.h - the C ABI between libpbox and its GPU library (docs/gpu.md).
 *
 * libpbox never links CUDA. When a call first meets a device buffer it
 * dlopens the GPU library (libpbox-gpu.so.1 from gpu/, built by nvcc;
 * PBOX_GPU_LIB names another file, e.g. the fake device the tests use)
 * and calls its one exported symbol:
 *
 *     const struct pbox_gpu_ops *pbox_gpu_ops_v2(void);
 *
 * Every function returns 0 or a negative errno and, on failure, leaves a
 * one-line reason for last_error(). Streams and events are opaque
 * handles (cudaStream_t / cudaEvent_t for CUDA). Stream 0 is the legacy
 * default stream. Functions may be called from any thread; one stream is
 * used by one thread at a time.
 *
 * Ordering is CUDA's: work enqueued on one stream runs in order;
 * event_record marks the point reached by the stream's enqueued work;
 * stream_wait_event makes later work on a stream wait for that point.
 * A copy's source must not change, and its destination must not be
 * read, until an event recorded after it has completed.
 */
#ifndef PBOX_GPU_OPS_H
#define PBOX_GPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#define PBOX_GPU_ABI 2
#define PBOX_GPU_SYMBOL "pbox_gpu_ops_v2"

/* Element types: the values of pbox_dtype (include/pbox.h). */
enum gpu_dtype { GPU_F32 = 0, GPU_F16 = 1, GPU_BF16 = 2 };

struct pbox_gpu_ops {
	uint32_t abi;      /* PBOX_GPU_ABI */
	const char *name;  /* "cuda", "fake" */

	/* Once per process, before anything else: finds the driver and a
	 * device. -ENODEV (no device), -ENOENT (no driver library). */
	int (*init)(void);
	/* The reason of the last failure on this thread. */
	const char *(*last_error)(void);

	/* 1 if p is device memory (or managed), 0 if host memory, < 0 on
	 * error. */
	int (*is_device)(const void *p);
	/* Device memory (tests, benchmarks) and page-locked host memory
	 * that device kernels can read and write (the staging slabs). */
	int (*dev_alloc)(void **p, size_t bytes);
	void (*dev_free)(void *p);
	int (*host_alloc)(void **p, size_t bytes);
	void (*host_free)(void *p);
	/* Synchronous copies for tests (either direction, any memory). */
	int (*memcpy_sync)(void *dst, const void *src, size_t bytes);

	int (*stream_create)(void **s);
	void (*stream_destroy)(void *s);
	int (*event_create)(void **e);
	void (*event_destroy)(void *e);
	int (*event_record)(void *e, void *stream);
	/* 0 when every piece of work before the record has completed,
	 * -EAGAIN while some is pending, another negative errno on failure. */
	int (*event_query)(void *e);
	/* Blocks until that work has completed, sleeping (the host level's
	 * thread waits with it: no spinning core). */
	int (*event_sync)(void *e);
	int (*stream_wait_event)(void *stream, void *e);

	/*
	 * Enqueued on stream: host[i] = (host_dt) dev[i] for i < count: a
	 * device-to-host copy with the cast fused in (one pass over device
	 * memory). host is host_alloc memory.
	 */
	int (*copy_d2h)(void *host, enum gpu_dtype host_dt, const void *dev,
			enum gpu_dtype dev_dt, size_t count, void *stream);
	/*
	 * Enqueued on stream: dev[i] = (dev_dt) ((float) host[i] * scale):
	 * a host-to-device copy with the scale and cast fused in; scale 1
	 * leaves values untouched (bit-exact when the types match).
	 */
	int (*copy_h2d)(void *dev, enum gpu_dtype dev_dt, const void *host,
			enum gpu_dtype host_dt, size_t count, float scale, void *stream);
	/*
	 * Enqueued on stream: error-feedback top-k on device (the rules of
	 * common/topk.h topk_select_ef, on device memory): e += g (g may be
	 * NULL), select m entries (k - k/8 <= m <= k + k/8) into host memory
	 * idx/val (host_alloc, TOPK_MAX(k) entries) and *m_out (host_alloc),
	 * and zero them in e. All fp32.
	 */
	int (*topk_ef)(float *e, const float *g, size_t n, size_t k, uint32_t *idx,
		       float *val, size_t *m_out, void *stream);

	/*
	 * GPUDirect RDMA (ABI 2): a dma-buf of device memory for a NIC driver
	 * to map (ibv_reg_dmabuf_mr), so the NIC reads it without a copy to
	 * the host. Covers [p, p + len) rounded out to whole host pages,
	 * inside p's allocation: 0 with *fd (the caller closes it once the
	 * NIC has it) and that range, [*base, *base + *size). -EOPNOTSUPP
	 * when the device or driver cannot export dma-bufs (the reason in
	 * last_error: the NVIDIA open kernel modules and CUDA >= 11.7 can),
	 * -EINVAL when [p, p + len) is not inside one device allocation.
	 */
	int (*dmabuf_export)(const void *p, size_t len, int *fd, void **base, size_t *size);
	/* Enqueued on stream: bytes of device memory at p set to 0 (ABI 2;
	 * a new top-k residual, pbox_topk_reset). */
	int (*dev_zero)(void *p, size_t bytes, void *stream);
};

typedef const struct pbox_gpu_ops *(*pbox_gpu_ops_fn)(void);

#endif
