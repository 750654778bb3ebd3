#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# rank_netns.sh CMD... - run CMD in the network namespace of this MPI rank:
# ${PBOX_NETNS_PREFIX}${OMPI_COMM_WORLD_RANK}${PBOX_NETNS_SUFFIX}. mpirun
# starts it once per rank (compare.sh --topology hosts), so every rank has
# its own network stack and link, as on separate hosts.
rank=${OMPI_COMM_WORLD_RANK:?rank_netns.sh: OMPI_COMM_WORLD_RANK is not set (run it under mpirun)}
exec ip netns exec "${PBOX_NETNS_PREFIX:?}${rank}${PBOX_NETNS_SUFFIX:-}" "$@"
