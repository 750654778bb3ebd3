/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_server.c - the control plane's event loop: accept connections on the
 * listeners, read request lines, answer through rpc.c, queue replies and
 * notifications per connection, and end sessions. See rpc_server.h.
 *
 * Connections are never freed in the middle of a batch of events: a
 * connection that ends is marked dead, taken out of epoll and closed at
 * once (its session ends, which may abort jobs and notify others), and its
 * memory is freed at the end of rpc_server_poll.
 *
 * Budgets (docs/reliability.md "Resource budgets"): a connection whose
 * unread replies exceed --conn-reply-bytes, or any connection with unread
 * replies while all of them exceed --total-reply-bytes, is *throttled*:
 * its requests are neither read nor answered until its replies drain, so
 * pipelined requests wait in the kernel, not in pboxd. Once a second the
 * server closes connections idle for --idle-timeout-ms that hold no rank
 * and those with a request line pending for --request-timeout-ms, ends
 * those of workers that promised heartbeats (job_join's heartbeat_ms) and
 * sent nothing for --heartbeat-timeout-ms (their ranks are lost: a stopped
 * or hung process, an unreachable host), and reports log lines suppressed
 * per peer.
 */
#include "control/rpc_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/ckpt_worker.h"
#include "control/jobs.h"
#include "common/jsonl.h"
#include "control/peers.h"
#include "control/log.h"
#include "control/rpc.h"
#include "control/rpc_listen.h"
#include "control/telemetry.h"

#define MAX_EVENTS   64
#define READS_PER_EVENT 16
#define CLOSE_GRACE_MS 1000  /* to flush a last reply before closing */
#define SWEEP_MS       1000  /* timeouts and suppressed-log reports */
#define NO_PEER ((struct peer_addr){ { 0 } })

enum { EP_TCP_LISTEN = 1, EP_UNIX_LISTEN, EP_CONN };

struct listener {
	int kind;   /* EP_TCP_LISTEN / EP_UNIX_LISTEN: first, as in struct conn */
	int fd;
};

struct conn {
	int kind;   /* EP_CONN */
	int fd;
	int is_tcp;
	int dead;
	int closing;          /* answer what is queued, then close */
	int throttled;        /* over a reply budget: not read until drained */
	long deadline_ms;     /* of closing */
	long last_rx_ms;      /* last bytes received */
	long last_tx_ms;      /* replies last moved: one sent, or the first
				 queued after none were unread */
	long partial_ms;      /* since when a request line is incomplete, 0 = none */
	struct peer_addr ip;  /* TCP peer address, all zero = Unix socket */
	char peer[64];
	struct jsonl_buf in;
	char *out;
	size_t out_len, out_off, out_cap;
	uint32_t events;      /* registered with epoll */
	struct conn *next, *prev;
};

struct rpc_server {
	struct box *box;
	int ep;
	struct listener tcp, unx;
	unsigned tcp_port;
	char unix_path[108];
	struct conn *conns;   /* live */
	struct conn *dead;    /* to free at the end of the poll */
	unsigned nconns, ntcp;
	size_t out_total;     /* unread reply bytes over all connections */
	unsigned nthrottled;
	long next_sweep_ms;
	struct peers peers;
	int owns_jobs;        /* created box->jobs, so closes it */
	int owns_ckpt;        /* started box->ckpt, so stops it */
};

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* ---- connection list and teardown ---- */

static void conn_unlink(struct rpc_server *s, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static void conn_kill(struct rpc_server *s, struct conn *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = 1;
	ctl_log(s->box, CTL_LOG_DEBUG, "control connection %s closed (%s)", c->peer, why);
	epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	conn_unlink(s, c);
	s->nconns--;
	s->out_total -= c->out_len - c->out_off;
	s->nthrottled -= c->throttled != 0;
	c->throttled = 0;
	if (c->is_tcp) {
		struct peer *p = peers_get(&s->peers, &c->ip);
		s->ntcp--;
		if (p && p->conns)
			p->conns--;
	}
	c->next = s->dead;
	s->dead = c;
	jobs_session_closed(s->box->jobs, c); /* may notify other sessions */
	ckpt_worker_forget(s->box->ckpt, c);   /* a job_save's answer: dropped */
}

static void conn_free(struct conn *c)
{
	jsonl_free(&c->in);
	free(c->out);
	free(c);
}

static void free_dead(struct rpc_server *s)
{
	while (s->dead) {
		struct conn *c = s->dead;
		s->dead = c->next;
		conn_free(c);
	}
}

/* ---- output ---- */

static void set_events(struct rpc_server *s, struct conn *c, uint32_t ev)
{
	if (c->dead || c->events == ev)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = c };
	if (epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &e) == 0)
		c->events = ev;
}

