/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_gpu.c - a GPU library for tests on machines without a GPU: the ABI
 * of common/gpu_ops.h implemented on host memory (tests/unit/fake_gpu.h
 * says what it models and what it exports beyond the ABI). Built as
 * build/tests/libpbox-gpu-fake.so; libpbox loads it like the real one
 * when PBOX_GPU_LIB names it.
 *
 * Streams are worker threads, each with a FIFO of operations; an event
 * has a generation per record, and a stream's wait on it holds the
 * stream until the generation captured at the wait is done (CUDA's
 * cudaStreamWaitEvent captures the event's last record the same way).
 * NULL is the legacy default stream, made on first use. Copies cast and
 * scale with fake_cast, the one conversion routine here.
 *
 * Devices: each thread has a current device (fake_gpu_set_device, the
 * tests' cudaSetDevice); streams, events and device memory belong to the
 * device current where they were made. As with CUDA, an event records
 * only on a stream of its device, and a kernel (a cast or scaled copy,
 * topk_ef, dev_zero) launches only into a stream of the current device
 * and reaches only its device's memory; the library makes the stream's
 * device current for each call that enqueues on it (gpu/lib.c's
 * gpu_enter), which fake_gpu_set_switch(0) turns off to show what a
 * library without it does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/cast.h"
#include "common/gpu_ops.h"
#include "common/topk.h"
#include "tests/unit/fake_gpu.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- conversions ----------------------------------------------------- */

/* The GPU library's fused copies, as its CPU reference computes them
 * (common/cast.h: the same per-element code as the kernels). */
static void fake_cast(void *dst, enum gpu_dtype ddt, const void *src, enum gpu_dtype sdt,
		      size_t n, float scale)
{
	cast_copy(dst, ddt, src, sdt, n, scale);
}

/* ---- errors ---------------------------------------------------------- */

static __thread char last_err[256];

static int fail(int rc, const char *what)
{
	snprintf(last_err, sizeof(last_err), "fake GPU: %s", what);
	return rc;
}

static int failf(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int failf(int rc, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fail(rc, what);
}

static const char *fake_last_error(void)
{
	return last_err;
}

/* ---- devices ------------------------------------------------------------ */

/* The thread's current device; -1: none yet (a new thread). CUDA's first
 * call on such a thread binds device 0, unless the library made a
 * stream's device current for it (then it keeps that one). */
static __thread int cur_dev = -1;
static int dev_switch = 1;   /* the library's gpu_enter (fake_gpu_set_switch) */

/* The device a call without a stream works on (binding device 0). */
static int thread_dev(void)
{
	if (cur_dev < 0)
		cur_dev = 0;
	return cur_dev;
}

/* gpu_enter for a call enqueueing on a stream of device sd: the thread
 * works on sd for the call; one with no device keeps it. Without the
 * switch, the thread's own device. */
static int enter_dev(int sd)
{
	if (!__atomic_load_n(&dev_switch, __ATOMIC_RELAXED))
		return thread_dev();
	if (cur_dev < 0)
		cur_dev = sd;
	return sd;
}

/* ---- device memory: a registry of dev_alloc's blocks ------------------ */

struct block { uintptr_t lo, hi; int dev; };

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct block *blocks;
static size_t nblocks, capblocks;
static unsigned long host_allocs, host_frees;

/* The device of the block holding p, or -1 if p is not device memory. */
static int dev_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	int dev = -1;

	pthread_mutex_lock(&mem_mu);
	for (size_t i = 0; i < nblocks && dev < 0; i++)
		if (a >= blocks[i].lo && a < blocks[i].hi)
			dev = blocks[i].dev;
	pthread_mutex_unlock(&mem_mu);
	return dev;
}

static int fake_is_device(const void *p)
{
	return dev_of(p) >= 0;
}

/* is_device as the table has it: fake_gpu_fail_is_device makes it fail
 * as a CUDA error would (cudaPointerGetAttributes). */
static int is_device_err;

static int fake_is_device_op(const void *p)
{
	int err = __atomic_load_n(&is_device_err, __ATOMIC_RELAXED);

	if (err < 0)
		return fail(err, "is_device: cudaPointerGetAttributes failed "
			    "(fake_gpu_fail_is_device)");
	return fake_is_device(p);
}

static int fake_dev_alloc(void **p, size_t bytes)
{
	/* page aligned, as cudaMalloc's allocations are (dmabuf_export) */
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = bytes ? bytes : 1;
	void *m = aligned_alloc(pg, (len + pg - 1) / pg * pg);

	if (!m)
		return fail(-ENOMEM, "dev_alloc: out of memory");
	memset(m, 0, len);
	pthread_mutex_lock(&mem_mu);
	if (nblocks == capblocks) {
		size_t ncap = capblocks ? capblocks * 2 : 64;
		struct block *nb = realloc(blocks, ncap * sizeof(*nb));
		if (!nb) {
			pthread_mutex_unlock(&mem_mu);
			free(m);
			return fail(-ENOMEM, "dev_alloc: out of memory");
		}
		blocks = nb;
		capblocks = ncap;
	}
	blocks[nblocks++] = (struct block){ (uintptr_t)m, (uintptr_t)m + len, thread_dev() };
	pthread_mutex_unlock(&mem_mu);
	*p = m;
	return 0;
}

static void fake_dev_free(void *p)
{
	pthread_mutex_lock(&mem_mu);
	for (size_t i = 0; i < nblocks; i++)
		if (blocks[i].lo == (uintptr_t)p) {
			blocks[i] = blocks[--nblocks];
			break;
		}
	if (nblocks == 0) {
		free(blocks);
		blocks = NULL;
		capblocks = 0;
	}
	pthread_mutex_unlock(&mem_mu);
	free(p);
}

static int fake_host_alloc(void **p, size_t bytes)
{
	*p = malloc(bytes ? bytes : 1);
	if (!*p)
		return fail(-ENOMEM, "host_alloc: out of memory");
	__atomic_fetch_add(&host_allocs, 1, __ATOMIC_RELAXED);
	return 0;
}

static void fake_host_free(void *p)
{
	if (p)
		__atomic_fetch_add(&host_frees, 1, __ATOMIC_RELAXED);
	free(p);
}

static int fake_memcpy_sync(void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
	return 0;
}

/* ---- events ----------------------------------------------------------- */

/* Under ev_mu. As with CUDA, an event may be destroyed while work that
 * records or waits for it is pending: it is freed when that work ran. */
struct fake_event {
	int dev;                 /* the device current where it was made */
	uint64_t recorded;       /* generation of the last record (0: never) */
	uint64_t done;           /* the highest generation reached */
	unsigned refs;           /* pending records and waits */
	bool dead;               /* destroyed: free at refs 0 */
};

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;

static int fake_event_create(void **e)
{
	struct fake_event *ev = calloc(1, sizeof(*ev));

	*e = ev;
	if (!ev)
		return fail(-ENOMEM, "event_create: out of memory");
	ev->dev = thread_dev();
	return 0;
}

static void fake_event_destroy(void *e)
{
	struct fake_event *ev = e;

	if (!ev)
		return;
	pthread_mutex_lock(&ev_mu);
	ev->dead = true;
	bool now = ev->refs == 0;
	pthread_mutex_unlock(&ev_mu);
	if (now)
		free(ev);
}

/* A record or wait of ev ran (under ev_mu); true if ev is to be freed. */
static bool event_unref(struct fake_event *ev)
{
	return --ev->refs == 0 && ev->dead;
}

static int fake_event_query(void *e)
{
	struct fake_event *ev = e;
	pthread_mutex_lock(&ev_mu);
	int rc = ev->done >= ev->recorded ? 0 : -EAGAIN;
	pthread_mutex_unlock(&ev_mu);
	return rc;
}

static int fake_event_sync(void *e)
{
	struct fake_event *ev = e;
	pthread_mutex_lock(&ev_mu);
	uint64_t want = ev->recorded;
	while (ev->done < want)
		pthread_cond_wait(&ev_cv, &ev_mu);
	pthread_mutex_unlock(&ev_mu);
	return 0;
}

/* ---- streams ---------------------------------------------------------- */

enum op_kind { OP_D2H, OP_H2D, OP_RECORD, OP_WAIT, OP_FN, OP_TOPK, OP_ZERO };

struct op {
	struct op *next;
	enum op_kind kind;
	void *dst;
	const void *src;
	enum gpu_dtype ddt, sdt;
	size_t count;
	float scale;
	struct fake_event *ev;
	uint64_t gen;
	void (*fn)(void *);
	void *arg;
	size_t k;                /* topk */
	uint32_t *idx;
	float *val;
	size_t *m_out;
	uint64_t enq;
};

struct fake_stream {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct op *head, *tail;
	bool stop;
	unsigned id;
	int dev;                 /* the device current where it was made */
	uint64_t rng;
};

static unsigned max_delay_us = 50;
static uint64_t seed = 1;
static unsigned nstreams;    /* (under ev_mu) */
static uint64_t order;       /* the trace's counter (atomic) */

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_gpu_op *trace;
static size_t ntrace;

static void trace_add(const struct op *o, unsigned stream, uint64_t start, uint64_t end)
{
	pthread_mutex_lock(&trace_mu);
	if (!trace)
		trace = calloc(FAKE_GPU_TRACE_MAX, sizeof(*trace));
	if (trace && ntrace < FAKE_GPU_TRACE_MAX)
		trace[ntrace++] = (struct fake_gpu_op){
			.kind = o->kind == OP_D2H ? FAKE_D2H : FAKE_H2D, .stream = stream,
			.dev = o->kind == OP_D2H ? o->src : o->dst, .count = o->count,
			.enq = o->enq, .start = start, .end = end };
	pthread_mutex_unlock(&trace_mu);
}

static uint64_t next_order(void)
{
	return __atomic_add_fetch(&order, 1, __ATOMIC_SEQ_CST);
}

static void run_op(struct fake_stream *s, struct op *o)
{
	uint64_t start;

	switch (o->kind) {
	case OP_D2H:
	case OP_H2D:
		start = next_order();
		fake_cast(o->dst, o->ddt, o->src, o->sdt, o->count, o->scale);
		trace_add(o, s->id, start, next_order());
		break;
	case OP_RECORD:
	case OP_WAIT:
		pthread_mutex_lock(&ev_mu);
		if (o->kind == OP_RECORD && o->gen > o->ev->done)
			o->ev->done = o->gen;
		while (o->kind == OP_WAIT && o->ev->done < o->gen)
			pthread_cond_wait(&ev_cv, &ev_mu);
		pthread_cond_broadcast(&ev_cv);
		bool gone = event_unref(o->ev);
		pthread_mutex_unlock(&ev_mu);
		if (gone)
			free(o->ev);
		break;
	case OP_FN:
		o->fn(o->arg);
		break;
	case OP_TOPK:
		*o->m_out = topk_select_ef(NULL, o->dst, o->src, o->count, o->k, o->idx, o->val);
		break;
	case OP_ZERO:
		memset(o->dst, 0, o->count);
		break;
	}
}

static void *stream_main(void *arg)
{
	struct fake_stream *s = arg;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		struct op *o = s->head;
		if (!o) {
			pthread_mutex_unlock(&s->mu);
			return NULL;
		}
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->mu);
		unsigned d = __atomic_load_n(&max_delay_us, __ATOMIC_RELAXED);
		if (d) {   /* xorshift64: reproducible per stream */
			s->rng ^= s->rng << 13;
			s->rng ^= s->rng >> 7;
			s->rng ^= s->rng << 17;
			usleep((useconds_t)(s->rng % (d + 1)));
		}
		run_op(s, o);
		free(o);
	}
}

