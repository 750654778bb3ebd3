/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_dev.c - finding the RDMA device behind the network interface toward
 * the box, and opening it for the verbs transport (verbs.h). Everything
 * here runs once, at tp_verbs_open; the reasons a device cannot serve are
 * spelled out in err so that `auto` can say why it skipped verbs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/transport/verbs.h"
#include "include/pbox.h"

#define VERBS_MAX_PORTS 8         /* ports looked at in sysfs per device */

int verbs_dev_list(struct ibv_device ***list, char *err, size_t errlen)
{
	int n = 0;

	errno = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l) {
		/* ENOSYS: the kernel has no RDMA user-space interface */
		snprintf(err, errlen, "no RDMA device (ibv_get_device_list: %s)",
			 strerror(errno ? errno : ENOSYS));
		return PBOX_ENOTSUP;
	}
	if (n <= 0) {
		ibv_free_device_list(l);
		snprintf(err, errlen, "no RDMA device (ibv_get_device_list found none)");
		return PBOX_ENOTSUP;
	}
	*list = l;
	return n;
}

/* The first line of a small sysfs file, without its newline; 0 or
 * PBOX_ESYS. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ok = f && fgets(buf, (int)len, f);

	if (f)
		fclose(f);
	if (!ok)
		return PBOX_ESYS;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* The port of d whose network interface is ifname (1-based), 0 if none.
 * A PCI device lists its interfaces under device/net/ (the port is the
 * interface's dev_port + 1); a RoCE port names its interface in
 * ports/<n>/gid_attrs/ndevs/0. */
static int port_of(struct ibv_device *d, const char *ifname)
{
	char path[512], line[64];

	snprintf(path, sizeof(path), "%s/device/net/%s", d->ibdev_path, ifname);
	if (access(path, F_OK) == 0) {
		unsigned dev_port = 0;
		snprintf(path, sizeof(path), "%s/device/net/%s/dev_port", d->ibdev_path, ifname);
		if (read_line(path, line, sizeof(line)) == 0 && sscanf(line, "%u", &dev_port) == 1 &&
		    dev_port < VERBS_MAX_PORTS)
			return (int)dev_port + 1;
		return 1;
	}
	for (int p = 1; p <= VERBS_MAX_PORTS; p++) {
		snprintf(path, sizeof(path), "%s/ports/%d/gid_attrs/ndevs/0", d->ibdev_path, p);
		if (read_line(path, line, sizeof(line)) == 0 && strcmp(line, ifname) == 0)
			return p;
	}
	return 0;
}

/* Append "dev on if1, if2" (or "dev without a network interface") for d. */
static size_t describe_one(struct ibv_device *d, char *out, size_t len)
{
	char path[512], line[64];
	size_t used = (size_t)snprintf(out, len, "%s", ibv_get_device_name(d));
	unsigned nif = 0;

	snprintf(path, sizeof(path), "%s/device/net", d->ibdev_path);
	DIR *dir = opendir(path);
	for (struct dirent *e; dir && (e = readdir(dir)) && used < len;) {
		if (e->d_name[0] == '.')
			continue;
		used += (size_t)snprintf(out + used, len - used, "%s%s", nif++ ? "/" : " on ",
					 e->d_name);
	}
	if (dir)
		closedir(dir);
	for (int p = 1; nif == 0 && p <= VERBS_MAX_PORTS && used < len; p++) {
		snprintf(path, sizeof(path), "%s/ports/%d/gid_attrs/ndevs/0", d->ibdev_path, p);
		if (read_line(path, line, sizeof(line)) == 0)
			used += (size_t)snprintf(out + used, len - used, "%s%s", nif++ ? "/" : " on ",
						 line);
	}
	if (nif == 0 && used < len)
		used += (size_t)snprintf(out + used, len - used, " without a network interface");
	return used < len ? used : len;
}

static void describe(struct ibv_device **list, int n, char *out, size_t len)
{
	size_t used = 0;

	out[0] = 0;
	for (int i = 0; i < n && used + 2 < len; i++) {
		if (i)
			used += (size_t)snprintf(out + used, len - used, ", ");
		used += describe_one(list[i], out + used, len - used);
	}
}

