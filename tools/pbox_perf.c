/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pbox_perf.c - pbox-perf, an allreduce benchmark and checker in the style
 * of nccl-tests' all_reduce_perf. Every rank of a job runs it; rank 0 prints
 * one line per size: bytes, count, dtype, time per call, algbw, busbw and
 * the number of wrong elements. With --check every rank fills its buffer
 * with small integers (depending on rank, index and iteration) whose sum is
 * exact in every dtype and verifies every element after every iteration.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "include/pbox.h"
#include "tools/perf_blast.h"
#include "tools/perf_args.h"
#include "tools/perf_sparse.h"
#include "common/wire.h"

/* Most keys a size may be split over (--keys): the requests of one call
 * are in flight at once. */
#define PERF_MAX_KEYS 65536

struct perf_args {
	const char *control, *job;
	int rank, world;
	size_t minbytes, maxbytes;
	double stepfactor;
	int iters, warmup, keys, check;
	pbox_dtype dtype;
	pbox_opts opts;
	const char *blast;          /* --blast ADDR:PORT: raw UDP instead of allreduce */
	double blast_seconds;
	size_t blast_bytes;
	int blast_gso;
	struct perf_sparse sp;      /* --sparse D / --topk D */
	int local;                  /* --local L: host-local aggregation, 0 unset */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pbox-perf --control HOST:PORT --job NAME --rank R --world N [options]\n"
		"  --control H:P       box control address (default $PBOX_CONTROL)\n"
		"  --job NAME          job to join (all ranks use the same)\n"
		"  --rank R --world N  this worker's rank and the number of workers\n"
		"  --minbytes B        smallest size (default 4; K, M, G suffixes)\n"
		"  --maxbytes B        largest size (default 64M)\n"
		"  --stepfactor F      size multiplier between lines (default 2)\n"
		"  --iters I           timed calls per size (default 20)\n"
		"  --warmup W          untimed calls per size first (default 2)\n"
		"  --dtype T           f32, f16 or bf16 (default f32)\n"
		"  --keys K            split each size over K keys reduced at once with\n"
		"                      pbox_iallreduce (default 1, at most 65536)\n"
		"  --check             fill exact-sum data and verify every element\n"
		"  --window W --rto-ms MS --timeout-ms MS --mtu M   pbox_opts (0 = default)\n"
		"  --udp-offload       send with UDP GSO, receive with GRO (pbox_opts.udp_offload)\n"
		"  --transport T       auto, udp, xdp or verbs (pbox_opts.transport; default\n"
		"                      $PBOX_TRANSPORT, else auto)\n"
		"  --busy-poll         xdp: busy-poll the socket (pbox_opts.busy_poll)\n"
		"  --sparse D          pbox_allreduce_sparse with about a fraction D of the\n"
		"                      elements per rank (f32, --keys 1)\n"
		"  --topk D            pbox_allreduce_topk at density D with error feedback\n"
		"                      (f32, --keys 1); --check replays every rank's selection\n"
		"  --topk-local L      hierarchical top-k: hosts of L consecutive ranks sum\n"
		"                      through shared memory, their first rank selects and sends\n"
		"  --local L           host-local aggregation: hosts of L consecutive ranks sum\n"
		"                      each call through shared memory, one contribution per\n"
		"                      host to the box (pbox_opts.local_world; 1 = off; default\n"
		"                      LOCAL_WORLD_SIZE and LOCAL_RANK if set)\n"
		"\n"
		"usage: pbox-perf --blast ADDR:PORT [--blast-seconds S] [--blast-bytes B] [--blast-gso]\n"
		"  raw UDP datagrams of pbox's size (default 1448 B: header + one segment at\n"
		"  MTU 1500) sent as fast as the kernel takes them, batched like libpbox:\n"
		"  the wire limit of one client on this path (default 3 s; --blast-gso\n"
		"  sends 32 datagrams per UDP_SEGMENT message)\n"
		"\n"
		"time is the mean per call (all keys of a size); algbw = bytes / time;\n"
		"busbw = algbw * 2*(n-1)/n, nccl's allreduce factor, so the numbers compare\n"
		"with ring allreduce. Each size's keys are declared on first use: the box\n"
		"keeps every size's keys, about twice maxbytes in total.\n");
}

