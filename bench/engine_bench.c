/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_bench.c - one lcore's engine at packet rate, without a NIC.
 *
 * Feeds engine_push with synthetic PUSH packets from memory: for each
 * segment of a key, one contribution from every rank (ranks in a rotating
 * order), so every world-th packet completes a segment and is summed. Reports
 * packets/s, payload GB/s in and cycles per packet, for 1 KiB and 8 KiB
 * payloads and N = 4, 8, 16, beside the bound of the sum kernel alone on
 * the same data (the sum must read N payloads and write one).
 * Usage: engine_bench [--quick] [--csv] [--lcores T] [--worlds N,N,...]
 * --worlds: the first table's worlds (default 4,8,16; up to 1,024 ranks,
 * with the slots pboxd gives such a job: control/jobs.h jobs_slots).
 *
 * A second table: PS mode (docs/protocol.md "PS keys"), the same rounds
 * on a key declared with SGD (momentum 0.9, Nesterov, weight decay) or
 * Adam (weight decay), fp32 gradients and weights, contributions held:
 * each completed round also averages the gradient and steps the
 * optimizer on the segment's weights and state, beside the plain sum.
 * Under it, the non-finite check of every PS step (common/finite.h) on
 * its own: cycles per segment beside the optimizer step's, each the
 * fastest of many calls on warm data, so a busy machine barely moves
 * them (docs/performance.md "Non-finite check").
 *
 * --lcores T runs T engines at once, one thread each (pinned to CPUs
 * 0..T-1), every one with its own job memory as pboxd's lcores have, and
 * reports their aggregate packet rate beside one engine alone: the
 * scaling of the box with lcores when nothing else limits it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "common/finite.h"
#include "dataplane/engine.h"

#define NSEGS 4096
#define REPS 5

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct setup {
	struct engine e;
	void *jobmem, *keymem;
	struct engine_key *key;
	uint8_t *payload; /* world * seg_bytes source data */
};

static void release_nothing(void *ctx, void *ref)
{
	(void)ctx;
	(void)ref;
}

static void setup_init(struct setup *s, uint16_t world, uint32_t seg_bytes)
{
	uint32_t key_cap = 16;
	/* as pboxd's jobs_slots: at most 128 MiB of copied contributions */
	uint64_t fit = (128ull << 20) / ((uint64_t)world * seg_bytes);
	uint32_t nslots = fit < 16 ? 16 : fit > 256 ? 256 : (uint32_t)fit;
	size_t jb = engine_job_mem_bytes(world, seg_bytes, key_cap, nslots);
	uint32_t count = NSEGS * (seg_bytes / 4);
	size_t kb = engine_key_mem_bytes(count, WIRE_F32, seg_bytes, 1);
	uint8_t *owners = calloc(NSEGS, 1);

	engine_init(&s->e, 0, sum_best());
	engine_set_hold(&s->e, release_nothing, NULL);
	s->jobmem = aligned_alloc(64, (jb + 63) & ~(size_t)63);
	s->keymem = aligned_alloc(64, (kb + 63) & ~(size_t)63);
	memset(s->jobmem, 0, jb);
	memset(s->keymem, 0, kb);
	struct engine_msg m = { .type = ENGINE_MSG_JOB_INSTALL, .job = 1,
		.u.desc = { .id = 1, .token = 7, .world = world, .seg_bytes = seg_bytes,
			    .mem = s->jobmem, .key_cap = key_cap, .nslots = nslots } };
	engine_apply(&s->e, &m);
	for (uint16_t r = 0; r < world; r++) {
		struct engine_msg w = { .type = ENGINE_MSG_WORKER_SET, .job = 1,
			.u.worker = { .rank = r, .ip = 1, .port = (uint16_t)(100 + r) } };
		engine_apply(&s->e, &w);
	}
	s->key = engine_key_init(s->keymem, 9, count, WIRE_F32, seg_bytes, 1, owners);
	struct engine_msg k = { .type = ENGINE_MSG_KEY_INSTALL, .job = 1, .u.key = s->key };
	engine_apply(&s->e, &k);
	s->payload = aligned_alloc(64, (size_t)world * seg_bytes);
	for (size_t i = 0; i < (size_t)world * seg_bytes / 4; i++)
		((float *)s->payload)[i] = (float)(i % 101);
	free(owners);
}

static void setup_free(struct setup *s)
{
	free(s->jobmem);
	free(s->keymem);
	free(s->payload);
}

