/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * box_rpc.c - the box methods of docs/rpc.md: box_endpoints (what workers
 * send to), box_status (ports, lcores, limits, and every option's value
 * and default from the option table, control/options.h) and box_stats
 * (port, lcore and engine counters, drops by reason name from
 * common/drops.h).
 */
#include <stdio.h>
#include <time.h>

#include "common/clock.h"
#include "common/wire.h"
#include "control/jobs.h"
#include "control/options.h"
#include "control/rpc_methods.h"

/* pbox's version, from include/pbox.h (the Makefile passes it: control/
 * does not include the client's header). */
#ifndef PBOX_VERSION_STRING
#error "build with -DPBOX_VERSION_STRING=\"MAJOR.MINOR.PATCH\" (the Makefile does)"
#endif

static const char *const no_params[] = { NULL };

RPC_HANDLER(rpc_box_endpoints)
{
	const struct box *b = ctx->box;
	json_t *eps = json_array();
	char ip[16];
	int rc = rpc_params_known(params, no_params, err, errlen);

	if (rc < 0) {
		json_decref(eps);
		return rc;
	}
	for (unsigned i = 0; i < b->layout.neps; i++)
		json_array_append_new(eps, json_pack("{s:s, s:i}",
			"ip", rpc_ip_str(b->layout.eps[i].ip, ip, sizeof(ip)),
			"port", (int)b->layout.eps[i].udp_port));
	*result = json_pack("{s:i, s:o, s:I}", "version", WIRE_VERSION, "endpoints", eps,
			    "mtu", (json_int_t)b->layout.mtu);
	return 0;
}

/* ---- box_status ---- */

static json_t *port_status(const struct box *b, unsigned i)
{
	const struct box_port_info *p = &b->layout.ports[i];
	struct box_port_stats st = { 0 };
	char mac[18], ip[16], cidr[24];
	int rc = b->dp.port_stats ? b->dp.port_stats(b->dp.ctx, i, &st) : -1;

	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", p->mac[0], p->mac[1],
		 p->mac[2], p->mac[3], p->mac[4], p->mac[5]);
	snprintf(cidr, sizeof(cidr), "%s/%u", rpc_ip_str(p->ip, ip, sizeof(ip)), p->prefix);
	json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:I, s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:s}",
			 "port", (int)p->port, "name", p->name, "mac", mac, "ip", cidr,
			 "mtu", (json_int_t)p->mtu,
			 "link", rc < 0 ? "unknown" : st.link_up ? "up" : "down",
			 "rx_queues", (int)p->rx_queues,
			 "steering", p->steering ? p->steering : "?",
			 "fanout", p->fanout ? p->fanout : "?",
			 "contributions", p->hold ? "held" : "copied",
			 "udp_checksum", b->cfg.udp_checksum ? "software" : "off",
			 "rx_checksum", p->rx_checksum ? p->rx_checksum : "?",
			 "numa_node", p->numa_node, "local_cpus", p->local_cpus);
	/* net_af_xdp: the kernel's preferred busy polling (nic/port_xdp.c) */
	if (o && p->busy_budget >= 0)
		json_object_set_new(o, "busy_poll", json_pack("{s:i, s:s, s:I, s:I}",
			"budget", p->busy_budget, "iface", p->iface,
			"napi_defer_hard_irqs", (json_int_t)p->napi_defer_hard_irqs,
			"gro_flush_timeout_ns", (json_int_t)p->gro_flush_timeout_ns));
	return o;
}

static json_t *limits(const struct box_config *c)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "max_jobs", (json_int_t)c->max_jobs, "max_world", (json_int_t)c->max_world,
			 "max_keys", (json_int_t)c->max_keys,
			 "max_job_bytes", (json_int_t)c->max_job_bytes,
			 "default_job_bytes", (json_int_t)c->default_job_bytes,
			 "chunk_bytes", (json_int_t)c->chunk_bytes,
			 "slots_per_lcore", (json_int_t)c->slots_per_lcore);
}

/* Every setting of the option table: its value and its default, both as
 * option values ("32K", "on"); a secret shows as "set" or "none". */
static json_t *config_rows(const struct box_config *c)
{
	json_t *rows = json_array();
	char v[512];

	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		if (!box_opt_is_setting(o))
			continue;
		if (box_opt_show(c, o, v, sizeof(v)) < 0)
			snprintf(v, sizeof(v), "?");
		json_array_append_new(rows, json_pack("{s:s, s:s, s:s}", "option", o->name,
						      "value", v, "default", o->def ? o->def : "none"));
	}
	return rows;
}

