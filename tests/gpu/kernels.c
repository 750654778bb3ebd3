/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.c - the GPU library's kernels against their CPU references, on
 * a device: copy_h2d and copy_d2h against cast_copy (common/cast.c) for
 * every pair of types, several scales and patterns that include NaNs,
 * infinities, subnormals, -0 and rounding ties, at odd offsets and
 * counts, bit for bit; topk_ef against topk_select_ef (common/topk.c) on
 * every shape of test_topk (normal, heavy-tailed, layered, tied, zeros,
 * NaNs) from 1000 to 5 M floats, with and without a gradient: the same m,
 * idx and val, and the same residual, bit for bit (e + g's NaNs are
 * canonical on both, docs/gpu.md); misuse answered with -EINVAL and a
 * message; with two devices or more, the copies, topk_ef and dev_zero on
 * a stream of device 1 from a thread on device 0 (given back after) and
 * from a thread with none (it keeps device 1), as libpbox's progress
 * thread calls them (skipped, saying so, on one device).
 * Then the figures to hold the copies' design against: GB/s of the fused
 * copies beside cudaMemcpyAsync's, and topk_ef beside the CPU.
 *
 *   build/tests/gpu/kernels [--init-only] [LIBRARY]
 *
 * LIBRARY defaults to $PBOX_GPU_LIB, else libpbox-gpu.so.1 two folders
 * above this program (build/). It is loaded with dlopen, as libpbox loads
 * it. Exit 0: passed; 1: failed; 77: skipped, no NVIDIA driver or no
 * device (init's -ENOENT or -ENODEV, its reason printed). --init-only
 * loads the library and runs init alone (make check does, through
 * tests/unit/gpu_archs.sh): exit 0 whether or not a device is there.
 */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cast.h"
#include "common/elem.h"
#include "common/gpu_ops.h"
#include "common/topk.h"

static const struct pbox_gpu_ops *ops;
static unsigned passed, failed;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		return;
	}
	failed++;
	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

/* Stops the run on a failed call of the library. */
static void must(int rc, const char *what)
{
	if (rc < 0) {
		printf("kernels: %s: %s (%s)\n", what, strerror(-rc), ops->last_error());
		exit(1);
	}
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static const char *const names[] = { "f32", "f16", "bf16" };

/* ---- copies ---- */

#define NCOPY (1u << 20)

static const uint32_t special_f32[] = {
	0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
	0x3f800000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
	0x7f800001u, 0xff802001u, 0x477fefffu, 0x477ff000u, 0x3f801000u, 0x3f803000u,
	0x387fe000u, 0x33000000u, 0x33c00000u, 0x3f808000u, 0x3f818000u, 0x7f7f8000u,
};

/* n elements of dt: every special, then (16-bit types) every pattern in
 * turn, (f32) random bits, a third of them ordinary numbers. */
static void fill(void *p, enum gpu_dtype dt, size_t n, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = i < sizeof(special_f32) / sizeof(special_f32[0])
			     ? special_f32[i] : (uint32_t)(rng_next(rng) >> 32);
		if (dt == GPU_F32) {
			if (i % 3 == 0)
				u = (u & 0x807fffffu) | (uint32_t)(100 + i % 50) << 23;
			((uint32_t *)p)[i] = u;
		} else {
			((uint16_t *)p)[i] = i < 24 ? (uint16_t)(u >> 16) : (uint16_t)i;
		}
	}
}

