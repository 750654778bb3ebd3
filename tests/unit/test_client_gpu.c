/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_gpu.c - device calls (include/pbox_cuda.h) end to end on the
 * fake GPU library (tests/unit/fake_gpu.h: streams are threads with random
 * delays, device memory is tracked host memory) against the in-process box
 * (box_inproc.h), several ranks:
 *   - the sum is exact for f32, f16 and bf16 device buffers, with and
 *     without a cast on the wire and the mean's scale, every rank the same
 *     bits, over several calls on a key;
 *   - the same over a fleet of two in-process boxes (f32 with the mean,
 *     bf16): each 512 KiB partition a device call on its box, both boxes
 *     summing, every partition's slab freed;
 *   - it is ordered after the caller's stream (a slow "kernel" writing
 *     the gradient is enqueued before the call: the sum includes it) and
 *     work enqueued on the stream after pbox_wait (or pbox_test) sees it;
 *   - the pinned slab of a key is allocated once (the fake counts
 *     host_alloc) and freed at pbox_close;
 *   - the chunks overlap: chunk i+1 goes to the host before chunk i has
 *     come back (the fake's trace of its copies);
 *   - failures are named: no library, not a GPU library, another ABI,
 *     init finding no device, a host pointer, misuse, a copy back to the
 *     device that fails in the middle of a call's results;
 *   - top-k on the device (pbox_iallreduce_topk_dev): every rank gets
 *     the rank-ordered sum of what a CPU model of each rank's selection
 *     with error feedback (topk_select_ef) sends, scaled, over several
 *     calls and across a pbox_topk_reset; its limits are named.
 * The error test runs first: a library that loaded is kept for the
 * process, so the fake's failure knobs act only before that.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/gpu_ops.h"
#include "common/topk.h"
#include "include/pbox.h"
#include "include/pbox_cuda.h"
#include "tests/unit/box_inproc.h"
#include "tests/unit/dtype_io.h"
#include "tests/unit/fake_gpu.h"

#define MAXW   4
#define STEPS  3
#define CHUNK  8192      /* staging chunk: 5 segments of 1408 bytes at MTU 1500 */

static char fake_path[PATH_MAX];
static const struct pbox_gpu_ops *ops;
static fake_gpu_host_allocs_fn host_allocs;
static fake_gpu_host_live_fn host_live;
static fake_gpu_launch_fn launch;
static fake_gpu_trace_fn trace_get;
static fake_gpu_trace_reset_fn trace_reset;
static fake_gpu_set_delay_fn set_delay;
static fake_gpu_fail_h2d_fn fail_h2d;
static fake_gpu_fail_d2h_fn fail_d2h;
static fake_gpu_fail_is_device_fn fail_is_device;
static fake_gpu_set_device_fn set_device;
static fake_gpu_device_fn get_device;
static fake_gpu_set_switch_fn set_switch;

/* The fake beside this program (build/tests/ or build-san/tests/). */
static void find_fake(void)
{
	assert_true(fake_gpu_path(fake_path, sizeof(fake_path)));
}

/* The fake as libpbox sees it: the same file, so one device. */
static void open_fake(void)
{
	void *h = fake_gpu_dlopen(fake_path);
	assert_non_null(h);
	pbox_gpu_ops_fn get = (pbox_gpu_ops_fn)dlsym(h, PBOX_GPU_SYMBOL);
	host_allocs = (fake_gpu_host_allocs_fn)dlsym(h, "fake_gpu_host_allocs");
	host_live = (fake_gpu_host_live_fn)dlsym(h, "fake_gpu_host_live");
	launch = (fake_gpu_launch_fn)dlsym(h, "fake_gpu_launch");
	trace_get = (fake_gpu_trace_fn)dlsym(h, "fake_gpu_trace");
	trace_reset = (fake_gpu_trace_reset_fn)dlsym(h, "fake_gpu_trace_reset");
	set_delay = (fake_gpu_set_delay_fn)dlsym(h, "fake_gpu_set_delay");
	fail_h2d = (fake_gpu_fail_h2d_fn)dlsym(h, "fake_gpu_fail_h2d");
	fail_d2h = (fake_gpu_fail_d2h_fn)dlsym(h, "fake_gpu_fail_d2h");
	fail_is_device = (fake_gpu_fail_is_device_fn)dlsym(h, "fake_gpu_fail_is_device");
	set_device = (fake_gpu_set_device_fn)dlsym(h, "fake_gpu_set_device");
	get_device = (fake_gpu_device_fn)dlsym(h, "fake_gpu_device");
	set_switch = (fake_gpu_set_switch_fn)dlsym(h, "fake_gpu_set_switch");
	assert_true(get && host_allocs && host_live && launch && trace_get && trace_reset &&
		    set_delay && fail_h2d && fail_d2h && fail_is_device && set_device &&
		    get_device && set_switch);
	ops = get();
	assert_int_equal(ops->init(), 0);
}

static size_t esize(pbox_dtype t)
{
	return t == PBOX_F32 ? 4 : 2;
}

/* Element i of rank r's gradient at a step: a mix of small and large
 * magnitudes, so that f16/bf16 sums round. */
static float grad(int rank, int step, size_t i)
{
	float v = (float)((int)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 201) - 100) / 4;
	return i % 5 == 0 ? v * 1000.0f + 0.3f : v;
}

