/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xdp_pair_prog.c - test_xdp_fleet.sh's worker for the order in which
 * clients of one process join and leave an interface's shared AF_XDP
 * UMEM (client/transport/xdp_share.c), through the public API only:
 *   xdp_pair_prog CONTROL_A CONTROL_B JOB RANK WORLD
 * two clients, A to box A and B to box B (two single-box jobs, JOB-a and
 * JOB-b), whose sockets share the worker's one interface (A's made the
 * share, B joined). Then:
 *   1. both allreduce;
 *   2. A closes (the share's maker leaves), B allreduces on;
 *   3. A connects again (joining B's share), both allreduce;
 *   4. B closes, A allreduces on; A closes last (the share goes).
 * Every allreduce is 3 calls of N = 1 Mi floats (x[i] = rank + 1 + i % 7,
 * call-dependent), each result checked exactly against the world's sum.
 * Prints "ok" and each client's pbox_transport_info; exit 0, or 1 naming
 * the step that failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbox.h"

#define N (1u << 20)

static const char *ctl[2], *job;
static int rank, world;
static float *buf;

static int open_one(int which, pbox_client **c)
{
	char name[128];
	pbox_opts o;

	snprintf(name, sizeof(name), "%s-%c", job, 'a' + which);
	pbox_opts_init(&o);
	if (pbox_connect(ctl[which], name, rank, world, &o, c) != 0) {
		fprintf(stderr, "xdp_pair_prog: connect %c to %s: %s\n", 'a' + which, ctl[which],
			*c ? pbox_last_error(*c) : "");
		return -1;
	}
	printf("client %c: %s\n", 'a' + which, pbox_transport_info(*c));
	return 0;
}

/* 3 allreduces on c, each exact: 0 or -1 naming step and client. */
static int sums(pbox_client *c, int which, const char *step)
{
	static unsigned call[2];

	for (int k = 0; k < 3; k++, call[which]++) {
		unsigned t = call[which] % 5;
		for (uint32_t i = 0; i < N; i++)
			buf[i] = (float)(rank + 1 + (int)(i % 7) + (int)t);
		if (pbox_allreduce(c, 1, buf, N, PBOX_F32) != 0) {
			fprintf(stderr, "xdp_pair_prog: %s: client %c: %s\n", step, 'a' + which,
				pbox_last_error(c));
			return -1;
		}
		/* sum over ranks r of (r + 1 + i % 7 + t): exact in f32 */
		for (uint32_t i = 0; i < N; i++) {
			float want = (float)(world * (world + 1) / 2 + world * (int)(i % 7 + t));
			if (buf[i] != want) {
				fprintf(stderr, "xdp_pair_prog: %s: client %c: element %u is %g, "
					"not %g\n", step, 'a' + which, i, buf[i], want);
				return -1;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	pbox_client *a = NULL, *b = NULL;

	if (argc != 6) {
		fprintf(stderr, "usage: xdp_pair_prog CONTROL_A CONTROL_B JOB RANK WORLD\n");
		return 2;
	}
	ctl[0] = argv[1];
	ctl[1] = argv[2];
	job = argv[3];
	rank = atoi(argv[4]);
	world = atoi(argv[5]);
	buf = malloc(N * sizeof(float));
	if (!buf)
		return 1;
	int ok = open_one(0, &a) == 0 && open_one(1, &b) == 0 &&
		 sums(a, 0, "1 (both)") == 0 && sums(b, 1, "1 (both)") == 0;
	if (ok) {
		pbox_close(a);
		a = NULL;
		ok = sums(b, 1, "2 (a closed)") == 0 && open_one(0, &a) == 0 &&
		     sums(a, 0, "3 (a again)") == 0 && sums(b, 1, "3 (a again)") == 0;
	}
	if (ok) {
		pbox_close(b);
		b = NULL;
		ok = sums(a, 0, "4 (b closed)") == 0;
	}
	pbox_close(a);
	pbox_close(b);
	free(buf);
	if (ok)
		printf("ok\n");
	return ok ? 0 : 1;
}