/* One round over every segment; returns seconds and cycles. With hold,
 * contributions are offered by reference (as pboxd's lcores offer rx
 * mbufs) and kept in place instead of copied. */
static void one_round_mode(struct setup *s, uint16_t world, uint32_t seg_bytes,
			   uint32_t round, int hold, double *secs, double *cycles)
{
	struct wire_msg m = { .type = WIRE_PUSH, .dtype = WIRE_F32, .job = 1, .token = 7,
			      .key = 9, .round = round, .count = (uint16_t)(seg_bytes / 4) };
	struct engine_out out;
	unsigned sends = 0;
	double t0 = now_s();
	uint64_t c0 = __rdtsc();

	for (uint32_t seg = 0; seg < NSEGS; seg++) {
		m.seg = seg;
		for (uint16_t i = 0; i < world; i++) {
			m.rank = (uint16_t)((i + seg) % world);
			const uint8_t *p = s->payload + (size_t)m.rank * seg_bytes;
			int rc = engine_push_ref(&s->e, &m, p, hold ? (void *)p : NULL,
						 1, (uint16_t)(100 + m.rank), &out);
			sends += rc == ENGINE_SEND_ALL;
		}
	}
	*cycles = (double)(__rdtsc() - c0);
	*secs = now_s() - t0;
	if (sends != NSEGS) {
		fprintf(stderr, "engine_bench: %u of %u segments completed\n", sends, NSEGS);
		exit(1);
	}
}

static void one_round(struct setup *s, uint16_t world, uint32_t seg_bytes,
		      uint32_t round, double *secs, double *cycles)
{
	one_round_mode(s, world, seg_bytes, round, 0, secs, cycles);
}

/* The sum kernel alone over the same bytes. */
static double kernel_only(struct setup *s, uint16_t world, uint32_t seg_bytes)
{
	const void *src[ENGINE_MAX_WORLD];
	const struct sum_kernels *k = sum_best();
	for (unsigned r = 0; r < world; r++)
		src[r] = s->payload + (size_t)r * seg_bytes;
	double t0 = now_s();
	for (uint32_t seg = 0; seg < NSEGS; seg++)
		k->fn[WIRE_F32](s->key->result + (size_t)seg * seg_bytes, src, world, seg_bytes / 4);
	return now_s() - t0;
}

/* ---- PS mode: the optimizer update at completion ---- */

/* Make s's key (laid out by setup_init, f32) a PS key with opt, in fresh
 * key memory, and run its init round (rank 0's weights: the payload). */
static void ps_setup(struct setup *s, uint16_t world, uint32_t seg_bytes,
		     const struct optim_params *opt)
{
	uint32_t count = NSEGS * (seg_bytes / 4);
	size_t kb = engine_key_mem_bytes(count, WIRE_F32, seg_bytes, 1);
	size_t pb = engine_ps_mem_bytes(count, seg_bytes, optim_planes(opt), WIRE_F32);
	uint8_t *owners = calloc(NSEGS, 1);
	struct engine_out out;

	setup_init(s, world, seg_bytes);
	free(s->keymem);  /* a new key 10 with room for its PS state */
	s->keymem = aligned_alloc(64, (kb + pb + 63) & ~(size_t)63);
	memset(s->keymem, 0, kb + pb);
	s->key = engine_key_init(s->keymem, 10, count, WIRE_F32, seg_bytes, 1, owners);
	engine_ps_init((uint8_t *)s->keymem + kb, s->key, opt, WIRE_F32, WIRE_F32, 1);
	struct engine_msg k = { .type = ENGINE_MSG_KEY_INSTALL, .job = 1, .u.key = s->key };
	engine_apply(&s->e, &k);
	free(owners);
	struct wire_msg m = { .type = WIRE_PUSH, .dtype = WIRE_F32, .flags = WIRE_FLAG_INIT,
			      .job = 1, .token = 7, .key = 10, .round = 1 };
	for (uint32_t seg = 0; seg < NSEGS; seg++)
		for (uint16_t r = 0; r < world; r++) {
			m.seg = seg;
			m.rank = r;
			m.count = r == 0 ? (uint16_t)(seg_bytes / 4) : 0;
			engine_push(&s->e, &m, s->payload, 1, (uint16_t)(100 + r), &out);
		}
}