/* parse_int/parse_size for parse_args: NULL, or what the option takes. */
static const char *int_arg(const char *s, int *out)
{
	return parse_int(s, out) < 0 ? "an integer in [0, 2^30]" : NULL;
}

static const char *size_arg(const char *s, size_t *out)
{
	return parse_size(s, out) < 0 ? "a size in bytes (K, M, G suffixes) below 2^64" : NULL;
}

/* Options into a; -1 (after a message naming what is wrong) on bad ones. */
static int parse_args(int argc, char **argv, struct perf_args *a)
{
	static const struct option lo[] = {
		{ "control", 1, 0, 'c' }, { "job", 1, 0, 'j' }, { "rank", 1, 0, 'r' },
		{ "world", 1, 0, 'n' }, { "minbytes", 1, 0, 'b' }, { "maxbytes", 1, 0, 'e' },
		{ "stepfactor", 1, 0, 'f' }, { "iters", 1, 0, 'i' }, { "warmup", 1, 0, 'w' },
		{ "dtype", 1, 0, 'd' }, { "keys", 1, 0, 'k' }, { "check", 0, 0, 'C' },
		{ "window", 1, 0, 'W' }, { "rto-ms", 1, 0, 'R' }, { "timeout-ms", 1, 0, 'T' },
		{ "mtu", 1, 0, 'M' }, { "help", 0, 0, 'h' }, { "blast", 1, 0, 'B' },
		{ "udp-offload", 0, 0, 'O' }, { "blast-seconds", 1, 0, 'S' }, { "blast-bytes", 1, 0, 'Z' }, { "blast-gso", 0, 0, 'G' },
		{ "transport", 1, 0, 'X' }, { "busy-poll", 0, 0, 'P' },
		{ "sparse", 1, 0, 'Y' }, { "topk", 1, 0, 'K' }, { "topk-local", 1, 0, 'L' },
		{ "local", 1, 0, 'H' },
		{ 0, 0, 0, 0 },
	};
	int o, v, li = 0, bad = 0;

	*a = (struct perf_args){ .rank = -1, .world = -1, .minbytes = 4, .maxbytes = 64 << 20,
				 .stepfactor = 2, .iters = 20, .warmup = 2, .keys = 1,
				 .blast_seconds = 3, .blast_bytes = 1448 };
	pbox_opts_init(&a->opts); /* sets its size; --window 0 etc. keep "default" */
	while ((o = getopt_long(argc, argv, "", lo, &li)) != -1) {
		const char *want = NULL;   /* what the option takes, if refused */

		v = 0;
		switch (o) {
		case 'c': a->control = optarg; break;
		case 'j': a->job = optarg; break;
		case 'r': want = int_arg(optarg, &a->rank); break;
		case 'n': want = int_arg(optarg, &a->world); break;
		case 'b': want = size_arg(optarg, &a->minbytes); break;
		case 'e': want = size_arg(optarg, &a->maxbytes); break;
		case 'f':
			if (parse_real(optarg, 1, INFINITY, &a->stepfactor) < 0)
				want = "a finite number above 1";
			break;
		case 'i': want = int_arg(optarg, &a->iters); break;
		case 'w': want = int_arg(optarg, &a->warmup); break;
		case 'k':
			if (parse_int(optarg, &a->keys) < 0 || a->keys < 1 || a->keys > PERF_MAX_KEYS)
				want = "an integer in [1, 65536]";
			break;
		case 'C': a->check = 1; break;
		case 'B': a->blast = optarg; break;
		case 'S':
			if (parse_real(optarg, 0, 86400, &a->blast_seconds) < 0)
				want = "a number of seconds in (0, 86400]";
			break;
		case 'Z': want = size_arg(optarg, &a->blast_bytes); break;
		case 'G': a->blast_gso = 1; break;
		case 'O': a->opts.udp_offload = 1; break;
		case 'P': a->opts.busy_poll = 1; break;
		case 'Y':
		case 'K':
			a->sp.mode = o == 'Y' ? PERF_SPARSE : PERF_TOPK;
			if (parse_real(optarg, 0, 1, &a->sp.density) < 0)
				want = "a density in (0, 1]";
			break;
		case 'L': want = int_arg(optarg, &a->sp.local); break;
		case 'H':
			if (parse_int(optarg, &a->local) < 0 || a->local < 1 || a->local > 64)
				want = "ranks per host in [1, 64]";
			break;
		case 'X':
			v = !strcmp(optarg, "auto") ? PBOX_TRANSPORT_AUTO
			  : !strcmp(optarg, "udp") ? PBOX_TRANSPORT_UDP
			  : !strcmp(optarg, "xdp") ? PBOX_TRANSPORT_XDP
			  : !strcmp(optarg, "verbs") ? PBOX_TRANSPORT_VERBS : -1;
			if (v < 0)
				want = "auto, udp, xdp or verbs";
			a->opts.transport = (uint32_t)(v < 0 ? 0 : v);
			break;
		case 'W': want = int_arg(optarg, &v); a->opts.window = (uint32_t)v; break;
		case 'R': want = int_arg(optarg, &v); a->opts.rto_ms = (uint32_t)v; break;
		case 'T': want = int_arg(optarg, &v); a->opts.timeout_ms = (uint32_t)v; break;
		case 'M': want = int_arg(optarg, &v); a->opts.mtu = (uint32_t)v; break;
		case 'd':
			a->dtype = !strcmp(optarg, "f32") ? PBOX_F32 : !strcmp(optarg, "f16") ? PBOX_F16
				 : !strcmp(optarg, "bf16") ? PBOX_BF16 : (pbox_dtype)-1;
			if ((int)a->dtype < 0)
				want = "f32, f16 or bf16";
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
		if (want) {
			fprintf(stderr, "pbox-perf: --%s '%s': want %s\n", lo[li].name, optarg, want);
			bad = -1;
		}
	}
	if (a->blast && !bad && optind == argc)
		return 0;
	if (a->local) {   /* (1: off, whatever LOCAL_WORLD_SIZE says) */
		a->opts.local_world = (uint32_t)a->local;
		a->opts.local_rank = a->rank >= 0 ? (uint32_t)(a->rank % a->local) : 0;
	}
	if (bad || optind != argc || !a->job || a->world < 1 || a->rank < 0 ||
	    a->rank >= a->world || a->keys < 1 || a->iters < 1 || a->stepfactor <= 1 ||
	    a->minbytes < 1 || a->maxbytes < a->minbytes ||
	    (a->sp.mode && (a->keys != 1 || a->dtype != PBOX_F32)) ||
	    (a->sp.local > 1 && (a->sp.mode != PERF_TOPK || a->world % a->sp.local)) ||
	    (a->local > 1 && a->world % a->local)) {
		fprintf(stderr, "pbox-perf: bad or missing arguments (need --job, --rank, "
			"--world; --keys in [1, 65536]; --iters >= 1; --stepfactor > 1; minbytes <= maxbytes;\n"
			"--sparse/--topk: a density in (0, 1], f32 and one key; --topk-local L:\n"
			"with --topk, L dividing --world; --local L: L dividing --world)\n");
		usage(stderr);
		return -1;
	}
	return 0;
}

static size_t elem_size(pbox_dtype t)
{
	return t == PBOX_F32 ? 4 : 2;
}

/* Exact encodings of small integers (|v| <= 2048) in the 16-bit types. */
static uint16_t int_to_f16(int v)
{
	uint16_t sign = v < 0 ? 0x8000 : 0;
	unsigned a = (unsigned)abs(v), e = 0;

	if (a == 0)
		return 0;
	while ((a >> e) > 1)
		e++;
	/* a = 1.m * 2^e, 10 fraction bits */
	return (uint16_t)(sign | (e + 15) << 10 | ((a << 10 >> e) & 0x3FF));
}

static uint16_t float_bits_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16); /* exact for small integers */
}