/* ---- fake kernels on the caller's stream ---- */

struct fill { void *dev; size_t n; pbox_dtype dt; int rank, step; unsigned sleep_us; };

/* A slow kernel writing the gradient: if the call did not wait for it,
 * the box would sum the poison left before. */
static void fill_kernel(void *arg)
{
	struct fill *f = arg;
	usleep(f->sleep_us);
	for (size_t i = 0; i < f->n; i++)
		put(f->dev, f->dt, i, grad(f->rank, f->step, i));
}

struct readback { const void *dev; void *out; size_t bytes; };

static void read_kernel(void *arg)
{
	struct readback *r = arg;
	memcpy(r->out, r->dev, r->bytes);
}

/* ---- a job of several ranks ---- */

struct run {
	const char *job;
	int world;
	size_t n;
	pbox_dtype dt;       /* the device buffers' */
	int wire;            /* pbox_dev_opts.wire_dtype (-1: dt) */
	double scale;
	size_t chunk;        /* pbox_dev_opts.chunk_bytes */
	unsigned fill_us;    /* the fill kernel's sleep */
	int steps;
	int use_test;        /* rank 1 completes with pbox_test, not pbox_wait */
	double density;      /* > 0: pbox_iallreduce_topk_dev (f32) */
	int reset_at;        /* top-k: pbox_topk_reset before this step (0: never) */
	bool no_delay;       /* the fake's streams run without their random delay
				(copies back race the results still coming) */
	uint32_t timeout_ms; /* pbox_opts.timeout_ms (0: 20000) */
	int device;          /* the ranks' threads' current device */
	uint8_t *out[MAXW][STEPS]; /* results as read back on the stream */
	void *dev[MAXW];
	int rc[MAXW];
	char err[MAXW][512];
};

struct worker {
	struct run *run;
	pbox_client *c;
	int rank;
};

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct run *r = wk->run;
	size_t bytes = r->n * esize(r->dt);
	void *dev, *stream, *ev;
	pbox_dev_opts o;
	int rc;

	set_device(r->device);   /* before anything of the device is made */
	assert_int_equal(ops->dev_alloc(&dev, bytes), 0);
	assert_int_equal(ops->stream_create(&stream), 0);
	assert_int_equal(ops->event_create(&ev), 0);
	r->dev[wk->rank] = dev;
	memset(dev, 0xFF, bytes);   /* NaN poison */
	pbox_dev_opts_init(&o);
	o.wire_dtype = r->wire;
	o.scale = r->scale;
	o.chunk_bytes = r->chunk;
	rc = 0;
	for (int s = 0; rc == 0 && s < r->steps; s++) {
		struct fill f = { dev, r->n, r->dt, wk->rank, s, r->fill_us };
		struct readback rb = { dev, r->out[wk->rank][s], bytes };
		pbox_req *req;
		assert_int_equal(launch(stream, fill_kernel, &f), 0);
		if (r->density > 0) {
			pbox_topk_opts t;
			pbox_topk_opts_init(&t);
			t.density = r->density;
			if (s && s == r->reset_at)
				assert_int_equal(pbox_topk_reset(wk->c, 7), 0);
			rc = pbox_iallreduce_topk_dev(wk->c, 7, dev, r->n, stream, &t, &o, &req);
		} else {
			rc = pbox_iallreduce_dev(wk->c, 7, dev, r->n, r->dt, stream, &o, &req);
		}
		if (rc == 0 && r->use_test && wk->rank == 1) {
			while (!pbox_test(req))
				usleep(200);
			rc = pbox_wait(req);      /* returns at once */
		} else if (rc == 0) {
			rc = pbox_wait(req);
		}
		/* ordered after the sum on the stream: no host-side sync before */
		assert_int_equal(launch(stream, read_kernel, &rb), 0);
		assert_int_equal(ops->event_record(ev, stream), 0);
		assert_int_equal(ops->event_sync(ev), 0);
	}
	assert_int_equal(get_device(), r->device);   /* the calls left it so */
	r->rc[wk->rank] = rc;
	if (rc < 0)
		snprintf(r->err[wk->rank], sizeof(r->err[0]), "%s", pbox_last_error(wk->c));
	ops->event_destroy(ev);
	ops->stream_destroy(stream);
	return NULL;
}

/* The ranks' calls against the box (or the list of boxes) at addr. */
static void run_at(const char *addr, struct run *r)
{
	struct worker wk[MAXW];
	pthread_t th[MAXW];
	pbox_opts opts;

	pbox_opts_init(&opts);
	opts.timeout_ms = r->timeout_ms ? r->timeout_ms : 20000;
	opts.mtu = 1500;
	if (r->no_delay)
		set_delay(0);
	for (int k = 0; k < r->world; k++) {
		for (int s = 0; s < r->steps; s++)
			r->out[k][s] = calloc(r->n, esize(r->dt));
		wk[k] = (struct worker){ .run = r, .rank = k };
		assert_int_equal(pbox_connect(addr, r->job, k, r->world, &opts, &wk[k].c), 0);
	}
	for (int k = 0; k < r->world; k++)
		pthread_create(&th[k], NULL, worker_main, &wk[k]);
	for (int k = 0; k < r->world; k++)
		pthread_join(th[k], NULL);
	if (r->no_delay)
		set_delay(50);
	for (int k = 0; k < r->world; k++) {
		pbox_close(wk[k].c);
		if (r->rc[k])
			print_error("rank %d: %s (%s)\n", k, pbox_strerror(r->rc[k]), r->err[k]);
	}
	for (int k = 0; k < r->world; k++)
		assert_int_equal(r->rc[k], 0);
}