/* One step of every segment (round >= 2), contributions held. */
static void ps_round(struct setup *s, uint16_t world, uint32_t seg_bytes, uint32_t round,
		     double *secs, double *cycles)
{
	float lr = 0.01f;
	uint32_t arg;
	memcpy(&arg, &lr, sizeof(arg));
	struct wire_msg m = { .type = WIRE_PUSH, .dtype = WIRE_F32, .job = 1, .token = 7,
			      .key = 10, .round = round, .count = (uint16_t)(seg_bytes / 4),
			      .arg = arg };
	struct engine_out out;
	unsigned sends = 0;
	uint64_t updates = s->e.c.updates;
	double t0 = now_s();
	uint64_t c0 = __rdtsc();

	for (uint32_t seg = 0; seg < NSEGS; seg++) {
		m.seg = seg;
		for (uint16_t i = 0; i < world; i++) {
			m.rank = (uint16_t)((i + seg) % world);
			const uint8_t *p = s->payload + (size_t)m.rank * seg_bytes;
			sends += engine_push_ref(&s->e, &m, p, (void *)p, 1,
						 (uint16_t)(100 + m.rank), &out) == ENGINE_SEND_ALL;
		}
	}
	*cycles = (double)(__rdtsc() - c0);
	*secs = now_s() - t0;
	if (sends != NSEGS || s->e.c.updates - updates != NSEGS) {
		fprintf(stderr, "engine_bench: PS round %u: %u of %u segments stepped\n", round,
			sends, NSEGS);
		exit(1);
	}
}

static void ps_table(int reps, int csv)
{
	static const uint32_t sizes[] = { 1024, 8896 };
	static const uint16_t worlds[] = { 4, 8, 16 };
	static const struct { const char *name; struct optim_params p; } opts[] = {
		{ "sgd", { .kind = OPTIM_SGD, .nesterov = 1, .momentum = 0.9,
			   .weight_decay = 1e-4 } },
		{ "adam", { .kind = OPTIM_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
			    .weight_decay = 1e-4 } },
	};

	printf(csv ? "\npayload,world,optimizer,mpps,gbps_in,cycles_per_pkt,plain_gbps_in,"
		     "ratio\n"
		   : "\n# PS mode: the same rounds on a PS key (fp32 gradients and weights, held),\n"
		     "# each completion averaging the gradient and stepping the optimizer;\n"
		     "# plain: the sum alone (held), measured beside it\n"
		     "# payload  world  optimizer   Mpkt/s   GB/s in  cycles/pkt  plain GB/s in"
		     "  PS/plain\n");
	for (unsigned si = 0; si < 2; si++)
		for (unsigned wi = 0; wi < 3; wi++)
			for (unsigned oi = 0; oi < 2; oi++) {
				uint32_t sb = sizes[si];
				uint16_t w = worlds[wi];
				struct setup s, plain;
				double t[REPS], c[REPS], pt[REPS], pc[REPS];
				ps_setup(&s, w, sb, &opts[oi].p);
				setup_init(&plain, w, sb);
				for (int r = 0; r < reps; r++) {
					ps_round(&s, w, sb, (uint32_t)r + 2, &t[r], &c[r]);
					one_round_mode(&plain, w, sb, (uint32_t)r + 1, 1, &pt[r], &pc[r]);
				}
				qsort(t, (size_t)reps, sizeof(double), cmp_double);
				qsort(c, (size_t)reps, sizeof(double), cmp_double);
				qsort(pt, (size_t)reps, sizeof(double), cmp_double);
				double pkts = (double)NSEGS * w, bytes = pkts * sb;
				double tm = t[reps / 2], pm = pt[reps / 2];
				printf(csv ? "%u,%u,%s,%.3f,%.2f,%.0f,%.2f,%.2f\n"
					   : "  %6u  %5u  %-9s  %7.3f  %8.2f  %10.0f  %13.2f  %8.2f\n",
				       sb, w, opts[oi].name, pkts / tm / 1e6, bytes / tm / 1e9,
				       c[reps / 2] / pkts, bytes / pm / 1e9, pm / tm);
				setup_free(&s);
				setup_free(&plain);
			}
}

/* The fastest of n timings (cycles) of fn(arg). */
static double min_cycles(void (*fn)(void *), void *arg, int n)
{
	double best = 1e300;

	for (int i = 0; i < n; i++) {
		uint64_t c0 = __rdtsc();
		fn(arg);
		double c = (double)(__rdtsc() - c0);
		if (c < best)
			best = c;
	}
	return best;
}

struct check_arg {
	const struct optim_params *p;
	float *w, *st[OPTIM_MAX_PLANES], *g;
	size_t n;
	int finite;
};