RPC_HANDLER(rpc_box_status)
{
	const struct box *b = ctx->box;
	int rc = rpc_params_known(params, no_params, err, errlen);

	if (rc < 0)
		return rc;
	json_t *ports = json_array(), *lcores = json_array();
	for (unsigned i = 0; i < b->layout.nports; i++)
		json_array_append_new(ports, port_status(b, i));
	for (unsigned i = 0; i < b->layout.nlcores; i++)
		json_array_append_new(lcores, json_pack("{s:i, s:i, s:i, s:i, s:i, s:I}",
			"lcore", (int)b->layout.lcores[i].eal_id, "index", (int)b->layout.lcores[i].index,
			"udp_port", (int)(b->cfg.udp_base + b->layout.lcores[i].index),
			"socket", b->layout.lcores[i].socket, "cpu", b->layout.lcores[i].cpu,
			"hold_max", (json_int_t)b->layout.lcores[i].hold_max));
	*result = json_pack("{s:s, s:i, s:f, s:s, s:o, s:o, s:o, s:o, s:i, s:i}",
			    "version", PBOX_VERSION_STRING, "protocol", WIRE_VERSION,
			    "uptime_s", clock_s() - b->start_time,
			    "kernel", b->layout.kernel ? b->layout.kernel : "?",
			    "ports", ports, "lcores", lcores, "limits", limits(&b->cfg),
			    "config", config_rows(&b->cfg),
			    "jobs", (int)jobs_count(b->jobs),
			    "jobs_removing", (int)jobs_removing(b->jobs));
	return 0;
}

/* ---- box_stats ---- */

static json_t *drops_obj(const uint64_t *drops)
{
	json_t *o = json_object();

	for (int r = 1; r < DROP_COUNT; r++)
		json_object_set_new(o, drop_name(r), json_integer((json_int_t)drops[r]));
	return o;
}

static json_t *port_stats(const struct box *b, unsigned i)
{
	struct box_port_stats s = { 0 };
	int rc = b->dp.port_stats ? b->dp.port_stats(b->dp.ctx, i, &s) : -1;
	json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			      "port", (int)b->layout.ports[i].port,
			      "ipackets", (json_int_t)s.ipackets, "opackets", (json_int_t)s.opackets,
			      "ibytes", (json_int_t)s.ibytes, "obytes", (json_int_t)s.obytes,
			      "imissed", (json_int_t)s.imissed, "ierrors", (json_int_t)s.ierrors,
			      "oerrors", (json_int_t)s.oerrors, "rx_nombuf", (json_int_t)s.rx_nombuf);
	if (rc < 0)
		json_object_set_new(o, "error", json_string("counters unavailable"));
	return o;
}

static json_t *lcore_stats(const struct box *b, unsigned i, uint64_t *total)
{
	static const struct lcore_stats zl;
	static const struct engine_counters ze;
	const struct lcore_stats *l = b->dp.lcore_stats ? b->dp.lcore_stats(b->dp.ctx, i) : NULL;
	const struct engine_counters *e = b->dp.engine_stats ? b->dp.engine_stats(b->dp.ctx, i) : NULL;

	l = l ? l : &zl;
	e = e ? e : &ze;
	for (int r = 0; r < DROP_COUNT; r++)
		total[r] += l->drops[r];
	json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			      "index", (int)i, "rx", (json_int_t)l->rx, "tx", (json_int_t)l->tx,
			      "pushes", (json_int_t)e->pushes, "completes", (json_int_t)e->completes,
			      "dup_open", (json_int_t)e->dup_open, "dup_done", (json_int_t)e->dup_done,
			      "retx", (json_int_t)e->retx, "errors_sent", (json_int_t)e->errors_sent);
	json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
			      "held", (json_int_t)e->held, "arp", (json_int_t)l->arp, "icmp", (json_int_t)l->icmp,
			      "handoff_out", (json_int_t)l->handoff_out,
			      "handoff_in", (json_int_t)l->handoff_in,
			      "busy_polls", (json_int_t)l->busy_polls,
			      "idle_polls", (json_int_t)l->idle_polls,
			      "busy_ns", (json_int_t)l->busy_ns,
			      "csum_unfilled", (json_int_t)l->csum_unfilled,
			      "probes", (json_int_t)l->probes,
			      "msgs", (json_int_t)e->msgs, "drops", drops_obj(l->drops)));
	json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			      "waits", (json_int_t)e->waits, "nacks", (json_int_t)e->nacks,
			      "nacks_limited", (json_int_t)e->nacks_limited,
			      "marks", (json_int_t)e->marks, "updates", (json_int_t)e->updates,
			      "no_weights", (json_int_t)e->no_weights,
			      "finals", (json_int_t)e->finals));
	return o;
}

RPC_HANDLER(rpc_box_stats)
{
	const struct box *b = ctx->box;
	uint64_t total[DROP_COUNT] = { 0 };
	int rc = rpc_params_known(params, no_params, err, errlen);

	if (rc < 0)
		return rc;
	json_t *ports = json_array(), *lcores = json_array();
	for (unsigned i = 0; i < b->layout.nports; i++)
		json_array_append_new(ports, port_stats(b, i));
	for (unsigned i = 0; i < b->layout.nlcores; i++)
		json_array_append_new(lcores, lcore_stats(b, i, total));
	*result = json_pack("{s:o, s:o, s:o}", "ports", ports, "lcores", lcores,
			    "drops", drops_obj(total));
	return 0;
}
