/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cast.cu - the kernel of the fused copies (copy.c): dst[i] = (dst_dt)
 * (src[i] * scale), one element per thread step, with the per-element
 * code of common/elem.h (elem_load, elem_scale, elem_store: the functions
 * cast_copy runs on the CPU), so each element has the bits cast_copy
 * gives it. One instance per pair of types: the dtype tests fold away.
 *
 * Each thread walks the array with the grid's stride and keeps 4 loads in
 * flight before it stores (the reads of copy_h2d cross the link: latency
 * to hide); a warp's 32 neighbouring elements make coalesced accesses.
 * Built with -fmad=false and without fast math: no contraction, no
 * flush of subnormals.
 */
#include "common/elem.h"
#include "gpu/gpu_impl.h"

#define CAST_THREADS 256
#define CAST_UNROLL  4

template <int DD, int SD>
__global__ void __launch_bounds__(CAST_THREADS)
cast_kernel(void *dst, const void *src, size_t count, float scale)
{
	const enum gpu_dtype dd = (enum gpu_dtype)DD, sd = (enum gpu_dtype)SD;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	for (; i + (CAST_UNROLL - 1) * stride < count; i += CAST_UNROLL * stride) {
		float v[CAST_UNROLL];
#pragma unroll
		for (int u = 0; u < CAST_UNROLL; u++)
			v[u] = elem_load(src, sd, i + u * stride);
#pragma unroll
		for (int u = 0; u < CAST_UNROLL; u++)
			elem_store(dst, dd, i + u * stride, elem_scale(v[u], scale));
	}
	for (; i < count; i += stride)
		elem_cast(dst, dd, src, sd, i, scale);
}

template <int DD, int SD>
static cudaError_t launch(void *dst, const void *src, size_t count, float scale, int sms,
			  cudaStream_t s)
{
	cudaLaunchConfig_t cfg = {};
	size_t want = (count + CAST_THREADS * CAST_UNROLL - 1) / (CAST_THREADS * CAST_UNROLL);
	size_t cap = 2 * (size_t)sms;

	cfg.gridDim = dim3((unsigned)(want < cap ? want : cap));
	cfg.blockDim = dim3(CAST_THREADS);
	cfg.stream = s;
	return cudaLaunchKernelEx(&cfg, cast_kernel<DD, SD>, dst, src, count, scale);
}

template <int DD>
static cudaError_t launch_from(void *dst, const void *src, enum gpu_dtype src_dt, size_t count,
			       float scale, int sms, cudaStream_t s)
{
	switch (src_dt) {
	case GPU_F16:
		return launch<DD, GPU_F16>(dst, src, count, scale, sms, s);
	case GPU_BF16:
		return launch<DD, GPU_BF16>(dst, src, count, scale, sms, s);
	case GPU_F32:
		return launch<DD, GPU_F32>(dst, src, count, scale, sms, s);
	}
	return cudaErrorInvalidValue;
}

extern "C" cudaError_t gpu_cast_launch(void *dst, enum gpu_dtype dst_dt, const void *src,
				       enum gpu_dtype src_dt, size_t count, float scale,
				       int sms, cudaStream_t s)
{
	switch (dst_dt) {
	case GPU_F16:
		return launch_from<GPU_F16>(dst, src, src_dt, count, scale, sms, s);
	case GPU_BF16:
		return launch_from<GPU_BF16>(dst, src, src_dt, count, scale, sms, s);
	case GPU_F32:
		return launch_from<GPU_F32>(dst, src, src_dt, count, scale, sms, s);
	}
	return cudaErrorInvalidValue;
}

extern "C" cudaError_t gpu_kernels_runnable(void)
{
	struct cudaFuncAttributes a;

	return cudaFuncGetAttributes(&a, cast_kernel<GPU_F16, GPU_F32>);
}