static void run_check(void *arg)
{
	struct check_arg *a = arg;
	a->finite += finite_all_f32(a->g, a->n);
}

static void run_step(void *arg)
{
	struct check_arg *a = arg;
	optim_step(a->p, a->w, a->st, a->g, a->n, 2, 1e-6f, 16.0f);
}

/* Cycles per segment of the non-finite check and of the optimizer steps. */
static void check_table(int csv)
{
	static const uint32_t sizes[] = { 1024, 8896 };
	static const struct optim_params sgd = { .kind = OPTIM_SGD, .nesterov = 1,
		.momentum = 0.9, .weight_decay = 1e-4 };
	static const struct optim_params adam = { .kind = OPTIM_ADAM, .beta1 = 0.9,
		.beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-4 };

	printf(csv ? "\npayload,elements,check_cycles,sgd_cycles,adam_cycles,check_sgd_pct,"
		     "check_adam_pct\n"
		   : "\n# non-finite check of a PS step's summed gradient (finite_all_f32) beside\n"
		     "# the optimizer step, cycles per segment (fastest of 2000 calls)\n"
		     "# payload  elements  check  SGD step  Adam step  check/SGD  check/Adam\n");
	for (unsigned si = 0; si < 2; si++) {
		size_t n = sizes[si] / 4;
		float *buf = aligned_alloc(64, 4 * n * sizeof(float));
		for (size_t i = 0; i < 4 * n; i++)
			buf[i] = (float)(i % 101) * 0.01f;
		struct check_arg a = { .w = buf, .st = { buf + n, buf + 2 * n }, .g = buf + 3 * n,
				       .n = n };
		double ck = min_cycles(run_check, &a, 2000);
		a.p = &sgd;
		double cs = min_cycles(run_step, &a, 2000);
		a.p = &adam;
		double ca = min_cycles(run_step, &a, 2000);
		if (a.finite != 2000) {
			fprintf(stderr, "engine_bench: the check found finite data not finite\n");
			exit(1);
		}
		printf(csv ? "%u,%zu,%.0f,%.0f,%.0f,%.1f,%.1f\n"
			   : "  %6u  %8zu  %5.0f  %8.0f  %9.0f  %8.1f%%  %9.1f%%\n",
		       sizes[si], n, ck, cs, ca, 100 * ck / cs, 100 * ck / ca);
		free(buf);
	}
}

/* ---- --lcores: T engines at once ---- */

struct worker {
	pthread_t th;
	unsigned cpu;
	uint16_t world;
	uint32_t seg_bytes;
	int rounds;
	pthread_barrier_t *start;
	double secs;      /* this thread's time for all its rounds */
};

static void *engine_thread(void *arg)
{
	struct worker *w = arg;
	struct setup s;
	cpu_set_t set;
	double t, c, total = 0;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	setup_init(&s, w->world, w->seg_bytes);
	one_round(&s, w->world, w->seg_bytes, 1, &t, &c);     /* warm up */
	pthread_barrier_wait(w->start);
	for (int r = 0; r < w->rounds; r++) {
		one_round(&s, w->world, w->seg_bytes, (uint32_t)r + 2, &t, &c);
		total += t;
	}
	w->secs = total;
	setup_free(&s);
	return NULL;
}

