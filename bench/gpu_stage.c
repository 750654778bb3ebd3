/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_stage.c - what staging device buffers costs (docs/gpu.md "The
 * staging pipeline"). WORLD ranks (threads, a client each) against the
 * in-process box of the unit tests (tests/unit/box_inproc.h), on the GPU
 * library libpbox loads ($PBOX_GPU_LIB, else libpbox-gpu.so.1). Per bucket
 * size, rank 0's medians over REPS of ITERS calls each:
 *
 *   d2h     one device-to-host copy of the whole bucket into pinned memory
 *           (the cast to the wire dtype fused), until its event completed;
 *   h2d     the copy back (scale and cast fused);
 *   net     pbox_allreduce of a host buffer of the bucket's wire bytes: the
 *           box round without any device;
 *   dev     pbox_iallreduce_dev + pbox_wait + the caller's stream reaching
 *           the point after it (an event, synchronised): the whole device
 *           call; submit is the time pbox_iallreduce_dev takes to return;
 *   over    dev - net: what staging adds per bucket;
 *   hidden  (d2h + net + h2d - dev) / (d2h + h2d): the share of the copy
 *           time the pipeline hides behind the network (1: all of it; 0:
 *           the copies ran before and after the round).
 * GB/s of each stage are the bucket's device bytes (net: wire bytes) over
 * its time. With the fake library (tests/unit/fake_gpu.c: "device" memory
 * is host memory, copies are CPU loops on stream threads with random
 * delays) the figures say the pipeline works and what libpbox itself adds;
 * they are not GPU figures, and every line says so.
 *
 * usage: gpu_stage [--world W] [--lcores L] [--iters I] [--reps R]
 *                  [--dtype f32|f16|bf16] [--wire f32|f16|bf16] [--chunk BYTES]
 *                  [SIZE ...]     (bucket bytes on the device; K, M suffixes)
 * defaults: world 2, lcores 1, iters 10, reps 5, f32 on the wire as on the
 * device, chunk 1M (libpbox's default), sizes 256K 4M 16M.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu_ops.h"
#include "include/pbox.h"
#include "include/pbox_cuda.h"
#include "tests/unit/box_inproc.h"

#define MAX_WORLD 8
#define MAX_SIZES 16
#define MAX_REPS  31

enum { T_D2H, T_H2D, T_NET, T_DEV, T_SUBMIT, NT };

struct bench {
	const struct pbox_gpu_ops *ops;
	int world, iters, reps, nsizes;
	pbox_dtype dt, wire;
	size_t chunk;
	size_t bytes[MAX_SIZES];
	pthread_barrier_t bar;
	double us[MAX_SIZES][NT][MAX_REPS];   /* rank 0: mean per call */
};

struct rank {
	struct bench *b;
	pbox_client *c;
	int rank;
};

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'K' || *end == 'k')
		v *= 1024;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024;
	return v > 0 ? (size_t)v : 0;
}

static int parse_dtype(const char *s, pbox_dtype *t)
{
	if (!strcmp(s, "f32"))
		*t = PBOX_F32;
	else if (!strcmp(s, "f16"))
		*t = PBOX_F16;
	else if (!strcmp(s, "bf16"))
		*t = PBOX_BF16;
	else
		return -1;
	return 0;
}

static const char *dtype_name(pbox_dtype t)
{
	return t == PBOX_F32 ? "f32" : t == PBOX_F16 ? "f16" : "bf16";
}

static size_t esize(pbox_dtype t)
{
	return t == PBOX_F32 ? 4 : 2;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const struct rank *rk, const char *what, int rc)
{
	fprintf(stderr, "gpu_stage: rank %d: %s: %d %s\n", rk->rank, what, rc,
		rc <= 0 && rk->c ? pbox_last_error(rk->c) : rk->b->ops->last_error());
	exit(1);
}

/* Time ITERS runs of one stage: mean microseconds per run. */
#define TIMED(rk, out, body) do {                                          \
	pthread_barrier_wait(&(rk)->b->bar);                               \
	uint64_t t0_ = clock_ns();                                         \
	for (int it_ = 0; it_ < (rk)->b->iters; it_++) { body; }           \
	out = (double)(clock_ns() - t0_) / 1e3 / (rk)->b->iters;           \
} while (0)

