/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fanout_bench.c - cost of sending one completed round to N ranks, the two
 * ways pboxd can (dataplane/lcore_fanout.h): a payload copy per rank
 * ("copy") or one shared payload mbuf plus a header and an indirect mbuf
 * per rank ("shared"). Builds the N packets exactly as the lcore does and
 * frees them as a PMD does after transmission; no NIC, so the figure is
 * the lcore's CPU cost alone. Reports TSC cycles per result and per packet
 * for N = 4, 8, 16 and 1408-byte (MTU 1500) and 8896-byte (jumbo)
 * payloads, median of --reps runs.
 *
 *   build/bench/fanout_bench [--reps R] [--results K]
 *
 * Runs the EAL with --no-huge --no-pci on the current CPU (no root needed
 * beyond what the EAL wants for memory).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>

#include "dataplane/lcore_fanout.h"

#define MAX_N 16
#define MAX_REPS 31

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Cycles per result: build N packets of one result, then free them. */
static double run(int shared, unsigned n, size_t plen, unsigned results,
		  struct rte_mempool *pool, struct rte_mempool *hdr_pool,
		  const uint8_t *payload)
{
	static const uint8_t mac_a[6] = { 2, 0, 0, 0, 0, 1 }, mac_b[6] = { 2, 0, 0, 0, 0, 2 };
	struct rte_mbuf *pkts[MAX_N];
	struct wire_msg h = { .type = WIRE_RESULT, .dtype = WIRE_F32, .job = 1, .key = 7,
			      .count = (uint16_t)(plen / 4), .round = 1 };
	uint64_t t0 = rte_rdtsc();

	for (unsigned i = 0; i < results; i++) {
		struct rte_mbuf *pay = shared ? fanout_payload(pool, payload, plen) : NULL;
		for (unsigned r = 0; r < n; r++) {
			struct fanout_dst d = {
				.dst_mac = mac_b, .src_mac = mac_a, .src_ip = 0xC6120001,
				.dst_ip = 0xC6120002, .src_port = 47000, .dst_port = (uint16_t)(40000 + r),
			};
			h.rank = (uint16_t)r;
			h.seg = i;
			pkts[r] = shared ? fanout_chain(hdr_pool, &d, &h, pay, NULL)
					 : fanout_copy(pool, &d, &h, payload, plen, NULL);
			if (!pkts[r]) {
				fprintf(stderr, "fanout_bench: out of mbufs\n");
				exit(1);
			}
		}
		if (pay)
			rte_pktmbuf_free(pay);
		rte_pktmbuf_free_bulk(pkts, n);      /* what the PMD does after tx */
	}
	return (double)(rte_rdtsc() - t0) / results;
}

int main(int argc, char **argv)
{
	char *eal[] = { argv[0], "--no-huge", "-m", "256", "--no-pci", "--no-shconf",
			"--log-level=lib.eal:error", "-l", "0", NULL };
	unsigned reps = 7, results = 20000;
	int c;

	while ((c = getopt(argc, argv, "r:k:h")) != -1) {
		switch (c) {
		case 'r': reps = (unsigned)atoi(optarg); break;
		case 'k': results = (unsigned)atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-r reps (1-%d)] [-k results per run]\n", argv[0], MAX_REPS);
			return c == 'h' ? 0 : 2;
		}
	}
	if (reps < 1 || reps > MAX_REPS || results < 1) {
		fprintf(stderr, "fanout_bench: reps must be 1-%d and results >= 1\n", MAX_REPS);
		return 2;
	}
	if (rte_eal_init(9, eal) < 0) {
		fprintf(stderr, "fanout_bench: EAL init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	struct rte_mempool *pool = rte_pktmbuf_pool_create("fb_pay", 8191, 256, 0,
							   RTE_PKTMBUF_HEADROOM + 9216, 0);
	struct rte_mempool *hdr = rte_pktmbuf_pool_create("fb_hdr", 8191, 256, 0,
							  FANOUT_HDR_ROOM, 0);
	static uint8_t payload[8896];
	if (!pool || !hdr) {
		fprintf(stderr, "fanout_bench: cannot create mbuf pools: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	double hz = (double)rte_get_tsc_hz();
	printf("# fanout_bench: TSC %.2f GHz, %u results per run, median of %u runs\n",
	       hz / 1e9, results, reps);
	printf("%8s %4s %14s %14s %12s %12s %8s\n", "payload", "N", "copy_cyc/res",
	       "shared_cyc/res", "copy_cyc/pkt", "shared_c/pkt", "speedup");
	static const size_t plens[] = { 1408, 8896 };
	static const unsigned ns[] = { 4, 8, 16 };
	for (size_t p = 0; p < 2; p++) {
		for (size_t k = 0; k < 3; k++) {
			double t[2][MAX_REPS];
			for (unsigned r = 0; r < reps; r++)
				for (int s = 0; s < 2; s++)
					t[s][r] = run(s, ns[k], plens[p], results, pool, hdr, payload);
			qsort(t[0], reps, sizeof(double), cmp_dbl);
			qsort(t[1], reps, sizeof(double), cmp_dbl);
			double cp = t[0][reps / 2], sh = t[1][reps / 2];
			printf("%8zu %4u %14.0f %14.0f %12.0f %12.0f %7.2fx\n", plens[p], ns[k],
			       cp, sh, cp / ns[k], sh / ns[k], cp / sh);
		}
	}
	rte_eal_cleanup();
	return 0;
}