static void copies__match_cast_copy(void)
{
	static const float scales[] = { 1.0f, 0.25f, 1.0f / 3.0f, -2.0f, 1e-30f, 1e30f, 0.0f, NAN };
	static const size_t offs[] = { 0, 1, 3 };
	static const size_t counts[] = { NCOPY, NCOPY - 5, 1, 0, 777 };
	size_t bytes = NCOPY * 4 + 64;
	void *hsrc, *hdst, *ref = malloc(bytes), *dev, *s;
	uint64_t rng = 42;
	unsigned cases = 0;

	must(ops->host_alloc(&hsrc, bytes), "host_alloc");
	must(ops->host_alloc(&hdst, bytes), "host_alloc");
	must(ops->dev_alloc(&dev, bytes), "dev_alloc");
	must(ops->stream_create(&s), "stream_create");
	if (!ref)
		exit(1);
	for (int sd = GPU_F32; sd <= GPU_BF16; sd++)
		for (int dd = GPU_F32; dd <= GPU_BF16; dd++)
			for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++)
				for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			size_t n = counts[c], off = offs[(si + c) % 3];
			float sc = scales[si];
			size_t ss = cast_size((enum gpu_dtype)sd), ds = cast_size((enum gpu_dtype)dd);
			void *e;

			/* h2d: host sd -> device dd, scaled */
			fill((char *)hsrc + off * ss, (enum gpu_dtype)sd, n, &rng);
			memset(ref, 0x5a, bytes);
			must(ops->memcpy_sync(dev, ref, bytes), "memcpy_sync");
			cast_copy((char *)ref + off * ds, (enum gpu_dtype)dd, (char *)hsrc + off * ss,
				  (enum gpu_dtype)sd, n, sc);
			must(ops->copy_h2d((char *)dev + off * ds, (enum gpu_dtype)dd,
					   (char *)hsrc + off * ss, (enum gpu_dtype)sd, n, sc, s),
			     "copy_h2d");
			must(ops->event_create(&e), "event_create");
			must(ops->event_record(e, s), "event_record");
			must(ops->event_sync(e), "event_sync");
			must(ops->memcpy_sync(hdst, dev, bytes), "memcpy_sync");
			check(memcmp(hdst, ref, bytes) == 0, "copy_h2d %s -> %s, scale %a, %zu at +%zu: "
			      "not cast_copy's bytes", names[sd], names[dd], (double)sc, n, off);
			/* d2h: device sd -> host dd (no scale in the ABI) */
			if (sc == 1.0f) {
				must(ops->memcpy_sync((char *)dev + off * ss, (char *)hsrc + off * ss,
						      n * ss), "memcpy_sync");
				memset(hdst, 0x5a, bytes);
				memset(ref, 0x5a, bytes);
				cast_copy((char *)ref + off * ds, (enum gpu_dtype)dd,
					  (char *)hsrc + off * ss, (enum gpu_dtype)sd, n, 1.0f);
				must(ops->copy_d2h((char *)hdst + off * ds, (enum gpu_dtype)dd,
						   (char *)dev + off * ss, (enum gpu_dtype)sd, n, s),
				     "copy_d2h");
				must(ops->event_record(e, s), "event_record");
				must(ops->event_sync(e), "event_sync");
				check(memcmp(hdst, ref, bytes) == 0, "copy_d2h %s -> %s, %zu at +%zu: "
				      "not cast_copy's bytes", names[sd], names[dd], n, off);
			}
			ops->event_destroy(e);
			cases++;
		}
	printf("copies: %u cases of type pair, scale, count and offset\n", cases);

	/* misuse: pageable host memory with a cast, an unknown dtype */
	int rc = ops->copy_d2h(ref, GPU_F16, dev, GPU_F32, 16, s);
	check(rc == -EINVAL && strstr(ops->last_error(), "host_alloc"),
	      "copy_d2h into malloc memory: %d (%s), want -EINVAL naming host_alloc", rc,
	      ops->last_error());
	rc = ops->copy_h2d(dev, (enum gpu_dtype)9, hsrc, GPU_F32, 16, 1.0f, s);
	check(rc == -EINVAL && *ops->last_error(), "copy_h2d of dtype 9: %d (%s)", rc,
	      ops->last_error());
	ops->stream_destroy(s);
	ops->dev_free(dev);
	ops->host_free(hsrc);
	ops->host_free(hdst);
	free(ref);
}

/* ---- top-k ---- */

enum shape { NORMAL, HEAVY, LAYERED, TIED, ZEROS, NANS, NSHAPES };

static unsigned seed = 1;

static float uni(void)
{
	seed = seed * 1103515245u + 12345u;
	return (float)(seed >> 8) / 16777216.0f - 0.5f;
}

static void make(float *x, size_t n, enum shape s)
{
	for (size_t i = 0; i < n; i++) {
		float v = uni() + uni() + uni() + uni();
		switch (s) {
		case HEAVY: v = v * v * v * v * v; break;
		case LAYERED: v *= powf(1000.0f, (float)(i * 5 / n)); break;
		case TIED: v = (float)((int)(i % 7) - 3); break;
		case ZEROS: v = i % 10 ? 0.0f : v; break;
		case NANS: /* both signs, many payloads: a device add's NaN differs */
			if (i % 3 == 0)
				v = elem_bits_f32((uint32_t)(i & 1) << 31 | 0x7fc00000u |
						  (uint32_t)(i * 2654435761u >> 10));
			break;
		default: break;
		}
		x[i] = v;
	}
}