static void run_ranks(struct box_inproc *b, struct run *r)
{
	run_at(b->addr, r);
}

static void free_run(struct run *r)
{
	for (int k = 0; k < r->world; k++) {
		ops->dev_free(r->dev[k]);
		for (int s = 0; s < r->steps; s++)
			free(r->out[k][s]);
	}
}

/* Every rank read back what the box's rank-ordered sum of the gradients
 * as sent (cast to the wire dtype), scaled and cast back, gives. */
static void check_sums(const struct run *r)
{
	pbox_dtype wire = r->wire < 0 ? r->dt : (pbox_dtype)r->wire;
	size_t dsz = esize(r->dt);
	uint8_t one[4], w[4], want[4];

	for (int s = 0; s < r->steps; s++)
		for (size_t i = 0; i < r->n; i++) {
			float acc = 0;
			for (int q = 0; q < r->world; q++) {
				put(one, r->dt, 0, grad(q, s, i));     /* on the device */
				put(w, wire, 0, get(one, r->dt, 0));   /* as sent */
				acc = q ? acc + get(w, wire, 0) : get(w, wire, 0);
			}
			put(w, wire, 0, acc);                       /* the box's result */
			if (r->scale == 1.0 && wire == r->dt)
				memcpy(want, w, dsz);
			else
				put(want, r->dt, 0, r->scale == 1.0 ? get(w, wire, 0)
						    : get(w, wire, 0) * (float)r->scale);
			for (int k = 0; k < r->world; k++)
				if (memcmp(r->out[k][s] + i * dsz, want, dsz) != 0) {
					print_error("step %d element %zu rank %d: got %g, want %g\n",
						    s, i, k, (double)get(r->out[k][s], r->dt, i),
						    (double)get(want, r->dt, 0));
					fail();
				}
		}
}

/* ---- tests ---- */