/* Write what the socket takes now; wait for EPOLLOUT for the rest. */
static void flush(struct rpc_server *s, struct conn *c)
{
	while (!c->dead && c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			c->out_off += (size_t)w;
			s->out_total -= (size_t)w;
			c->last_tx_ms = now_ms();
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		conn_kill(s, c, "write failed");
		return;
	}
	if (c->dead)
		return;
	if (c->out_off == c->out_len) {
		c->out_off = c->out_len = 0;
		if (c->closing) {
			conn_kill(s, c, "closed after last reply");
			return;
		}
	}
	uint32_t ev = (c->closing || c->throttled ? 0 : EPOLLIN) | (c->out_len ? EPOLLOUT : 0);
	set_events(s, c, ev);
}

static size_t unread(const struct conn *c)
{
	return c->out_len - c->out_off;
}

/* Is c over a reply budget: its own, or, while the total is over its
 * budget, more than a fair share of it (so a few connections that never
 * read cannot slow the others down)? */
static int over_budget(const struct rpc_server *s, const struct conn *c)
{
	const struct box_config *cfg = &s->box->cfg;

	return unread(c) > cfg->conn_reply_bytes ||
	       (s->out_total > cfg->total_reply_bytes &&
		unread(c) > cfg->total_reply_bytes / (s->nconns ? s->nconns : 1));
}

static int queue(struct rpc_server *s, struct conn *c, const json_t *msg)
{
	if (c->dead)   /* closed meanwhile (its own request may have done it):
			  nothing to count against the reply budget */
		return 0;
	char *line = json_dumps(msg, JSON_COMPACT);
	if (!line)
		return -ENOMEM;
	size_t n = strlen(line);
	size_t pending = c->out_len - c->out_off;
	if (!pending)
		c->last_tx_ms = now_ms();
	if (pending + n + 1 > RPC_SERVER_OUT_MAX) {
		free(line);
		ctl_log(s->box, CTL_LOG_WARN, "control connection %s: more than %u bytes of "
			"replies unread; closing it", c->peer, RPC_SERVER_OUT_MAX);
		conn_kill(s, c, "output limit");
		return -ENOBUFS;
	}
	if (c->out_off > 0 && c->out_len + n + 1 > c->out_cap) { /* compact */
		memmove(c->out, c->out + c->out_off, pending);
		c->out_len = pending;
		c->out_off = 0;
	}
	if (c->out_len + n + 1 > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + n + 1)
			cap *= 2;
		char *p = realloc(c->out, cap);
		if (!p) {
			free(line);
			return -ENOMEM;
		}
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, line, n);
	c->out[c->out_len + n] = '\n';
	c->out_len += n + 1;
	s->out_total += n + 1;
	free(line);
	return 0;
}

int rpc_server_send(struct rpc_server *s, void *session, const json_t *msg)
{
	struct conn *c = session;
	int rc = queue(s, c, msg);

	if (rc == 0 && !c->dead)
		flush(s, c);
	return rc;
}

static int send_to(void *ctx, void *session, const json_t *msg)
{
	return rpc_server_send(ctx, session, msg);
}

static void close_after_reply(struct rpc_server *s, struct conn *c)
{
	c->closing = 1;
	c->deadline_ms = now_ms() + CLOSE_GRACE_MS;
	flush(s, c);
}

/* ---- requests ---- */

static void reply_to(struct rpc_server *s, struct conn *c, json_t *reply)
{
	if (!reply)
		return;
	if (queue(s, c, reply) < 0 && !c->dead) {
		json_t *e = rpc_error_reply(NULL, RPC_INTERNAL_ERROR, "out of memory for the reply");
		if (e)
			queue(s, c, e);
		json_decref(e);
	}
	json_decref(reply);
}