static int stream_new(struct fake_stream **out)
{
	struct fake_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return fail(-ENOMEM, "stream_create: out of memory");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_lock(&ev_mu);
	s->id = ++nstreams;
	pthread_mutex_unlock(&ev_mu);
	s->rng = (seed + s->id) * 0x9E3779B97F4A7C15ull | 1;
	s->dev = thread_dev();
	if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
		free(s);
		return fail(-EAGAIN, "stream_create: cannot start a thread");
	}
	*out = s;
	return 0;
}

static int fake_stream_create(void **s)
{
	return stream_new((struct fake_stream **)s);
}

/* Waits for the work enqueued so far, then frees the stream. */
static void fake_stream_destroy(void *p)
{
	struct fake_stream *s = p;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static pthread_mutex_t legacy_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_stream *legacy;   /* stream 0, made on first use, never freed */

static struct fake_stream *stream_of(void *p)
{
	if (p)
		return p;
	pthread_mutex_lock(&legacy_mu);
	if (!legacy && stream_new(&legacy) < 0)
		legacy = NULL;
	struct fake_stream *s = legacy;
	pthread_mutex_unlock(&legacy_mu);
	return s;
}

/* The device of a stream: its own; the legacy stream is the current
 * device's. */
static int stream_dev(void *p)
{
	return p ? ((struct fake_stream *)p)->dev : thread_dev();
}

/* A kernel of a call enqueued on stream, touching device memory dev
 * (NULL: none): CUDA launches it only into a stream of the current
 * device (the call's, with the library's switch), and it reaches only
 * that device's memory (no peer access here). 0 or -EINVAL. */
static int kernel_check(void *stream, const void *dev, const char *what)
{
	int sd = stream_dev(stream), on = enter_dev(sd), md = dev ? dev_of(dev) : sd;

	if (on != sd)
		return failf(-EINVAL, "%s: a kernel launched into a stream of device %d from "
			     "device %d (cudaErrorInvalidResourceHandle)", what, sd, on);
	if (md != sd)
		return failf(-EINVAL, "%s: a kernel on device %d reached memory of device %d",
			     what, sd, md);
	return 0;
}

static int enqueue(void *stream, struct op *tmpl)
{
	struct fake_stream *s = stream_of(stream);
	struct op *o = malloc(sizeof(*o));

	if (!s || !o) {
		free(o);
		return fail(-ENOMEM, "enqueue: out of memory");
	}
	*o = *tmpl;
	o->next = NULL;
	o->enq = next_order();
	pthread_mutex_lock(&s->mu);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* An enqueue of a record (gen) or wait (gen 0) of ev failed: as if it ran. */
static void event_done_unref(struct fake_event *ev, uint64_t gen)
{
	pthread_mutex_lock(&ev_mu);
	if (gen > ev->done)
		ev->done = gen;
	pthread_cond_broadcast(&ev_cv);
	bool gone = event_unref(ev);
	pthread_mutex_unlock(&ev_mu);
	if (gone)
		free(ev);
}

static int fake_event_record(void *e, void *stream)
{
	struct fake_event *ev = e;
	struct op o = { .kind = OP_RECORD, .ev = ev };
	int sd = stream_dev(stream);

	enter_dev(sd);
	if (ev->dev != sd)   /* CUDA's rule */
		return failf(-EINVAL, "event_record: an event of device %d on a stream of device "
			     "%d (cudaErrorInvalidResourceHandle)", ev->dev, sd);

	pthread_mutex_lock(&ev_mu);
	o.gen = ++ev->recorded;
	ev->refs++;
	pthread_mutex_unlock(&ev_mu);
	int rc = enqueue(stream, &o);
	if (rc < 0)
		event_done_unref(ev, o.gen);
	return rc;
}

static int fake_stream_wait_event(void *stream, void *e)
{
	struct fake_event *ev = e;
	struct op o = { .kind = OP_WAIT, .ev = ev };

	enter_dev(stream_dev(stream));

	pthread_mutex_lock(&ev_mu);
	o.gen = ev->recorded;    /* the last record, as at this call */
	ev->refs++;
	pthread_mutex_unlock(&ev_mu);
	int rc = enqueue(stream, &o);
	if (rc < 0)
		event_done_unref(ev, 0);
	return rc;
}

/* fake_gpu_fail_h2d / _d2h: which call of a copy fails (0: none), and
 * the calls since it was set */
struct fault {
	unsigned long at, calls;
};
static struct fault h2d_fault, d2h_fault;

static bool fault_now(struct fault *f)
{
	unsigned long at = __atomic_load_n(&f->at, __ATOMIC_RELAXED);

	return at && __atomic_add_fetch(&f->calls, 1, __ATOMIC_RELAXED) == at;
}

static void fault_set(struct fault *f, unsigned long nth)
{
	__atomic_store_n(&f->at, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&f->calls, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&f->at, nth, __ATOMIC_RELAXED);
}

static int fake_copy_d2h(void *host, enum gpu_dtype host_dt, const void *dev,
			 enum gpu_dtype dev_dt, size_t count, void *stream)
{
	if (!fake_is_device(dev))
		return fail(-EINVAL, "copy_d2h: the source is not device memory");
	int rc = host_dt != dev_dt ? kernel_check(stream, dev, "copy_d2h")
				   : (enter_dev(stream_dev(stream)), 0);
	if (rc < 0)
		return rc;
	if (fault_now(&d2h_fault))
		return fail(-EIO, "copy_d2h: the device faulted (fake_gpu_fail_d2h)");
	struct op o = { .kind = OP_D2H, .dst = host, .ddt = host_dt, .src = dev, .sdt = dev_dt,
			.count = count, .scale = 1.0f };
	return enqueue(stream, &o);
}


static int fake_copy_h2d(void *dev, enum gpu_dtype dev_dt, const void *host,
			 enum gpu_dtype host_dt, size_t count, float scale, void *stream)
{
	if (!fake_is_device(dev))
		return fail(-EINVAL, "copy_h2d: the destination is not device memory");
	int rc = host_dt != dev_dt || scale != 1.0f ? kernel_check(stream, dev, "copy_h2d")
						    : (enter_dev(stream_dev(stream)), 0);
	if (rc < 0)
		return rc;
	if (fault_now(&h2d_fault))
		return fail(-EIO, "copy_h2d: the device faulted (fake_gpu_fail_h2d)");
	struct op o = { .kind = OP_H2D, .dst = dev, .ddt = dev_dt, .src = host, .sdt = host_dt,
			.count = count, .scale = scale };
	return enqueue(stream, &o);
}

static int fake_topk_ef(float *e, const float *g, size_t n, size_t k, uint32_t *idx,
			float *val, size_t *m_out, void *stream)
{
	struct op o = { .kind = OP_TOPK, .dst = e, .src = g, .count = n, .k = k, .idx = idx,
			.val = val, .m_out = m_out };
	int rc = kernel_check(stream, n ? e : NULL, "topk_ef");

	if (rc == 0 && g && n)
		rc = kernel_check(stream, g, "topk_ef");
	return rc < 0 ? rc : enqueue(stream, &o);
}

static int fake_dev_zero(void *p, size_t bytes, void *stream)
{
	if (!fake_is_device(p) || (bytes && !fake_is_device((const uint8_t *)p + bytes - 1)))
		return fail(-EINVAL, "dev_zero: not device memory");
	struct op o = { .kind = OP_ZERO, .dst = p, .count = bytes };
	int rc = kernel_check(stream, p, "dev_zero");

	return rc < 0 ? rc : enqueue(stream, &o);
}

/* ---- GPUDirect: dma-bufs ------------------------------------------------ */

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

static unsigned long dmabuf_exports;

/* A memfd stands for the dma-buf (the verbs fake maps nothing: the fake
 * NIC reads the device memory by address). PBOX_FAKE_GPU_DMABUF=0 makes
 * the device one without dma-buf export, as under the proprietary driver. */
static int fake_dmabuf_export(const void *p, size_t len, int *fd, void **base, size_t *size)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, lo = 0, hi = 0;

	if (!env_int("PBOX_FAKE_GPU_DMABUF", 1))
		return fail(-EOPNOTSUPP, "dma-buf: no export on this device (PBOX_FAKE_GPU_DMABUF=0)");
	pthread_mutex_lock(&mem_mu);
	for (size_t i = 0; i < nblocks; i++)
		if (a >= blocks[i].lo && a < blocks[i].hi) {
			lo = blocks[i].lo;
			hi = (blocks[i].hi + pg - 1) & ~(pg - 1);
		}
	pthread_mutex_unlock(&mem_mu);
	if (!lo || len == 0 || a + len > hi)
		return fail(-EINVAL, "dma-buf: the range is not inside one device allocation");
	int f = memfd_create("fake-dmabuf", MFD_CLOEXEC);
	if (f < 0)
		return fail(-errno, "dma-buf: memfd_create failed");
	__atomic_fetch_add(&dmabuf_exports, 1, __ATOMIC_RELAXED);
	*fd = f;
	*base = (void *)(a & ~(pg - 1));
	*size = ((a + len + pg - 1) & ~(pg - 1)) - (a & ~(pg - 1));
	return 0;
}

/* ---- the table and the knobs ------------------------------------------ */

static int fake_init(void)
{
	int rc = env_int("PBOX_FAKE_GPU_INIT", 0);

	if (rc < 0)
		return fail(rc, rc == -ENODEV ? "no device (PBOX_FAKE_GPU_INIT)"
					      : "init fails (PBOX_FAKE_GPU_INIT)");
	max_delay_us = (unsigned)env_int("PBOX_FAKE_GPU_DELAY_US", 50);
	seed = (uint64_t)env_int("PBOX_FAKE_GPU_SEED", 1);
	return 0;
}

static struct pbox_gpu_ops ops = {
	.abi = PBOX_GPU_ABI,
	.name = "fake",
	.init = fake_init,
	.last_error = fake_last_error,
	.is_device = fake_is_device_op,
	.dev_alloc = fake_dev_alloc,
	.dev_free = fake_dev_free,
	.host_alloc = fake_host_alloc,
	.host_free = fake_host_free,
	.memcpy_sync = fake_memcpy_sync,
	.stream_create = fake_stream_create,
	.stream_destroy = fake_stream_destroy,
	.event_create = fake_event_create,
	.event_destroy = fake_event_destroy,
	.event_record = fake_event_record,
	.event_query = fake_event_query,
	.event_sync = fake_event_sync,
	.stream_wait_event = fake_stream_wait_event,
	.copy_d2h = fake_copy_d2h,
	.copy_h2d = fake_copy_h2d,
	.topk_ef = fake_topk_ef,
	.dmabuf_export = fake_dmabuf_export,
	.dev_zero = fake_dev_zero,
};

EXPORT const struct pbox_gpu_ops *pbox_gpu_ops_v2(void)
{
	ops.abi = (uint32_t)env_int("PBOX_FAKE_GPU_ABI", PBOX_GPU_ABI);
	return &ops;
}

EXPORT unsigned long fake_gpu_host_allocs(void)
{
	return __atomic_load_n(&host_allocs, __ATOMIC_RELAXED);
}

EXPORT unsigned long fake_gpu_host_live(void)
{
	return __atomic_load_n(&host_allocs, __ATOMIC_RELAXED) -
	       __atomic_load_n(&host_frees, __ATOMIC_RELAXED);
}

EXPORT unsigned long fake_gpu_dmabuf_exports(void)
{
	return __atomic_load_n(&dmabuf_exports, __ATOMIC_RELAXED);
}

EXPORT int fake_gpu_launch(void *stream, void (*fn)(void *), void *arg)
{
	struct op o = { .kind = OP_FN, .fn = fn, .arg = arg };
	return enqueue(stream, &o);
}

EXPORT size_t fake_gpu_trace(struct fake_gpu_op *out, size_t max)
{
	pthread_mutex_lock(&trace_mu);
	size_t n = ntrace < max ? ntrace : max;
	if (n)
		memcpy(out, trace, n * sizeof(*out));
	n = ntrace;
	pthread_mutex_unlock(&trace_mu);
	return n;
}

EXPORT void fake_gpu_trace_reset(void)
{
	pthread_mutex_lock(&trace_mu);
	ntrace = 0;
	pthread_mutex_unlock(&trace_mu);
}

EXPORT void fake_gpu_set_delay(unsigned max_us)
{
	__atomic_store_n(&max_delay_us, max_us, __ATOMIC_RELAXED);
}

EXPORT void fake_gpu_fail_h2d(unsigned long nth)
{
	fault_set(&h2d_fault, nth);
}

EXPORT void fake_gpu_fail_d2h(unsigned long nth)
{
	fault_set(&d2h_fault, nth);
}

EXPORT void fake_gpu_fail_is_device(int err)
{
	__atomic_store_n(&is_device_err, err, __ATOMIC_RELAXED);
}

EXPORT void fake_gpu_set_device(int dev)
{
	cur_dev = dev;
}

EXPORT int fake_gpu_device(void)
{
	return cur_dev < 0 ? 0 : cur_dev;
}

EXPORT void fake_gpu_set_switch(int on)
{
	__atomic_store_n(&dev_switch, on, __ATOMIC_RELAXED);
}

/* The trace buffer goes when the library is unloaded (LeakSanitizer). */
__attribute__((destructor)) static void fake_gpu_fini(void)
{
	free(trace);
	trace = NULL;
}