/* Equal bits, NaN payloads included. */
static int same(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

static void topk__matches_select_ef(void)
{
	static const size_t ns[] = { 1000, 70000, 300000, 5000000 };
	static const double ds[] = { 0, 0.001, 0.01, 0.1, 0.9, 1 };
	size_t maxn = 5000000, cap = TOPK_MAX(maxn);
	float *x = malloc(maxn * 4), *g = malloc(maxn * 4), *e0 = malloc(maxn * 4);
	float *e1 = malloc(maxn * 4), *v0 = malloc(cap * 4), *v1;
	uint32_t *i0 = malloc(cap * 4), *i1;
	size_t *m1;
	void *de, *dg;
	unsigned cases = 0;

	if (!x || !g || !e0 || !e1 || !v0 || !i0)
		exit(1);
	must(ops->host_alloc((void **)&v1, cap * 4), "host_alloc");
	must(ops->host_alloc((void **)&i1, cap * 4), "host_alloc");
	must(ops->host_alloc((void **)&m1, sizeof(*m1)), "host_alloc");
	must(ops->dev_alloc(&de, maxn * 4), "dev_alloc");
	must(ops->dev_alloc(&dg, maxn * 4), "dev_alloc");
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (int sh = 0; sh < NSHAPES; sh++) {
			size_t n = ns[a];
			make(x, n, (enum shape)sh);
			make(g, n, (enum shape)((sh + 1) % NSHAPES));
			must(ops->memcpy_sync(dg, g, n * 4), "memcpy_sync");
			for (size_t d = 0; d < sizeof(ds) / sizeof(ds[0]); d++)
				for (int with_g = 0; with_g < 2; with_g++) {
				size_t k = (size_t)(ds[d] * (double)n) + (ds[d] > 0 && ds[d] < 1);
				memcpy(e0, x, n * 4);
				size_t m0 = topk_select_ef(NULL, e0, with_g ? g : NULL, n, k, i0, v0);
				must(ops->memcpy_sync(de, x, n * 4), "memcpy_sync");
				*m1 = (size_t)-1;
				must(ops->topk_ef(de, with_g ? dg : NULL, n, k, i1, v1, m1, NULL),
				     "topk_ef");
				must(ops->memcpy_sync(e1, de, n * 4), "memcpy_sync");
				int ok = *m1 == m0;
				for (size_t j = 0; ok && j < m0; j++)
					ok = i1[j] == i0[j] && same(v1[j], v0[j]);
				for (size_t i = 0; ok && i < n; i++)
					ok = same(e1[i], e0[i]);
				check(ok, "topk_ef: n %zu shape %d k %zu g %d: m %zu, select_ef %zu, "
				      "or another entry or residual", n, sh, k, with_g, *m1, m0);
				cases++;
			}
		}
	printf("topk_ef: %u cases of size, shape, k and gradient\n", cases);

	check(ops->topk_ef(de, NULL, (size_t)UINT32_MAX + 1, 10, i1, v1, m1, NULL) == -EINVAL,
	      "topk_ef of 2^32 entries: not -EINVAL");
	ops->dev_free(de);
	ops->dev_free(dg);
	ops->host_free(v1);
	ops->host_free(i1);
	ops->host_free(m1);
	free(x);
	free(g);
	free(e0);
	free(e1);
	free(v0);
	free(i0);
}

/* ---- streams of another device ---- */

/* The driver's calls that pick a thread's device (the ABI has none:
 * libpbox never picks one, the caller's current device is the one),
 * through libcuda.so.1 as the runtime reaches it: a runtime call uses
 * the context the driver has current (cudaSetDevice(d) makes device d's
 * primary context current). */
typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_count_fn)(int *n);
typedef int (*cu_ctx_retain_fn)(void **ctx, int dev);
typedef int (*cu_ctx_release_fn)(int dev);
typedef int (*cu_ctx_set_fn)(void *ctx);
typedef int (*cu_ctx_get_fn)(void **ctx);

static struct {
	cu_ctx_set_fn set;
	cu_ctx_get_fn get;
} cu;

/* What a thread of libpbox does: enqueue a scaled copy (a kernel) on a
 * stream of another device, with no device of its own. */
struct other_thread {
	void *dev, *host, *stream, *ev, *ctx_after;
	size_t n;
	int rc;
};

