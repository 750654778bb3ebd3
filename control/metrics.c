/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics.c - the Prometheus exposition of pboxd's counters and the small
 * non-blocking HTTP server that serves it (see metrics.h). Every metric is
 * written once, from the same live counters box_stats reads.
 */
#include "control/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/drops.h"
#include "control/jobs.h"
#include "control/jobs_nonfinite.h"
#include "control/peers.h"
#include "control/rpc_listen.h"

/* ---- the exposition ---- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Job names are [A-Za-z0-9._-]: no label escaping is ever needed. */
static void ports(FILE *f, const struct box *b)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} m[] = {
		{ "pbox_port_rx_packets_total", "Packets the port received.",
		  offsetof(struct box_port_stats, ipackets) },
		{ "pbox_port_tx_packets_total", "Packets the port sent.",
		  offsetof(struct box_port_stats, opackets) },
		{ "pbox_port_rx_bytes_total", "Bytes the port received.",
		  offsetof(struct box_port_stats, ibytes) },
		{ "pbox_port_tx_bytes_total", "Bytes the port sent.",
		  offsetof(struct box_port_stats, obytes) },
		{ "pbox_port_rx_missed_total", "Packets the port dropped: rx queues full.",
		  offsetof(struct box_port_stats, imissed) },
		{ "pbox_port_rx_errors_total", "Packets received with errors.",
		  offsetof(struct box_port_stats, ierrors) },
		{ "pbox_port_tx_errors_total", "Packets the port failed to send.",
		  offsetof(struct box_port_stats, oerrors) },
	};
	struct box_port_stats st[BOX_MAX_PORTS];
	int ok[BOX_MAX_PORTS];

	for (unsigned i = 0; i < b->layout.nports; i++)
		ok[i] = b->dp.port_stats && b->dp.port_stats(b->dp.ctx, i, &st[i]) == 0;
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		family(f, m[k].name, "counter", m[k].help);
		for (unsigned i = 0; i < b->layout.nports; i++)
			if (ok[i])
				fprintf(f, "%s{port=\"%u\"} %" PRIu64 "\n", m[k].name,
					b->layout.ports[i].port,
					*(const uint64_t *)((const char *)&st[i] + m[k].off));
	}
	family(f, "pbox_port_up", "gauge", "1 if the port's link is up.");
	for (unsigned i = 0; i < b->layout.nports; i++)
		if (ok[i])
			fprintf(f, "pbox_port_up{port=\"%u\"} %d\n", b->layout.ports[i].port,
				st[i].link_up != 0);
}

