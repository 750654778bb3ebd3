/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * extprog.c - a program outside the project, built only against an
 * installed pbox (pkg-config pbox): 4 ranks allreduce and check the sums.
 * It also uses the ABI the way outside programs do: the installed library's
 * version against the header's, options through pbox_opts_init, counters
 * through pbox_get_stats. The device-call header compiles on its own
 * beside it (no CUDA needed), and its options' defaults are the library's.
 * usage: extprog CONTROL JOB RANK WORLD
 */
#include <pbox.h>
#include <pbox_cuda.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	int rank = atoi(argv[3]), world = atoi(argv[4]);
	size_t n = 1000003;
	float *x = malloc(n * sizeof(*x));
	pbox_client *c;
	pbox_opts o;
	pbox_stats st;

	pbox_dev_opts d;
	if (pbox_dev_opts_init(&d) != 0 || d.wire_dtype != -1 || d.scale != 1.0) {
		fprintf(stderr, "pbox_dev_opts_init: not the defaults of pbox_cuda.h\n");
		return 1;
	}
	/* same MAJOR.MINOR: before 1.0 a MINOR may break the ABI (pbox.h) */
	if (pbox_version() >> 8 != PBOX_VERSION >> 8) {
		fprintf(stderr, "libpbox %s is loaded, this program was built for %d.%d\n",
			pbox_version_string(), PBOX_VERSION_MAJOR, PBOX_VERSION_MINOR);
		return 1;
	}
	pbox_opts_init(&o);
	o.timeout_ms = 20000;
	int rc = pbox_connect(argv[1], argv[2], rank, world, &o, &c);
	if (rc < 0) {
		fprintf(stderr, "connect: %s\n", c ? pbox_last_error(c) : pbox_strerror(rc));
		return 1;
	}
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < n; i++)
			x[i] = (float)((i % 97) * (rank + 1) + round);
		rc = pbox_allreduce(c, 42, x, n, PBOX_F32);
		if (rc < 0) {
			fprintf(stderr, "allreduce: %s\n", pbox_last_error(c));
			return 1;
		}
		float ranks = (float)(world * (world + 1) / 2);
		for (size_t i = 0; i < n; i++) {
			float want = (float)(i % 97) * ranks + (float)(round * world);
			if (x[i] != want) {
				fprintf(stderr, "rank %d round %d: x[%zu] = %g, want %g\n", rank, round, i, x[i], want);
				return 1;
			}
		}
	}
	if (pbox_get_stats(c, &st) < 0 || st.calls != 3) {
		fprintf(stderr, "rank %d: pbox_get_stats: %llu calls, want 3\n", rank,
			(unsigned long long)st.calls);
		return 1;
	}
	printf("rank %d: 3 rounds of %zu floats exact (libpbox %s)\n", rank, n,
	       pbox_version_string());
	pbox_close(c);
	free(x);
	return 0;
}
