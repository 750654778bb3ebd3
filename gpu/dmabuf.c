/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dmabuf.c - dmabuf_export of common/gpu_ops.h: a dma-buf file descriptor
 * for a range of device memory, which the verbs transport hands to
 * ibv_reg_dmabuf_mr so the NIC reads gradients straight from the GPU
 * (GPUDirect RDMA, docs/gpu.md).
 *
 * The runtime has no call for it; the driver's are reached through
 * cudaGetDriverEntryPointByVersion, so the library still links no
 * libcuda. The rules:
 *   - the device must say CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (the
 *     NVIDIA open kernel modules, R515 and later, do; the proprietary
 *     ones do not: then nvidia-peermem is the other way);
 *   - the range must be whole host pages inside one allocation
 *     (cuMemGetAddressRange): [p, p + len) is rounded out to pages and
 *     refused if that leaves the allocation (cudaMalloc's allocations
 *     start page aligned; a caching allocator's blocks lie inside them).
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include <cuda.h>

#include "gpu/gpu_impl.h"

typedef CUresult (*get_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr p);
typedef CUresult (*get_attr_fn)(int *v, CUdevice_attribute a, CUdevice d);
typedef CUresult (*get_dev_fn)(CUdevice *d, int ordinal);
typedef CUresult (*get_handle_fn)(void *handle, CUdeviceptr p, size_t size,
				  CUmemRangeHandleType type, unsigned long long flags);

/* The driver's entry point of name, as of CUDA version ver; NULL with the
 * message set if this driver lacks it. */
static void *driver_fn(const char *name, unsigned ver)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	void *fn = NULL;
	cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, ver, cudaEnableDefault, &q);

	if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
		gpu_fail(-EOPNOTSUPP, "dma-buf: the NVIDIA driver has no %s (%s)", name,
			 e != cudaSuccess ? cudaGetErrorString(e)
			 : q == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
									 : "symbol not found");
		return NULL;
	}
	return fn;
}

/* Whether the device holding p exports dma-bufs: 1, 0 (message set), or
 * a negative errno. */
static int dmabuf_supported(const void *p)
{
	struct cudaPointerAttributes a;
	get_dev_fn get_dev = driver_fn("cuDeviceGet", 2000);
	get_attr_fn get_attr = driver_fn("cuDeviceGetAttribute", 2000);
	CUdevice d;
	int v = 0;
	cudaError_t e = cudaPointerGetAttributes(&a, p);

	if (e != cudaSuccess)
		return gpu_cuda(e, "dma-buf: cudaPointerGetAttributes");
	if (a.type != cudaMemoryTypeDevice)
		return gpu_fail(-EINVAL, "dma-buf: %p is not device memory", p);
	if (!get_dev || !get_attr)
		return -EOPNOTSUPP;
	if (get_dev(&d, a.device) != CUDA_SUCCESS ||
	    get_attr(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS)
		return gpu_fail(-EIO, "dma-buf: cannot query CUDA device %d", a.device);
	if (!v)
		return gpu_fail(-EOPNOTSUPP, "dma-buf: CUDA device %d cannot export dma-bufs "
				"(it needs the NVIDIA open kernel modules, R515 or later)", a.device);
	return 1;
}

int gpu_dmabuf_export(const void *p, size_t len, int *fd, void **base, size_t *size)
{
	get_range_fn get_range = driver_fn("cuMemGetAddressRange", 3020);
	get_handle_fn get_handle = driver_fn("cuMemGetHandleForAddressRange", 11070);
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p;
	CUdeviceptr abase = 0;
	size_t asize = 0;
	int rc = dmabuf_supported(p), h = -1;

	if (rc <= 0)
		return rc < 0 ? rc : -EOPNOTSUPP;
	if (!get_range || !get_handle)
		return -EOPNOTSUPP;
	if (len == 0 || get_range(&abase, &asize, (CUdeviceptr)a) != CUDA_SUCCESS)
		return gpu_fail(-EINVAL, "dma-buf: %p is not in a device allocation", p);
	uintptr_t lo = a & ~(pg - 1), hi = (a + len + pg - 1) & ~(pg - 1);
	if (lo < abase || hi > abase + ((asize + pg - 1) & ~(pg - 1)) || a + len > abase + asize)
		return gpu_fail(-EINVAL, "dma-buf: [%p, +%zu) rounded to pages leaves its "
				"allocation [0x%llx, +%zu)", p, len, (unsigned long long)abase,
				asize);
	CUresult r = get_handle(&h, (CUdeviceptr)lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
				0);
	if (r != CUDA_SUCCESS || h < 0)
		return gpu_fail(r == CUDA_ERROR_NOT_SUPPORTED ? -EOPNOTSUPP : -EIO,
				"dma-buf: cuMemGetHandleForAddressRange of %zu bytes failed "
				"(CUresult %d)", (size_t)(hi - lo), (int)r);
	*fd = h;
	*base = (void *)lo;
	*size = hi - lo;
	return 0;
}
