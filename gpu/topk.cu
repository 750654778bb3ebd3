/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk.cu - the device kernels of top-k with error feedback (topk_ef.c
 * drives them as the steps of common/topk.c's search): add the gradient,
 * gather the sample, count thresholds, and the compaction that selects in
 * index order. Per element they run common/elem.h's elem_topk_keep and
 * elem_topk_class, the comparisons of the CPU kernels.
 *
 * The compaction (pass and exact take alike): the array is cut into tiles
 * of GPU_TOPK_TILE elements, one thread block each.
 *   1. tiles: per tile, how many magnitudes are >= hi ("above") and how
 *      many in [lo, hi) ("band"), with the gradient added first if asked;
 *   2. two exclusive prefix sums over the tiles (CUB DeviceScan);
 *   3. write: each tile loads its elements in blocked order (thread t
 *      holds elements 8t..8t+7), takes its band ranks by a block-wide
 *      prefix sum, keeps "above" and the band entries whose global rank
 *      (the tiles before it, plus its own rank) is below the band, and
 *      places them from a block-wide prefix sum of the kept flags after
 *      the offset of the tiles before: entries land in index order, the
 *      first cap of them stored. Tiles with nothing to place return.
 * A pass is the case lo == hi == t, band 0. tests/unit/test_topk.c runs
 * the same three steps on the CPU ("a model of the device steps").
 */
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "common/elem.h"
#include "gpu/gpu_impl.h"
extern "C" {
#include "common/topk.h"
}

#define THREADS 256
#define ITEMS   (GPU_TOPK_TILE / THREADS)

static_assert(GPU_TOPK_TILE % THREADS == 0, "a tile is whole rows of the block");
static_assert(GPU_TOPK_TILE < 65536, "a tile's counts fit 16 bits");

struct thresholds {
	float t[TOPK_MAX_THRESH];
};

__global__ void __launch_bounds__(THREADS) add_kernel(float *x, const float *g, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		x[i] = elem_topk_add(x[i], g[i]);
}

/* One block per sample block, one thread per element. */
__global__ void __launch_bounds__(TOPK_SAMPLE_BLOCK)
sample_kernel(float *smp, const float *x, const float *g, size_t stride)
{
	size_t o = (size_t)blockIdx.x * stride + threadIdx.x;

	smp[(size_t)blockIdx.x * TOPK_SAMPLE_BLOCK + threadIdx.x] =
		g ? elem_topk_add(x[o], g[o]) : x[o];
}

/* Per-thread counts (at most n / THREADS each: 32 bits), summed per warp,
 * one atomic per warp and threshold. */
__global__ void __launch_bounds__(THREADS)
count_kernel(const float *x, size_t n, struct thresholds th, unsigned nt,
	     unsigned long long *counts)
{
	unsigned c[TOPK_MAX_THRESH] = { 0 };
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v = x[i];
#pragma unroll
		for (unsigned j = 0; j < TOPK_MAX_THRESH; j++)
			if (j < nt)
				c[j] += elem_topk_keep(v, th.t[j]);
	}
#pragma unroll
	for (unsigned j = 0; j < TOPK_MAX_THRESH; j++) {
		if (j >= nt)
			break;
		unsigned w = c[j];
		for (int off = 16; off > 0; off >>= 1)
			w += __shfl_down_sync(0xffffffffu, w, off);
		if ((threadIdx.x & 31) == 0 && w)
			atomicAdd(&counts[j], (unsigned long long)w);
	}
}

/* Step 1: one block per tile; above << 16 | band summed over the block. */
__global__ void __launch_bounds__(THREADS)
tiles_kernel(float *x, const float *g, int add_g, size_t n, float lo, float hi, uint32_t *above,
	     uint32_t *inband, size_t ntiles)
{
	typedef cub::BlockReduce<unsigned, THREADS> reduce;
	__shared__ typename reduce::TempStorage tmp;
	size_t base = (size_t)blockIdx.x * GPU_TOPK_TILE;
	unsigned packed = 0;

#pragma unroll
	for (int u = 0; u < ITEMS; u++) {
		size_t i = base + (size_t)u * THREADS + threadIdx.x;
		if (i < n) {
			float v = x[i];
			if (add_g) {
				v = elem_topk_add(v, g[i]);
				x[i] = v;
			}
			int cls = elem_topk_class(v, lo, hi);
			packed += cls == 2 ? 1u << 16 : (unsigned)cls;
		}
	}
	unsigned sum = reduce(tmp).Sum(packed);
	if (threadIdx.x == 0) {
		above[blockIdx.x] = sum >> 16;
		inband[blockIdx.x] = sum & 0xffffu;
		if (blockIdx.x == 0) {
			above[ntiles] = 0;
			inband[ntiles] = 0;
		}
	}
}

