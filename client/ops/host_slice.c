/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_slice.c - the pure rules of the host level (host.h): which ranks
 * form a host and what layouts are refused, and how a key's elements are
 * cut into one part per local rank. No state, no system calls: the unit
 * tests hold them (tests/unit/test_host_slice.c).
 */
#include <stdio.h>
#include <string.h>

#include "client/ops/host.h"

int host_layout_of(int rank, int world, uint32_t local_rank, uint32_t local_world,
		   const char *job, struct host_layout *out, char *err, size_t len)
{
	if (local_world > PBOX_HOST_LOCAL_MAX) {
		snprintf(err, len, "rank %d: host-local aggregation: %u ranks per host, at most %d "
			 "(LOCAL_WORLD_SIZE or pbox_opts.local_world)", rank, local_world,
			 PBOX_HOST_LOCAL_MAX);
		return PBOX_EINVAL;
	}
	if (local_world < 2 || world % (int)local_world) {
		snprintf(err, len, "rank %d: host-local aggregation: %u ranks per host do not "
			 "divide the world of %d (every host runs the same number of ranks; "
			 "PBOX_HOST_LOCAL=0 turns the host level off)", rank, local_world, world);
		return PBOX_EINVAL;
	}
	if (local_rank >= local_world || (uint32_t)rank % local_world != local_rank) {
		snprintf(err, len, "rank %d: host-local aggregation: local rank %u of %u, but a "
			 "host's ranks are consecutive (rank = host * %u + local rank): rank %d "
			 "is local rank %u of host %u", rank, local_rank, local_world, local_world,
			 rank, (uint32_t)rank % local_world, (uint32_t)rank / local_world);
		return PBOX_EINVAL;
	}
	if (strlen(job) > HOST_JOB_NAME_MAX) {
		snprintf(err, len, "rank %d: host-local aggregation: the job name '%s' is %zu "
			 "characters, at most %d (its lanes are '<job>.lane<l>')", rank, job,
			 strlen(job), HOST_JOB_NAME_MAX);
		return PBOX_EINVAL;
	}
	*out = (struct host_layout){ .local = local_rank, .local_world = local_world,
				     .host = (uint32_t)rank / local_world,
				     .hosts = (uint32_t)world / local_world };
	return 0;
}

void host_slice(size_t count, uint32_t L, uint32_t l, size_t *lo, size_t *hi)
{
	size_t per = (count + L - 1) / L;

	per = (per + HOST_SLICE_ALIGN - 1) / HOST_SLICE_ALIGN * HOST_SLICE_ALIGN;
	*lo = (size_t)l * per < count ? (size_t)l * per : count;
	*hi = *lo + per < count ? *lo + per : count;
}