static void line_too_long(struct rpc_server *s, struct conn *c)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "request line longer than %d bytes; closing the connection",
		 JSONL_MAX_LINE);
	reply_to(s, c, rpc_error_reply(NULL, RPC_INVALID_REQUEST, msg));
	close_after_reply(s, c);
}

static int blank(const char *line, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t')
			return 0;
	return 1;
}

static void throttle(struct rpc_server *s, struct conn *c, int on)
{
	if (c->throttled == on)
		return;
	c->throttled = on;
	s->nthrottled += on ? 1 : -1;
	if (on)
		ctl_log(s->box, CTL_LOG_DEBUG, "control connection %s: %zu reply bytes unread;"
			" not reading its requests until they are", c->peer, unread(c));
}

/* Answer the complete lines buffered while c is within its reply budget.
 * 0, 1 if c was throttled, or -1 if the connection ended. */
static int handle_lines(struct rpc_server *s, struct conn *c)
{
	struct rpc_ctx ctx = { .box = s->box, .session = c, .remote = c->is_tcp, .peer = c->peer };
	char *line;
	size_t len;
	int rc;
	bool took = false;

	while (!c->dead && !c->closing) {
		if (over_budget(s, c)) {
			throttle(s, c, 1);
			return 1;
		}
		if ((rc = jsonl_next(&c->in, &line, &len)) == 0)
			break;
		if (rc < 0) {
			line_too_long(s, c);
			return -1;
		}
		took = true;
		if (!blank(line, len))
			reply_to(s, c, rpc_handle_line(&ctx, line, len));
	}
	if (c->dead || c->closing)
		return -1;
	/* what is left is part of a line: the request timeout runs from the
	 * moment that line began (a client pipelining lines, each read ending
	 * inside the next, is not slow) */
	if (c->in.len > c->in.start) {
		if (!c->partial_ms || took)
			c->partial_ms = now_ms();
	} else {
		c->partial_ms = 0;
	}
	return 0;
}

static void conn_readable(struct rpc_server *s, struct conn *c)
{
	for (int i = 0; i < READS_PER_EVENT && !c->dead && !c->closing && !c->throttled; i++) {
		ssize_t r = jsonl_fill(&c->in, c->fd);
		if (r == -EAGAIN)
			break;
		if (r > 0)
			c->last_rx_ms = now_ms();
		if (r == -E2BIG) {
			line_too_long(s, c);
			break;
		}
		if (r < 0) {
			conn_kill(s, c, "read failed");
			break;
		}
		if (handle_lines(s, c) != 0)
			break;
		if (r == 0) { /* peer done sending: answer, then close */
			jobs_session_closed(s->box->jobs, c);
			close_after_reply(s, c);
			break;
		}
	}
	if (!c->dead)
		flush(s, c);
}

/* ---- accepting ---- */

static void tune_tcp(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;
	unsigned user_timeout = 30000;

	/* A worker host that dies without closing is noticed in ~25 s. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

/* "ADDR:PORT" ("[ADDR]:PORT" for IPv6) of the socket's peer, and its
 * peer address (peers.h). */
static void peer_name(int fd, int is_tcp, char *buf, size_t len, struct peer_addr *ip_out)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char a[INET6_ADDRSTRLEN];

	memset(ip_out, 0, sizeof(*ip_out));
	if (!is_tcp || getpeername(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
		snprintf(buf, len, is_tcp ? "tcp peer" : "unix peer");
		return;
	}
	*ip_out = peer_addr_of((struct sockaddr *)&ss);
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(in->sin_port));
		return;
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {   /* IPv4 on a dual-stack listener */
		inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(in6->sin6_port));
		return;
	}
	inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
	snprintf(buf, len, "[%s]:%u", a, ntohs(in6->sin6_port));
}

static void add_conn(struct rpc_server *s, int fd, int is_tcp, const struct peer_addr *ip,
		     const char *peer)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c || jsonl_init(&c->in, JSONL_MAX_LINE) < 0) {
		free(c);
		close(fd);
		ctl_log(s->box, CTL_LOG_ERROR, "out of memory for a control connection");
		return;
	}
	c->kind = EP_CONN;
	c->fd = fd;
	c->is_tcp = is_tcp;
	c->ip = *ip;
	c->events = EPOLLIN;
	c->last_rx_ms = now_ms();
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
		conn_free(c);
		close(fd);
		return;
	}
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	if (is_tcp) {
		struct peer *p = peers_get(&s->peers, ip);
		s->ntcp++;
		if (p)
			p->conns++;
	}
	ctl_log(s->box, CTL_LOG_DEBUG, "control connection from %s", c->peer);
}