static void gpu__errors_named(void **state)
{
	(void)state;
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	pbox_req *req = NULL;
	char buf[64];

	box_inproc_start(b);
	pbox_opts_init(&opts);
	opts.mtu = 1500;
	opts.timeout_ms = 5000;
	assert_int_equal(pbox_connect(b->addr, "gpuerr", 0, 1, &opts, &c), 0);

	setenv("PBOX_GPU_LIB", "/nonexistent/libpbox-gpu.so.1", 1);
	assert_int_equal(pbox_gpu_init(c), PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "no GPU library: /nonexistent/libpbox-gpu.so.1: "
					 "cannot open shared object file"));
	assert_non_null(strstr(pbox_last_error(c), "make gpu"));
	/* a device call says the same */
	assert_int_equal(pbox_iallreduce_dev(c, 1, buf, 16, PBOX_F32, NULL, NULL, &req),
			 PBOX_ENOTSUP);
	assert_null(req);
	assert_non_null(strstr(pbox_last_error(c), "no GPU library"));

	setenv("PBOX_GPU_LIB", "libm.so.6", 1);
	assert_int_equal(pbox_gpu_init(c), PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "libm.so.6 is not a pbox GPU library: it has "
					 "no pbox_gpu_ops_v2()"));

	setenv("PBOX_GPU_LIB", fake_path, 1);
	setenv("PBOX_FAKE_GPU_ABI", "1", 1);
	assert_int_equal(pbox_gpu_init(c), PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "speaks GPU ABI 1, this libpbox 2"));
	unsetenv("PBOX_FAKE_GPU_ABI");

	setenv("PBOX_FAKE_GPU_INIT", "-19", 1);   /* -ENODEV */
	assert_int_equal(pbox_gpu_init(c), PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "no CUDA device: fake GPU: no device"));
	assert_int_equal(pbox_iallreduce_dev(c, 1, buf, 16, PBOX_F32, NULL, NULL, &req),
			 PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "no CUDA device"));
	unsetenv("PBOX_FAKE_GPU_INIT");

	/* now it loads (and stays loaded for the process) */
	assert_int_equal(pbox_gpu_init(c), 0);
	open_fake();
	void *stream, *dev;
	assert_int_equal(ops->stream_create(&stream), 0);
	assert_int_equal(ops->dev_alloc(&dev, 64 * 4), 0);

	/* a host pointer */
	assert_int_equal(pbox_iallreduce_dev(c, 1, buf, 16, PBOX_F32, stream, NULL, &req),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "host memory, not device memory"));
	assert_non_null(strstr(pbox_last_error(c), "pbox_iallreduce sums host buffers"));
	/* misuse */
	pbox_dev_opts o;
	assert_int_equal(pbox_dev_opts_init_sized(&o, 16), PBOX_EINVAL);
	assert_int_equal(pbox_dev_opts_init(&o), 0);
	assert_int_equal(o.size, sizeof(o));
	assert_int_equal(o.wire_dtype, -1);
	assert_true(o.scale == 1.0);
	o.scale = NAN;
	assert_int_equal(pbox_iallreduce_dev(c, 1, dev, 64, PBOX_F32, stream, &o, &req),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "scale"));
	pbox_dev_opts_init(&o);
	o.wire_dtype = 7;
	assert_int_equal(pbox_iallreduce_dev(c, 1, dev, 64, PBOX_F32, stream, &o, &req),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "wire_dtype 7"));
	pbox_dev_opts_init(&o);
	o.size = 8;
	assert_int_equal(pbox_iallreduce_dev(c, 1, dev, 64, PBOX_F32, stream, &o, &req),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "pbox_dev_opts.size is 8"));
	assert_int_equal(pbox_iallreduce_dev(c, 1, dev, 64, PBOX_F32, stream, NULL, NULL),
			 PBOX_EINVAL);
	assert_int_equal(pbox_gpu_init(NULL), PBOX_EINVAL);

	/* a key has one device call at a time, of one size */
	assert_int_equal(pbox_iallreduce_dev(c, 2, dev, 64, PBOX_F32, stream, NULL, &req), 0);
	pbox_req *r2 = NULL;
	assert_int_equal(pbox_iallreduce_dev(c, 2, dev, 64, PBOX_F32, stream, NULL, &r2),
			 PBOX_EBUSY);
	assert_non_null(strstr(pbox_last_error(c), "device call on this key is in flight"));
	assert_int_equal(pbox_wait(req), 0);
	assert_int_equal(pbox_iallreduce_dev(c, 2, dev, 32, PBOX_F32, stream, NULL, &r2),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "use another key for another size"));
	pbox_dev_opts_init(&o);
	o.chunk_bytes = 4096;
	assert_int_equal(pbox_iallreduce_dev(c, 2, dev, 64, PBOX_F32, stream, &o, &r2),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "staging chunk"));
	/* the blocking form, on the legacy default stream */
	assert_int_equal(pbox_allreduce_dev(c, 2, dev, 64, PBOX_F32, NULL, NULL), 0);

	/* any chunk_bytes is a request: beyond the buffer, one chunk (1408 <<
	 * 32, 2^32 segments, was cut to 0 segments a chunk in 32 bits: no
	 * chunk at all, and the call wrote past the end of its arrays) */
	static const uint64_t huge[] = { (uint64_t)1408 << 32, UINT64_MAX };
	void *ev;
	assert_int_equal(ops->event_create(&ev), 0);
	assert_int_equal(ops->event_record(ev, NULL), 0);   /* the last call's copies are done */
	assert_int_equal(ops->event_sync(ev), 0);
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		float *f = dev;
		for (size_t j = 0; j < 64; j++)
			f[j] = (float)(j + i);
		pbox_dev_opts_init(&o);
		o.chunk_bytes = huge[i];
		assert_int_equal(pbox_allreduce_dev(c, 10 + (uint32_t)i, dev, 64, PBOX_F32, stream,
						    &o), 0);
		assert_int_equal(ops->event_record(ev, stream), 0);
		assert_int_equal(ops->event_sync(ev), 0);
		for (size_t j = 0; j < 64; j++)
			assert_true(f[j] == (float)(j + i));   /* one rank: the sum is its own */
	}
	ops->event_destroy(ev);

	/* the library cannot tell what dev is (a CUDA failure): its reason,
	 * not "host memory" */
	pbox_topk_opts t;
	pbox_topk_opts_init(&t);
	fail_is_device(-EIO);
	assert_int_equal(pbox_iallreduce_dev(c, 12, dev, 64, PBOX_F32, stream, NULL, &req),
			 PBOX_ESYS);
	assert_non_null(strstr(pbox_last_error(c), "cannot tell whether"));
	assert_non_null(strstr(pbox_last_error(c), "cudaPointerGetAttributes failed"));
	assert_int_equal(pbox_iallreduce_topk_dev(c, 13, dev, 64, stream, &t, NULL, &req),
			 PBOX_ESYS);
	assert_non_null(strstr(pbox_last_error(c), "cudaPointerGetAttributes failed"));
	fail_is_device(0);

	pbox_close(c);
	ops->dev_free(dev);
	ops->stream_destroy(stream);
	assert_int_equal(host_live(), 0);   /* the key's slab went with the client */
	box_inproc_free(b);
}

static void exact_run(struct run *r)
{
	struct box_inproc *b = box_inproc_new(2);
	unsigned long allocs = host_allocs(), live = host_live();

	box_inproc_start(b);
	run_ranks(b, r);
	box_inproc_stop(b);
	check_sums(r);
	/* one slab per rank for its key, made by the first call, freed at close */
	assert_int_equal(host_allocs() - allocs, (unsigned long)r->world);
	assert_int_equal(host_live(), live);
	free_run(r);
	box_inproc_free(b);
}

/* Over a fleet of two boxes (ops/fleet.c): the key's 512 KiB partitions
 * are device calls of their own on their boxes, the sums the same bits. */