static void *other_thread_main(void *arg)
{
	struct other_thread *t = arg;

	t->rc = ops->copy_h2d(t->dev, GPU_F32, t->host, GPU_F16, t->n, 0.25f, t->stream);
	if (t->rc == 0)
		t->rc = ops->event_record(t->ev, t->stream);
	if (t->rc == 0)
		t->rc = ops->event_sync(t->ev);
	cu.get(&t->ctx_after);
	return NULL;
}

/*
 * The kernels of a call whose stream is on device 1 run on device 1, from
 * a thread whose current device is 0 (the caller's thread: its device is
 * given back after each call) and from a thread with no device (libpbox's
 * progress thread: it keeps the stream's). CUDA launches a kernel only
 * into a stream of the current device: without the library's switch
 * (gpu_enter) every cast or scaled copy of a rank not on device 0
 * failed. Skipped, saying so, with fewer than two devices.
 */
static void devices__stream_of_another_device(void)
{
	enum { N = 100003 };
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cu_init_fn cu_init = drv ? (cu_init_fn)dlsym(drv, "cuInit") : NULL;
	cu_count_fn cu_count = drv ? (cu_count_fn)dlsym(drv, "cuDeviceGetCount") : NULL;
	cu_ctx_retain_fn retain = drv ? (cu_ctx_retain_fn)dlsym(drv, "cuDevicePrimaryCtxRetain")
				      : NULL;
	cu_ctx_release_fn release = drv ? (cu_ctx_release_fn)dlsym(drv,
						"cuDevicePrimaryCtxRelease_v2") : NULL;
	void *ctx0, *ctx1, *now, *s1, *ev1, *d1, *h, *h2;
	uint16_t *src;
	float *want, *got, *val, *e0;
	uint32_t *idx, *i0;
	size_t *m, k = N / 100, m0;
	uint64_t rng = 7;
	int n = 0;

	cu.set = drv ? (cu_ctx_set_fn)dlsym(drv, "cuCtxSetCurrent") : NULL;
	cu.get = drv ? (cu_ctx_get_fn)dlsym(drv, "cuCtxGetCurrent") : NULL;
	if (!cu_init || !cu_count || !retain || !release || !cu.set || !cu.get ||
	    cu_init(0) != 0 || cu_count(&n) != 0) {
		printf("kernels: devices: cannot reach the driver's context calls\n");
		exit(1);
	}
	if (n < 2) {
		printf("devices: SKIP: %d CUDA device (a stream of another device needs 2)\n", n);
		return;
	}
	src = malloc(N * 2);
	want = malloc(N * 4);
	got = malloc(N * 4);
	e0 = malloc(N * 4);
	i0 = malloc(TOPK_MAX(k) * 4);
	if (!src || !want || !got || !e0 || !i0)
		exit(1);
	if (retain(&ctx0, 0) != 0 || retain(&ctx1, 1) != 0 || cu.set(ctx1) != 0) {
		printf("kernels: devices: cannot make device 1 current\n");
		exit(1);
	}
	/* made on device 1, as libpbox makes its streams on the caller's */
	must(ops->stream_create(&s1), "stream_create");
	must(ops->event_create(&ev1), "event_create");
	must(ops->dev_alloc(&d1, N * 4), "dev_alloc");
	must(ops->host_alloc(&h, N * 4), "host_alloc");
	must(ops->host_alloc(&h2, N * 4), "host_alloc");
	must(ops->host_alloc((void **)&val, TOPK_MAX(k) * 4), "host_alloc");
	must(ops->host_alloc((void **)&idx, TOPK_MAX(k) * 4), "host_alloc");
	must(ops->host_alloc((void **)&m, sizeof(*m)), "host_alloc");
	cu.set(ctx0);

	/* from device 0: h2d f16 -> f32 x 0.5, then d2h f32 -> bf16 */
	fill(src, GPU_F16, N, &rng);
	memcpy(h, src, N * 2);
	cast_copy(want, GPU_F32, src, GPU_F16, N, 0.5f);
	int rc = ops->copy_h2d(d1, GPU_F32, h, GPU_F16, N, 0.5f, s1);
	if (rc == 0)
		rc = ops->event_record(ev1, s1);
	if (rc == 0)
		rc = ops->event_sync(ev1);
	check(rc == 0, "copy_h2d on device 1's stream from device 0: %d (%s)", rc,
	      ops->last_error());
	must(ops->memcpy_sync(got, d1, N * 4), "memcpy_sync");
	check(memcmp(got, want, N * 4) == 0, "copy_h2d on device 1's stream: not cast_copy's");
	cast_copy(want, GPU_BF16, got, GPU_F32, N, 1.0f);
	rc = ops->copy_d2h(h2, GPU_BF16, d1, GPU_F32, N, s1);
	if (rc == 0)
		rc = ops->event_record(ev1, s1);
	if (rc == 0)
		rc = ops->event_sync(ev1);
	check(rc == 0 && memcmp(h2, want, N * 2) == 0, "copy_d2h on device 1's stream from "
	      "device 0: %d (%s), or not cast_copy's", rc, ops->last_error());
	cu.get(&now);
	check(now == ctx0, "the copies left device 0's thread on another device");

	/* top-k and dev_zero from device 0 */
	memcpy(e0, got, N * 4);
	m0 = topk_select_ef(NULL, e0, NULL, N, k, i0, val);
	memcpy(want, val, m0 * 4);
	rc = ops->topk_ef(d1, NULL, N, k, idx, val, m, s1);
	check(rc == 0 && *m == m0 && memcmp(idx, i0, m0 * 4) == 0 &&
	      memcmp(val, want, m0 * 4) == 0, "topk_ef on device 1's stream from device 0: "
	      "%d (%s), or not topk_select_ef's selection", rc, ops->last_error());
	rc = ops->dev_zero(d1, N * 4, s1);
	if (rc == 0)
		rc = ops->event_record(ev1, s1);
	if (rc == 0)
		rc = ops->event_sync(ev1);
	must(ops->memcpy_sync(got, d1, N * 4), "memcpy_sync");
	memset(want, 0, N * 4);
	check(rc == 0 && memcmp(got, want, N * 4) == 0, "dev_zero on device 1's stream from "
	      "device 0: %d (%s)", rc, ops->last_error());
	cu.get(&now);
	check(now == ctx0, "top-k or dev_zero left device 0's thread on another device");

	/* from a thread with no device: it keeps device 1's */
	struct other_thread t = { .dev = d1, .host = h, .stream = s1, .ev = ev1, .n = N };
	pthread_t th;
	if (pthread_create(&th, NULL, other_thread_main, &t) != 0)
		exit(1);
	pthread_join(th, NULL);
	cast_copy(want, GPU_F32, src, GPU_F16, N, 0.25f);
	must(ops->memcpy_sync(got, d1, N * 4), "memcpy_sync");
	check(t.rc == 0 && memcmp(got, want, N * 4) == 0, "copy_h2d on device 1's stream from "
	      "a thread with no device: %d, or not cast_copy's", t.rc);
	check(t.ctx_after == ctx1, "a thread with no device does not keep the stream's");
	printf("devices: kernels on device 1's stream from device 0 and from a new thread\n");

	cu.set(ctx1);
	ops->host_free(val);
	ops->host_free(idx);
	ops->host_free(m);
	ops->host_free(h);
	ops->host_free(h2);
	ops->dev_free(d1);
	ops->event_destroy(ev1);
	ops->stream_destroy(s1);
	cu.set(ctx0);
	release(1);
	release(0);
	free(src);
	free(want);
	free(got);
	free(e0);
	free(i0);
}

