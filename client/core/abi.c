/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * abi.c - what lets a program built against one libpbox run with another:
 * the library's version, the sizes of its structs for FFI bindings, and the
 * size-checked copies of pbox_opts (defaults; reading a caller's options)
 * and pbox_stats.
 *
 * Rules (include/pbox.h, "ABI rules"): a struct only grows at its end; the
 * caller says how many bytes its copy has (pbox_opts.size, the size argument
 * of pbox_get_stats_sized); the library touches only those bytes. A caller
 * older than the library gets the defaults for fields it does not have; a
 * caller newer than the library is accepted as long as the fields the
 * library does not know are 0 ("default"), and refused with a message
 * otherwise, never silently ignored (Linux's copy_struct_from_user rule;
 * client_struct_tail, which pbox_optim and pbox_topk_opts follow too).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/knobs.h"
#include "client/core/req.h"

#define DEFAULT_RTO_MS     20
#define DEFAULT_WINDOW     128

/* The first layouts (0.2.0): the smallest sizes accepted. Frozen: a field
 * added later lies beyond them. */
#define OPTS_SIZE_V0  (offsetof(pbox_opts, udp_offload) + sizeof(uint32_t))
#define STATS_SIZE_V0 (offsetof(pbox_stats, window) + sizeof(uint64_t))
_Static_assert(OPTS_SIZE_V0 == 24, "pbox_opts' first layout is 24 bytes");
_Static_assert(STATS_SIZE_V0 == 104, "pbox_stats' first layout is 104 bytes");
_Static_assert(offsetof(pbox_opts, size) == 0, "pbox_opts.size comes first");
/* A larger size is not a struct's: garbage, or the first field of a
 * pbox_opts from before the size field (a timeout in ms). */
#define STRUCT_SIZE_MAX 4096

#define STR_(x) #x
#define STR(x)  STR_(x)
#define VERSION_STRING STR(PBOX_VERSION_MAJOR) "." STR(PBOX_VERSION_MINOR) "." \
	STR(PBOX_VERSION_PATCH)

unsigned pbox_version(void)
{
	return PBOX_VERSION;
}

const char *pbox_version_string(void)
{
	return VERSION_STRING;
}

size_t pbox_opts_size(void)
{
	return sizeof(pbox_opts);
}

size_t pbox_stats_size(void)
{
	return sizeof(pbox_stats);
}

size_t pbox_optim_size(void)
{
	return sizeof(pbox_optim);
}

static void opts_defaults(pbox_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	uint64_t t;
	knob_value(NULL, KNOB_TIMEOUT, &t);   /* (refused text: the default, and
						 pbox_connect names it) */
	o->timeout_ms = (uint32_t)t;
	o->rto_ms = DEFAULT_RTO_MS;
	o->window = DEFAULT_WINDOW;
	o->mtu = 0;   /* automatic: pmtu.c */
	uint64_t on;
	knob_value(NULL, KNOB_UDP_OFFLOAD, &on);   /* (a flag: never fails) */
	o->udp_offload = (uint32_t)on;
	o->join_secret = NULL;   /* pbox_connect falls back to PBOX_JOIN_SECRET */
	o->transport = PBOX_TRANSPORT_AUTO; /* client_opts_read reads PBOX_TRANSPORT */
	knob_value(NULL, KNOB_BUSY_POLL, &on);
	o->busy_poll = (uint32_t)on;
	o->job_bytes = 0;   /* pbox_connect reads PBOX_JOB_BYTES (checked) */
}

/* opts.transport 0 (auto): $PBOX_TRANSPORT, if set, must name one. */
static int transport_from_env(pbox_client *c)
{
	uint64_t k;

	if (c->opts.transport != PBOX_TRANSPORT_AUTO)
		return 0;
	int rc = knob_value(c, KNOB_TRANSPORT, &k);
	if (rc == 0)
		c->opts.transport = (uint32_t)k;
	return rc;
}

int pbox_opts_init_sized(pbox_opts *opts, size_t size)
{
	pbox_opts d;

	if (!opts || size < OPTS_SIZE_V0 || size > STRUCT_SIZE_MAX)
		return PBOX_EINVAL;
	opts_defaults(&d);
	d.size = (uint32_t)size;
	memset(opts, 0, size);
	memcpy(opts, &d, size < sizeof(d) ? size : sizeof(d));
	return 0;
}

/* Index of the first non-zero byte of p[from, to), or `to`. */
static size_t first_nonzero(const void *at, size_t from, size_t to)
{
	const unsigned char *p = at;

	while (from < to && p[from] == 0)
		from++;
	return from;
}

int client_struct_tail(pbox_client *c, const char *what, const void *in, size_t size,
		       size_t known)
{
	size_t at = first_nonzero(in, known, size);

	if (at < size)
		return client_error(c, PBOX_EINVAL, "%s sets byte %zu of its %zu, beyond the "
				    "%zu bytes this libpbox %s knows: the program uses an option "
				    "of a newer libpbox (install that one)", what, at, size, known,
				    VERSION_STRING);
	return 0;
}

int client_opts_read(pbox_client *c, const pbox_opts *in)
{
	pbox_opts o;

	opts_defaults(&c->opts);
	if (!in)
		return transport_from_env(c);
	size_t size = in->size;
	if (size < OPTS_SIZE_V0)
		return client_error(c, PBOX_EINVAL, "pbox_opts.size is %zu, below the smallest "
				    "pbox_opts (%zu bytes): fill opts with pbox_opts_init() before "
				    "setting fields (programs built against libpbox before 0.2 "
				    "must be rebuilt)", size, OPTS_SIZE_V0);
	if (size > STRUCT_SIZE_MAX)
		return client_error(c, PBOX_EINVAL, "pbox_opts.size is %zu, more than any "
				    "pbox_opts (at most %d bytes): fill opts with pbox_opts_init() "
				    "before setting fields (programs built against libpbox before 0.2 "
				    "must be rebuilt)", size, STRUCT_SIZE_MAX);
	int rc = client_struct_tail(c, "pbox_opts", in, size, sizeof(o));
	if (rc < 0)
		return rc;
	memset(&o, 0, sizeof(o));
	memcpy(&o, in, size < sizeof(o) ? size : sizeof(o));
	/* 0 = the default, for every field; fields beyond `size` read 0 */
	if (o.timeout_ms)
		c->opts.timeout_ms = o.timeout_ms;
	if (o.rto_ms)
		c->opts.rto_ms = o.rto_ms;
	if (o.window)
		c->opts.window = o.window;
	if (o.mtu)
		c->opts.mtu = o.mtu;
	if (o.udp_offload)
		c->opts.udp_offload = o.udp_offload;
	c->opts.join_secret = o.join_secret;
	if (o.busy_poll)
		c->opts.busy_poll = o.busy_poll;
	if (o.job_bytes)
		c->opts.job_bytes = o.job_bytes;
	if (o.key_bytes)
		c->opts.key_bytes = o.key_bytes;
	if (o.transport && !transport_name((pbox_transport)o.transport))
		return client_error(c, PBOX_EINVAL, "pbox_opts.transport is %u: use a "
				    "pbox_transport (PBOX_TRANSPORT_AUTO, _UDP, _XDP, _VERBS)",
				    o.transport);
	c->opts.transport = o.transport;
	if (o.nonfinite > PBOX_NONFINITE_PASS)
		return client_error(c, PBOX_EINVAL, "pbox_opts.nonfinite is %u: use a "
				    "pbox_nonfinite (PBOX_NONFINITE_DEFAULT, _ABORT, _SKIP, _PASS)",
				    o.nonfinite);
	c->opts.nonfinite = o.nonfinite;
	c->opts.local_rank = o.local_rank;
	c->opts.local_world = o.local_world;
	return transport_from_env(c);
}

int pbox_get_stats_sized(const pbox_client *c, pbox_stats *out, size_t size)
{
	pbox_stats s;

	if (!out || size < STATS_SIZE_V0 || size > STRUCT_SIZE_MAX)
		return PBOX_EINVAL;
	memset(out, 0, size);
	if (!c)
		return PBOX_EINVAL;
	client_stats(c, &s);
	memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}

/* Add from's counters to *out, keeping *out's gauges (round trip, window,
 * MTU, segment size, transport: one path's, not sums). */
static void add_counters(pbox_stats *out, const pbox_client *from)
{
	pbox_stats s, g = *out;
	uint64_t *o = (uint64_t *)out;

	client_stats(from, &s);
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		o[i] += ((const uint64_t *)&s)[i];
	out->srtt_us = g.srtt_us;
	out->rttvar_us = g.rttvar_us;
	out->rto_us = g.rto_us;
	out->window = g.window;
	out->mtu = g.mtu;
	out->seg_bytes = g.seg_bytes;
	out->transport = g.transport;
}

void client_stats(const pbox_client *c, pbox_stats *out)
{
	const uint64_t *in = (const uint64_t *)&c->stats;
	uint64_t *o = (uint64_t *)out;

	_Static_assert(sizeof(pbox_stats) % sizeof(uint64_t) == 0, "pbox_stats holds only u64");
	if (c->nsubs) {   /* a fleet: its boxes' counters summed, the first's gauges */
		client_stats(c->subs[0], out);
		for (unsigned b = 1; b < c->nsubs; b++)
			add_counters(out, c->subs[b]);
	} else {
		for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
			o[i] = __atomic_load_n(&in[i], __ATOMIC_RELAXED);
		if (c->tp.ops) {   /* the transport keeps its own counters */
			struct tp_counters t;
			c->tp.ops->counters(&c->tp, &t);
			out->gso_sends += t.gso_sends;
			out->gro_receives += t.gro_receives;
			out->tx_dropped += t.tx_dropped;
			out->rx_lost += t.rx_lost;
			out->wakeups += t.wakeups;
			out->bad_packets += t.rx_bad;
		}
	}
	if (c->lane)   /* the host level: the lane's traffic too */
		add_counters(out, c->lane);
}

/* pbox_topk_opts' size, for bindings as pbox_opts_size above (that of
 * pbox_dev_opts is in client/gpu/gpu_call.c, beside its other calls). */
size_t pbox_topk_opts_size(void)
{
	return sizeof(pbox_topk_opts);
}
