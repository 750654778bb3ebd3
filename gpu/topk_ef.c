/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_ef.c - topk_ef of common/gpu_ops.h: error-feedback top-k on device
 * memory. The decisions are common/topk.c's topk_select_steps, the same
 * C that topk_select_ef runs on the CPU; it reaches the device array
 * through the steps below, which run the kernels of topk.cu and bring
 * back only what the search decides on: the 256 KiB sample (searched on
 * the host with the CPU kernels, as topk_select_ef does), a few counts per
 * pass, and at the end the selected entries. So the device selects the
 * entries topk_select_ef selects from the same e and g: same sample, same
 * thresholds, same band, ties taken in index order.
 *
 * Everything runs on the caller's stream, after the work enqueued before
 * it, with the stream's device current (gpu_enter, lib.c: kernels launch
 * only into streams of the current device); the call returns when the
 * selection is in idx/val/m_out (the search needs each pass's counts on
 * the host, so it waits for the stream a few times: about 4 to 15 round
 * trips). Scratch memory is taken from the memory pool of the stream's
 * device (cudaMallocAsync) and given back at the end: TOPK_MAX(k)
 * entries, the sample, and 16 bytes per 2048 elements.
 *
 * The residual too has the same bits: e + g is elem_topk_add on both,
 * whose NaN is canonical (a device add's NaN is 0x7fffffff, x86's the
 * operand's).
 */
#include <errno.h>
#include <stdint.h>

#include "common/topk.h"
#include "gpu/gpu_impl.h"

#define ALIGN(x) (((x) + 255) & ~(size_t)255)

/* The array on the device and the scratch of one call. */
struct dev_array {
	float *x;
	const float *g;
	size_t n, ntiles, cap;
	cudaStream_t s;
	int sms;
	uint32_t *idx;                  /* cap entries */
	float *val;                     /* cap entries */
	unsigned long long *counts;     /* TOPK_MAX_THRESH */
	float *smp;                     /* TOPK_SAMPLE_MAX (n > TOPK_SAMPLE_MAX) */
	uint32_t *above, *inband;       /* ntiles + 1 each: per-tile counts */
	uint32_t *above_off, *inband_off; /* their exclusive prefix sums */
	void *scan;
	size_t scan_bytes;
};

/* Waits for the stream: a failure of any kernel before shows here. */
static int sync_stream(struct dev_array *d, const char *what)
{
	return gpu_cuda(cudaStreamSynchronize(d->s), what);
}

static int dev_sample(void *ctx, float *s)
{
	struct dev_array *d = ctx;
	cudaError_t e = gpu_topk_sample(d->smp, d->x, d->g, topk_sample_stride(d->n), d->s);

	if (e == cudaSuccess)
		e = cudaMemcpyAsync(s, d->smp, TOPK_SAMPLE_MAX * sizeof(float),
				    cudaMemcpyDeviceToHost, d->s);
	if (e != cudaSuccess)
		return gpu_cuda(e, "topk_ef: sample");
	return sync_stream(d, "topk_ef: sample");
}

static int dev_add(void *ctx)
{
	struct dev_array *d = ctx;

	return gpu_cuda(gpu_topk_add(d->x, d->g, d->n, d->sms, d->s), "topk_ef: add");
}

static int dev_count(void *ctx, const float *t, unsigned nt, uint64_t *counts)
{
	struct dev_array *d = ctx;
	cudaError_t e = cudaMemsetAsync(d->counts, 0, TOPK_MAX_THRESH * sizeof(*d->counts), d->s);

	if (e == cudaSuccess)
		e = gpu_topk_count(d->x, d->n, t, nt, d->counts, d->sms, d->s);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(counts, d->counts, nt * sizeof(*counts), cudaMemcpyDeviceToHost,
				    d->s);
	if (e != cudaSuccess)
		return gpu_cuda(e, "topk_ef: count");
	return sync_stream(d, "topk_ef: count");
}

/* The compaction of topk.cu: every |x| >= hi and the first band ones in
 * [lo, hi), the first cap of them into d->idx/d->val; *m = how many. */
static int dev_select(struct dev_array *d, int add_g, float lo, float hi, size_t band,
		      size_t cap, size_t *m)
{
	uint32_t tot[2];
	cudaError_t e = gpu_topk_tiles(d->x, d->g, add_g, d->n, lo, hi, d->above, d->inband, d->s);

	if (cap > d->cap)
		cap = d->cap;
	if (e == cudaSuccess)
		e = gpu_topk_scan(d->scan, d->scan_bytes, d->above, d->above_off, d->ntiles + 1, d->s);
	if (e == cudaSuccess)
		e = gpu_topk_scan(d->scan, d->scan_bytes, d->inband, d->inband_off, d->ntiles + 1,
				  d->s);
	if (e == cudaSuccess)
		e = gpu_topk_write(d->x, d->n, lo, hi, band, cap, d->above_off, d->inband_off,
				   d->idx, d->val, d->s);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(&tot[0], d->above_off + d->ntiles, sizeof(tot[0]),
				    cudaMemcpyDeviceToHost, d->s);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(&tot[1], d->inband_off + d->ntiles, sizeof(tot[1]),
				    cudaMemcpyDeviceToHost, d->s);
	if (e != cudaSuccess)
		return gpu_cuda(e, "topk_ef: selection");
	int rc = sync_stream(d, "topk_ef: selection");
	if (rc < 0)
		return rc;
	*m = (size_t)tot[0] + (tot[1] < band ? tot[1] : band);
	return 0;
}

static int dev_pass(void *ctx, int add_g, float t, size_t cap, size_t *m)
{
	return dev_select(ctx, add_g, t, t, 0, cap, m);
}

static int dev_take(void *ctx, float lo, float hi, size_t band, size_t k, size_t *m)
{
	return dev_select(ctx, 0, lo, hi, band, k, m);
}

static const struct topk_steps dev_steps = {
	.sample = dev_sample,
	.add = dev_add,
	.count = dev_count,
	.pass = dev_pass,
	.take = dev_take,
};

/* One allocation for the scratch of d (d->n, d->cap, d->ntiles set),
 * carved into its arrays; *mem to free. */
static int scratch(struct dev_array *d, void **mem)
{
	size_t tiles = ALIGN((d->ntiles + 1) * sizeof(uint32_t));
	size_t smp = d->n > TOPK_SAMPLE_MAX ? ALIGN(TOPK_SAMPLE_MAX * sizeof(float)) : 0;
	size_t bytes, off = 0;
	cudaError_t e = gpu_topk_scan_bytes(d->ntiles + 1, &d->scan_bytes);
	char *p;

	if (e != cudaSuccess)
		return gpu_cuda(e, "topk_ef: scan scratch");
	bytes = ALIGN(TOPK_MAX_THRESH * sizeof(*d->counts)) + 2 * ALIGN(d->cap * 4) + smp +
		4 * tiles + ALIGN(d->scan_bytes);
	e = cudaMallocAsync(mem, bytes, d->s);
	if (e == cudaErrorNotSupported) /* no memory pools (some vGPUs) */
		e = cudaMalloc(mem, bytes);
	if (e != cudaSuccess) {
		*mem = NULL;
		return gpu_fail(gpu_errno(e), "topk_ef: %zu bytes of device scratch: %s", bytes,
				cudaGetErrorString(e));
	}
	p = *mem;
	d->counts = (unsigned long long *)(p + off);
	off += ALIGN(TOPK_MAX_THRESH * sizeof(*d->counts));
	d->idx = (uint32_t *)(p + off);
	off += ALIGN(d->cap * 4);
	d->val = (float *)(p + off);
	off += ALIGN(d->cap * 4);
	d->smp = smp ? (float *)(p + off) : NULL;
	off += smp;
	d->above = (uint32_t *)(p + off);
	d->inband = (uint32_t *)(p + off + tiles);
	d->above_off = (uint32_t *)(p + off + 2 * tiles);
	d->inband_off = (uint32_t *)(p + off + 3 * tiles);
	off += 4 * tiles;
	d->scan = p + off;
	return 0;
}

static void scratch_free(struct dev_array *d, void *mem)
{
	if (mem && cudaFreeAsync(mem, d->s) == cudaErrorNotSupported)
		cudaFree(mem);
}

/* k == 0 or k >= n: every entry or none (topk_select_ef's first case). */
static int take_all_or_none(struct dev_array *d, size_t k, uint32_t *idx, float *val,
			    size_t *m_out)
{
	size_t m = k == 0 ? 0 : d->n;
	cudaError_t e = d->g ? gpu_topk_add(d->x, d->g, d->n, d->sms, d->s) : cudaSuccess;

	if (e == cudaSuccess && m)
		e = cudaMemcpyAsync(val, d->x, m * sizeof(float), cudaMemcpyDeviceToHost, d->s);
	if (e == cudaSuccess && m)
		e = cudaMemsetAsync(d->x, 0, m * sizeof(float), d->s);
	if (e != cudaSuccess)
		return gpu_cuda(e, "topk_ef");
	int rc = sync_stream(d, "topk_ef");
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < m; i++)
		idx[i] = (uint32_t)i;
	*m_out = m;
	return 0;
}