/* Step 3: one block per tile, elements in blocked order. */
__global__ void __launch_bounds__(THREADS)
write_kernel(const float *x, size_t n, float lo, float hi, size_t band, size_t cap,
	     const uint32_t *above_off, const uint32_t *inband_off, uint32_t *idx, float *val)
{
	typedef cub::BlockLoad<float, THREADS, ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE> load;
	typedef cub::BlockScan<unsigned, THREADS> scan;
	__shared__ union {
		typename load::TempStorage load;
		typename scan::TempStorage scan;
	} tmp;
	size_t tile = blockIdx.x, base = tile * GPU_TOPK_TILE;
	size_t a0 = above_off[tile], a1 = above_off[tile + 1];
	size_t b0 = inband_off[tile], b1 = inband_off[tile + 1];
	size_t start = a0 + (b0 < band ? b0 : band);
	float v[ITEMS];
	int cls[ITEMS];
	unsigned rank[ITEMS], keep[ITEMS], at[ITEMS];

	/* nothing of this tile is kept, or stored (uniform in the block) */
	if (start >= cap || (a1 == a0 && (b1 == b0 || b0 >= band)))
		return;
	size_t left = n - base;
	load(tmp.load).Load(x + base, v, (int)(left < GPU_TOPK_TILE ? left : GPU_TOPK_TILE), 0.0f);
	__syncthreads();
#pragma unroll
	for (int u = 0; u < ITEMS; u++) {
		/* past the end: never kept (a NaN would be, as +inf) */
		bool in = (size_t)threadIdx.x * ITEMS + u < left;
		cls[u] = in ? elem_topk_class(v[u], lo, hi) : 0;
		rank[u] = cls[u] == 1;
	}
	scan(tmp.scan).ExclusiveSum(rank, rank);
	__syncthreads();
#pragma unroll
	for (int u = 0; u < ITEMS; u++)
		keep[u] = cls[u] == 2 || (cls[u] == 1 && b0 + rank[u] < band);
	scan(tmp.scan).ExclusiveSum(keep, at);
#pragma unroll
	for (int u = 0; u < ITEMS; u++) {
		size_t pos = start + at[u];
		if (keep[u] && pos < cap) {
			idx[pos] = (uint32_t)(base + (size_t)threadIdx.x * ITEMS + u);
			val[pos] = v[u];
		}
	}
}

__global__ void __launch_bounds__(THREADS) zero_kernel(float *x, const uint32_t *idx, size_t m)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride)
		x[idx[j]] = 0.0f;
}

/* ---- launchers ---- */

template <typename... P, typename... A>
static cudaError_t go(void (*kernel)(P...), size_t grid, unsigned threads, cudaStream_t s,
		      A... args)
{
	cudaLaunchConfig_t cfg = {};

	cfg.gridDim = dim3((unsigned)grid);
	cfg.blockDim = dim3(threads);
	cfg.stream = s;
	return cudaLaunchKernelEx(&cfg, kernel, args...);
}

/* Blocks for a grid-stride loop over n: enough to fill the device. */
static size_t fill(size_t n, int sms)
{
	size_t want = (n + THREADS - 1) / THREADS, cap = 8 * (size_t)sms;

	return want < cap ? want : cap;
}

extern "C" cudaError_t gpu_topk_add(float *x, const float *g, size_t n, int sms, cudaStream_t s)
{
	return n ? go(add_kernel, fill(n, sms), THREADS, s, x, g, n) : cudaSuccess;
}

extern "C" cudaError_t gpu_topk_sample(float *smp, const float *x, const float *g,
				       size_t stride, cudaStream_t s)
{
	return go(sample_kernel, TOPK_SAMPLE_BLOCKS, TOPK_SAMPLE_BLOCK, s, smp, x, g, stride);
}

extern "C" cudaError_t gpu_topk_count(const float *x, size_t n, const float *t, unsigned nt,
				      unsigned long long *counts, int sms, cudaStream_t s)
{
	struct thresholds th = {};

	if (nt > TOPK_MAX_THRESH)
		return cudaErrorInvalidValue;
	for (unsigned j = 0; j < nt; j++)
		th.t[j] = t[j];
	return n ? go(count_kernel, fill(n, sms), THREADS, s, x, n, th, nt, counts) : cudaSuccess;
}

extern "C" cudaError_t gpu_topk_tiles(float *x, const float *g, int add_g, size_t n, float lo,
				      float hi, uint32_t *above, uint32_t *inband, cudaStream_t s)
{
	size_t ntiles = (n + GPU_TOPK_TILE - 1) / GPU_TOPK_TILE;

	return go(tiles_kernel, ntiles, THREADS, s, x, g, add_g, n, lo, hi, above, inband, ntiles);
}

extern "C" cudaError_t gpu_topk_scan_bytes(size_t n, size_t *bytes)
{
	*bytes = 0;
	return cub::DeviceScan::ExclusiveSum(NULL, *bytes, (const uint32_t *)NULL,
					     (uint32_t *)NULL, (int)n);
}

extern "C" cudaError_t gpu_topk_scan(void *tmp, size_t bytes, const uint32_t *in, uint32_t *out,
				     size_t n, cudaStream_t s)
{
	return cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, (int)n, s);
}

extern "C" cudaError_t gpu_topk_write(const float *x, size_t n, float lo, float hi, size_t band,
				      size_t cap, const uint32_t *above_off,
				      const uint32_t *inband_off, uint32_t *idx, float *val,
				      cudaStream_t s)
{
	size_t ntiles = (n + GPU_TOPK_TILE - 1) / GPU_TOPK_TILE;

	return go(write_kernel, ntiles, THREADS, s, x, n, lo, hi, band, cap, above_off,
		  inband_off, idx, val);
}

extern "C" cudaError_t gpu_topk_zero(float *x, const uint32_t *idx, size_t m, cudaStream_t s)
{
	return m ? go(zero_kernel, (m + THREADS - 1) / THREADS, THREADS, s, x, idx, m)
		 : cudaSuccess;
}