/* Aggregate Mpkt/s of n engines running rounds at once. */
static double run_parallel(unsigned n, uint16_t world, uint32_t seg_bytes, int rounds)
{
	struct worker ws[64];
	pthread_barrier_t start;
	double pkts = 0;

	pthread_barrier_init(&start, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		ws[i] = (struct worker){ .cpu = i, .world = world, .seg_bytes = seg_bytes,
					 .rounds = rounds, .start = &start };
		pthread_create(&ws[i].th, NULL, engine_thread, &ws[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(ws[i].th, NULL);
		pkts += (double)NSEGS * world * rounds / ws[i].secs;
	}
	pthread_barrier_destroy(&start);
	return pkts / 1e6;
}

static int scaling(unsigned lcores, int reps)
{
	static const uint32_t sizes[] = { 1024, 8896 };
	static const uint16_t worlds[] = { 4, 16 };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (lcores < 2 || lcores > 64 || (long)lcores > ncpu) {
		fprintf(stderr, "engine_bench: --lcores must be 2..%ld (online CPUs)\n",
			ncpu < 64 ? ncpu : 64);
		return 2;
	}
	printf("# engine_bench --lcores %u: aggregate Mpkt/s of T engines at once (one thread"
	       " each, own job), %d rounds of %u segments\n"
	       "# payload  world  T=1 Mpkt/s  T=%u Mpkt/s  speed-up\n", lcores, reps, NSEGS, lcores);
	for (unsigned si = 0; si < 2; si++)
		for (unsigned wi = 0; wi < 2; wi++) {
			double one = run_parallel(1, worlds[wi], sizes[si], reps);
			double all = run_parallel(lcores, worlds[wi], sizes[si], reps);
			printf("  %6u  %5u  %10.2f  %10.2f  %8.2fx\n", sizes[si], worlds[wi],
			       one, all, all / one);
		}
	return 0;
}

int main(int argc, char **argv)
{
	int quick = 0, csv = 0;
	unsigned lcores = 0, nworlds = 3;
	uint16_t worlds[8] = { 4, 8, 16 };
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--csv"))
			csv = 1;
		else if (!strcmp(argv[i], "--lcores") && i + 1 < argc)
			lcores = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--worlds") && i + 1 < argc) {
			char *t = argv[++i], *end;
			for (nworlds = 0; nworlds < 8 && *t; t = *end ? end + 1 : end) {
				long w = strtol(t, &end, 10);
				if (w < 1 || w > ENGINE_MAX_WORLD || (*end && *end != ',')) {
					fprintf(stderr, "engine_bench: --worlds takes 1..%d, "
						"comma-separated\n", ENGINE_MAX_WORLD);
					return 2;
				}
				worlds[nworlds++] = (uint16_t)w;
			}
		} else {
			fprintf(stderr, "usage: engine_bench [--quick] [--csv] [--lcores T] "
				"[--worlds N,N,...]\n");
			return 2;
		}
	}
	if (lcores)
		return scaling(lcores, quick ? 2 : REPS);
	static const uint32_t sizes[] = { 1024, 8896 };
	int reps = quick ? 2 : REPS;

	printf(csv ? "payload,world,mpps,gbps_in,cycles_per_pkt,kernel_gbps_in,ratio,"
		     "held_mpps,held_gbps_in,held_cycles_per_pkt,held_ratio\n"
		   : "# engine_bench: kernel %s, %u segments per round, median of %d rounds\n"
		     "# copied: each contribution copied into its slot; held: kept in the packet\n"
		     "# payload  world   Mpkt/s   GB/s in  cycles/pkt  kernel-only GB/s in  engine/kernel"
		     " | held Mpkt/s  GB/s in  cycles/pkt  engine/kernel\n",
	       sum_best()->name, NSEGS, reps);
	for (unsigned si = 0; si < 2; si++) {
		for (unsigned wi = 0; wi < nworlds; wi++) {
			uint32_t sb = sizes[si];
			uint16_t w = worlds[wi];
			struct setup s;
			double t[REPS], c[REPS], kt[REPS], ht[REPS], hc[REPS];
			setup_init(&s, w, sb);
			for (int r = 0; r < reps; r++) {
				one_round_mode(&s, w, sb, 2 * (uint32_t)r + 1, 0, &t[r], &c[r]);
				one_round_mode(&s, w, sb, 2 * (uint32_t)r + 2, 1, &ht[r], &hc[r]);
				kt[r] = kernel_only(&s, w, sb);
			}
			qsort(t, (size_t)reps, sizeof(double), cmp_double);
			qsort(c, (size_t)reps, sizeof(double), cmp_double);
			qsort(ht, (size_t)reps, sizeof(double), cmp_double);
			qsort(hc, (size_t)reps, sizeof(double), cmp_double);
			qsort(kt, (size_t)reps, sizeof(double), cmp_double);
			double pkts = (double)NSEGS * w, bytes = pkts * sb;
			double tm = t[reps / 2], km = kt[reps / 2], hm = ht[reps / 2];
			printf(csv ? "%u,%u,%.3f,%.2f,%.0f,%.2f,%.2f,%.3f,%.2f,%.0f,%.2f\n"
				   : "  %6u  %5u  %7.3f  %8.2f  %10.0f  %19.2f  %13.2f"
				     " | %11.3f  %7.2f  %10.0f  %13.2f\n",
			       sb, w, pkts / tm / 1e6, bytes / tm / 1e9, c[reps / 2] / pkts,
			       bytes / km / 1e9, km / tm,
			       pkts / hm / 1e6, bytes / hm / 1e9, hc[reps / 2] / pkts, km / hm);
			setup_free(&s);
		}
	}
	ps_table(reps, csv);
	check_table(csv);
	return 0;
}
