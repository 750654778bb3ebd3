/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs.h - what the verbs transport's two files share: finding and
 * opening the RDMA device behind the network interface toward the box
 * (verbs_dev.c), for the raw-packet queue pair that carries pbox frames
 * (tp_verbs.c), and registering GPU memory with it (verbs_mem.c).
 *
 * The device is found through sysfs, as rdma-core's tools do: an RDMA
 * device's ibdev_path (/sys/class/infiniband/<dev>) has device/net/<ifname>
 * for each network interface of its PCI function (mlx4, mlx5, ...), and
 * ports/<n>/gid_attrs/ndevs/0 names the interface of a RoCE port. The
 * port is the interface's dev_port + 1 when the device has several.
 */
#ifndef PBOX_CLIENT_VERBS_H
#define PBOX_CLIENT_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* An opened device and the port toward the box. */
struct verbs_port {
	struct ibv_context *ctx;
	char dev[64];             /* "mlx5_0" */
	uint8_t port;             /* 1-based */
	int csum_tx;              /* the NIC fills IPv4/UDP checksums (IBV_SEND_IP_CSUM) */
	uint32_t max_qp_wr;       /* device limit on a queue's work requests */
	uint32_t max_cqe;         /* device limit on a CQ's entries */
	uint32_t max_send_sge;    /* pieces a send gathers, as the QP was made (<= 2) */
};

/*
 * The RDMA devices present: *list (free with ibv_free_device_list) and
 * their number (> 0), or PBOX_ENOTSUP when there is none, with the
 * reason in err ("no RDMA device (ibv_get_device_list found none)").
 */
int verbs_dev_list(struct ibv_device ***list, char *err, size_t errlen);

/*
 * Open the device of list (n entries) whose network interface is ifname,
 * and check its port: Ethernet link layer, active. 0 with *vp filled, or
 * PBOX_ENOTSUP (no device on ifname: err names the devices found and
 * their interfaces; the port is not Ethernet or not up), PBOX_ESYS.
 * Close with verbs_dev_close.
 */
int verbs_dev_open(struct ibv_device **list, int n, const char *ifname,
		   struct verbs_port *vp, char *err, size_t errlen);
void verbs_dev_close(struct verbs_port *vp);

/*
 * GPUDirect: register [base, base + size) of GPU memory for the NIC to
 * read (sends only), through its dma-buf (dmabuf_fd >= 0) or else by
 * address (nvidia-peermem). 0 with *mr and *how ("dma-buf",
 * "nvidia-peermem"), or PBOX_ENOTSUP/PBOX_ENOMEM with the reasons in err
 * (no checksum offload, sends of one piece, neither way registers).
 */
int verbs_mem_reg(struct ibv_pd *pd, const struct verbs_port *vp, void *base, size_t size,
		  int dmabuf_fd, struct ibv_mr **mr, const char **how, char *err, size_t errlen);

#endif