static void exact_fleet_run(struct run *r)
{
	struct box_inproc *b1 = box_inproc_new(1), *b2 = box_inproc_new(1);
	unsigned long live = host_live();
	char list[80];

	box_inproc_start(b1);
	box_inproc_start(b2);
	snprintf(list, sizeof(list), "%s,%s", b1->addr, b2->addr);
	run_at(list, r);
	box_inproc_stop(b1);
	box_inproc_stop(b2);
	uint64_t p1 = b1->f->eng[0].c.pushes, p2 = b2->f->eng[0].c.pushes;
	check_sums(r);
	assert_true(p1 > 0 && p2 > 0);       /* both boxes summed */
	assert_int_equal(host_live(), live); /* every partition's slab freed */
	free_run(r);
	box_inproc_free(b1);
	box_inproc_free(b2);
}

static void gpu__fleet_f32_mean_exact(void **state)
{
	static struct run r = { .job = "gpufl32", .world = 3, .n = 300007, .dt = PBOX_F32,
				.wire = -1, .scale = 1.0 / 3, .chunk = CHUNK, .fill_us = 1000,
				.steps = STEPS };
	(void)state;
	exact_fleet_run(&r);
}

static void gpu__fleet_bf16_exact(void **state)
{
	static struct run r = { .job = "gpuflbf", .world = 2, .n = 300007, .dt = PBOX_BF16,
				.wire = -1, .scale = 1.0, .chunk = CHUNK, .fill_us = 1000,
				.steps = STEPS };
	(void)state;
	exact_fleet_run(&r);
}

static void gpu__exact_f32_ordered_after_stream(void **state)
{
	static struct run r = { .job = "gpu32", .world = 3, .n = 20011, .dt = PBOX_F32,
				.wire = -1, .scale = 1.0, .chunk = CHUNK, .fill_us = 3000,
				.steps = STEPS, .use_test = 1 };
	(void)state;
	exact_run(&r);
}

static void gpu__exact_f16_mean(void **state)
{
	static struct run r = { .job = "gpu16", .world = 3, .n = 9001, .dt = PBOX_F16,
				.wire = -1, .scale = 1.0 / 3, .chunk = CHUNK, .fill_us = 1000,
				.steps = STEPS };
	(void)state;
	exact_run(&r);
}

static void gpu__exact_bf16(void **state)
{
	static struct run r = { .job = "gpubf16", .world = 4, .n = 9001, .dt = PBOX_BF16,
				.wire = -1, .scale = 1.0, .chunk = CHUNK, .fill_us = 1000,
				.steps = STEPS };
	(void)state;
	exact_run(&r);
}

static void gpu__exact_f32_bf16_wire_mean(void **state)
{
	static struct run r = { .job = "gpucast", .world = 3, .n = 12345, .dt = PBOX_F32,
				.wire = PBOX_BF16, .scale = 1.0 / 3, .chunk = 0, .fill_us = 1000,
				.steps = STEPS };
	(void)state;
	exact_run(&r);
}

/* Every rank read back the rank-ordered sum of the entries each rank's
 * selection sent (a CPU model: topk_select_ef on its own residual),
 * absent entries zero, times the scale. */
static void check_topk(const struct run *r)
{
	size_t k = topk_k_of_density(r->density, r->n), cap = TOPK_MAX(k);
	float *e = calloc(r->n * (size_t)r->world, sizeof(float));
	float *g = malloc(r->n * sizeof(float)), *acc = malloc(r->n * sizeof(float));
	float *val = malloc(cap * sizeof(float));
	uint32_t *idx = malloc(cap * sizeof(uint32_t));

	assert_true(e && g && acc && val && idx);
	for (int s = 0; s < r->steps; s++) {
		if (s && s == r->reset_at)
			memset(e, 0, r->n * (size_t)r->world * sizeof(float));
		for (size_t i = 0; i < r->n; i++)
			acc[i] = 0;
		size_t sent = 0;
		for (int q = 0; q < r->world; q++) {
			for (size_t i = 0; i < r->n; i++)
				g[i] = grad(q, s, i);
			size_t m = topk_select_ef(NULL, e + (size_t)q * r->n, g, r->n, k, idx, val);
			assert_true(m >= k - k / 8 && m <= k + k / 8);
			sent += m;
			for (size_t j = 0; j < m; j++)
				acc[idx[j]] = q ? acc[idx[j]] + val[j] : val[j];
		}
		assert_true(sent > 0);
		for (size_t i = 0; i < r->n; i++) {
			float want = r->scale == 1.0 ? acc[i] : acc[i] * (float)r->scale;
			for (int q = 0; q < r->world; q++) {
				float got;
				memcpy(&got, r->out[q][s] + i * 4, 4);
				if (memcmp(&got, &want, 4) != 0) {
					print_error("top-k step %d element %zu rank %d: got %g, want %g\n",
						    s, i, q, (double)got, (double)want);
					fail();
				}
			}
		}
	}
	free(e);
	free(g);
	free(acc);
	free(val);
	free(idx);
}

static void topk_run(struct run *r)
{
	struct box_inproc *b = box_inproc_new(2);
	unsigned long live = host_live();

	box_inproc_start(b);
	run_ranks(b, r);
	box_inproc_stop(b);
	check_topk(r);
	assert_int_equal(host_live(), live);   /* slab and selection freed at close */
	free_run(r);
	box_inproc_free(b);
}