static void lcores(FILE *f, const struct box *b)
{
	static const struct lcore_stats zl;
	static const struct engine_counters ze;
	static const struct {
		const char *name, *help;
		int engine;   /* 1: engine_counters; 2: lcore_stats, ns shown as seconds */
		size_t off;
	} m[] = {
		{ "pbox_lcore_rx_packets_total", "Packets the lcore received.", 0,
		  offsetof(struct lcore_stats, rx) },
		{ "pbox_lcore_tx_packets_total", "Packets the lcore sent.", 0,
		  offsetof(struct lcore_stats, tx) },
		{ "pbox_lcore_busy_polls_total", "Polls that found packets.", 0,
		  offsetof(struct lcore_stats, busy_polls) },
		{ "pbox_lcore_idle_polls_total", "Polls that found none.", 0,
		  offsetof(struct lcore_stats, idle_polls) },
		{ "pbox_lcore_busy_seconds_total", "Time in polls that found work (the rest "
		  "was spent polling empty queues or sleeping).", 2,
		  offsetof(struct lcore_stats, busy_ns) },
		{ "pbox_lcore_contributions_total", "Contributions accepted.", 1,
		  offsetof(struct engine_counters, pushes) },
		{ "pbox_lcore_rounds_total", "Segment rounds completed.", 1,
		  offsetof(struct engine_counters, completes) },
		{ "pbox_lcore_duplicates_total", "Retransmitted contributions of completed "
		  "rounds, answered from the shadow copy.", 1,
		  offsetof(struct engine_counters, dup_done) },
		{ "pbox_lcore_nacks_total", "NACKs sent to ranks missing from a round.", 1,
		  offsetof(struct engine_counters, nacks) },
		{ "pbox_lcore_waits_total", "WAIT notices sent.", 1,
		  offsetof(struct engine_counters, waits) },
		{ "pbox_lcore_congestion_marks_total",
		  "Rounds whose results went out marked congested.", 1,
		  offsetof(struct engine_counters, marks) },
		{ "pbox_lcore_ps_updates_total", "PS segment rounds whose optimizer step ran.", 1,
		  offsetof(struct engine_counters, updates) },
		{ "pbox_lcore_ps_nonfinite_total", "PS segment rounds whose gradient sum held a "
		  "NaN or Inf.", 1, offsetof(struct engine_counters, nonfinite) },
		{ "pbox_lcore_ps_skipped_total", "... of them whose step was skipped (policy "
		  "skip).", 1, offsetof(struct engine_counters, skipped) },
	};

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		family(f, m[k].name, "counter", m[k].help);
		for (unsigned i = 0; i < b->layout.nlcores; i++) {
			const void *src;
			uint64_t v;
			if (m[k].engine == 1) {
				const struct engine_counters *e = b->dp.engine_stats ?
					b->dp.engine_stats(b->dp.ctx, i) : NULL;
				src = e ? (const void *)e : (const void *)&ze;
			} else {
				const struct lcore_stats *l = b->dp.lcore_stats ?
					b->dp.lcore_stats(b->dp.ctx, i) : NULL;
				src = l ? (const void *)l : (const void *)&zl;
			}
			v = __atomic_load_n((const uint64_t *)((const char *)src + m[k].off),
					    __ATOMIC_RELAXED);
			if (m[k].engine == 2)
				fprintf(f, "%s{lcore=\"%u\"} %" PRIu64 ".%09" PRIu64 "\n", m[k].name,
					i, v / 1000000000u, v % 1000000000u);
			else
				fprintf(f, "%s{lcore=\"%u\"} %" PRIu64 "\n", m[k].name, i, v);
		}
	}
}

static void drops(FILE *f, const struct box *b)
{
	uint64_t total[DROP_COUNT] = { 0 };

	for (unsigned i = 0; b->dp.lcore_stats && i < b->layout.nlcores; i++) {
		const struct lcore_stats *l = b->dp.lcore_stats(b->dp.ctx, i);
		for (int r = 1; l && r < DROP_COUNT; r++)
			total[r] += __atomic_load_n(&l->drops[r], __ATOMIC_RELAXED);
	}
	family(f, "pbox_drops_total", "counter", "Packets the box dropped, by reason "
	       "(pboxctl stats explains each).");
	for (int r = 1; r < DROP_COUNT; r++)
		fprintf(f, "pbox_drops_total{reason=\"%s\"} %" PRIu64 "\n", drop_name(r), total[r]);
}

static void jobs(FILE *f, const struct box *b)
{
	static const char *const names[] = { "pbox_job_rounds_total", "pbox_job_reduced_bytes_total",
					      "pbox_job_nacks_total", "pbox_job_ranks_joined",
					      "pbox_job_world" };
	static const char *const help[] = {
		"Segment rounds the job completed.",
		"Contribution bytes the box reduced for the job.",
		"NACKs the box sent the job's ranks (lost contributions).",
		"Ranks that have joined the job.",
		"Ranks the job has.",
	};
	unsigned n = 0;

	for (const struct job *j = jobs_next(b->jobs, NULL); j; j = jobs_next(b->jobs, j))
		n++;
	struct job_traffic *sums = calloc(n ? n : 1, sizeof(*sums));
	unsigned i = 0;
	for (const struct job *j = jobs_next(b->jobs, NULL); sums && j; j = jobs_next(b->jobs, j))
		jobs_traffic(b->jobs, j, &sums[i++]);
	family(f, "pbox_jobs", "gauge", "Jobs on the box.");
	fprintf(f, "pbox_jobs %u\n", n);
	for (unsigned k = 0; sums && k < 5; k++) {
		family(f, names[k], k < 3 ? "counter" : "gauge", help[k]);
		i = 0;
		for (const struct job *j = jobs_next(b->jobs, NULL); j; j = jobs_next(b->jobs, j), i++) {
			uint64_t v = k == 0 ? sums[i].rounds : k == 1 ? sums[i].bytes :
				     k == 2 ? sums[i].nacks : k == 3 ? j->njoined : j->world;
			fprintf(f, "%s{pbox_job=\"%s\",state=\"%s\"} %" PRIu64 "\n", names[k], j->name,
				job_state_name(j->state), v);
		}
	}
	free(sums);
}

