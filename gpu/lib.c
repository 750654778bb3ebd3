/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib.c - libpbox-gpu.so.1, the CUDA implementation of common/gpu_ops.h:
 * its one exported symbol pbox_gpu_ops_v2 (gpu/libpbox-gpu.map hides the
 * rest), the set-up, memory, stream and event calls over the CUDA
 * runtime, the per-thread error message, and gpu_enter/gpu_leave: every
 * call that enqueues on a stream runs with the stream's device current
 * (gpu_impl.h says why). The copies are in copy.c, top-k in topk_ef.c,
 * the dma-buf export in dmabuf.c, the kernels in cast.cu and topk.cu
 * (docs/gpu.md).
 *
 * The CUDA runtime is linked in statically (nvcc -cudart static), so the
 * only library needed at run time is the driver's libcuda.so.1, which the
 * runtime loads itself. init() says why the library cannot work:
 *   -ENOENT  no libcuda.so.1 (no NVIDIA driver installed);
 *   -ENODEV  no device (cudaGetDeviceCount), a driver older than the
 *            runtime needs, or a device this library has no code for
 *            (below sm_75: CUDA 13 dropped Volta).
 * Host memory (host_alloc) is page-locked, mapped and portable: the cast
 * kernels read and write it directly (copy.c says why).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include <cuda.h>

#include "gpu/gpu_impl.h"

/* ---- errors ---- */

static __thread char last_err[256];

int gpu_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_err, sizeof(last_err), fmt, ap);
	va_end(ap);
	return err;
}

int gpu_errno(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorInvalidValue:
	case cudaErrorInvalidDevicePointer:
	case cudaErrorInvalidResourceHandle:
		return -EINVAL;
	case cudaErrorNotReady:
		return -EAGAIN;
	case cudaErrorNoDevice:
	case cudaErrorInvalidDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorCallRequiresNewerDriver:
	case cudaErrorStubLibrary:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorNoKernelImageForDevice:
		return -ENODEV;
	default:
		return -EIO;
	}
}

int gpu_cuda(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	return gpu_fail(gpu_errno(e), "%s: %s: %s", what, cudaGetErrorName(e),
			cudaGetErrorString(e));
}

static const char *last_error(void)
{
	return last_err;
}

int gpu_sm_count(int dev)
{
	int sms;
	cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);

	if (e != cudaSuccess)
		return gpu_cuda(e, "multiprocessor count");
	return sms > 0 ? sms : 1;
}

/* ---- the stream's device ---- */

/* The driver's context calls, reached as dmabuf.c reaches its own (the
 * library links no libcuda); resolved by init(). */
static struct {
	CUresult (*get)(CUcontext *ctx);
	CUresult (*set)(CUcontext ctx);
	CUresult (*of_stream)(CUstream s, CUcontext *ctx);
	CUresult (*device)(CUdevice *dev);
} ctx_fn;

/* The driver's entry point of name as of CUDA version ver into *fn. */
static int ctx_entry(const char *name, unsigned ver, void **fn)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, ver, cudaEnableDefault, &q);

	if (e == cudaSuccess && q == cudaDriverEntryPointSuccess && *fn)
		return 0;
	return gpu_fail(-ENODEV, "init: the NVIDIA driver has no %s (%s)", name,
			e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
}

static int ctx_resolve(void)
{
	int rc = ctx_entry("cuCtxGetCurrent", 4000, (void **)&ctx_fn.get);

	if (rc == 0)
		rc = ctx_entry("cuCtxSetCurrent", 4000, (void **)&ctx_fn.set);
	if (rc == 0)
		rc = ctx_entry("cuStreamGetCtx", 9020, (void **)&ctx_fn.of_stream);
	if (rc == 0)
		rc = ctx_entry("cuCtxGetDevice", 2000, (void **)&ctx_fn.device);
	return rc;
}

static int ctx_fail(CUresult r, const char *what, const char *call)
{
	return gpu_fail(r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT ? -EINVAL
			: -EIO, "%s: %s failed (CUresult %d)", what, call, (int)r);
}