/* topk_ef on the stream's device, dev (gpu_enter). */
static int topk_ef_on(float *e, const float *g, size_t n, size_t k, uint32_t *idx, float *val,
		      size_t *m_out, void *stream, int dev)
{
	struct dev_array d = { .x = e, .g = g, .n = n, .s = (cudaStream_t)stream };
	void *mem = NULL;
	size_t m = 0;
	int rc;
	cudaError_t ce;

	if ((d.sms = gpu_sm_count(dev)) < 0)
		return d.sms;
	if (k == 0 || k >= n)
		return take_all_or_none(&d, k, idx, val, m_out);
	d.cap = TOPK_MAX(k);
	d.ntiles = (n + GPU_TOPK_TILE - 1) / GPU_TOPK_TILE;
	if ((rc = scratch(&d, &mem)) < 0)
		return rc;
	rc = topk_select_steps(NULL, &dev_steps, &d, n, k, g != NULL, &m);
	if (rc == 0) {
		ce = gpu_topk_zero(e, d.idx, m, d.s);
		if (ce == cudaSuccess && m)
			ce = cudaMemcpyAsync(idx, d.idx, m * sizeof(uint32_t), cudaMemcpyDeviceToHost,
					     d.s);
		if (ce == cudaSuccess && m)
			ce = cudaMemcpyAsync(val, d.val, m * sizeof(float), cudaMemcpyDeviceToHost,
					     d.s);
		rc = gpu_cuda(ce, "topk_ef: results");
	}
	scratch_free(&d, mem);
	if (rc == 0)
		rc = sync_stream(&d, "topk_ef: results");
	if (rc == 0)
		*m_out = m;
	return rc;
}

int gpu_topk_ef(float *e, const float *g, size_t n, size_t k, uint32_t *idx, float *val,
		size_t *m_out, void *stream)
{
	struct gpu_on on;
	int rc;

	if (n > UINT32_MAX)
		return gpu_fail(-EINVAL, "topk_ef: %zu entries: at most 2^32 - 1", n);
	if ((n && !e) || !idx || !val || !m_out)
		return gpu_fail(-EINVAL, "topk_ef: a NULL array");
	if ((rc = gpu_enter(stream, &on, "topk_ef")) < 0)
		return rc;
	rc = topk_ef_on(e, g, n, k, idx, val, m_out, stream, on.dev);
	gpu_leave(&on);
	return rc;
}
