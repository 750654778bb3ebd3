/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_telemetry.c - the DPDK telemetry commands of pboxd (docs/operations.md
 * "Telemetry"): /pbox/stats, /pbox/jobs and /pbox/info on the EAL's
 * telemetry socket, /run/dpdk/<file-prefix>/dpdk_telemetry.v2.
 *
 * This is the one file of pboxd with mutable file-scope state, because
 * DPDK 22.11's telemetry callbacks (telemetry_cb) take no context pointer:
 * the last snapshot the control thread published, and the mutex that
 * guards the pointer to it. The mutex is held only to swap the pointer
 * (control thread, every 200 ms) or to take a reference to the snapshot
 * (DPDK's telemetry thread, once per query); the conversion into
 * rte_tel_data runs outside it, and the last reference frees the
 * snapshot. The lcores never touch any of it.
 *
 * The answers are trees built by the control plane (control/telemetry.c);
 * this file only walks them. A query may name a part of the answer with a
 * parameter, a path of keys joined by '/' ("/pbox/stats,lcores/0"); a key
 * also matches a dict's alias (a job's name: "/pbox/jobs,myjob"). An
 * answer larger than DPDK sends (16 KiB in 22.11, which would drop the
 * entries that do not fit without a word) is replaced by an error that
 * says which parts to ask for.
 */
#include "dataplane/dp_telemetry.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_telemetry.h>

#include "common/errmsg.h"

/* What DPDK 22.11's telemetry sends at most (its MAX_OUTPUT_LEN, also
 * given as max_output_len in the socket's greeting), less room for the
 * command's name around the answer. */
#define TEL_OUTPUT_MAX 16384
#define TEL_OUTPUT_ROOM 64

struct held {
	struct dp_tel_snapshot snap;
	unsigned refs;      /* under tel_lock: 1 while published + readers */
};

static pthread_mutex_t tel_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held *tel_current; /* under tel_lock; NULL: none (yet, or any more) */

static void snap_free(struct dp_tel_snapshot *s)
{
	for (unsigned c = 0; c < DP_TEL_NCMDS; c++) {
		free(s->answer[c].nodes);
		free(s->answer[c].strs);
	}
}

static void held_free(struct held *h)
{
	snap_free(&h->snap);
	free(h);
}

/* Drop one reference; the last frees (outside the lock). */
static void held_put(struct held *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&tel_lock);
	unsigned left = --h->refs;
	pthread_mutex_unlock(&tel_lock);
	if (left == 0)
		held_free(h);
}

static struct held *held_get(void)
{
	pthread_mutex_lock(&tel_lock);
	struct held *h = tel_current;
	if (h)
		h->refs++;
	pthread_mutex_unlock(&tel_lock);
	return h;
}

void dp_telemetry_publish(void *ctx, struct dp_tel_snapshot *s)
{
	struct held *h = NULL;

	(void)ctx;
	if (s) {
		h = malloc(sizeof(*h));
		if (!h) { /* keep the last one */
			snap_free(s);
			free(s);
			return;
		}
		h->snap = *s;
		h->refs = 1;
		free(s);
	}
	pthread_mutex_lock(&tel_lock);
	struct held *old = tel_current;
	tel_current = h;
	pthread_mutex_unlock(&tel_lock);
	held_put(old);
}

void dp_telemetry_close(void)
{
	dp_telemetry_publish(NULL, NULL);
}

/* ---- walking an answer ---- */

static const char *str_at(const struct dp_tel_answer *a, uint64_t off)
{
	return off < a->strs_len ? a->strs + off : "";
}

/* The member of dict i named part (key or alias), or -ENOENT. */
static long member(const struct dp_tel_answer *a, unsigned i, const char *part, size_t len)
{
	unsigned j = i + 1;

	for (uint32_t k = 0; k < a->nodes[i].nkids; k++, j += a->nodes[j].span) {
		const struct dp_tel_node *m = &a->nodes[j];
		const char *alias = m->kind == DP_TEL_DICT && m->val ? str_at(a, m->val - 1) : "";
		if ((strlen(m->name) == len && memcmp(m->name, part, len) == 0) ||
		    (strlen(alias) == len && memcmp(alias, part, len) == 0))
			return j;
	}
	return -ENOENT;
}

/* The node a parameter path names ("" or NULL: the top), or -ENOENT. */
static long find(const struct dp_tel_answer *a, const char *path)
{
	long i = 0;

	while (path && *path && i >= 0) {
		size_t len = strcspn(path, "/");
		if (a->nodes[i].kind != DP_TEL_DICT)
			return -ENOENT;
		if (len > 0)
			i = member(a, (unsigned)i, path, len);
		path += len + (path[len] == '/');
	}
	return i;
}