static float f16_to_float(uint16_t h)
{
	int e = (h >> 10) & 0x1F;
	float m = (float)(h & 0x3FF);
	float v = e == 0 ? ldexpf(m, -24) : e == 31 ? (m ? NAN : INFINITY)
					   : ldexpf(1024 + m, e - 25);
	return (h & 0x8000) ? -v : v;
}

static float bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Rank r's value at index i in iteration it: an integer in [-4, 3] from a
 * hash of all three (splitmix64's finalizer), so that a sum delivered to
 * another index or key, a stale one (an earlier iteration's) or one that
 * lost or doubled a rank's part differs from the expected one almost
 * everywhere, whatever the world. Any sum of up to 64 ranks is an integer
 * of magnitude <= 256, exact in f32, f16 and bf16 at every partial sum. */
static int value(int r, size_t i, int it)
{
	uint64_t h = (((uint64_t)(uint32_t)r << 32) | (uint32_t)it) * 0x9E3779B97F4A7C15ull +
		     (uint64_t)i;

	h ^= h >> 30;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 27;
	h *= 0x94D049BB133111EBull;
	h ^= h >> 31;
	return (int)(h >> 61) - 4;
}

/* The sum every rank expects at index i in iteration it. */
static int expected(int world, size_t i, int it)
{
	int sum = 0;

	for (int r = 0; r < world; r++)
		sum += value(r, i, it);
	return sum;
}


static void store(void *buf, pbox_dtype t, size_t i, int v)
{
	if (t == PBOX_F32)
		((float *)buf)[i] = (float)v;
	else if (t == PBOX_F16)
		((uint16_t *)buf)[i] = int_to_f16(v);
	else
		((uint16_t *)buf)[i] = float_bits_to_bf16((float)v);
}

static float load(const void *buf, pbox_dtype t, size_t i)
{
	if (t == PBOX_F32)
		return ((const float *)buf)[i];
	if (t == PBOX_F16)
		return f16_to_float(((const uint16_t *)buf)[i]);
	return bf16_to_float(((const uint16_t *)buf)[i]);
}

static void fill(void *buf, pbox_dtype t, size_t count, int rank, int it)
{
	for (size_t i = 0; i < count; i++)
		store(buf, t, i, value(rank, i, it));
}

/* Number of wrong elements; the first is reported on stderr. */
static size_t verify(const void *buf, pbox_dtype t, size_t count, int world, int it,
		     int rank, size_t bytes)
{
	size_t wrong = 0;

	for (size_t i = 0; i < count; i++) {
		float got = load(buf, t, i);
		int want = expected(world, i, it);
		if (got != (float)want) {
			if (wrong++ == 0)
				fprintf(stderr, "pbox-perf: rank %d size %zu iteration %d: element %zu "
					"expected %d got %g\n", rank, bytes, it, i, want, (double)got);
		}
	}
	return wrong;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One call of a size: all keys started, then all waited; reqs holds nkeys. */
static int run_once(pbox_client *c, uint32_t key0, int nkeys, pbox_req **reqs, char *buf,
		    size_t count, pbox_dtype t)
{
	size_t per = count / (size_t)nkeys, esz = elem_size(t);
	int rc = 0, started = 0;

	for (int k = 0; k < nkeys && rc == 0; k++, started++) {
		size_t n = k == nkeys - 1 ? count - per * (size_t)k : per;
		rc = pbox_iallreduce(c, key0 + (uint32_t)k, buf + per * (size_t)k * esz, n, t,
				     &reqs[k]);
		if (rc < 0)
			break;
	}
	for (int k = 0; k < started; k++) {
		int w = pbox_wait(reqs[k]);
		if (w < 0 && rc == 0)
			rc = w;
	}
	return rc;
}

struct size_result {
	double us;
	size_t wrong;
};

static double tv_s(const struct timeval *t)
{
	return (double)t->tv_sec + (double)t->tv_usec / 1e6;
}

/* CPU seconds (this process) outside the calls: filling the buffer, making
 * the sparse entries and the expected sums, verifying. main's "# cpu" line
 * leaves them out: it is the calls' CPU. */
static double outside_user, outside_sys;

static void outside_add(const struct rusage *r0)
{
	struct rusage r1;

	getrusage(RUSAGE_SELF, &r1);
	outside_user += tv_s(&r1.ru_utime) - tv_s(&r0->ru_utime);
	outside_sys += tv_s(&r1.ru_stime) - tv_s(&r0->ru_stime);
}

/* The key of --topk's barriers between calls (sizes use keys from 0 up). */
#define PERF_BARRIER_KEY 0xFFFFFF00u

static int run_size(pbox_client *c, const struct perf_args *a, uint32_t key0, int nkeys,
		    pbox_req **reqs, char *buf, size_t count, struct size_result *res)
{
	size_t bytes = count * elem_size(a->dtype);
	double total = 0;

	/* --topk without --check: every call selects from this rank's own
	 * gradient (its first fill, restored outside the clock), as a training
	 * step does, not from the last call's sum, which is every rank's alike
	 * (their selections would coincide and the results carry one rank's
	 * entries instead of up to world's); then a barrier, so that no rank's
	 * restore is counted in another's call. */
	float *grad0 = NULL;
	if (a->sp.mode == PERF_TOPK && !a->check && !(grad0 = malloc(bytes))) {
		fprintf(stderr, "pbox-perf: rank %d: no memory for %zu bytes\n", a->rank, bytes);
		return PBOX_ENOMEM;
	}
	res->wrong = 0;
	for (int it = 0; it < a->warmup + a->iters; it++) {
		struct perf_sparse *sp = (struct perf_sparse *)&a->sp;
		struct rusage ru;
		int prep = a->check || it == 0 || sp->mode;
		if (prep)
			getrusage(RUSAGE_SELF, &ru);
		if (sp->mode == PERF_TOPK && (a->check || it == 0))
			perf_sparse_fill(sp, (float *)buf, count, it);
		else if (sp->mode != PERF_TOPK && (a->check || it == 0))
			fill(buf, a->dtype, count, a->rank, it);
		if (grad0 && it == 0)
			memcpy(grad0, buf, bytes);
		else if (grad0)
			memcpy(buf, grad0, bytes);
		/* the entries and the expected sum are made before the clock starts */
		int rc = sp->mode ? perf_sparse_prepare(sp, key0, count, it) : 0;
		if (prep)
			outside_add(&ru);
		if (rc == 0 && grad0)
			rc = pbox_barrier(c, PERF_BARRIER_KEY);
		if (it == a->warmup) { /* --topk's split: the timed calls of the last size */
			sp->select_us = sp->call_us = 0;
			sp->calls = 0;
		}
		double t0 = now_us();
		if (rc == 0)
			rc = sp->mode ? perf_sparse_call(c, sp, key0, (float *)buf, count)
				      : run_once(c, key0, nkeys, reqs, buf, count, a->dtype);
		double t1 = now_us();
		if (rc < 0) {
			fprintf(stderr, "pbox-perf: rank %d size %zu: %s: %s\n", a->rank, bytes,
				pbox_strerror(rc), pbox_last_error(c));
			free(grad0);
			return rc;
		}
		if (it >= a->warmup)
			total += t1 - t0;
		if (a->check) {
			getrusage(RUSAGE_SELF, &ru);
			res->wrong += a->sp.mode ? perf_sparse_wrong(&a->sp, (float *)buf, count, it)
				    : verify(buf, a->dtype, count, a->world, it, a->rank, bytes);
			outside_add(&ru);
		}
		if (res->wrong)
			break;
	}
	free(grad0);
	res->us = total / a->iters;
	return 0;
}

static void print_header(const struct perf_args *a)
{
	printf("# pbox-perf: job %s, world %d, dtype %s, keys %d, iters %d, warmup %d%s\n",
	       a->job, a->world, a->dtype == PBOX_F32 ? "f32" : a->dtype == PBOX_F16 ? "f16" : "bf16",
	       a->keys, a->iters, a->warmup, a->check ? ", check" : "");
	printf("# busbw = algbw * 2*(n-1)/n (nccl's allreduce factor)\n");
	printf("#%13s %12s %6s %11s %12s %12s %7s\n", "size(B)", "count", "type", "time(us)",
	       "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

static void print_line(const struct perf_args *a, size_t bytes, size_t count,
		       const struct size_result *r)
{
	double algbw = r->us > 0 ? (double)bytes / (r->us * 1e3) : 0;
	double busbw = algbw * 2.0 * (a->world - 1) / a->world;
	char wrong[32];

	if (a->check)
		snprintf(wrong, sizeof(wrong), "%zu", r->wrong);
	else
		snprintf(wrong, sizeof(wrong), "N/A");
	printf(" %13zu %12zu %6s %11.1f %12.3f %12.3f %7s\n", bytes, count,
	       a->dtype == PBOX_F32 ? "f32" : a->dtype == PBOX_F16 ? "f16" : "bf16",
	       r->us, algbw, busbw, wrong);
	fflush(stdout);
}

/* Every size; *last_rate gets the rate of the largest (bytes/us each way). */
static int run_all(pbox_client *c, const struct perf_args *a, char *buf, double *last_rate)
{
	size_t esz = elem_size(a->dtype);
	uint32_t idx = 0;
	pbox_req **reqs = malloc((size_t)a->keys * sizeof(*reqs));
	int rc = 0;

	if (!reqs) {
		fprintf(stderr, "pbox-perf: cannot allocate %d requests\n", a->keys);
		return PBOX_ENOMEM;
	}

	for (double s = (double)a->minbytes; s <= (double)a->maxbytes; s *= a->stepfactor, idx++) {
		size_t count = (size_t)s / esz;
		if (count == 0)
			continue;
		int nkeys = (size_t)a->keys < count ? a->keys : (int)count;
		struct size_result res;
		rc = run_size(c, a, idx * (uint32_t)a->keys, nkeys, reqs, buf, count, &res);
		if (rc < 0)
			break;
		if (a->rank == 0)
			print_line(a, count * esz, count, &res);
		if (res.wrong) {
			rc = -1;
			break;
		}
		*last_rate = res.us > 0 ? (double)(count * esz) / res.us : 0;
	}
	free(reqs);
	return rc;
}

/* The window the last size needed: bandwidth x round trip in segments
 * (Little's law), beside the window in use. */
static void print_window_advice(const struct perf_args *a, const pbox_stats *st,
				double last_rate)
{
	pbox_opts d;
	pbox_opts_init(&d);
	unsigned window = a->opts.window ? a->opts.window : d.window;
	unsigned seg = st->seg_bytes ? (unsigned)st->seg_bytes : WIRE_PAYLOAD_ALIGN;
	double bdp = last_rate * (double)st->srtt_us; /* bytes */

	printf("# window %" PRIu64 " segments (cap %u); the last size moved %.3f GB/s each way "
	       "with srtt %" PRIu64 " us: bandwidth x round trip = %.0f segments of %u B\n",
	       st->window, window, last_rate / 1e3, st->srtt_us, bdp / seg, seg);
	printf("# mtu %" PRIu64 "%s: segments of %" PRIu64 " B\n", st->mtu,
	       a->opts.mtu ? "" : " (automatic)", st->seg_bytes);
}

static int blast_main(const struct perf_args *a)
{
	struct blast_result r;
	char err[256];

	if (perf_blast(a->blast, a->blast_seconds, a->blast_bytes, a->blast_gso, &r, err,
		       sizeof(err)) < 0) {
		fprintf(stderr, "pbox-perf: %s\n", err);
		return 1;
	}
	printf("# blast to %s: %" PRIu64 " datagrams of %zu B in %.2f s%s: %.3f Mpkt/s, "
	       "%.3f GB/s of UDP payload; %" PRIu64 " refused by the kernel\n",
	       a->blast, r.datagrams, a->blast_bytes, r.seconds, r.gso ? " (UDP GSO)" : "",
	       (double)r.datagrams / r.seconds / 1e6, (double)r.bytes / r.seconds / 1e9, r.dropped);
	return 0;
}

int main(int argc, char **argv)
{
	struct perf_args a;
	pbox_client *c;
	pbox_stats st;

	if (parse_args(argc, argv, &a) < 0)
		return 2;
	if (a.blast)
		return blast_main(&a);
	a.sp.rank = a.rank;
	a.sp.world = a.world;
	a.sp.host = a.local;
	a.sp.check = a.check;
	char *buf = malloc(a.maxbytes + 64);
	if (!buf) {
		fprintf(stderr, "pbox-perf: cannot allocate %zu bytes\n", a.maxbytes);
		return 1;
	}
	int rc = pbox_connect(a.control, a.job, a.rank, a.world, &a.opts, &c);
	if (rc < 0) {
		fprintf(stderr, "pbox-perf: rank %d: connect: %s: %s\n", a.rank, pbox_strerror(rc),
			pbox_last_error(c));
		pbox_close(c);
		free(buf);
		return 1;
	}
	if (a.rank == 0) {
		print_header(&a);
		printf("# transport: %s\n", pbox_transport_info(c));
	}
	double last_rate = 0;
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	rc = run_all(c, &a, buf, &last_rate);
	getrusage(RUSAGE_SELF, &ru1);
	pbox_get_stats(c, &st);
	if (a.rank == 0)
		printf("# cpu: %.3f s user, %.3f s system in the calls (this process; "
		       "%.3f s more filling%s the buffer, not counted)\n"
		       "# transport counters: tx_dropped %" PRIu64 " rx_lost %" PRIu64
		       " wakeups %" PRIu64 "\n",
		       tv_s(&ru1.ru_utime) - tv_s(&ru0.ru_utime) - outside_user,
		       tv_s(&ru1.ru_stime) - tv_s(&ru0.ru_stime) - outside_sys,
		       outside_user + outside_sys, a.check ? " and checking" : "",
		       st.tx_dropped, st.rx_lost, st.wakeups);
	if (a.rank == 0)
		printf("# recovery: nacks %" PRIu64 " waits %" PRIu64 " fast_retransmits %" PRIu64
		       " timeouts %" PRIu64 " ce_marks %" PRIu64 " window %" PRIu64 "\n",
		       st.nacks, st.waits, st.fast_retransmits, st.timeouts, st.ce_marks,
		       st.window);
	if (a.rank == 0)
		printf("# packets sent %" PRIu64 " received %" PRIu64 " retransmits %" PRIu64
		       " dup_results %" PRIu64 " bad %" PRIu64 "\n"
		       "# round trip srtt %" PRIu64 " us rttvar %" PRIu64 " us rto %" PRIu64
		       " us (%" PRIu64 " samples)\n"
		       "# udp offload: %" PRIu64 " GSO sends, %" PRIu64 " GRO receives\n",
		       st.pkts_sent, st.pkts_recv, st.retransmits, st.dup_results, st.bad_packets,
		       st.srtt_us, st.rttvar_us, st.rto_us, st.rtt_samples, st.gso_sends,
		       st.gro_receives);
	if (a.rank == 0 && rc == 0)
		print_window_advice(&a, &st, last_rate);
	if (a.rank == 0 || a.sp.local > 1)   /* (hierarchical: what each rank sends) */
		printf("# bytes: sent %" PRIu64 " received %" PRIu64 " (pbox headers and payloads,"
		       " all calls); sparse entries sent %" PRIu64 "\n", st.bytes_sent,
		       st.bytes_recv, st.sparse_entries);
	if (a.sp.mode == PERF_TOPK && a.sp.calls)
		printf("# topk: %s %.0f us of the call's %.0f us (mean of "
		       "the last size's %u timed calls, this rank)\n", a.sp.local > 1 ?
		       "host sum, selection and submission" : a.local > 1 ?
		       "submission (the host level selects in its thread, inside the call)" :
		       "selection and submission",
		       a.sp.select_us / a.sp.calls, a.sp.call_us / a.sp.calls, a.sp.calls);
	perf_sparse_free(&a.sp);
	pbox_close(c);
	free(buf);
	return rc < 0 ? 1 : 0;
}