/* ---- figures ---- */

static void figures(void)
{
	size_t n = (size_t)64 << 20 >> 2; /* 64 MiB of f32 */
	void *h, *d, *s, *e;
	float *x = malloc(n * 4), *val;
	uint32_t *idx;
	size_t *m;

	if (!x)
		exit(1);
	must(ops->host_alloc(&h, n * 4), "host_alloc");
	must(ops->dev_alloc(&d, n * 4), "dev_alloc");
	must(ops->stream_create(&s), "stream_create");
	must(ops->event_create(&e), "event_create");
	memset(h, 0, n * 4);
	struct {
		const char *what;
		int d2h;
		enum gpu_dtype hd, dd;
		float sc;
	} rows[] = {
		{ "d2h f32 -> f32 (cudaMemcpyAsync)", 1, GPU_F32, GPU_F32, 1 },
		{ "d2h f32 -> f16 (kernel, zero-copy)", 1, GPU_F16, GPU_F32, 1 },
		{ "d2h f32 -> bf16 (kernel, zero-copy)", 1, GPU_BF16, GPU_F32, 1 },
		{ "h2d f32 -> f32 (cudaMemcpyAsync)", 0, GPU_F32, GPU_F32, 1 },
		{ "h2d f16 -> f32 x 0.25 (kernel, zero-copy)", 0, GPU_F16, GPU_F32, 0.25f },
		{ "h2d f32 -> f32 x 0.25 (kernel, zero-copy)", 0, GPU_F32, GPU_F32, 0.25f },
	};
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		double best = 1e9;
		for (int rep = 0; rep < 5; rep++) {
			double t0 = now_s();
			if (rows[r].d2h)
				must(ops->copy_d2h(h, rows[r].hd, d, rows[r].dd, n, s), "copy_d2h");
			else
				must(ops->copy_h2d(d, rows[r].dd, h, rows[r].hd, n, rows[r].sc, s),
				     "copy_h2d");
			must(ops->event_record(e, s), "event_record");
			must(ops->event_sync(e), "event_sync");
			double t = now_s() - t0;
			best = t < best ? t : best;
		}
		printf("copy %-44s %zu elements: %6.2f ms, %6.1f GB/s over the link\n",
		       rows[r].what, n, best * 1e3,
		       (double)(n * cast_size(rows[r].hd)) / best / 1e9);
	}
	make(x, n, LAYERED);
	must(ops->memcpy_sync(d, x, n * 4), "memcpy_sync");
	must(ops->host_alloc((void **)&val, TOPK_MAX(n / 100) * 4), "host_alloc");
	must(ops->host_alloc((void **)&idx, TOPK_MAX(n / 100) * 4), "host_alloc");
	must(ops->host_alloc((void **)&m, sizeof(*m)), "host_alloc");
	double t0 = now_s();
	must(ops->topk_ef(d, NULL, n, n / 100, idx, val, m, s), "topk_ef");
	double tg = now_s() - t0;
	t0 = now_s();
	topk_select_ef(NULL, x, NULL, n, n / 100, idx, val);
	double tc = now_s() - t0;
	printf("topk_ef %zu floats at 1%%: device %.2f ms, CPU (%s) %.2f ms\n", n, tg * 1e3,
	       topk_best()->name, tc * 1e3);
	ops->host_free(val);
	ops->host_free(idx);
	ops->host_free(m);
	ops->event_destroy(e);
	ops->stream_destroy(s);
	ops->dev_free(d);
	ops->host_free(h);
	free(x);
}

