/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_allreduce.c - MPI_Allreduce (float32, MPI_SUM, in place) timed the way
 * pbox-perf times pbox_allreduce, for bench/compare/compare.sh.
 *
 *   mpirun -np N [--mca btl tcp,self] mpi_allreduce [--minbytes B] [--maxbytes B]
 *          [--stepfactor F] [--iters I] [--warmup W] [--reps R]
 *
 * For every size (minbytes, minbytes*F, ... <= maxbytes) and every rep, the
 * ranks meet at a barrier, run W untimed calls, then I timed calls back to
 * back. Rank 0 prints one line per (rep, size):
 *
 *   rep bytes us_per_call
 *
 * us_per_call is rank 0's wall time for the I calls divided by I (the mean),
 * as pbox-perf reports it. Lines starting with '#' are comments. The buffer
 * is refilled with 1.0 before each rep's calls: the values grow by a factor
 * N per call and may reach inf, which costs the same as finite values (no
 * denormals are ever produced).
 */
#include <mpi.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/perf_args.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: mpirun -np N mpi_allreduce [--minbytes B] [--maxbytes B] "
		"[--stepfactor F] [--iters I] [--warmup W] [--reps R]\n"
		"  defaults: 4K .. 64M, stepfactor 4, iters 5, warmup 2, reps 1 (K, M, G suffixes)\n"
		"  output (rank 0): one line 'rep bytes us_per_call' per rep and size\n");
}

int main(int argc, char **argv)
{
	size_t minbytes = 4096, maxbytes = 64u << 20;
	double step = 4;
	int iters = 5, warmup = 2, reps = 1, bad = 0;
	int rank, world;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
			if (rank == 0)
				usage(stdout);
			MPI_Finalize();
			return 0;
		}
		if (!v) {
			bad = 1;
			break;
		}
		i++;
		if (!strcmp(o, "--minbytes"))
			bad |= parse_size(v, &minbytes) != 0;
		else if (!strcmp(o, "--maxbytes"))
			bad |= parse_size(v, &maxbytes) != 0;
		else if (!strcmp(o, "--stepfactor"))
			step = atof(v);
		else if (!strcmp(o, "--iters"))
			bad |= parse_int(v, &iters) != 0;
		else if (!strcmp(o, "--warmup"))
			bad |= parse_int(v, &warmup) != 0;
		else if (!strcmp(o, "--reps"))
			bad |= parse_int(v, &reps) != 0;
		else
			bad = 1;
	}
	if (bad || step <= 1 || iters < 1 || reps < 1 || minbytes < 4 || maxbytes < minbytes) {
		if (rank == 0) {
			fprintf(stderr, "mpi_allreduce: bad arguments\n");
			usage(stderr);
		}
		MPI_Finalize();
		return 2;
	}

	float *buf = malloc(maxbytes + 64);
	if (!buf) {
		fprintf(stderr, "mpi_allreduce: rank %d: cannot allocate %zu bytes\n", rank, maxbytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		printf("# mpi_allreduce: world %d, f32 MPI_SUM in place, iters %d, warmup %d, reps %d\n",
		       world, iters, warmup, reps);
		printf("# rep bytes us_per_call\n");
		fflush(stdout);
	}
	for (int rep = 0; rep < reps; rep++) {
		for (double s = (double)minbytes; s <= (double)maxbytes; s *= step) {
			size_t count = (size_t)s / sizeof(float);
			if (count == 0)
				continue;
			for (size_t i = 0; i < count; i++)
				buf[i] = 1.0f;
			MPI_Barrier(MPI_COMM_WORLD);
			for (int it = 0; it < warmup; it++)
				MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
					      MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int it = 0; it < iters; it++)
				MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
					      MPI_COMM_WORLD);
			double us = (MPI_Wtime() - t0) * 1e6 / iters;
			if (rank == 0) {
				printf("%d %zu %.3f\n", rep, count * sizeof(float), us);
				fflush(stdout);
			}
		}
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