int gpu_enter(void *stream, struct gpu_on *on, const char *what)
{
	cudaStream_t s = (cudaStream_t)stream;
	CUcontext want, prev = NULL;
	CUdevice dev;
	CUresult r;

	on->prev = NULL;
	on->switched = 0;
	if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
		return gpu_cuda(cudaGetDevice(&on->dev), what);
	if ((r = ctx_fn.get(&prev)) != CUDA_SUCCESS)
		return ctx_fail(r, what, "cuCtxGetCurrent");
	if ((r = ctx_fn.of_stream((CUstream)s, &want)) != CUDA_SUCCESS)
		return ctx_fail(r, what, "cuStreamGetCtx");
	if (want != prev && (r = ctx_fn.set(want)) != CUDA_SUCCESS)
		return ctx_fail(r, what, "cuCtxSetCurrent");
	on->prev = prev;
	on->switched = want != prev;
	if ((r = ctx_fn.device(&dev)) != CUDA_SUCCESS) {
		gpu_leave(on);
		return ctx_fail(r, what, "cuCtxGetDevice");
	}
	on->dev = (int)dev;
	return 0;
}

void gpu_leave(const struct gpu_on *on)
{
	if (on->switched && on->prev)
		ctx_fn.set((CUcontext)on->prev);
}

/* ---- set-up ---- */

static int init(void)
{
	struct cudaDeviceProp p;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int n = 0, dev, rc;
	cudaError_t e;

	if (!drv)
		return gpu_fail(-ENOENT, "no NVIDIA driver: cannot load libcuda.so.1 (%s)", dlerror());
	dlclose(drv); /* the runtime holds its own reference */
	e = cudaGetDeviceCount(&n);
	if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
		return gpu_fail(-ENODEV, "no CUDA device (cudaGetDeviceCount: %s)",
				e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
	if (e == cudaErrorInsufficientDriver || e == cudaErrorCallRequiresNewerDriver)
		return gpu_fail(-ENODEV, "the NVIDIA driver is older than this CUDA %d.%d "
				"runtime needs (cudaGetDeviceCount: %s)", CUDART_VERSION / 1000,
				CUDART_VERSION % 1000 / 10, cudaGetErrorString(e));
	if (e != cudaSuccess)
		return gpu_cuda(e, "cudaGetDeviceCount");
	if ((e = cudaGetDevice(&dev)) != cudaSuccess)
		return gpu_cuda(e, "cudaGetDevice");
	if ((rc = ctx_resolve()) < 0)
		return rc;
	e = gpu_kernels_runnable();
	if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidKernelImage ||
	    e == cudaErrorUnsupportedPtxVersion) {
		if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
			p.major = p.minor = 0;
		return gpu_fail(-ENODEV, "CUDA device %d (sm_%d%d) cannot run this library's "
				"kernels (sm_75 to sm_90, PTX for compute_90): %s", dev, p.major,
				p.minor, cudaGetErrorString(e));
	}
	return gpu_cuda(e, "init: kernel image");
}

/* ---- memory ---- */

static int is_device(const void *p)
{
	struct cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, p);

	if (e != cudaSuccess)
		return gpu_cuda(e, "is_device: cudaPointerGetAttributes");
	return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int dev_alloc(void **p, size_t bytes)
{
	cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);

	if (e != cudaSuccess) {
		*p = NULL;
		return gpu_fail(gpu_errno(e), "cudaMalloc of %zu bytes: %s", bytes,
				cudaGetErrorString(e));
	}
	return 0;
}

static void dev_free(void *p)
{
	if (p)
		cudaFree(p);
}

/* Mapped: kernels reach it at the same address (UVA); portable: from
 * every device and context. */
static int host_alloc(void **p, size_t bytes)
{
	cudaError_t e = cudaHostAlloc(p, bytes ? bytes : 1,
				      cudaHostAllocMapped | cudaHostAllocPortable);

	if (e != cudaSuccess) {
		*p = NULL;
		return gpu_fail(gpu_errno(e), "cudaHostAlloc of %zu bytes: %s", bytes,
				cudaGetErrorString(e));
	}
	return 0;
}