/* PS gradients that were not finite, per job (and its policy) and rank. */
static void nonfinite(FILE *f, const struct box *b)
{
	struct job_nonfinite n;

	family(f, "pbox_job_nonfinite_rounds_total", "counter", "PS segment rounds of the job "
	       "whose gradient sum held a NaN or Inf (policy: the job's nonfinite).");
	for (const struct job *j = jobs_next(b->jobs, NULL); j; j = jobs_next(b->jobs, j)) {
		jobs_nonfinite_counts(b->jobs, j, &n);
		fprintf(f, "pbox_job_nonfinite_rounds_total{pbox_job=\"%s\",policy=\"%s\"} %"
			PRIu64 "\n", j->name, jobs_nonfinite_name(j->nonfinite), n.rounds);
	}
	family(f, "pbox_job_skipped_rounds_total", "counter", "... of them whose optimizer step "
	       "was skipped (policy skip).");
	for (const struct job *j = jobs_next(b->jobs, NULL); j; j = jobs_next(b->jobs, j)) {
		jobs_nonfinite_counts(b->jobs, j, &n);
		fprintf(f, "pbox_job_skipped_rounds_total{pbox_job=\"%s\"} %" PRIu64 "\n",
			j->name, n.skipped);
	}
	family(f, "pbox_job_rank_nonfinite_total", "counter", "PS gradients (segment rounds) "
	       "a rank sent with a NaN or Inf.");
	for (const struct job *j = jobs_next(b->jobs, NULL); j; j = jobs_next(b->jobs, j))
		for (uint16_t r = 0; r < j->world; r++)
			fprintf(f, "pbox_job_rank_nonfinite_total{pbox_job=\"%s\",rank=\"%u\"} %"
				PRIu64 "\n", j->name, (unsigned)r, jobs_rank_nonfinite(b->jobs, j, r));
}

/* The box's id in the `box` label: --box-id, else --control's ADDR:PORT,
 * with the host name for a wildcard address (0.0.0.0), else the host
 * name: one box of a fleet told from another in one Prometheus. */
static void box_id_of(const struct box *b, char *buf, size_t len)
{
	const char *ctl = b->cfg.control, *colon = strrchr(ctl, ':');
	char host[256];

	if (b->cfg.box_id[0]) {
		snprintf(buf, len, "%s", b->cfg.box_id);
		return;
	}
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "pboxd");
	host[sizeof(host) - 1] = 0;
	if (!ctl[0] || !colon)
		snprintf(buf, len, "%s", host);
	else if (strncmp(ctl, "0.0.0.0:", 8) == 0 || strncmp(ctl, "[::]:", 5) == 0)
		snprintf(buf, len, "%s%s", host, colon);
	else
		snprintf(buf, len, "%s", ctl);
}

/* text with box="id" added to every sample's labels, into *out. */
static int add_box_label(const char *text, size_t len, const char *id, char **out,
			 size_t *outlen)
{
	char esc[2 * BOX_ID_MAX + 1], *d = esc;
	FILE *f = open_memstream(out, outlen);

	if (!f)
		return -ENOMEM;
	for (const char *s = id; *s && d < esc + sizeof(esc) - 2; s++) {
		if (*s == '\\' || *s == '"')
			*d++ = '\\';
		*d++ = *s == '\n' ? 'n' : *s;
	}
	*d = 0;
	for (size_t i = 0; i < len;) {
		const char *line = text + i, *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) + 1 : len - i;
		size_t name = strcspn(line, "{ \n");
		if (line[0] == '#' || line[0] == '\n' || name >= n)
			fwrite(line, 1, n, f);
		else if (line[name] == '{')
			fprintf(f, "%.*sbox=\"%s\",%.*s", (int)name + 1, line, esc,
				(int)(n - name - 1), line + name + 1);
		else
			fprintf(f, "%.*s{box=\"%s\"}%.*s", (int)name, line, esc, (int)(n - name),
				line + name);
		i += n;
	}
	return fclose(f) == 0 ? 0 : -ENOMEM;
}

