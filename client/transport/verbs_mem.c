/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_mem.c - GPUDirect RDMA for the verbs transport (docs/gpu.md
 * "GPUDirect RDMA"): registering a range of GPU memory with the NIC so a
 * send's payload goes from the GPU to the wire with no copy to the host.
 *
 * Two ways, tried in order:
 *   dma-buf         ibv_reg_dmabuf_mr on the dma-buf the GPU library
 *                   exported for the range (Linux >= 5.12, the NVIDIA open
 *                   kernel modules): the upstream way;
 *   nvidia-peermem  ibv_reg_mr on the device address, which the NVIDIA
 *                   peer-memory client lets the RDMA core pin (MLNX_OFED
 *                   kernels); without it the kernel refuses (EFAULT).
 * A GPUDirect send gathers the frame's headers from the host ring and the
 * payload from this region, so the NIC must compute the IPv4 and UDP
 * checksums (IBV_SEND_IP_CSUM): the CPU never sees the payload. Without
 * that offload, or with neither way working, registration fails with the
 * reasons and the caller stages through host memory instead.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/transport/verbs.h"
#include "include/pbox.h"

int verbs_mem_reg(struct ibv_pd *pd, const struct verbs_port *vp, void *base, size_t size,
		  int dmabuf_fd, struct ibv_mr **mr, const char **how, char *err, size_t errlen)
{
	char why[160] = "the GPU library exported no dma-buf";

	if (!vp->csum_tx) {
		snprintf(err, errlen, "GPUDirect needs a NIC that computes IPv4/UDP checksums "
			 "(IBV_SEND_IP_CSUM): %s port %u does not, and the CPU cannot sum a "
			 "payload in GPU memory", vp->dev, vp->port);
		return PBOX_ENOTSUP;
	}
	if (vp->max_send_sge < 2) {
		snprintf(err, errlen, "GPUDirect needs sends of two pieces (headers from the host, "
			 "payload from the GPU): %s gathers %u", vp->dev, vp->max_send_sge);
		return PBOX_ENOTSUP;
	}
	if (dmabuf_fd >= 0) {
		errno = 0;
		*mr = ibv_reg_dmabuf_mr(pd, 0, size, (uint64_t)(uintptr_t)base, dmabuf_fd,
					IBV_ACCESS_LOCAL_WRITE);
		if (*mr) {
			*how = "dma-buf";
			return 0;
		}
		snprintf(why, sizeof(why), "ibv_reg_dmabuf_mr: %s", strerror(errno ? errno : EIO));
	}
	errno = 0;
	*mr = ibv_reg_mr(pd, base, size, IBV_ACCESS_LOCAL_WRITE);
	if (*mr) {
		*how = "nvidia-peermem";
		return 0;
	}
	int e = errno ? errno : EIO;
	snprintf(err, errlen, "GPUDirect: %s cannot register %zu bytes of GPU memory: %s; "
		 "ibv_reg_mr: %s%s", vp->dev, size, why, strerror(e),
		 e == EFAULT || e == EINVAL ? " (is nvidia-peermem loaded?)" : "");
	return e == ENOMEM ? PBOX_ENOMEM : PBOX_ENOTSUP;
}