static void host_free(void *p)
{
	if (p)
		cudaFreeHost(p);
}

static int memcpy_sync(void *dst, const void *src, size_t bytes)
{
	if (bytes == 0)
		return 0;
	return gpu_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "memcpy_sync");
}

/* ---- streams and events ---- */

/* Non-blocking: no implicit order with the legacy default stream, so a
 * staging stream never waits for the application's stream 0 work. */
static int stream_create(void **s)
{
	return gpu_cuda(cudaStreamCreateWithFlags((cudaStream_t *)s, cudaStreamNonBlocking),
			"cudaStreamCreateWithFlags");
}

static void stream_destroy(void *s)
{
	if (s)
		cudaStreamDestroy((cudaStream_t)s);
}

/* Blocking sync: event_sync sleeps until the event completes (the host
 * level's thread waits for its copy to the host that way) where the
 * default would spin a core; queries and stream waits are unchanged. */
static int event_create(void **e)
{
	return gpu_cuda(cudaEventCreateWithFlags((cudaEvent_t *)e, cudaEventDisableTiming |
						 cudaEventBlockingSync),
			"cudaEventCreateWithFlags");
}

static void event_destroy(void *e)
{
	if (e)
		cudaEventDestroy((cudaEvent_t)e);
}

/* (On the stream's device, gpu_enter: the first CUDA call of libpbox's
 * progress thread is one of these, and it must not bind device 0.) */
static int event_record(void *e, void *stream)
{
	struct gpu_on on;
	int rc = gpu_enter(stream, &on, "cudaEventRecord");

	if (rc < 0)
		return rc;
	rc = gpu_cuda(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)stream), "cudaEventRecord");
	gpu_leave(&on);
	return rc;
}

static int event_query(void *e)
{
	cudaError_t r = cudaEventQuery((cudaEvent_t)e);

	if (r == cudaErrorNotReady)
		return -EAGAIN;
	return gpu_cuda(r, "cudaEventQuery");
}

static int event_sync(void *e)
{
	return gpu_cuda(cudaEventSynchronize((cudaEvent_t)e), "cudaEventSynchronize");
}

static int stream_wait_event(void *stream, void *e)
{
	struct gpu_on on;
	int rc = gpu_enter(stream, &on, "cudaStreamWaitEvent");

	if (rc < 0)
		return rc;
	rc = gpu_cuda(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)e, 0),
		      "cudaStreamWaitEvent");
	gpu_leave(&on);
	return rc;
}

static int dev_zero(void *p, size_t bytes, void *stream)
{
	struct gpu_on on;
	int rc = gpu_enter(stream, &on, "dev_zero");

	if (rc < 0)
		return rc;
	rc = gpu_cuda(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream), "dev_zero");
	gpu_leave(&on);
	return rc;
}

/* ---- the table ---- */

static const struct pbox_gpu_ops cuda_ops = {
	.abi = PBOX_GPU_ABI,
	.name = "cuda",
	.init = init,
	.last_error = last_error,
	.is_device = is_device,
	.dev_alloc = dev_alloc,
	.dev_free = dev_free,
	.host_alloc = host_alloc,
	.host_free = host_free,
	.memcpy_sync = memcpy_sync,
	.stream_create = stream_create,
	.stream_destroy = stream_destroy,
	.event_create = event_create,
	.event_destroy = event_destroy,
	.event_record = event_record,
	.event_query = event_query,
	.event_sync = event_sync,
	.stream_wait_event = stream_wait_event,
	.copy_d2h = gpu_copy_d2h,
	.copy_h2d = gpu_copy_h2d,
	.topk_ef = gpu_topk_ef,
	.dmabuf_export = gpu_dmabuf_export,
	.dev_zero = dev_zero,
};

const struct pbox_gpu_ops *pbox_gpu_ops_v2(void);

const struct pbox_gpu_ops *pbox_gpu_ops_v2(void)
{
	return &cuda_ops;
}