int metrics_render(const struct box *b, char **text, size_t *len)
{
	char *raw = NULL, id[BOX_ID_MAX + 256];
	size_t rawlen = 0;
	FILE *f = open_memstream(&raw, &rawlen);

	if (!f)
		return -ENOMEM;
	family(f, "pbox_up", "gauge", "1: pboxd is serving.");
	fprintf(f, "pbox_up 1\n");
	family(f, "pbox_uptime_seconds", "gauge", "Seconds since pboxd started.");
	fprintf(f, "pbox_uptime_seconds %.3f\n", clock_s() - b->start_time);
	ports(f, b);
	lcores(f, b);
	drops(f, b);
	jobs(f, b);
	nonfinite(f, b);
	if (fclose(f) != 0) {
		free(raw);
		return -ENOMEM;
	}
	box_id_of(b, id, sizeof(id));
	int rc = add_box_label(raw, rawlen, id, text, len);
	free(raw);
	return rc;
}

/* ---- the server ---- */

struct mconn {
	int fd;                 /* -1: free */
	struct peer_addr addr;  /* its peer address */
	long deadline_ms;
	size_t got;             /* request bytes read */
	char req[METRICS_REQ_MAX];
	char *out;              /* the answer being written, malloc'ed */
	size_t out_len, sent;
};

struct metrics_server {
	const struct box *box;
	int fd;
	struct mconn c[METRICS_MAX_CONNS];
	struct peers peers;     /* connections and their rate per peer address */
	long swept_ms;          /* peers_sweep's last run */
};