void verbs_dev_close(struct verbs_port *vp)
{
	if (vp->ctx)
		ibv_close_device(vp->ctx);
	vp->ctx = NULL;
}

/* Query the port and the device's limits and offloads into vp. */
static int check_port(struct verbs_port *vp, const char *ifname, char *err, size_t errlen)
{
	struct ibv_device_attr_ex ax;
	struct ibv_port_attr pa;
	int rc;

	memset(&ax, 0, sizeof(ax));
	rc = ibv_query_device_ex(vp->ctx, NULL, &ax);
	if (rc) {
		snprintf(err, errlen, "ibv_query_device_ex on %s: %s", vp->dev, strerror(rc));
		return PBOX_ESYS;
	}
	if (vp->port > ax.orig_attr.phys_port_cnt) {
		snprintf(err, errlen, "%s (%s) maps to port %u but %s has %u", ifname, vp->dev,
			 vp->port, vp->dev, ax.orig_attr.phys_port_cnt);
		return PBOX_ENOTSUP;
	}
	memset(&pa, 0, sizeof(pa));
	rc = ibv_query_port(vp->ctx, vp->port, &pa);
	if (rc) {
		snprintf(err, errlen, "ibv_query_port on %s port %u: %s", vp->dev, vp->port,
			 strerror(rc));
		return PBOX_ESYS;
	}
	if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
		snprintf(err, errlen, "%s port %u (%s) is not Ethernet: raw packet QPs carry "
			 "Ethernet frames", vp->dev, vp->port, ifname);
		return PBOX_ENOTSUP;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		snprintf(err, errlen, "%s port %u (%s) is not active (%s)", vp->dev, vp->port,
			 ifname, ibv_port_state_str(pa.state));
		return PBOX_ENOTSUP;
	}
	/* mlx5 honours IBV_SEND_IP_CSUM on a raw packet QP only with
	 * IBV_DEVICE_RAW_IP_CSUM; raw_packet_caps says the same for new kernels. */
	vp->csum_tx = (ax.raw_packet_caps & IBV_RAW_PACKET_CAP_IP_CSUM) &&
		      (ax.orig_attr.device_cap_flags & IBV_DEVICE_RAW_IP_CSUM);
	vp->max_qp_wr = ax.orig_attr.max_qp_wr > 0 ? (uint32_t)ax.orig_attr.max_qp_wr : 0;
	vp->max_cqe = ax.orig_attr.max_cqe > 0 ? (uint32_t)ax.orig_attr.max_cqe : 0;
	vp->max_send_sge = ax.orig_attr.max_sge >= 2 ? 2 : 1;
	return 0;
}

int verbs_dev_open(struct ibv_device **list, int n, const char *ifname,
		   struct verbs_port *vp, char *err, size_t errlen)
{
	struct ibv_device *dev = NULL;
	int port = 0;

	memset(vp, 0, sizeof(*vp));
	for (int i = 0; i < n && !dev; i++) {
		port = port_of(list[i], ifname);
		if (port > 0)
			dev = list[i];
	}
	if (!dev) {
		char found[256];
		describe(list, n, found, sizeof(found));
		snprintf(err, errlen, "no RDMA device on interface %s (found %s)", ifname, found);
		return PBOX_ENOTSUP;
	}
	snprintf(vp->dev, sizeof(vp->dev), "%s", ibv_get_device_name(dev));
	vp->port = (uint8_t)port;
	vp->ctx = ibv_open_device(dev);
	if (!vp->ctx) {
		int e = errno;
		snprintf(err, errlen, "cannot open RDMA device %s (%s): %s", vp->dev, ifname,
			 strerror(e));
		return e == EACCES || e == EPERM ? PBOX_EPERM : PBOX_ESYS;
	}
	int rc = check_port(vp, ifname, err, errlen);
	if (rc < 0)
		verbs_dev_close(vp);
	return rc;
}