static void gpu__topk_exact_with_residual_and_reset(void **state)
{
	static struct run r = { .job = "gputopk", .world = 3, .n = 30011, .dt = PBOX_F32,
				.wire = -1, .scale = 1.0 / 3, .chunk = CHUNK, .fill_us = 2000,
				.steps = STEPS, .density = 0.02, .reset_at = 2 };
	(void)state;
	topk_run(&r);
}

/*
 * The staging chunks of a top-k call are whole segments of its sparse
 * layout, whose segments are WIRE_SPARSE_SLACK bytes shorter than the
 * job's (336 floats, not 352, at MTU 1500). Cut by the dense size:
 *   - the same shape without the fake's delays copied chunks back with
 *     elements of the next chunk whose results were not in (stale sums);
 *   - 3520 floats, 10 dense segments, are 11 sparse ones: with the
 *     default chunk (one chunk) the 11th was never released to be sent
 *     (the call timed out) and its result indexed a chunk past the end;
 *   - 1 Mi floats in 5 chunks of 744 segments: 3121 sparse segments, of
 *     which the last 142 were never sent, and stale sums without delays.
 */
static void gpu__topk_exact_without_device_delay(void **state)
{
	static struct run r = { .job = "gputopk0", .world = 3, .n = 30011, .dt = PBOX_F32,
				.wire = -1, .scale = 1.0 / 3, .chunk = CHUNK, .fill_us = 2000,
				.steps = STEPS, .density = 0.02, .reset_at = 2, .no_delay = true,
				.timeout_ms = 5000 };
	(void)state;
	topk_run(&r);
}

static void gpu__topk_one_chunk_of_sparse_segments(void **state)
{
	static struct run r = { .job = "gputopk1", .world = 2, .n = 3520, .dt = PBOX_F32,
				.wire = -1, .scale = 1.0, .chunk = 0, .fill_us = 100, .steps = 2,
				.density = 0.02, .timeout_ms = 3000 };
	(void)state;
	topk_run(&r);
}

static void gpu__topk_many_chunks_without_device_delay(void **state)
{
	static struct run r = { .job = "gputopkm", .world = 2, .n = 1048576, .dt = PBOX_F32,
				.wire = -1, .scale = 0.5, .chunk = 0, .fill_us = 100, .steps = 2,
				.density = 0.02, .no_delay = true, .timeout_ms = 5000 };
	(void)state;
	topk_run(&r);
}

/* What a device top-k call cannot take, and a host pointer. */
static void gpu__topk_limits_named(void **state)
{
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c;
	pbox_opts opts;
	pbox_topk_opts t;
	pbox_dev_opts o;
	pbox_req *req;
	static float host[64];
	void *dev;

	(void)state;
	box_inproc_start(b);
	pbox_opts_init(&opts);
	assert_int_equal(pbox_connect(b->addr, "gputopkerr", 0, 1, &opts, &c), 0);
	assert_int_equal(ops->dev_alloc(&dev, sizeof(host)), 0);
	static const struct { uint32_t ef; double mom, density; int wire; bool host;
			      const char *want; } bad[] = {
		{ 0, 0, 0.01, -1, false, "does not take error_feedback 0" },
		{ 1, 0.9, 0.01, -1, false, "momentum correction" },
		{ 1, 0, 0.01, PBOX_BF16, false, "wire_dtype other than f32" },
		{ 1, 0, 2, -1, false, "density 2 is outside (0, 1]" },
		{ 1, 0, 0.01, -1, true, "host memory, not device memory" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pbox_topk_opts_init(&t);
		pbox_dev_opts_init(&o);
		t.error_feedback = bad[i].ef;
		t.momentum = bad[i].mom;
		t.density = bad[i].density;
		o.wire_dtype = bad[i].wire;
		assert_int_equal(pbox_iallreduce_topk_dev(c, 3, bad[i].host ? host : dev, 64, NULL,
							  &t, &o, &req), PBOX_EINVAL);
		if (!strstr(pbox_last_error(c), bad[i].want))
			fail_msg("said '%s', not '%s'", pbox_last_error(c), bad[i].want);
	}
	pbox_topk_opts_init(&t);
	pbox_dev_opts_init(&o);
	assert_null(req);
	/* one call goes through; reset on a key without top-k state is named */
	assert_int_equal(pbox_allreduce_topk_dev(c, 3, dev, 64, NULL, &t, &o), 0);
	/* its staging is cut in sparse segments: a dense call needs another key */
	assert_int_equal(pbox_allreduce_dev(c, 3, dev, 64, PBOX_F32, NULL, NULL), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "dense calls cannot use it"));
	assert_int_equal(pbox_topk_reset(c, 3), 0);
	assert_int_equal(pbox_topk_reset(c, 4), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "no pbox_allreduce_topk call has used"));
	pbox_close(c);
	ops->dev_free(dev);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
}

/* One rank on a box of one lcore, with n floats of device memory, a
 * stream and an event (the fault tests). */
struct one_gpu {
	struct box_inproc *b;
	pbox_client *c;
	void *stream, *ev;
	float *dev;
};