/* May one more connection of this kind (and TCP peer) be taken? NULL, or
 * why not. The last --unix-reserved-conns slots are the Unix socket's. */
static const char *refuse_why(struct rpc_server *s, int is_tcp, const struct peer_addr *ip)
{
	const struct box_config *cfg = &s->box->cfg;
	unsigned max = cfg->max_conns;
	unsigned tcp_max = max - (cfg->unix_reserved_conns < max ? cfg->unix_reserved_conns : max - 1);

	if (s->nconns >= max)
		return "every control connection slot is taken (--max-conns)";
	if (!is_tcp)
		return NULL;
	if (s->ntcp >= tcp_max)
		return "every TCP control slot is taken (the rest are kept for the Unix socket)";
	struct peer *p = peers_get(&s->peers, ip);
	if (!p)
		return "too many peer addresses";
	if (cfg->max_conns_per_peer && p->conns >= cfg->max_conns_per_peer)
		return "this address has --max-conns-per-peer connections open";
	double burst = cfg->max_conns_per_peer ? cfg->max_conns_per_peer : 64;
	if (!peers_conn_allow(p, clock_s(), cfg->conn_rate_per_peer, burst))
		return "this address opens connections faster than --conn-rate-per-peer";
	return NULL;
}

static void accept_all(struct rpc_server *s, struct listener *l)
{
	for (int i = 0; i < MAX_EVENTS; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				ctl_log(s->box, CTL_LOG_WARN, "accept: %s", strerror(errno));
			return;
		}
		int is_tcp = l->kind == EP_TCP_LISTEN;
		char peer[64];
		struct peer_addr ip;
		peer_name(fd, is_tcp, peer, sizeof(peer), &ip);
		const char *why = refuse_why(s, is_tcp, &ip);
		if (why) {
			s->box->log_peer = ip;
			ctl_log(s->box, CTL_LOG_WARN, "control: refused a connection from %s: %s",
				peer, why);
			s->box->log_peer = NO_PEER;
			close(fd);
			continue;
		}
		if (is_tcp)
			tune_tcp(fd);
		add_conn(s, fd, is_tcp, &ip, peer);
	}
}

/* ---- the loop ---- */

