/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * copy.c - the fused copies of common/gpu_ops.h: copy_d2h (device ->
 * pinned host, cast fused) and copy_h2d (pinned host -> device, scale and
 * cast fused). Their CPU reference is common/cast.c (cast_copy).
 *
 * Equal types and no scale: cudaMemcpyAsync, the copy engine at full link
 * speed with no SM time. A cast or a scale: one kernel (cast.cu) that
 * reads one side and writes the other directly, the host side through the
 * device address of the mapped page-locked buffer host_alloc returns
 * (zero-copy). Chosen over "kernel into a device scratch buffer, then a
 * DMA copy" because:
 *  - it is one pass over device memory, not three (read the source, write
 *    the scratch, DMA-read the scratch), and one operation on the stream,
 *    not two;
 *  - it needs no scratch buffer, which the ABI has no place for (one per
 *    stream sized for the largest chunk, or an allocation per call);
 *  - the link carries the narrower type either way (2 bytes an element
 *    for f32 <-> f16/bf16).
 * The price: the kernel holds a few SMs for as long as the link takes (its
 * grid is at most 2 blocks per SM, so compute kernels keep the rest),
 * where DMA would hold none. Writes to host memory are posted and
 * coalesced (32-128 byte transactions), so copy_d2h runs near link speed;
 * copy_h2d's reads are round trips over the link, which each thread hides
 * with 4 loads in flight. tests/gpu/kernels.c prints both directions'
 * GB/s beside cudaMemcpyAsync on a device: the figures to hold this
 * choice against (docs/gpu.md "Kernels").
 *
 * Both run with the stream's device current (gpu_enter, lib.c): libpbox
 * calls them from its progress thread on streams of the caller's device,
 * and a kernel launches only into a stream of the current device.
 */
#include <errno.h>
#include <stdint.h>

#include "common/cast.h"
#include "gpu/gpu_impl.h"

/* The device address of host (page-locked and mapped: host_alloc), or
 * NULL with the message set. */
static void *mapped(const void *host, const char *what, int *rc)
{
	struct cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, host);

	if (e != cudaSuccess) {
		*rc = gpu_cuda(e, what);
		return NULL;
	}
	if (a.type != cudaMemoryTypeHost || !a.devicePointer) {
		*rc = gpu_fail(-EINVAL, "%s: the host buffer %p is not host_alloc memory "
			       "(page-locked and mapped)", what, host);
		return NULL;
	}
	return a.devicePointer;
}

static int check_dev(const void *dev, const char *what)
{
	struct cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, dev);

	if (e != cudaSuccess)
		return gpu_cuda(e, what);
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
		return gpu_fail(-EINVAL, "%s: %p is not device memory", what, dev);
	return 0;
}

static int check_args(enum gpu_dtype a, enum gpu_dtype b, size_t count, const char *what)
{
	if (cast_size(a) == 0 || cast_size(b) == 0)
		return gpu_fail(-EINVAL, "%s: unknown dtype %d", what,
				cast_size(a) == 0 ? (int)a : (int)b);
	if (count > SIZE_MAX / 4)
		return gpu_fail(-EINVAL, "%s: %zu elements is too many", what, count);
	return 0;
}

/* The kernel from src to dst (device addresses) on stream, of device dev. */
static int launch(void *dst, enum gpu_dtype dst_dt, const void *src, enum gpu_dtype src_dt,
		  size_t count, float scale, void *stream, int dev, const char *what)
{
	int sms = gpu_sm_count(dev);

	if (sms < 0)
		return sms;
	return gpu_cuda(gpu_cast_launch(dst, dst_dt, src, src_dt, count, scale, sms,
					(cudaStream_t)stream), what);
}

/* copy_d2h on the stream's device (gpu_enter). */
static int d2h(void *host, enum gpu_dtype host_dt, const void *dev, enum gpu_dtype dev_dt,
	       size_t count, void *stream, int device)
{
	int rc;
	void *hp;

	if (host_dt == dev_dt)
		return gpu_cuda(cudaMemcpyAsync(host, dev, count * cast_size(dev_dt),
						cudaMemcpyDeviceToHost, (cudaStream_t)stream),
				"copy_d2h: cudaMemcpyAsync");
	if ((rc = check_dev(dev, "copy_d2h: source")) < 0)
		return rc;
	if (!(hp = mapped(host, "copy_d2h: destination", &rc)))
		return rc;
	return launch(hp, host_dt, dev, dev_dt, count, 1.0f, stream, device,
		      "copy_d2h: cast kernel");
}

/* copy_h2d on the stream's device (gpu_enter). */
static int h2d(void *dev, enum gpu_dtype dev_dt, const void *host, enum gpu_dtype host_dt,
	       size_t count, float scale, void *stream, int device)
{
	int rc;
	void *hp;

	if (host_dt == dev_dt && scale == 1.0f)
		return gpu_cuda(cudaMemcpyAsync(dev, host, count * cast_size(dev_dt),
						cudaMemcpyHostToDevice, (cudaStream_t)stream),
				"copy_h2d: cudaMemcpyAsync");
	if ((rc = check_dev(dev, "copy_h2d: destination")) < 0)
		return rc;
	if (!(hp = mapped(host, "copy_h2d: source", &rc)))
		return rc;
	return launch(dev, dev_dt, hp, host_dt, count, scale, stream, device,
		      "copy_h2d: cast kernel");
}

int gpu_copy_d2h(void *host, enum gpu_dtype host_dt, const void *dev, enum gpu_dtype dev_dt,
		 size_t count, void *stream)
{
	int rc = check_args(host_dt, dev_dt, count, "copy_d2h");
	struct gpu_on on;

	if (rc < 0 || count == 0)
		return rc;
	if ((rc = gpu_enter(stream, &on, "copy_d2h")) < 0)
		return rc;
	rc = d2h(host, host_dt, dev, dev_dt, count, stream, on.dev);
	gpu_leave(&on);
	return rc;
}

int gpu_copy_h2d(void *dev, enum gpu_dtype dev_dt, const void *host, enum gpu_dtype host_dt,
		 size_t count, float scale, void *stream)
{
	int rc = check_args(dev_dt, host_dt, count, "copy_h2d");
	struct gpu_on on;

	if (rc < 0 || count == 0)
		return rc;
	if ((rc = gpu_enter(stream, &on, "copy_h2d")) < 0)
		return rc;
	rc = h2d(dev, dev_dt, host, host_dt, count, scale, stream, on.dev);
	gpu_leave(&on);
	return rc;
}
