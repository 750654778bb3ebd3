/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c - libpbox's client lifecycle: pbox_connect, pbox_close, and a
 * snapshot of the counters (their sized copy for callers is in abi.c, with
 * the options' defaults and checks).
 *
 * pbox_connect: parse the control "host:port" (NULL -> $PBOX_CONTROL), TCP
 * connect within min(timeout_ms, CLIENT_CONNECT_MAX_MS), box_endpoints,
 * choose the MTU (pmtu.c, through a throwaway UDP socket), open the
 * transport (transport.h: pbox_opts.transport or $PBOX_TRANSPORT; it
 * knows this host's port and source IP toward endpoint 0), job_join with
 * data_ip/data_port/mtu, keep job_id/token/seg_bytes/endpoints, then
 * start the progress thread (progress.c) that owns the control connection
 * and the transport from then on. Box errors: ECONNABORTED -> PBOX_EABORTED, others
 * -> PBOX_EREJECTED, with the box's message as the last error.
 *
 * pbox_close: stop the thread, job_leave (bounded), close, free. Requests
 * not yet waited for are freed too: wait for them before closing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/core/knobs.h"
#include "client/ops/fleet.h"
#include "client/ops/host.h"
#include "client/transport/net.h"
#include "common/secret.h"

#define MAX_WINDOW         65536

static pbox_client *client_alloc(void)
{
	pbox_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done_cond, NULL);
	ctrl_init(&c->ctrl);
	c->evfd = -1;
	c->serial = client_serial_next();
	return c;
}

static bool job_name_ok(const char *job)
{
	size_t n = job ? strlen(job) : 0;

	if (n < 1 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", job[i]))
			return false;
	return true;
}

/* The join secret (pbox_opts.join_secret, else PBOX_JOIN_SECRET) travels
 * as a JSON string (docs/rpc.md job_join): 1..SECRET_MAX_LEN bytes of
 * UTF-8. Bytes that are not UTF-8 cannot be sent at all (json_string
 * refuses them: the join would go without the secret, creating an open
 * job), and a longer one the box refuses as invalid params (PBOX_EPROTO):
 * both are the caller's PBOX_EINVAL, found before anything is sent. */
static int check_secret(pbox_client *c)
{
	const char *secret = c->opts.join_secret ? c->opts.join_secret
						 : knob_text(KNOB_JOIN_SECRET);
	const char *what = c->opts.join_secret ? "pbox_opts.join_secret" : "PBOX_JOIN_SECRET";

	/* the secret the join sends, if any (read during pbox_connect only) */
	c->opts.join_secret = secret && *secret ? secret : NULL;
	if (!c->opts.join_secret)
		return 0;
	size_t n = strlen(secret);
	if (n <= SECRET_MAX_LEN)   /* (a rejoin sends it again: resume.c) */
		memcpy(c->secret, secret, n + 1);
	if (n > SECRET_MAX_LEN)
		return client_error(c, PBOX_EINVAL, "%s is %zu bytes long: at most %d", what, n,
				    SECRET_MAX_LEN);
	json_t *s = json_string(secret);
	if (!s)
		return client_error(c, PBOX_EINVAL, "%s is not UTF-8 text (it travels as a JSON "
				    "string)", what);
	json_decref(s);
	return 0;
}

/* pbox_opts.job_bytes 0: $PBOX_JOB_BYTES, if set: a whole number of bytes,
 * or of KiB, MiB, GiB or TiB with a K, M, G or T suffix (as pboxd's
 * sizes), at least 1. Anything else is PBOX_EINVAL naming it ("64M" was
 * once read as 64 bytes, "abc" as none). */
static int job_bytes_from_env(pbox_client *c)
{
	uint64_t v;

	if (c->opts.job_bytes)
		return 0;
	int rc = knob_value(c, KNOB_JOB_BYTES, &v);
	if (rc == 0)
		c->opts.job_bytes = v;
	return rc;
}

static int check_args(pbox_client *c, const char *control, const char *job, int rank,
		      int world, const pbox_opts *opts)
{
	if (!control || !*control)
		control = knob_text(KNOB_CONTROL);
	if (!control || !*control)
		return client_error(c, PBOX_EINVAL,
				    "no control address: pass one or set PBOX_CONTROL");
	if (strlen(control) >= sizeof(c->control))
		return client_error(c, PBOX_EINVAL, "control address is too long");
	snprintf(c->control, sizeof(c->control), "%s", control);
	if (!job_name_ok(job))
		return client_error(c, PBOX_EINVAL, "job name '%s' is not 1-63 characters of "
				    "[A-Za-z0-9._-]", job ? job : "(null)");
	snprintf(c->job, sizeof(c->job), "%s", job);
	if (world < 1 || world > UINT16_MAX || rank < 0 || rank >= world)
		return client_error(c, PBOX_EINVAL, "job '%s': rank %d of world %d is out of "
				    "range (0 <= rank < world <= 65535)", job, rank, world);
	c->rank = rank;
	c->world = world;
	int rc = client_opts_read(c, opts);
	if (rc < 0)
		return rc;
	uint64_t mtu, tmo;
	/* PBOX_TIMEOUT filled timeout_ms at pbox_opts_init; text it refused
	 * is named here, as PBOX_REPLACE_WAIT's */
	if ((rc = knob_value(c, KNOB_TIMEOUT, &tmo)) < 0 ||
	    (rc = knob_value(c, KNOB_REPLACE_WAIT, &tmo)) < 0)
		return rc;
	if (c->opts.mtu == 0 && (rc = knob_value(c, KNOB_MTU, &mtu)) < 0)
		return rc;
	if (c->opts.mtu == 0)
		c->opts.mtu = (uint32_t)mtu;
	c->mtu_auto = c->opts.mtu == 0;
	if (!c->mtu_auto && wire_seg_bytes(c->opts.mtu) == 0)
		return client_error(c, PBOX_EINVAL, "mtu %u is too small for a %d-byte payload",
				    c->opts.mtu, WIRE_PAYLOAD_ALIGN);
	if (c->opts.timeout_ms > INT32_MAX)
		return client_error(c, PBOX_EINVAL, "timeout_ms %u exceeds %d (24.8 days)",
				    c->opts.timeout_ms, INT32_MAX);
	if (c->opts.window > MAX_WINDOW)
		return client_error(c, PBOX_EINVAL, "window %u exceeds %d", c->opts.window,
				    MAX_WINDOW);
	uint64_t resume;
	if ((rc = knob_value(c, KNOB_RESUME, &resume)) < 0)
		return rc;
	c->resume = resume != 0;
	rc = job_bytes_from_env(c);
	if (rc == 0 && c->opts.nonfinite == PBOX_NONFINITE_DEFAULT) {
		uint64_t nf;
		if ((rc = knob_value(c, KNOB_NONFINITE, &nf)) == 0)
			c->opts.nonfinite = (uint32_t)nf;
	}
	return rc < 0 ? rc : check_secret(c);
}

static int parse_endpoint(const json_t *e, struct sockaddr_in *sa)
{
	const char *ip = json_string_value(json_object_get(e, "ip"));
	json_int_t port = json_integer_value(json_object_get(e, "port"));

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return ip && port > 0 && port <= 65535 && inet_pton(AF_INET, ip, &sa->sin_addr) == 1
		       ? 0 : PBOX_EPROTO;
}

static int get_endpoints(pbox_client *c)
{
	char err[CLIENT_MSG_LEN];
	json_t *res;
	int rc = ctrl_call(&c->ctrl, "box_endpoints", NULL, (int)c->opts.timeout_ms, &res,
			   err, sizeof(err));

	if (rc < 0)
		return client_error(c, rc, "%s", err);
	json_int_t ver = json_integer_value(json_object_get(res, "version"));
	json_int_t box_mtu = json_integer_value(json_object_get(res, "mtu"));
	c->box_mtu = box_mtu > 0 && box_mtu <= 65535 ? (uint32_t)box_mtu : 0;
	json_t *eps = json_object_get(res, "endpoints");
	size_t n = json_array_size(eps);
	if (ver != WIRE_VERSION)
		rc = client_error(c, PBOX_EPROTO, "box %s speaks wire protocol version %lld, "
				  "this libpbox speaks %d", c->control, (long long)ver, WIRE_VERSION);
	else if (n == 0 || n > UINT16_MAX)
		rc = client_error(c, PBOX_EPROTO, "box %s lists %zu data endpoints", c->control, n);
	else if (!(c->eps = calloc(n, sizeof(*c->eps))))
		rc = client_error(c, PBOX_ENOMEM, "out of memory for %zu endpoints", n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (parse_endpoint(json_array_get(eps, i), &c->eps[i]) < 0)
			rc = client_error(c, PBOX_EPROTO, "box_endpoints: endpoint %zu of box %s "
					  "has no valid ip/port", i, c->control);
	c->neps = rc == 0 ? (unsigned)n : 0;
	json_decref(res);
	return rc;
}

/*
 * pbox_opts.mtu 0: the smaller of the box's and the route's MTU, confirmed
 * by a full-size probe (pmtu.c); one that does not come back falls back to
 * 1500, with a warning on stderr, as does a box too old to answer probes.
 */
static int choose_mtu(pbox_client *c)
{
	uint32_t mtu = pmtu_route_min(c->eps, c->neps, c->box_mtu ? c->box_mtu : 1500);
	char err[CLIENT_MSG_LEN];
	uint16_t port;
	int fd, rc = udp_reserve_port(&fd, &port, err, sizeof(err));

	if (rc < 0)
		return client_error(c, rc, "%s", err);
	if (pmtu_confirm(fd, c->eps, c->neps, mtu) == 0) {
		close(fd);
		c->opts.mtu = mtu;
		return 0;
	}
	uint32_t low = mtu < 1500 ? mtu : 1500;
	int ok = low < mtu && pmtu_confirm(fd, c->eps, c->neps, low) == 0;
	close(fd);
	fprintf(stderr, "pbox: warning: job %s rank %d: a %u-byte probe to the box %s did not come "
		"back; using MTU %u%s (set pbox_opts.mtu or PBOX_MTU to choose)\n", c->job, c->rank,
		mtu, c->control, low, ok ? "" : ", also unconfirmed");
	c->opts.mtu = low;
	return 0;
}

static int open_data_and_join(pbox_client *c)
{
	char err[CLIENT_MSG_LEN];
	json_t *res;
	int rc = c->mtu_auto ? choose_mtu(c) : 0;
	uint64_t skb;

	if (rc < 0)
		return rc;
	knob_value(NULL, KNOB_XDP_MODE, &skb);   /* (never fails: native) */
	struct tp_config cfg = {
		.eps = c->eps, .neps = c->neps,
		.max_dgram = WIRE_HDR_LEN + WIRE_MAX_PAYLOAD,
		.mtu = c->opts.mtu,
		.udp_offload = (int)c->opts.udp_offload,
		.busy_poll = (int)c->opts.busy_poll,
		.xdp_skb = (int)skb,
	};
	rc = transport_open(&c->tp, (pbox_transport)c->opts.transport, &cfg, err, sizeof(err));
	if (rc < 0)
		return client_error(c, rc, "transport %s: %s",
				    transport_name((pbox_transport)c->opts.transport), err);
	stat_set(&c->stats.transport, c->tp.kind);
	json_t *params = client_join_params(c);
	c->opts.join_secret = NULL;   /* the caller's memory: not kept */
	rc = ctrl_call(&c->ctrl, "job_join", params, (int)c->opts.timeout_ms, &res, err,
		       sizeof(err));
	if (rc < 0)
		return client_error(c, rc, "%s", err);
	c->joined = true;
	rc = client_join_answer(c, res);
	stat_set(&c->stats.mtu, c->opts.mtu);
	stat_set(&c->stats.seg_bytes, c->seg_bytes);
	stat_set(&c->stats.key_bytes, (uint64_t)json_integer_value(json_object_get(res,
									       "key_bytes")));
	json_decref(res);
	return rc;
}

static int start_thread(pbox_client *c)
{
	int e;

	if (xfer_init(c) < 0)
		return client_error(c, PBOX_ENOMEM, "out of memory for a window of %u segments",
				    c->opts.window);
	c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->evfd < 0)
		return client_error(c, PBOX_ESYS, "eventfd: %s", strerror(errno));
	if ((e = pthread_create(&c->thread, NULL, progress_main, c)) != 0)
		return client_error(c, PBOX_ESYS, "cannot start the progress thread: %s",
				    strerror(e));
	c->thread_started = true;
	return 0;
}

int client_connect_box(const char *control, const char *job, int rank, int world,
		       const pbox_opts *opts, const char *placement, pbox_client **out)
{
	pbox_client *c;
	char err[CLIENT_MSG_LEN];
	int rc;

	if (!out)
		return PBOX_EINVAL;
	*out = c = client_alloc();
	if (!c)
		return PBOX_ENOMEM;
	if (placement)
		snprintf(c->placement, sizeof(c->placement), "%s", placement);
	rc = check_args(c, control, job, rank, world, opts);
	if (rc == 0) {
		uint32_t t = c->opts.timeout_ms < CLIENT_CONNECT_MAX_MS ? c->opts.timeout_ms
									 : CLIENT_CONNECT_MAX_MS;
		rc = ctrl_connect(&c->ctrl, c->control, (int)t, err, sizeof(err));
		if (rc < 0)
			client_error(c, rc, "%s", err);
	}
	if (rc == 0)
		rc = get_endpoints(c);
	if (rc == 0)
		rc = open_data_and_join(c);
	if (rc == 0)
		rc = start_thread(c);
	client_debug_joined(c, rc);
	return rc;
}

int client_connect_flat(const char *control, const char *job, int rank, int world,
			const pbox_opts *opts, pbox_client **out)
{
	const char *list = control && *control ? control : knob_text(KNOB_CONTROL);
	pbox_client *c;

	if (!out)
		return PBOX_EINVAL;
	if (!fleet_listed(list))
		return client_connect_box(control, job, rank, world, opts, NULL, out);
	/* a fleet: a client per box (fleet.c), each given the caller's opts */
	*out = c = client_alloc();
	if (!c)
		return PBOX_ENOMEM;
	int rc = check_args(c, control, job, rank, world, opts);
	return rc < 0 ? rc : fleet_connect(c, opts);
}

int pbox_connect(const char *control, const char *job, int rank, int world,
		 const pbox_opts *opts, pbox_client **out)
{
	int rc = client_connect_flat(control, job, rank, world, opts, out);

	/* the host level (host.c), once the flat job is joined */
	return rc < 0 ? rc : host_connect(*out);
}

static void stop_thread(pbox_client *c)
{
	if (!c->thread_started)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_mutex_unlock(&c->lock);
	client_kick(c);
	pthread_join(c->thread, NULL);
	c->thread_started = false;
}

static void leave_job(pbox_client *c)
{
	char err[CLIENT_MSG_LEN];
	json_t *res = NULL;
	uint32_t t = c->opts.timeout_ms < CLIENT_LEAVE_MAX_MS ? c->opts.timeout_ms
							       : CLIENT_LEAVE_MAX_MS;

	/* ctrl_open is false once the progress thread saw the connection end */
	if (!c->joined || c->ctrl.fd < 0 || (c->x && !c->ctrl_open))
		return;
	json_t *params = json_pack("{s:I, s:i}", "job_id", (json_int_t)c->job_id, "rank", c->rank);
	if (ctrl_call(&c->ctrl, "job_leave", params, (int)t, &res, err, sizeof(err)) == 0)
		json_decref(res);
}

void pbox_close(pbox_client *c)
{
	if (!c)
		return;
	host_close(c);   /* (its lane's client and host thread first) */
	if (c->fleet || c->nsubs) {   /* a fleet: no box of its own */
		fleet_close(c);
		free(c->lrs);
		pthread_cond_destroy(&c->done_cond);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return;
	}
	stop_thread(c);
	client_debug_closing(c);
	leave_job(c);
	while (c->live) {
		struct pbox_req *r = c->live;
		c->live = r->live_next;
		req_free(r);
	}
	client_ext_close(c);   /* (top-k states, device staging) */
	xfer_free(c);
	ctrl_close(&c->ctrl);
	transport_close(&c->tp);
	if (c->evfd >= 0)
		close(c->evfd);
	free(c->eps);
	free(c->lrs);
	pthread_cond_destroy(&c->done_cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

const char *pbox_transport_info(const pbox_client *c)
{
	if (c && c->nsubs)   /* a fleet: every box's (fleet_connect) */
		return c->tp.info;
	return c && c->tp.ops ? c->tp.info : "";
}