static long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void conn_close(struct metrics_server *m, struct mconn *c)
{
	if (c->fd >= 0) {
		close(c->fd);
		struct peer *p = peers_get(&m->peers, &c->addr);
		if (p && p->conns)
			p->conns--;
	}
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* The answer to a complete request head: the metrics for GET /metrics,
 * 404 for another path, 405 for another method. */
static void answer(struct metrics_server *m, struct mconn *c)
{
	char *body = NULL, head[256];
	size_t blen = 0;
	const char *status = "200 OK", *type = "text/plain; version=0.0.4; charset=utf-8";
	int get = strncmp(c->req, "GET ", 4) == 0, head_only = strncmp(c->req, "HEAD ", 5) == 0;
	const char *path = c->req + (get ? 4 : head_only ? 5 : 0);

	if (!get && !head_only) {
		status = "405 Method Not Allowed";
	} else if (strncmp(path, "/metrics ", 9) != 0 && strncmp(path, "/metrics?", 9) != 0) {
		status = "404 Not Found";
	} else if (metrics_render(m->box, &body, &blen) < 0) {
		status = "500 Internal Server Error";
		body = NULL;
		blen = 0;
	}
	if (strncmp(status, "200", 3) != 0) {
		free(body);
		body = strdup("try GET /metrics\n");
		blen = body ? strlen(body) : 0;
		type = "text/plain; charset=utf-8";
	}
	int hl = snprintf(head, sizeof(head), "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, type, blen);
	size_t send_body = head_only ? 0 : blen;
	c->out = malloc((size_t)hl + send_body);
	if (!c->out) {
		free(body);
		conn_close(m, c);
		return;
	}
	memcpy(c->out, head, (size_t)hl);
	if (send_body)
		memcpy(c->out + hl, body, send_body);
	c->out_len = (size_t)hl + send_body;
	free(body);
}

/* Read what the request has sent, answer once its head is complete,
 * write what the socket takes; close when done, failed or late. */
static void conn_step(struct metrics_server *m, struct mconn *c, long now)
{
	if (now > c->deadline_ms) {
		conn_close(m, c);
		return;
	}
	if (!c->out) {
		ssize_t n = recv(c->fd, c->req + c->got, sizeof(c->req) - 1 - c->got, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			conn_close(m, c);
			return;
		}
		if (n > 0)
			c->got += (size_t)n;
		c->req[c->got] = '\0';
		if (!strstr(c->req, "\r\n\r\n") && !strstr(c->req, "\n\n")) {
			if (c->got == sizeof(c->req) - 1)
				conn_close(m, c); /* a head too long for a scraper */
			return;
		}
		answer(m, c);
		if (c->fd < 0)
			return;
	}
	ssize_t n = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		conn_close(m, c);
		return;
	}
	if (n > 0)
		c->sent += (size_t)n;
	if (c->sent == c->out_len)
		conn_close(m, c);
}

int metrics_open(struct metrics_server **out, const struct box *b, const char *addr,
		 unsigned *port, char *err, size_t errlen)
{
	struct metrics_server *m = calloc(1, sizeof(*m));

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->box = b;
	m->fd = rpc_listen_tcp("metrics", addr, port, err, errlen);
	if (m->fd < 0) {
		int rc = m->fd;
		free(m);
		return rc;
	}
	if (peers_init(&m->peers, METRICS_PEERS) < 0) {
		close(m->fd);
		free(m);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < METRICS_MAX_CONNS; i++)
		m->c[i].fd = -1;
	*out = m;
	return 0;
}

/*
 * Where the connection of peer addr goes (issue 44.7: a flood of
 * connections from one address pushed every scraper out, oldest first):
 * a peer at --metrics-conns-per-peer replaces its own oldest; else a free
 * slot; else the oldest of the peer holding the most. NULL: none (the
 * peer table is full).
 */
static struct mconn *slot_for(struct metrics_server *m, const struct peer_addr *addr,
			      struct peer *p)
{
	uint32_t cap = m->box->cfg.metrics_conns_per_peer;
	struct mconn *best = NULL;
	uint32_t most = 0;

	if (cap && p->conns >= cap) {
		for (unsigned i = 0; i < METRICS_MAX_CONNS; i++)
			if (m->c[i].fd >= 0 && !memcmp(&m->c[i].addr, addr, sizeof(*addr)) &&
			    (!best || m->c[i].deadline_ms < best->deadline_ms))
				best = &m->c[i];
		return best;
	}
	for (unsigned i = 0; i < METRICS_MAX_CONNS; i++)
		if (m->c[i].fd < 0)
			return &m->c[i];
	for (unsigned i = 0; i < METRICS_MAX_CONNS; i++) {
		struct peer *q = peers_get(&m->peers, &m->c[i].addr);
		uint32_t n = q ? q->conns : 0;
		if (!best || n > most || (n == most && m->c[i].deadline_ms < best->deadline_ms)) {
			best = &m->c[i];
			most = n;
		}
	}
	return best;
}

static void no_report(void *ctx, const struct peer_addr *addr, uint32_t n)
{
	(void)ctx;
	(void)addr;
	(void)n;
}

void metrics_poll(struct metrics_server *m)
{
	long now = mono_ms();

	if (!m)
		return;
	uint32_t rate = m->box->cfg.metrics_rate_per_peer;
	for (unsigned k = 0; k < METRICS_ACCEPTS_PER_POLL; k++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(m->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		struct peer_addr addr = peer_addr_of((struct sockaddr *)&ss);
		struct peer *p = peers_get(&m->peers, &addr);
		/* over its rate: closed unanswered, costing others nothing */
		if (!p || !peers_conn_allow(p, (double)now / 1e3, rate, rate)) {
			close(fd);
			continue;
		}
		struct mconn *slot = slot_for(m, &addr, p);
		if (!slot) {
			close(fd);
			continue;
		}
		conn_close(m, slot);
		slot->fd = fd;
		slot->addr = addr;
		slot->deadline_ms = now + METRICS_DEADLINE_MS;
		p->conns++;
	}
	for (unsigned i = 0; i < METRICS_MAX_CONNS; i++)
		if (m->c[i].fd >= 0)
			conn_step(m, &m->c[i], now);
	if (now - m->swept_ms >= 1000) {
		peers_sweep(&m->peers, (double)now / 1e3, no_report, NULL);
		m->swept_ms = now;
	}
}

void metrics_close(struct metrics_server *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < METRICS_MAX_CONNS; i++)
		conn_close(m, &m->c[i]);
	close(m->fd);
	peers_free(&m->peers);
	free(m);
}