static size_t digits(uint64_t v)
{
	size_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* The JSON bytes node i takes as a value (DPDK's compact output). */
static size_t json_len(const struct dp_tel_answer *a, unsigned i)
{
	const struct dp_tel_node *n = &a->nodes[i];

	if (n->kind == DP_TEL_U64)
		return digits(n->val);
	if (n->kind == DP_TEL_STR)
		return strlen(str_at(a, n->val)) + 2;
	size_t len = 2;
	unsigned j = i + 1;
	for (uint32_t k = 0; k < n->nkids; k++, j += a->nodes[j].span)
		len += strlen(a->nodes[j].name) + 4 + json_len(a, j); /* "k":v, */
	return len;
}

/* Fill d (a started dict) with the members of dict i. 0 or negative errno. */
static int fill(struct rte_tel_data *d, const struct dp_tel_answer *a, unsigned i)
{
	unsigned j = i + 1;

	for (uint32_t k = 0; k < a->nodes[i].nkids; k++, j += a->nodes[j].span) {
		const struct dp_tel_node *m = &a->nodes[j];
		int rc;
		if (m->kind == DP_TEL_U64) {
			rc = rte_tel_data_add_dict_u64(d, m->name, m->val);
		} else if (m->kind == DP_TEL_STR) {
			rc = rte_tel_data_add_dict_string(d, m->name, str_at(a, m->val));
			rc = rc == E2BIG ? 0 : rc; /* truncated: still shown */
		} else {
			struct rte_tel_data *c = rte_tel_data_alloc();
			if (!c)
				return -ENOMEM;
			rte_tel_data_start_dict(c);
			rc = fill(c, a, j);
			if (rc == 0)
				rc = rte_tel_data_add_dict_container(d, m->name, c, 0);
			if (rc != 0)
				rte_tel_data_free(c);
		}
		if (rc != 0)
			return rc < 0 ? rc : -rc;
	}
	return 0;
}

static int error_answer(struct rte_tel_data *d, const char *msg)
{
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "error", msg);
	return 0;
}

static int answer(enum dp_tel_cmd c, const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct held *h = held_get();
	char msg[DP_TEL_STR_MAX];
	int rc = 0;

	if (!h)
		return error_answer(d, "no counters: pboxd is starting or stopping");
	const struct dp_tel_answer *a = &h->snap.answer[c];
	long i = a->n ? find(a, params) : -ENOENT;
	if (i < 0) {
		snprintf(msg, sizeof(msg), "%s has no part '%s'", cmd, params ? params : "");
		error_answer(d, msg);
	} else if (a->nodes[i].kind != DP_TEL_DICT) {
		/* a single value: as a dict of one, under its own key */
		rte_tel_data_start_dict(d);
		if (a->nodes[i].kind == DP_TEL_U64)
			rte_tel_data_add_dict_u64(d, a->nodes[i].name, a->nodes[i].val);
		else
			rte_tel_data_add_dict_string(d, a->nodes[i].name, str_at(a, a->nodes[i].val));
	} else if (json_len(a, (unsigned)i) + strlen(cmd) > TEL_OUTPUT_MAX - TEL_OUTPUT_ROOM) {
		snprintf(msg, sizeof(msg), "answer larger than the %d bytes DPDK sends: ask %s,PART"
			 " for one part (docs/operations.md)", TEL_OUTPUT_MAX, cmd);
		error_answer(d, msg);
	} else {
		rte_tel_data_start_dict(d);
		rc = fill(d, a, (unsigned)i);
		if (rc < 0) { /* more than DPDK's 256 entries in a dict */
			snprintf(msg, sizeof(msg), "cannot answer (%s): ask %s,PART for one part",
				 strerror(-rc), cmd);
			error_answer(d, msg);
			rc = 0;
		}
	}
	held_put(h);
	return rc;
}

static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	return answer(DP_TEL_STATS, cmd, params, d);
}

static int tel_jobs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	return answer(DP_TEL_JOBS, cmd, params, d);
}

static int tel_info(const char *cmd, const char *params, struct rte_tel_data *d)
{
	return answer(DP_TEL_INFO, cmd, params, d);
}

/* Whether the EAL's telemetry listens on path. A file alone does not say
 * so: a box started before with the same --file-prefix may have left it. */
static int listening(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int ok;

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

int dp_telemetry_open(char *path, size_t pathlen, char *err, size_t errlen)
{
	static const struct {
		const char *cmd;
		telemetry_cb fn;
		const char *help;
	} cmds[] = {
		{ "/pbox/stats", tel_stats, "pboxd's port, lcore and drop counters. "
		  "Parameter: a part, e.g. lcores/0" },
		{ "/pbox/jobs", tel_jobs, "pboxd's jobs by id: state, ranks, rounds, bytes, "
		  "NACKs. Parameter: a job's id or name" },
		{ "/pbox/info", tel_info, "pboxd's version, ports and lcores" },
	};

	snprintf(path, pathlen, "%s/dpdk_telemetry.v2", rte_eal_get_runtime_dir());
	if (!listening(path)) {
		/* the message first: it names the path */
		int rc = errmsg(err, errlen, -ENOTSUP,
				"the EAL runs without telemetry (no one listens on %s:"
				" --no-telemetry?)", path);
		path[0] = '\0';
		return rc;
	}
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		int rc = rte_telemetry_register_cmd(cmds[k].cmd, cmds[k].fn, cmds[k].help);
		if (rc < 0) {
			path[0] = '\0';
			return errmsg(err, errlen, rc, "cannot register telemetry command %s: %s",
				      cmds[k].cmd, strerror(-rc));
		}
	}
	return 0;
}