static void one_gpu_open(struct one_gpu *g, const char *job, size_t n, uint32_t timeout_ms)
{
	pbox_opts opts;

	g->b = box_inproc_new(1);
	box_inproc_start(g->b);
	pbox_opts_init(&opts);
	opts.mtu = 1500;
	opts.timeout_ms = timeout_ms;
	assert_int_equal(pbox_connect(g->b->addr, job, 0, 1, &opts, &g->c), 0);
	assert_int_equal(ops->dev_alloc((void **)&g->dev, n * sizeof(float)), 0);
	assert_int_equal(ops->stream_create(&g->stream), 0);
	assert_int_equal(ops->event_create(&g->ev), 0);
}

/* The host waits for what g's stream has enqueued. */
static void one_gpu_sync(const struct one_gpu *g)
{
	assert_int_equal(ops->event_record(g->ev, g->stream), 0);
	assert_int_equal(ops->event_sync(g->ev), 0);
}

static void one_gpu_close(struct one_gpu *g)
{
	ops->event_destroy(g->ev);
	ops->stream_destroy(g->stream);
	pbox_close(g->c);
	ops->dev_free(g->dev);
	assert_true(box_inproc_idle(g->b, 2000));
	box_inproc_free(g->b);
}

/* A device call whose copy to the host cannot be enqueued sent nothing:
 * it fails naming it, and the same key's next call is the same round
 * (it was taken by the failed one: the box saw a later round and the
 * retry hung until its timeout). */
static void gpu__copy_out_failure_retry_is_exact(void **state)
{
	enum { N = 10007 };
	struct one_gpu g;
	pbox_dev_opts o;

	(void)state;
	one_gpu_open(&g, "gpuout", N, 3000);
	pbox_dev_opts_init(&o);
	o.chunk_bytes = CHUNK;
	for (int call = 0; call < 3; call++) {
		for (size_t i = 0; i < N; i++)
			g.dev[i] = (float)((i + (size_t)call) % 89);
		fail_d2h(call == 1 ? 1 : 0);
		int rc = pbox_allreduce_dev(g.c, 3, g.dev, N, PBOX_F32, g.stream, &o);
		one_gpu_sync(&g);
		if (call == 1) {
			assert_int_equal(rc, PBOX_ESYS);
			assert_non_null(strstr(pbox_last_error(g.c), "cannot enqueue the copy"));
			continue;
		}
		if (rc != 0)
			fail_msg("call %d: %s", call, pbox_last_error(g.c));
		for (size_t i = 0; i < N; i++)
			assert_true(g.dev[i] == (float)((i + (size_t)call) % 89));
	}
	fail_d2h(0);
	one_gpu_close(&g);
}

/* The device faults while a call's results come back: the second
 * chunk's copy to the device fails to enqueue, in the middle of a RESULT
 * whose records span many chunks (one rank: each PUSH's rounds complete
 * at once and come back packed). The call fails naming it; nothing of
 * the call is touched after (ASan, make check); the client goes on. */
static void gpu__copy_back_failure_named(void **state)
{
	enum { N = 30011 };
	struct one_gpu g;
	pbox_topk_opts t;
	pbox_dev_opts o;

	(void)state;
	one_gpu_open(&g, "gpufault", N, 5000);
	for (size_t i = 0; i < N; i++)
		g.dev[i] = grad(0, 0, i);
	pbox_topk_opts_init(&t);
	pbox_dev_opts_init(&o);
	o.chunk_bytes = CHUNK;
	fail_h2d(2);
	assert_int_equal(pbox_allreduce_topk_dev(g.c, 5, g.dev, N, g.stream, &t, &o), PBOX_ESYS);
	fail_h2d(0);
	if (!strstr(pbox_last_error(g.c), "the device faulted"))
		fail_msg("said '%s'", pbox_last_error(g.c));
	print_message("failed as asked: %s\n", pbox_last_error(g.c));
	/* the stream is ordered after the copies the call made: then the
	 * client goes on, a dense device call on another key is exact */
	one_gpu_sync(&g);
	for (size_t i = 0; i < N; i++)
		g.dev[i] = (float)(i % 97);
	assert_int_equal(pbox_allreduce_dev(g.c, 6, g.dev, N, PBOX_F32, g.stream, &o), 0);
	one_gpu_sync(&g);
	for (size_t i = 0; i < N; i++)
		assert_true(g.dev[i] == (float)(i % 97));
	one_gpu_close(&g);
}

/*
 * Ranks whose threads are on device 1: their buffers, their streams and
 * libpbox's (made on the caller's thread) are device 1's, while libpbox's
 * progress thread, which enqueues the cast and scaled copies, starts on
 * device 0. Sums with a bf16 wire and the mean's scale, and top-k, are
 * exact, and the callers stay on device 1. A library that does not make
 * the stream's device current for a call (the fake without its switch,
 * as gpu/ was) fails the first kernel: CUDA launches one only into a
 * stream of the current device.
 */