int main(int argc, char **argv)
{
	int init_only = argc > 1 && strcmp(argv[1], "--init-only") == 0;
	const char *lib = argc > 1 + init_only ? argv[1 + init_only] : getenv("PBOX_GPU_LIB");
	char path[PATH_MAX], exe[PATH_MAX];
	ssize_t len;

	if (!lib) { /* build/tests/gpu/kernels -> build/libpbox-gpu.so.1 */
		if ((len = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
			return 1;
		exe[len] = '\0';
		snprintf(path, sizeof(path), "%s/../../libpbox-gpu.so.1", dirname(exe));
		lib = path;
	}
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("kernels: cannot load %s: %s\n", lib, dlerror());
		return 1;
	}
	pbox_gpu_ops_fn fn = (pbox_gpu_ops_fn)dlsym(h, PBOX_GPU_SYMBOL);
	if (!fn || !(ops = fn()) || ops->abi != PBOX_GPU_ABI) {
		printf("kernels: %s: no %s of ABI %d\n", lib, PBOX_GPU_SYMBOL, PBOX_GPU_ABI);
		return 1;
	}
	int rc = ops->init();
	if (rc == -ENODEV || rc == -ENOENT) {
		printf("kernels: %s: %s: %s\n", init_only ? "init" : "SKIP (needs an NVIDIA GPU "
		       "and driver)", rc == -ENODEV ? "-ENODEV" : "-ENOENT", ops->last_error());
		return init_only ? (*ops->last_error() ? 0 : 1) : 77;
	}
	if (rc < 0) {
		printf("kernels: init: %s (%s)\n", strerror(-rc), ops->last_error());
		return 1;
	}
	if (init_only) {
		printf("kernels: init: a device is there (library \"%s\")\n", ops->name);
		return 0;
	}
	copies__match_cast_copy();
	topk__matches_select_ef();
	devices__stream_of_another_device();
	if (failed == 0)
		figures();
	printf("kernels: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
