/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port.c - DPDK port bring-up for pboxd (see port.h). Steering: with one rx
 * queue per data lcore and rte_flow rules "UDP dst port udp_base+i -> queue
 * i" every packet lands on its owner; if the port has fewer queues or
 * refuses the rules, the lcores hand packets to their owners through rings
 * (with RSS spreading the rx queues over the lcores where the port has
 * it: steering "rss").
 */
#include "nic/port.h"


#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_mbuf.h>

#include "common/errmsg.h"
#include "nic/port_queues.h"

#define RX_DESC 1024
#define TX_DESC 1024

static int steer_flows(uint16_t port_id, unsigned nq, uint16_t udp_base)
{
	struct rte_flow_error ferr;

	for (unsigned q = 0; q < nq; q++) {
		struct rte_flow_attr attr = { .ingress = 1 };
		struct rte_flow_item_udp spec = { .hdr.dst_port = rte_cpu_to_be_16((uint16_t)(udp_base + q)) };
		struct rte_flow_item_udp mask = { .hdr.dst_port = 0xFFFF };
		struct rte_flow_item pattern[] = {
			{ .type = RTE_FLOW_ITEM_TYPE_ETH },
			{ .type = RTE_FLOW_ITEM_TYPE_IPV4 },
			{ .type = RTE_FLOW_ITEM_TYPE_UDP, .spec = &spec, .mask = &mask },
			{ .type = RTE_FLOW_ITEM_TYPE_END },
		};
		struct rte_flow_action_queue queue = { .index = (uint16_t)q };
		struct rte_flow_action actions[] = {
			{ .type = RTE_FLOW_ACTION_TYPE_QUEUE, .conf = &queue },
			{ .type = RTE_FLOW_ACTION_TYPE_END },
		};
		if (rte_flow_validate(port_id, &attr, pattern, actions, &ferr) != 0 ||
		    !rte_flow_create(port_id, &attr, pattern, actions, &ferr)) {
			rte_flow_flush(port_id, &ferr);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* Shared-payload fan-out needs chained mbufs on tx, and its own pool of
 * small mbufs (a header and an indirect mbuf per rank and result). */
static int setup_fanout(const struct port_setup *ps, const struct rte_eth_dev_info *di,
			struct rte_eth_conf *conf, struct box_port_info *info,
			struct rte_mempool **hdr_pool, char *err, size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	bool can = (di->tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;

	*hdr_pool = NULL;
	info->fanout = "copy";
	if (ps->fanout == BOX_FANOUT_COPY || !can) {
		if (ps->fanout == BOX_FANOUT_SHARED) {
			return errmsg(err, errlen, -ENOTSUP,
				      "port %u (%s) cannot send chained mbufs"
				      " (no MULTI_SEGS tx offload): use --fanout copy or auto",
				      ps->port_id, info->name);
		}
		return 0;
	}
	conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	snprintf(name, sizeof(name), "pbox_hd%u", ps->port_id);
	*hdr_pool = rte_pktmbuf_pool_create(name, 2 * ps->nmbufs, PORT_MBUF_CACHE, 0,
					    FANOUT_HDR_ROOM, ps->socket);
	if (!*hdr_pool)
		return errmsg(err, errlen, -ENOMEM,
			      "port %u (%s): cannot create a pool of %u header mbufs: %s"
			      " (more memory: -m or hugepages, fewer --mbufs, or --fanout copy)",
			      ps->port_id, info->name, 2 * ps->nmbufs, rte_strerror(rte_errno));
	info->fanout = ps->fanout == BOX_FANOUT_SHARED ? "shared" : "shared>=2KiB";
	return 0;
}

int port_start(const struct port_setup *ps, struct box_port_info *info,
	       struct rte_mempool **pool, struct rte_mempool **hdr_pool,
	       char *err, size_t errlen)
{
	struct rte_eth_dev_info di;
	struct rte_eth_conf conf;
	struct rte_ether_addr mac;
	uint16_t pid = ps->port_id, mtu = 1500;
	char pname[96];
	int rc;

	memset(info, 0, sizeof(*info));
	info->port = pid;
	if ((rc = rte_eth_dev_info_get(pid, &di)) != 0)
		return errmsg(err, errlen, rc, "port %u: cannot read device info: %s", pid,
			      rte_strerror(-rc));
	rte_eth_dev_get_name_by_port(pid, info->name);
	port_xdp_info(&di, info);
	if ((rc = port_queues_check(pid, info->name, di.driver_name, di.max_rx_queues,
				    di.max_tx_queues, ps->nlcores, err, errlen)) < 0)
		return rc;
	uint16_t nrxq = di.max_rx_queues >= ps->nlcores ? (uint16_t)ps->nlcores : 1;
	rte_eth_dev_get_mtu(pid, &mtu);
	/* --mtu, or the port's own: refuse one the port cannot carry, and size
	 * the mbufs as its PMD needs (port_mtu.c). It is set on the device
	 * where the PMD takes it; on net_af_packet it sizes pboxd's segments. */
	int mtu_on_device = 0;
	uint16_t room = 0;
	if (ps->mtu)
		mtu = ps->mtu;
	if ((rc = port_mtu_check(&di, pid, info->name, mtu, &mtu_on_device, &room,
				 err, errlen)) != 0)
		return rc;
	mtu_on_device = mtu_on_device && ps->mtu;
	snprintf(pname, sizeof(pname), "port %u (%s)", pid, info->name);
	if ((rc = port_pool_create(ps, di.driver_name, pname, room, pool, err, errlen)) != 0)
		return rc;
	memset(&conf, 0, sizeof(conf));
	if (di.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
	if (di.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	/* What the port does not verify, the lcore does (frame_verify). */
	switch (conf.rxmode.offloads & (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM)) {
	case RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM:
		info->rx_checksum = "nic";
		break;
	case RTE_ETH_RX_OFFLOAD_IPV4_CKSUM:
		info->rx_checksum = "ipv4 nic, udp software";
		break;
	case RTE_ETH_RX_OFFLOAD_UDP_CKSUM:
		info->rx_checksum = "ipv4 software, udp nic";
		break;
	default:
		info->rx_checksum = "software";
	}
	if ((rc = setup_fanout(ps, &di, &conf, info, hdr_pool, err, errlen)) != 0)
		return rc;
	/* RSS over the rx queues: if rte_flow steering is refused, at least
	 * the rx polling is spread over the lcores (owners via hand-off). */
	uint64_t rss_hf = di.flow_type_rss_offloads &
			  (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4);
	if (nrxq > 1 && rss_hf) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
	}
	if (mtu_on_device)
		conf.rxmode.mtu = ps->mtu;
	if ((rc = rte_eth_dev_configure(pid, nrxq, (uint16_t)ps->nlcores, &conf)) != 0)
		return errmsg(err, errlen, rc,
			      "port %u (%s): configure with %u rx / %u tx queues failed: %s",
			      pid, info->name, nrxq, ps->nlcores, rte_strerror(-rc));
	uint16_t nrx = RX_DESC, ntx = TX_DESC;
	rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrx, &ntx);
	for (uint16_t q = 0; q < nrxq; q++)
		if ((rc = rte_eth_rx_queue_setup(pid, q, nrx, (unsigned)ps->socket, NULL, *pool)) != 0)
			goto qfail;
	for (uint16_t q = 0; q < ps->nlcores; q++)
		if ((rc = rte_eth_tx_queue_setup(pid, q, ntx, (unsigned)ps->socket, NULL)) != 0)
			goto qfail;
	if ((rc = rte_eth_dev_start(pid)) != 0)
		return errmsg(err, errlen, rc, "port %u (%s): start failed: %s", pid, info->name,
			      rte_strerror(-rc));
	info->steering = "ring";
	if (nrxq > 1 && steer_flows(pid, nrxq, ps->udp_base) == 0)
		info->steering = "rte_flow";
	else if (nrxq > 1 && rss_hf)
		info->steering = "rss";
	info->pmd_mbufs = port_pmd_mbufs(di.driver_name, nrxq, nrx, ps->nlcores, ntx);
	rte_eth_macaddr_get(pid, &mac);
	memcpy(info->mac, mac.addr_bytes, 6);
	info->mtu = mtu;
	info->rx_queues = nrxq;
	return 0;
qfail:
	return errmsg(err, errlen, rc, "port %u (%s): queue setup failed: %s", pid, info->name,
		      rte_strerror(-rc));
}

void port_stop(uint16_t port_id)
{
	struct rte_flow_error ferr;

	rte_flow_flush(port_id, &ferr);
	rte_eth_dev_stop(port_id);
	rte_eth_dev_close(port_id);
}
