/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum_bench.c - how fast the N-way sum kernels are, next to the machine's
 * own yardsticks measured in the same run: memcpy and a STREAM-style add
 * (c[i] = a[i] + b[i], float32).
 *
 * Two working sets: "cache" (16 KiB per source buffer, so N = 16 uses
 * 17 x 16 KiB = 272 KiB: fits L2) and "memory" (64 MiB spread over all
 * buffers of the call, default; --mem-mib changes it). GB/s counts the
 * bytes the kernel must move: N reads + 1 write of one buffer each (memcpy:
 * 1 + 1, add: 2 + 1), 1 GB = 1e9 bytes. Each figure is the median of
 * several repetitions, each repetition calling the kernel until a minimum
 * time has passed; repetitions go round-robin over all rows of a size. "vs add" is a row's GB/s over the STREAM add's GB/s at
 * the same working-set size (for f32 sums: how close the kernel gets to the
 * machine's streaming bandwidth).
 *
 * The STREAM add is written with AVX-512 (or AVX2) intrinsics in functions
 * with __attribute__((target)), chosen by CPUID like the kernels, so it is
 * vectorised whatever -O level this file is built with; the header line
 * says which path ran. Inputs are ordinary normal numbers (no NaN, Inf or
 * subnormals, which can take slow microcode paths on some CPUs).
 *
 * Usage: sum_bench [--quick] [--csv] [--mem-mib M] [--same-offset]
 *   default about 13 s on a 2-core VM (7 reps of >= 20 ms); --quick about
 *   2.5 s (3 reps of >= 2 ms).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/sum.h"

#define CACHE_BUF_BYTES (16u << 10)
#define MAX_N 16

static const unsigned ns[] = { 2, 4, 8, 16 };
#define NNS (sizeof(ns) / sizeof(ns[0]))
static const char *const variant_names[] = { "scalar", "avx2", "avx512" };
#define NVARIANTS (sizeof(variant_names) / sizeof(variant_names[0]))

#define MAX_REPS 15
#define MAX_ROWS (2 + 3 * WIRE_NDTYPES * 4) /* memcpy, add, variants x dtypes x N */

struct opts {
	int quick;
	int csv;
	int same_offset;   /* all buffers at the same offset in their page */
	size_t mem_bytes;  /* "memory" working set, all buffers of a call */
	unsigned reps;     /* repetitions; the median is reported */
	double min_sec;    /* minimum time of one repetition */
};

/* One row of the table. */
struct row {
	const char *size;     /* "cache" or "memory" */
	const char *kernel;   /* "memcpy", "add", or a variant name */
	const char *dtype;    /* "f32", "f16", "bf16" or "-" */
	unsigned n;           /* sources, 0 for memcpy/add */
	size_t buf_bytes;     /* bytes of one buffer */
	size_t call_bytes;    /* bytes moved by one call */
	double gbps;
	double vs_add;        /* gbps / STREAM add gbps at this size, or 0 */
};

/* ---- timing ----------------------------------------------------------- */

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* What one measurement runs: a call of the kernel on prepared buffers. */
struct job {
	void (*run)(const struct job *j);
	void *dst;
	const void *const *src;
	unsigned n;
	size_t count;
	sum_fn fn;
};

/* GB/s of one repetition: call j (after one untimed warm-up call: caches,
 * TLB, page faults) until min_sec has passed. */
static double measure_once(const struct opts *o, const struct job *j, size_t bytes)
{
	unsigned long calls = 0;
	double t0, t;

	j->run(j);
	t0 = now_sec();
	do {
		j->run(j);
		calls++;
		t = now_sec() - t0;
	} while (t < o->min_sec);
	return (double)bytes * (double)calls / t / 1e9;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the yardsticks --------------------------------------------------- */

static void run_memcpy(const struct job *j)
{
	memcpy(j->dst, j->src[0], j->count * sizeof(float));
	__asm__ volatile("" : : "r"(j->dst) : "memory"); /* keep every copy */
}

__attribute__((target("avx512f")))
static void add_avx512(float *c, const float *a, const float *b, size_t count)
{
	size_t i = 0;

	for (; i + 16 <= count; i += 16)
		_mm512_storeu_ps(c + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
	for (; i < count; i++)
		c[i] = a[i] + b[i];
}

__attribute__((target("avx2")))
static void add_avx2(float *c, const float *a, const float *b, size_t count)
{
	size_t i = 0;

	for (; i + 8 <= count; i += 8)
		_mm256_storeu_ps(c + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
	for (; i < count; i++)
		c[i] = a[i] + b[i];
}

/* Plain C; at -O2 gcc 12 may or may not vectorise it (SSE2 at most). */
static void add_c(float *c, const float *a, const float *b, size_t count)
{
	for (size_t i = 0; i < count; i++)
		c[i] = a[i] + b[i];
}

static void (*pick_add(const char **how))(float *, const float *, const float *, size_t)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		*how = "AVX-512 intrinsics, 16 floats/iteration";
		return add_avx512;
	}
	if (__builtin_cpu_supports("avx2")) {
		*how = "AVX2 intrinsics, 8 floats/iteration";
		return add_avx2;
	}
	*how = "plain C (compiler's choice of vectorisation)";
	return add_c;
}

static void (*stream_add)(float *, const float *, const float *, size_t);

static void run_add(const struct job *j)
{
	stream_add(j->dst, j->src[0], j->src[1], j->count);
	__asm__ volatile("" : : "r"(j->dst) : "memory");
}

static void run_sum(const struct job *j)
{
	j->fn(j->dst, j->src, j->n, j->count);
	__asm__ volatile("" : : "r"(j->dst) : "memory");
}

/* ---- buffers ---------------------------------------------------------- */

/* Sources b[0..MAX_N-1] and the destination b[MAX_N], 64-byte aligned.
 * Source k serves calls with n > k sources, whose buffers are at most
 * mem/(k+2) bytes; the destination (and memcpy's source b[0]) mem/2.
 * Unless --same-offset, buffer k starts (7k mod 64) cache lines into a
 * page, so the N streams do not all map to the same L1 sets (which large
 * allocations, all page-aligned by mmap, otherwise do). */
struct bufs {
	void *mem[MAX_N + 1];
	void *b[MAX_N + 1];
};

static size_t buf_cap(const struct opts *o, unsigned k)
{
	size_t cap = o->mem_bytes / (k == MAX_N ? 2 : k + 2);
	return cap > CACHE_BUF_BYTES ? cap : CACHE_BUF_BYTES;
}

/* Filled with 16-bit words 0x3c00..0x3fff: f16 in [1, 2); as bf16 or as
 * the high half of an f32, normal numbers between 2^-7 and 2. */
static int bufs_alloc(struct bufs *bs, const struct opts *o)
{
	uint64_t s = 88172645463325252ull;

	memset(bs, 0, sizeof(*bs));
	for (unsigned k = 0; k <= MAX_N; k++) {
		size_t cap = buf_cap(o, k);
		/* aligned_alloc wants a multiple of the alignment */
		bs->mem[k] = aligned_alloc(4096, ((cap + 4095) & ~(size_t)4095) + 4096);
		if (bs->mem[k] == NULL)
			return -1;
		bs->b[k] = (char *)bs->mem[k] + (o->same_offset ? 0 : (7 * k % 64) * 64);
		uint16_t *h = bs->b[k];
		for (size_t i = 0; i < cap / 2; i++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			h[i] = (uint16_t)(0x3c00u | (s & 0x3ffu));
		}
	}
	return 0;
}

static void bufs_free(struct bufs *bs)
{
	for (unsigned k = 0; k <= MAX_N; k++)
		free(bs->mem[k]);
}

/* ---- output ----------------------------------------------------------- */

static void fmt_bytes(char *out, size_t len, size_t bytes)
{
	if (bytes >= (1u << 20))
		snprintf(out, len, "%.1f MiB", (double)bytes / (1 << 20));
	else
		snprintf(out, len, "%zu KiB", bytes >> 10);
}

static void print_row(const struct opts *o, const struct row *r)
{
	char buf[32], call[32], nsrc[16] = "-", ratio[16] = "";

	if (o->csv) {
		printf("%s,%s,%s,%u,%zu,%zu,%.2f,%.3f\n", r->size, r->kernel, r->dtype, r->n,
		       r->buf_bytes, r->call_bytes, r->gbps, r->vs_add);
		return;
	}
	fmt_bytes(buf, sizeof(buf), r->buf_bytes);
	fmt_bytes(call, sizeof(call), r->call_bytes);
	if (r->n > 0)
		snprintf(nsrc, sizeof(nsrc), "%u", r->n);
	if (r->vs_add > 0)
		snprintf(ratio, sizeof(ratio), "%.2f", r->vs_add);
	printf("%-7s %-7s %-5s %3s %11s %11s %8.1f %7s\n", r->size, r->kernel, r->dtype, nsrc,
	       buf, call, r->gbps, ratio);
	fflush(stdout);
}

/* ---- one working-set size --------------------------------------------- */

/* Bytes of one buffer when nbuf buffers share the working set. */
static size_t buf_bytes_for(const struct opts *o, int in_cache, unsigned nbuf)
{
	if (in_cache)
		return CACHE_BUF_BYTES;
	return (o->mem_bytes / nbuf) & ~(size_t)4095;
}

/* A row to measure: what it runs and, after the run, what it measured. */
struct entry {
	struct row r;
	struct job j;
	double gbps[MAX_REPS];
};

/* The rows of one working-set size, in print order; returns how many. */
static size_t plan_size(const struct opts *o, int in_cache, const void *const *src, void *dst,
			struct entry *e)
{
	const char *size = in_cache ? "cache" : "memory";
	struct job j = { .dst = dst, .src = src };
	size_t m = 0, b;

	b = buf_bytes_for(o, in_cache, 2); /* memcpy: 1 read + 1 write */
	j.run = run_memcpy, j.count = b / sizeof(float);
	e[m++] = (struct entry){ .r = { size, "memcpy", "-", 0, b, 2 * b }, .j = j };

	b = buf_bytes_for(o, in_cache, 3); /* STREAM add: 2 reads + 1 write */
	j.run = run_add, j.count = b / sizeof(float);
	e[m++] = (struct entry){ .r = { size, "add", "f32", 2, b, 3 * b }, .j = j };

	for (size_t v = 0; v < NVARIANTS; v++) { /* sums: N reads + 1 write */
		const struct sum_kernels *k = sum_by_name(variant_names[v]);
		if (k == NULL)
			continue;
		for (unsigned dt = 0; dt < WIRE_NDTYPES; dt++) {
			for (size_t ni = 0; ni < NNS; ni++) {
				unsigned n = ns[ni];
				b = buf_bytes_for(o, in_cache, n + 1);
				j.run = run_sum, j.fn = k->fn[dt], j.n = n;
				j.count = b / wire_dtype_size(dt);
				e[m++] = (struct entry){
					.r = { size, k->name, wire_dtype_name(dt), n, b, (n + 1) * b },
					.j = j };
			}
		}
	}
	return m;
}

/* Measure every row of one size. Repetitions go round-robin over the rows,
 * so a slow spell of the (virtual) machine hits all rows alike and the
 * "vs add" ratios stay meaningful; then medians, ratios, print. */
static void bench_size(const struct opts *o, struct bufs *bs, int in_cache)
{
	struct entry e[MAX_ROWS];
	const void *src[MAX_N];

	for (unsigned k = 0; k < MAX_N; k++)
		src[k] = bs->b[k];
	size_t m = plan_size(o, in_cache, src, bs->b[MAX_N], e);

	for (unsigned r = 0; r < o->reps; r++)
		for (size_t i = 0; i < m; i++)
			e[i].gbps[r] = measure_once(o, &e[i].j, e[i].r.call_bytes);
	for (size_t i = 0; i < m; i++)
		e[i].r.gbps = median(e[i].gbps, o->reps);
	double add_gbps = e[1].r.gbps; /* plan_size puts the add second */
	for (size_t i = 1; i < m; i++)
		e[i].r.vs_add = e[i].r.gbps / add_gbps;
	for (size_t i = 0; i < m; i++)
		print_row(o, &e[i].r);
	for (size_t v = 0; v < NVARIANTS && !o->csv; v++)
		if (sum_by_name(variant_names[v]) == NULL)
			printf("%-7s %-7s (not supported by this CPU: skipped)\n",
			       in_cache ? "cache" : "memory", variant_names[v]);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .mem_bytes = (size_t)64 << 20, .reps = 7, .min_sec = 0.02 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			o->quick = 1;
		} else if (strcmp(argv[i], "--csv") == 0) {
			o->csv = 1;
		} else if (strcmp(argv[i], "--same-offset") == 0) {
			o->same_offset = 1;
		} else if (strcmp(argv[i], "--mem-mib") == 0 && i + 1 < argc) {
			long m = strtol(argv[++i], NULL, 10);
			if (m < 1 || m > 65536) {
				fprintf(stderr, "sum_bench: --mem-mib wants 1..65536\n");
				return -1;
			}
			o->mem_bytes = (size_t)m << 20;
		} else {
			fprintf(stderr, "usage: sum_bench [--quick] [--csv] [--mem-mib M] [--same-offset]\n");
			return -1;
		}
	}
	if (o->quick)
		o->reps = 3, o->min_sec = 0.002;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct bufs bs;
	const char *add_how;

	if (parse_opts(argc, argv, &o) != 0)
		return 2;
	stream_add = pick_add(&add_how);
	if (bufs_alloc(&bs, &o) != 0) {
		fprintf(stderr, "sum_bench: cannot allocate the buffers for --mem-mib %zu\n",
			o.mem_bytes >> 20);
		bufs_free(&bs);
		return 1;
	}
	if (o.csv) {
		printf("size,kernel,dtype,n,buf_bytes,call_bytes,gbps,vs_add\n");
	} else {
		printf("# sum_bench: median of %u reps (>= %.0f ms each), GB/s = 1e9 B/s of "
		       "N reads + 1 write\n# STREAM add: %s; best sum variant: %s\n"
		       "# cache = %u KiB per buffer, memory = %zu MiB over all buffers of a call\n",
		       o.reps, o.min_sec * 1e3, add_how, sum_best()->name,
		       CACHE_BUF_BYTES >> 10, o.mem_bytes >> 20);
		printf("%-7s %-7s %-5s %3s %11s %11s %8s %7s\n", "size", "kernel", "dtype", "N",
		       "buffer", "per call", "GB/s", "vs add");
	}
	double t0 = now_sec();
	bench_size(&o, &bs, 1);
	bench_size(&o, &bs, 0);
	if (!o.csv)
		printf("# %.1f s\n", now_sec() - t0);
	bufs_free(&bs);
	return 0;
}