static void handle_event(struct rpc_server *s, struct epoll_event *e)
{
	int kind = *(int *)e->data.ptr;

	if (kind != EP_CONN) {
		accept_all(s, e->data.ptr);
		return;
	}
	struct conn *c = e->data.ptr;
	if (c->dead)
		return;
	s->box->log_peer = c->ip;   /* lines logged for this peer count against it */
	if (e->events & EPOLLOUT)
		flush(s, c);
	if (!c->dead && (e->events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing &&
	    !c->throttled)
		conn_readable(s, c);
	else if (!c->dead && (e->events & (EPOLLHUP | EPOLLERR)))
		conn_kill(s, c, "hang-up");
	s->box->log_peer = NO_PEER;
}

static void expire_closing(struct rpc_server *s)
{
	long now = now_ms();

	for (struct conn *c = s->conns, *n; c; c = n) {
		n = c->next;   /* may die meanwhile: then it leads into s->dead */
		if (c->dead)
			continue;
		if (c->closing && now >= c->deadline_ms)
			conn_kill(s, c, "last reply not read in time");
	}
}

/* Throttled connections whose replies drained (below half their budget,
 * and the total within its own) are read again. */
static void resume_throttled(struct rpc_server *s)
{
	const struct box_config *cfg = &s->box->cfg;

	for (struct conn *c = s->conns, *n; c && s->nthrottled; c = n) {
		n = c->next;   /* may die meanwhile (a notice's failed send) */
		if (c->dead || !c->throttled || unread(c) > cfg->conn_reply_bytes / 2 ||
		    (unread(c) && s->out_total > cfg->total_reply_bytes))
			continue;
		throttle(s, c, 0);
		s->box->log_peer = c->ip;
		if (handle_lines(s, c) >= 0 && !c->dead)
			flush(s, c);
		s->box->log_peer = NO_PEER;
	}
}

static int log_allow(void *ctx, const struct peer_addr *ip)
{
	struct rpc_server *s = ctx;
	struct peer *p = peers_get(&s->peers, ip);

	return !p || peers_log_allow(p, clock_s(), s->box->cfg.log_peer_burst);
}

static void report_suppressed(void *ctx, const struct peer_addr *ip, uint32_t n)
{
	struct rpc_server *s = ctx;
	char a[64];

	ctl_log(s->box, CTL_LOG_WARN, "control: %" PRIu32 " log lines from %s suppressed in the"
		" last %.0f s (--log-peer-burst %" PRIu32 ")", n, peer_addr_str(ip, a, sizeof(a)),
		PEERS_LOG_WINDOW_S, s->box->cfg.log_peer_burst);
}

/* A connection holding a rank whose worker promised heartbeats that has
 * sent nothing for --heartbeat-timeout-ms (bytes waiting in its socket
 * count as sent: this thread may have been held up). */
static int heartbeat_missed(const struct rpc_server *s, const struct conn *c, long now)
{
	uint32_t limit = s->box->cfg.heartbeat_timeout_ms;
	int pending = 0;

	if (!limit || now - c->last_rx_ms < (long)limit)
		return 0;
	uint32_t hb = jobs_session_heartbeat(s->box->jobs, c);
	if (!hb || hb * 2 > limit) /* a promise the limit cannot judge */
		return 0;
	if (ioctl(c->fd, FIONREAD, &pending) == 0 && pending > 0)
		return 0;
	return 1;
}

/* Once a second: idle connections that hold no rank and request lines
 * pending too long are closed; suppressed log lines are reported. */
static void sweep(struct rpc_server *s)
{
	const struct box_config *cfg = &s->box->cfg;
	long now = now_ms();

	if (now < s->next_sweep_ms)
		return;
	s->next_sweep_ms = now + SWEEP_MS;
	for (struct conn *c = s->conns, *n; c; c = n) {
		n = c->next;   /* may die meanwhile (a notice's failed send) */
		if (c->dead || c->closing)
			continue;
		s->box->log_peer = c->ip;
		if (cfg->idle_timeout_ms && unread(c) &&
		    now - c->last_tx_ms >= (long)cfg->idle_timeout_ms &&
		    !jobs_session_holds(s->box->jobs, c)) {
			ctl_log(s->box, CTL_LOG_INFO, "control connection %s: %zu reply bytes not "
				"read for %" PRIu32 " ms and holds no rank (--idle-timeout-ms); "
				"closed", c->peer, unread(c), cfg->idle_timeout_ms);
			conn_kill(s, c, "not reading");
		} else if (c->throttled) {
			/* not read meanwhile: its partial line is not its delay */
		} else if (cfg->request_timeout_ms && c->partial_ms &&
		    now - c->partial_ms >= (long)cfg->request_timeout_ms) {
			char msg[128];
			snprintf(msg, sizeof(msg), "request line not complete within %" PRIu32
				 " ms (--request-timeout-ms); closing the connection",
				 cfg->request_timeout_ms);
			ctl_log(s->box, CTL_LOG_INFO, "control connection %s: %s", c->peer, msg);
			reply_to(s, c, rpc_error_reply(NULL, RPC_INVALID_REQUEST, msg));
			close_after_reply(s, c);
		} else if (heartbeat_missed(s, c, now)) {
			/* the worker promised heartbeats and fell silent: its
			 * process stopped or hung, or its host is unreachable */
			char why[128];
			snprintf(why, sizeof(why), "no heartbeat on its control connection for %.1f s, "
				 "--heartbeat-timeout-ms %" PRIu32 ": process stopped, hung or unreachable",
				 (double)(now - c->last_rx_ms) / 1000.0, cfg->heartbeat_timeout_ms);
			ctl_log(s->box, CTL_LOG_WARN, "control connection %s: %s; closed", c->peer, why);
			jobs_session_lost(s->box->jobs, c, why);
			conn_kill(s, c, "no heartbeat");
		} else if (cfg->idle_timeout_ms && now - c->last_rx_ms >= (long)cfg->idle_timeout_ms &&
			   !unread(c) && !jobs_session_holds(s->box->jobs, c)) {
			ctl_log(s->box, CTL_LOG_INFO, "control connection %s: idle for %" PRIu32
				" ms and holds no rank (--idle-timeout-ms); closed", c->peer,
				cfg->idle_timeout_ms);
			conn_kill(s, c, "idle");
		}
		s->box->log_peer = NO_PEER;
	}
	peers_sweep(&s->peers, clock_s(), report_suppressed, s);
}

int rpc_server_poll(struct rpc_server *s, int timeout_ms)
{
	struct epoll_event ev[MAX_EVENTS];
	/* a checkpoint being copied a piece per poll: no wait between pieces */
	int n = epoll_wait(s->ep, ev, MAX_EVENTS, ckpt_worker_hurry(s->box->ckpt) ? 0 : timeout_ms);

	if (n < 0) {
		if (errno != EINTR)
			return -errno;
		n = 0;
	}
	for (int i = 0; i < n; i++)
		handle_event(s, &ev[i]);
	if (s->nthrottled)
		resume_throttled(s);
	sweep(s);
	expire_closing(s);
	free_dead(s);
	jobs_tick(s->box->jobs);
	ckpt_worker_poll(s->box->ckpt, s->box, send_to, s);
	box_ports_watch(s->box);
	box_telemetry_tick(s->box);
	return n;
}

/* ---- set-up and teardown ---- */

static void notify_aborted(void *ctx, void *session, const struct job *j,
			   const struct jobs_reset_note *reset)
{
	struct rpc_server *s = ctx;
	json_t *p = json_pack("{s:s, s:I, s:s}", "job", j->name, "job_id", (json_int_t)j->id,
			      "reason", reset ? reset->reason : j->reason);
	if (p && reset) {   /* job_reset: where the keys go on */
		json_t *done = json_array();
		for (uint32_t i = 0; i < reset->nkeys; i++)
			json_array_append_new(done, json_pack("[I, I]", (json_int_t)reset->done[i][0],
							       (json_int_t)reset->done[i][1]));
		json_object_set_new(p, "base", json_integer(reset->base));
		json_object_set_new(p, "done", done);
	}
	json_t *m = rpc_notification(reset ? "job_reset" : "job_aborted", p);
	if (m)
		rpc_server_send(s, session, m);
	json_decref(m);
}

static int add_listener(struct rpc_server *s, struct listener *l, int kind, int fd)
{
	l->kind = kind;
	l->fd = fd;
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = l };
	return epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

static int open_listeners(struct rpc_server *s, char *err, size_t errlen)
{
	const struct box_config *cfg = &s->box->cfg;
	int fd, rc;

	if (!cfg->control[0] && !cfg->rpc_socket[0]) {
		snprintf(err, errlen, "no control listener configured (--control, --rpc-socket)");
		return -EINVAL;
	}
	if (cfg->control[0]) {
		fd = rpc_listen_tcp("control", cfg->control, &s->tcp_port, err, errlen);
		if (fd < 0)
			return fd;
		if ((rc = add_listener(s, &s->tcp, EP_TCP_LISTEN, fd)) < 0) {
			close(fd);
			snprintf(err, errlen, "epoll: %s", strerror(-rc));
			return rc;
		}
	}
	if (cfg->rpc_socket[0]) {
		fd = rpc_listen_unix(cfg->rpc_socket, cfg->rpc_socket_mode, cfg->rpc_socket_group,
				     err, errlen);
		if (fd < 0)
			return fd;
		snprintf(s->unix_path, sizeof(s->unix_path), "%s", cfg->rpc_socket);
		if ((rc = add_listener(s, &s->unx, EP_UNIX_LISTEN, fd)) < 0) {
			close(fd);
			snprintf(err, errlen, "epoll: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Room for every connection: the soft limit on descriptors goes up to
 * --max-conns + RPC_SERVER_FD_SPARE if the hard one allows (a
 * service's soft limit is often 1024); if not, say how many fit. */
static void fd_room(struct box *box)
{
	struct rlimit rl;
	const rlim_t want = (rlim_t)box->cfg.max_conns + RPC_SERVER_FD_SPARE;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rlim_t cur = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
	if (rl.rlim_cur > cur && setrlimit(RLIMIT_NOFILE, &rl) != 0)
		rl.rlim_cur = cur;
	if (rl.rlim_cur < want)
		ctl_log(box, CTL_LOG_WARN, "open files limited to %llu (ulimit -n; systemd: "
			"LimitNOFILE): about %llu control connections fit, not --max-conns %u",
			(unsigned long long)rl.rlim_cur,
			(unsigned long long)(rl.rlim_cur > RPC_SERVER_FD_SPARE ?
					     rl.rlim_cur - RPC_SERVER_FD_SPARE : 0),
			box->cfg.max_conns);
}

int rpc_server_open(struct rpc_server **out, struct box *box, char *err, size_t errlen)
{
	struct rpc_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->box = box;
	s->tcp.fd = s->unx.fd = -1;
	fd_room(box);
	if (peers_init(&s->peers, box->cfg.max_conns + 256) < 0) {
		snprintf(err, errlen, "out of memory");
		free(s);
		return -ENOMEM;
	}
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->ep < 0) {
		rc = -errno;
		snprintf(err, errlen, "epoll_create1: %s", strerror(-rc));
		peers_free(&s->peers);
		free(s);
		return rc;
	}
	if (!box->jobs) {
		rc = jobs_open(box, &box->jobs);
		if (rc < 0) {
			snprintf(err, errlen, "out of memory for the job registry");
			close(s->ep);
			peers_free(&s->peers);
			free(s);
			return rc;
		}
		s->owns_jobs = 1;
	}
	jobs_set_notify(box->jobs, notify_aborted, s);
	if (!box->ckpt) {
		if ((rc = ckpt_worker_open(&box->ckpt)) < 0) {
			snprintf(err, errlen, "cannot start the checkpoint thread: %s",
				 strerror(-rc));
			rpc_server_close(s);
			return rc;
		}
		s->owns_ckpt = 1;
	}
	box->log_gate.allow = log_allow;
	box->log_gate.ctx = s;
	rc = open_listeners(s, err, errlen);
	if (rc < 0) {
		rpc_server_close(s);
		return rc;
	}
	if (s->tcp.fd >= 0) {
		ctl_log(box, CTL_LOG_INFO, "control: JSON-RPC on tcp %s (port %u)",
			box->cfg.control, s->tcp_port);
		if (box->cfg.operator_secret_len)
			ctl_log(box, CTL_LOG_INFO, "control: operator methods over tcp need the"
				" operator secret");
		else
			ctl_log(box, CTL_LOG_WARN, "control: no operator secret: tcp operators may only"
				" read; job_create, job_abort and job_save only over the unix socket (set"
				" --operator-secret-file to allow them over tcp)");
	}
	if (s->unx.fd >= 0)
		ctl_log(box, CTL_LOG_INFO, "control: JSON-RPC on unix %s", s->unix_path);
	*out = s;
	return 0;
}

void rpc_server_close(struct rpc_server *s)
{
	if (!s)
		return;
	/* Our registry goes first: with the lcores stopped there is nothing
	 * to abort, and the sessions below then end without touching a job.
	 * A registry the caller made outlives us but no longer notifies us. */
	if (s->owns_ckpt) { /* waits for a checkpoint being written */
		ckpt_worker_close(s->box->ckpt);
		s->box->ckpt = NULL;
	}
	if (s->owns_jobs) {
		jobs_close(s->box->jobs);
		s->box->jobs = NULL;
	} else if (s->box->jobs) {
		jobs_set_notify(s->box->jobs, NULL, NULL);
	}
	s->box->log_gate.allow = NULL;
	s->box->log_gate.ctx = NULL;
	while (s->conns)
		conn_kill(s, s->conns, "server closing");
	free_dead(s);
	if (s->tcp.fd >= 0)
		close(s->tcp.fd);
	if (s->unx.fd >= 0) {
		close(s->unx.fd);
		unlink(s->unix_path);
	}
	close(s->ep);
	peers_free(&s->peers);
	free(s);
}

unsigned rpc_server_tcp_port(const struct rpc_server *s)
{
	return s->tcp.fd >= 0 ? s->tcp_port : 0;
}