static void *rank_main(void *arg)
{
	struct rank *rk = arg;
	struct bench *b = rk->b;
	const struct pbox_gpu_ops *ops = b->ops;
	void *stream, *ev;
	int rc;

	if ((rc = ops->stream_create(&stream)) < 0 || (rc = ops->event_create(&ev)) < 0)
		die(rk, "stream/event", rc);
	pbox_dev_opts o;
	pbox_dev_opts_init(&o);
	o.wire_dtype = (int32_t)b->wire;
	o.chunk_bytes = b->chunk;
	o.scale = 1.0 / b->world;
	for (int s = 0; s < b->nsizes; s++) {
		size_t n = b->bytes[s] / esize(b->dt);
		void *dev, *pinned;
		uint8_t *host = calloc(n, esize(b->wire));
		if (!host || (rc = ops->dev_alloc(&dev, n * esize(b->dt))) < 0 ||
		    (rc = ops->host_alloc(&pinned, n * esize(b->wire))) < 0)
			die(rk, "memory", rc);
		uint32_t key_net = 2 * (uint32_t)s, key_dev = 2 * (uint32_t)s + 1;
		/* warm-up: the keys declared, the slab made */
		if ((rc = pbox_allreduce(rk->c, key_net, host, n, b->wire)) < 0 ||
		    (rc = pbox_allreduce_dev(rk->c, key_dev, dev, n, b->dt, stream, &o)) < 0)
			die(rk, "warm-up", rc);
		ops->event_record(ev, stream);
		ops->event_sync(ev);
		for (int rep = 0; rep < b->reps; rep++) {
			double t[NT], submit = 0;
			TIMED(rk, t[T_D2H], {
				ops->copy_d2h(pinned, (enum gpu_dtype)b->wire, dev,
					      (enum gpu_dtype)b->dt, n, stream);
				ops->event_record(ev, stream);
				ops->event_sync(ev);
			});
			TIMED(rk, t[T_H2D], {
				ops->copy_h2d(dev, (enum gpu_dtype)b->dt, pinned,
					      (enum gpu_dtype)b->wire, n, 1.0f, stream);
				ops->event_record(ev, stream);
				ops->event_sync(ev);
			});
			TIMED(rk, t[T_NET], {
				if ((rc = pbox_allreduce(rk->c, key_net, host, n, b->wire)) < 0)
					die(rk, "pbox_allreduce", rc);
			});
			TIMED(rk, t[T_DEV], {
				pbox_req *req;
				uint64_t a = clock_ns();
				rc = pbox_iallreduce_dev(rk->c, key_dev, dev, n, b->dt, stream, &o,
							 &req);
				submit += (double)(clock_ns() - a) / 1e3;
				if (rc < 0 || (rc = pbox_wait(req)) < 0)
					die(rk, "pbox_iallreduce_dev", rc);
				ops->event_record(ev, stream);
				ops->event_sync(ev);
			});
			t[T_SUBMIT] = submit / b->iters;
			if (rk->rank == 0)
				for (int k = 0; k < NT; k++)
					b->us[s][k][rep] = t[k];
		}
		pthread_barrier_wait(&b->bar);
		ops->host_free(pinned);
		ops->dev_free(dev);
		free(host);
	}
	ops->event_destroy(ev);
	ops->stream_destroy(stream);
	return NULL;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	static struct bench b = { .world = 2, .iters = 10, .reps = 5, .dt = PBOX_F32,
				  .wire = (pbox_dtype)-1 };
	unsigned lcores = 1;
	static const size_t def[] = { 256 << 10, 4 << 20, 16 << 20 };

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (!strcmp(a, "--world") && v)
			b.world = atoi(argv[++i]);
		else if (!strcmp(a, "--lcores") && v)
			lcores = (unsigned)atoi(argv[++i]);
		else if (!strcmp(a, "--iters") && v)
			b.iters = atoi(argv[++i]);
		else if (!strcmp(a, "--reps") && v)
			b.reps = atoi(argv[++i]);
		else if (!strcmp(a, "--chunk") && v)
			b.chunk = parse_size(argv[++i]);
		else if (!strcmp(a, "--dtype") && v)
			bad = parse_dtype(argv[++i], &b.dt);
		else if (!strcmp(a, "--wire") && v)
			bad = parse_dtype(argv[++i], &b.wire);
		else if (a[0] != '-' && b.nsizes < MAX_SIZES && parse_size(a))
			b.bytes[b.nsizes++] = parse_size(a);
		else
			bad = 1;
		if (bad) {
			fprintf(stderr, "usage: gpu_stage [--world W] [--lcores L] [--iters I] "
				"[--reps R] [--dtype T] [--wire T] [--chunk BYTES] [SIZE ...]\n");
			return 2;
		}
	}
	if ((int)b.wire < 0)
		b.wire = b.dt;
	if (b.world < 1 || b.world > MAX_WORLD || b.iters < 1 || b.reps < 1 ||
	    b.reps > MAX_REPS || lcores < 1 || lcores > BI_MAX_EPS) {
		fprintf(stderr, "gpu_stage: world 1..%d, lcores 1..%d, reps 1..%d\n", MAX_WORLD,
			BI_MAX_EPS, MAX_REPS);
		return 2;
	}
	if (b.nsizes == 0)
		for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++)
			b.bytes[b.nsizes++] = def[i];

	struct box_inproc *box = box_inproc_new(lcores);
	box->f->box.cfg.max_job_bytes = box->f->box.cfg.default_job_bytes = 1ull << 30;
	box_inproc_start(box);
	struct rank rk[MAX_WORLD];
	pthread_t th[MAX_WORLD];
	pbox_opts po;
	pbox_opts_init(&po);
	po.mtu = 1500;
	pthread_barrier_init(&b.bar, NULL, (unsigned)b.world);
	for (int k = 0; k < b.world; k++) {
		rk[k] = (struct rank){ .b = &b, .rank = k };
		if (pbox_connect(box->addr, "gpustage", k, b.world, &po, &rk[k].c) < 0 ||
		    pbox_gpu_init(rk[k].c) < 0) {
			fprintf(stderr, "gpu_stage: %s\n", pbox_last_error(rk[k].c));
			return 1;
		}
	}
	/* the ops of the library libpbox loaded: the same file, one device */
	const char *lib = getenv("PBOX_GPU_LIB");
	void *h = dlopen(lib && *lib ? lib : "libpbox-gpu.so.1", RTLD_NOW | RTLD_LOCAL);
	pbox_gpu_ops_fn get = h ? (pbox_gpu_ops_fn)dlsym(h, PBOX_GPU_SYMBOL) : NULL;
	if (!get) {
		fprintf(stderr, "gpu_stage: %s\n", dlerror());
		return 1;
	}
	b.ops = get();
	int fake = !strcmp(b.ops->name, "fake");
	for (int k = 0; k < b.world; k++)
		pthread_create(&th[k], NULL, rank_main, &rk[k]);
	for (int k = 0; k < b.world; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < b.world; k++)
		pbox_close(rk[k].c);
	box_inproc_free(box);

	printf("# gpu_stage: GPU library '%s'%s\n", b.ops->name,
	       fake ? " - FAKE device (host memory, CPU copies on threads): NOT GPU figures" : "");
	printf("# world %d, %u box lcore(s) on 127.0.0.1, device %s, wire %s, chunk %zu, "
	       "%d calls x %d reps, medians\n", b.world, lcores, dtype_name(b.dt),
	       dtype_name(b.wire), b.chunk ? b.chunk : (size_t)1 << 20, b.iters, b.reps);
	printf("%10s %9s %9s %9s %9s %8s %8s %7s | %7s %7s %7s %7s%s\n", "bytes", "d2h us",
	       "h2d us", "net us", "dev us", "submit", "over us", "hidden", "d2hGB/s", "h2dGB/s",
	       "netGB/s", "devGB/s", fake ? "  (fake)" : "");
	for (int s = 0; s < b.nsizes; s++) {
		double m[NT];
		for (int k = 0; k < NT; k++)
			m[k] = median(b.us[s][k], b.reps);
		double wire_bytes = (double)b.bytes[s] / esize(b.dt) * esize(b.wire);
		double copies = m[T_D2H] + m[T_H2D];
		double hidden = copies > 0 ? (m[T_D2H] + m[T_NET] + m[T_H2D] - m[T_DEV]) / copies : 0;
		printf("%10zu %9.1f %9.1f %9.1f %9.1f %8.1f %8.1f %7.2f | %7.3f %7.3f %7.3f %7.3f%s\n",
		       b.bytes[s], m[T_D2H], m[T_H2D], m[T_NET], m[T_DEV], m[T_SUBMIT],
		       m[T_DEV] - m[T_NET], hidden, b.bytes[s] / m[T_D2H] / 1e3,
		       b.bytes[s] / m[T_H2D] / 1e3, wire_bytes / m[T_NET] / 1e3,
		       b.bytes[s] / m[T_DEV] / 1e3, fake ? "  (fake)" : "");
	}
	return 0;
}