static void gpu__caller_on_device_1(void **state)
{
	static struct run dense = { .job = "gpudev1", .world = 2, .n = 20011, .dt = PBOX_F32,
				    .wire = PBOX_BF16, .scale = 0.5, .chunk = CHUNK,
				    .fill_us = 500, .steps = 2, .device = 1 };
	static struct run topk = { .job = "gpudev1k", .world = 2, .n = 30011, .dt = PBOX_F32,
				   .wire = -1, .scale = 0.5, .chunk = CHUNK, .fill_us = 500,
				   .steps = 2, .density = 0.02, .device = 1 };
	struct one_gpu g;
	pbox_dev_opts o;

	(void)state;
	exact_run(&dense);
	topk_run(&topk);

	set_device(1);
	one_gpu_open(&g, "gpudev1x", 1000, 3000);
	set_switch(0);
	pbox_dev_opts_init(&o);
	o.wire_dtype = PBOX_BF16;
	int rc = pbox_allreduce_dev(g.c, 3, g.dev, 1000, PBOX_F32, g.stream, &o);
	set_switch(1);
	assert_int_equal(rc, PBOX_ESYS);
	if (!strstr(pbox_last_error(g.c), "a kernel launched into a stream of device 1 from "
		    "device 0"))
		fail_msg("said '%s'", pbox_last_error(g.c));
	one_gpu_sync(&g);
	one_gpu_close(&g);
	set_device(0);
}

static int by_dev(const void *a, const void *b)
{
	const struct fake_gpu_op *x = a, *y = b;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* The trace of one call of a bucket of 57 chunks, per rank: each chunk
 * copied once each way; every chunk's copy to the host was enqueued
 * before the previous chunk's copy back, and (timing) started before it
 * ended. */
static void gpu__chunks_overlap(void **state)
{
	static struct run r = { .job = "gpuovl", .world = 2, .n = 100000, .dt = PBOX_F32,
				.wire = -1, .scale = 1.0, .chunk = CHUNK, .fill_us = 0,
				.steps = 1 };
	static struct fake_gpu_op t[FAKE_GPU_TRACE_MAX], d2h[256], h2d[256];
	(void)state;
	struct box_inproc *b = box_inproc_new(2);

	set_delay(200);   /* slower copies: the device side of the pipeline shows */
	trace_reset();
	box_inproc_start(b);
	run_ranks(b, &r);
	box_inproc_stop(b);
	set_delay(50);
	check_sums(&r);
	size_t nt = trace_get(t, FAKE_GPU_TRACE_MAX);
	for (int k = 0; k < r.world; k++) {
		const uint8_t *lo = r.dev[k], *hi = lo + r.n * 4;
		size_t nd = 0, nh = 0, elems = 0;
		for (size_t i = 0; i < nt; i++) {
			const uint8_t *p = t[i].dev;
			if (p < lo || p >= hi)
				continue;
			if (t[i].kind == FAKE_D2H && nd < 256) {
				d2h[nd++] = t[i];
				elems += t[i].count;
			} else if (t[i].kind == FAKE_H2D && nh < 256) {
				h2d[nh++] = t[i];
			}
		}
		assert_int_equal(nd, 57);   /* 100000 f32 in chunks of 5 x 352 */
		assert_int_equal(nh, nd);
		assert_int_equal(elems, r.n);
		qsort(d2h, nd, sizeof(d2h[0]), by_dev);
		qsort(h2d, nh, sizeof(h2d[0]), by_dev);
		unsigned overlapped = 0, back_early = 0;
		for (size_t i = 0; i < nd; i++) {
			assert_ptr_equal(d2h[i].dev, h2d[i].dev);
			assert_true(d2h[i].end < h2d[i].start);     /* a chunk goes, then comes back */
			if (i + 1 < nd) {
				assert_true(d2h[i + 1].enq < h2d[i].enq);
				overlapped += d2h[i + 1].start < h2d[i].end;
			}
			back_early += h2d[i].start < d2h[nd - 1].end;
		}
		print_message("rank %d: %zu chunks; the next chunk's copy to the host started "
			      "before this one's copy back ended for %u; %u came back before the "
			      "last went\n", k, nd, overlapped, back_early);
		assert_true(overlapped >= (nd - 1) / 2);
	}
	free_run(&r);
	box_inproc_free(b);
}

static int setup(void **state)
{
	(void)state;
	find_fake();
	unsetenv("PBOX_FAKE_GPU_ABI");
	unsetenv("PBOX_FAKE_GPU_INIT");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gpu__errors_named),   /* first: see the top */
		cmocka_unit_test(gpu__exact_f32_ordered_after_stream),
		cmocka_unit_test(gpu__exact_f16_mean),
		cmocka_unit_test(gpu__exact_bf16),
		cmocka_unit_test(gpu__fleet_f32_mean_exact),
		cmocka_unit_test(gpu__fleet_bf16_exact),
		cmocka_unit_test(gpu__exact_f32_bf16_wire_mean),
		cmocka_unit_test(gpu__chunks_overlap),
		cmocka_unit_test(gpu__topk_exact_with_residual_and_reset),
		cmocka_unit_test(gpu__topk_exact_without_device_delay),
		cmocka_unit_test(gpu__topk_one_chunk_of_sparse_segments),
		cmocka_unit_test(gpu__topk_many_chunks_without_device_delay),
		cmocka_unit_test(gpu__topk_limits_named),
		cmocka_unit_test(gpu__caller_on_device_1),
		cmocka_unit_test(gpu__copy_back_failure_named),
		cmocka_unit_test(gpu__copy_out_failure_retry_is_exact),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
