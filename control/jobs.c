/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs.c - the job life cycle: admission (ids, tokens, the arena and the
 * JOB_INSTALL on every lcore), ranks joining and leaving, sessions, abort
 * by name, and jobs_tick, which finishes removals (the arena is freed only
 * once every lcore has applied the REMOVE) and runs the keys' and the
 * stall watch's periodic work. The top of the registry: it builds on
 * jobs_keys.c, jobs_watch.c and jobs_core.c, and none of them calls it.
 * See jobs.h for the contract.
 */
#include "control/jobs_core.h"
#include "control/jobs_keys.h"
#include "control/jobs_nonfinite.h"
#include "control/jobs_watch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "common/clock.h"
#include "common/secret.h"
#include "common/wire.h"
#include "control/log.h"

#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)
#define DEFAULT_MTU 1500

_Static_assert(BOX_MAX_EPS <= ASSIGN_MAX_EPS, "assign cannot cover every endpoint");
_Static_assert(BOX_MAX_LCORES <= 256, "chunk owners are uint8_t");

/* ---- registry ---- */

int jobs_open(struct box *box, struct jobs **out)
{
	struct jobs *js = calloc(1, sizeof(*js));
	if (!js)
		return -ENOMEM;
	js->box = box;
	*out = js;
	return 0;
}

static void job_free(struct jobs *js, struct job *j)
{
	unsigned idx = engine_job_index(j->id);

	jobs_key_table_free(js, j);
	arena_fini(&j->mem);
	if (j->arena)
		js->box->dp.mem_free(js->box->dp.ctx, j->arena, j->max_bytes);
	if (js->table[idx] == j)
		js->table[idx] = NULL;
	free(j);
}

void jobs_close(struct jobs *js)
{
	if (!js)
		return;
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++)
		if (js->table[i])
			job_free(js, js->table[i]);
	free(js);
}

void jobs_set_notify(struct jobs *js, jobs_notify_fn fn, void *ctx)
{
	js->notify = fn;
	js->notify_ctx = ctx;
}

const char *job_state_name(enum job_state s)
{
	switch (s) {
	case JOB_FORMING: return "forming";
	case JOB_ACTIVE: return "active";
	case JOB_ABORTED: return "aborted";
	}
	return "?";
}

int job_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > JOB_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static void reset_finish(struct jobs *js, struct job *j);

/* ---- removal ---- */

void jobs_tick(struct jobs *js)
{
	if (!js)
		return;
	jobs_watch(js);
	jobs_nonfinite_watch(js);
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		struct job *j = js->table[i];
		if (j && !j->removing && j->keys_removing)
			jobs_keys_tick(js, j);
		if (j && !j->removing && j->resetting && j->state != JOB_ABORTED &&
		    jobs_applied(js, j->reset_mark))
			reset_finish(js, j);
		/* its sessions were told; a connection that stays open does not
		 * keep its slot and memory */
		if (j && !j->removing && j->state == JOB_ABORTED && !j->kept &&
		    clock_s() - j->aborted_at >= JOB_ABORT_LINGER_S)
			jobs_start_remove(js, j, "aborted, its sessions told");
		if (!j || !j->removing)
			continue;
		jobs_post_removes(js, j);
		if (!jobs_applied(js, j->remove_mark))
			continue;
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s (id %" PRIu32 "): removed, %" PRIu64
			" bytes freed", j->name, j->id, j->max_bytes);
		js->nremoving--;
		job_free(js, j);
	}
}

int jobs_abort(struct jobs *js, const char *name, const char *reason,
	       char *err, size_t errlen)
{
	struct job *j = (struct job *)jobs_find(js, name);

	if (!j)
		return errmsg(err, errlen, -ENOENT, "no job named '%s'", name);
	j->kept = 0;   /* ended by its operator: it does not come back */
	jobs_abort_job(js, j, reason && *reason ? reason : "aborted by operator");
	return 0;
}

int jobs_session_holds(const struct jobs *js, const void *session)
{
	for (unsigned i = 0; js && session && i < ENGINE_MAX_JOBS; i++) {
		const struct job *j = js->table[i];
		if (!j || j->removing || j->state == JOB_ABORTED)
			continue;
		for (unsigned r = 0; r < j->world; r++)
			if (j->ranks[r].session == session)
				return 1;
	}
	return 0;
}

uint32_t jobs_session_heartbeat(const struct jobs *js, const void *session)
{
	uint32_t hb = 0;

	for (unsigned i = 0; js && session && i < ENGINE_MAX_JOBS; i++) {
		const struct job *j = js->table[i];
		if (!j || j->removing || j->state == JOB_ABORTED)
			continue;
		for (unsigned r = 0; r < j->world; r++) {
			const struct job_rank *k = &j->ranks[r];
			if (k->session == session && k->joined && k->heartbeat_ms &&
			    (!hb || k->heartbeat_ms < hb))
				hb = k->heartbeat_ms;
		}
	}
	return hb;
}

/* Rank r of j, joined, is lost: in a job that waits for replacements it
 * is marked lost (the watch ends the job if nobody takes its place in
 * time), else the job is aborted. */
static void rank_lost(struct jobs *js, struct job *j, unsigned r, const char *why)
{
	char reason[sizeof(((struct job *)0)->reason)];
	struct job_rank *k = &j->ranks[r];

	if (j->replace_wait_ms && j->state != JOB_ABORTED && j->njoined > 1) {
		k->joined = 0;
		k->lost_at = clock_s();
		snprintf(k->lost_why, sizeof(k->lost_why), "%s", why);
		j->njoined--;
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s: rank %u lost (%s); "
			     "waiting up to %.1f s for a process to join in its place", j->name, r,
			     why, j->replace_wait_ms / 1000.0);
		return;
	}
	snprintf(reason, sizeof(reason), "rank %u lost (%s)", r, why);
	jobs_abort_job(js, j, reason);
}

/* Every rank session holds is gone: the jobs of those still joined are
 * aborted with "rank R lost: why", or wait for its replacement. */
static void session_gone(struct jobs *js, void *session, const char *why)
{
	if (!js || !session)
		return;
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		struct job *j = js->table[i];
		if (!j || j->removing)
			continue;
		for (unsigned r = 0; r < j->world; r++) {
			if (j->ranks[r].session != session)
				continue;
			j->ranks[r].session = NULL;
			if (j->ranks[r].joined && j->state != JOB_ABORTED)
				rank_lost(js, j, r, why);
		}
		if (j->state == JOB_ABORTED && !job_has_session(j))
			jobs_aborted_idle(js, j);
	}
}

void jobs_session_closed(struct jobs *js, void *session)
{
	session_gone(js, session, "control connection closed");
}

void jobs_session_lost(struct jobs *js, void *session, const char *why)
{
	session_gone(js, session, why);
}

/* ---- admission ---- */

static int new_token(uint64_t *t)
{
	do {
		ssize_t n = getrandom(t, sizeof(*t), 0);
		if (n != (ssize_t)sizeof(*t))
			return n < 0 ? -errno : -EIO;
	} while (*t == 0);
	return 0;
}

/* A table entry free in the registry, hence in every lcore's table (an
 * entry is only reused after its REMOVE was applied everywhere). */
static int free_index(struct jobs *js)
{
	for (unsigned k = 0; k < ENGINE_MAX_JOBS; k++) {
		unsigned i = (js->next + k) % ENGINE_MAX_JOBS;
		if (!js->table[i]) {
			js->next = (i + 1) % ENGINE_MAX_JOBS;
			return (int)i;
		}
	}
	return -1;
}

static uint32_t next_id(struct jobs *js, unsigned idx)
{
	uint32_t g = js->gen[idx] + 1;
	if (g >= UINT32_MAX / ENGINE_MAX_JOBS)
		g = 1; /* never 0: id 0 is invalid */
	js->gen[idx] = g;
	return g * ENGINE_MAX_JOBS + idx;
}

static int check_admission(struct jobs *js, const char *name, uint32_t world,
			   char *err, size_t errlen)
{
	const struct box_config *cfg = &js->box->cfg;

	if (!job_name_valid(name))
		return errmsg(err, errlen, -EINVAL, "job name '%.80s' is not 1-%d characters "
				 "of [A-Za-z0-9._-]", name ? name : "", JOB_NAME_MAX);
	if (world < 1 || world > cfg->max_world || world > ENGINE_MAX_WORLD)
		return errmsg(err, errlen, -EINVAL, "job %s: world %" PRIu32 " is outside "
				 "[1, %" PRIu32 "] (--max-world)", name, world, cfg->max_world);
	if (jobs_find(js, name))
		return errmsg(err, errlen, -EEXIST, "job %s already exists", name);
	if (js->nlive >= cfg->max_jobs)
		return errmsg(err, errlen, -ENOSPC, "job %s: the box already runs %u jobs, "
				 "its limit (--max-jobs)", name, js->nlive);
	if (js->box->layout.nlcores == 0)
		return errmsg(err, errlen, -EINVAL, "job %s: the box has no data lcores", name);
	return 0;
}

uint32_t jobs_slots(const struct box_config *cfg, uint32_t world, uint32_t seg_bytes)
{
	uint64_t fit = JOB_SLOT_DATA_BYTES / ((uint64_t)world * seg_bytes);

	if (fit < JOB_SLOTS_MIN)
		fit = JOB_SLOTS_MIN;
	return fit < cfg->slots_per_lcore ? (uint32_t)fit : cfg->slots_per_lcore;
}

/* Lay out each lcore's engine memory at the start of the arena and install. */
static int install(struct jobs *js, struct job *j, uint64_t per_lcore, uint32_t key_cap,
		   char *err, size_t errlen)
{
	const struct box_config *cfg = &js->box->cfg;
	unsigned failed;
	struct engine_msg m = {
		.type = ENGINE_MSG_JOB_INSTALL, .job = j->id,
		.u.desc = { .id = j->id, .token = j->token, .world = j->world,
			    .seg_bytes = j->seg_bytes, .key_cap = key_cap,
			    .nslots = jobs_slots(cfg, j->world, j->seg_bytes),
			    .weight = j->weight },
	};

	for (unsigned l = 0; l < js->box->layout.nlcores; l++) {
		m.u.desc.mem = j->arena + l * per_lcore;
		int rc = jobs_post(js, l, &m);
		if (rc < 0) {
			failed = l;
			return errmsg(err, errlen, rc, "job %s: cannot reach lcore %u "
					 "(message ring full)", j->name, failed);
		}
	}
	arena_init(&j->mem, j->max_bytes, js->box->layout.nlcores * per_lcore);
	return 0;
}

static int new_job(struct jobs *js, const char *name, uint32_t world, uint64_t max_bytes,
		   uint32_t seg_bytes, uint32_t weight, struct job **out, char *err, size_t errlen)
{
	const struct box_config *cfg = &js->box->cfg;
	uint32_t key_cap = jobs_key_cap(cfg->max_keys);
	uint32_t nslots = jobs_slots(cfg, world, seg_bytes);
	uint64_t per_lcore = ALIGN64(engine_job_mem_bytes((uint16_t)world, seg_bytes, key_cap,
							  nslots));
	uint64_t engine = per_lcore * js->box->layout.nlcores;

	if (engine > max_bytes)
		return errmsg(err, errlen, -ENOSPC, "job %s: world %" PRIu32 " with %" PRIu32
				 "-byte segments needs %" PRIu64 " bytes of engine memory on %u lcores "
				 "(%" PRIu32 " slots each), more than its max_bytes %" PRIu64
				 "; raise max_bytes (--job-bytes, --max-job-bytes) or lower --slots",
				 name, world, seg_bytes, engine, js->box->layout.nlcores,
				 nslots, max_bytes);
	int idx = free_index(js);
	if (idx < 0)
		return errmsg(err, errlen, -ENOSPC, "job %s: all %d job table entries are held "
				 "by jobs being removed; retry shortly", name, ENGINE_MAX_JOBS);
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return errmsg(err, errlen, -ENOMEM, "job %s: out of memory", name);
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->world = (uint16_t)world;
	j->weight = weight ? weight : 1;
	j->placement_rank = -1;
	j->created = clock_s();
	j->log_peer = js->box->log_peer;
	j->seg_bytes = seg_bytes;
	j->max_bytes = max_bytes;
	j->timeout_ms = cfg->stall_timeout_ms;
	int rc = new_token(&j->token);
	if (rc < 0) {
		free(j);
		return errmsg(err, errlen, rc, "job %s: getrandom failed: %s", name, strerror(-rc));
	}
	if (jobs_key_table_init(js, j) < 0) {
		free(j);
		return errmsg(err, errlen, -ENOMEM, "job %s: out of memory", name);
	}
	j->arena = js->box->dp.mem_alloc(js->box->dp.ctx, max_bytes);
	if (!j->arena) {
		jobs_key_table_free(js, j);
		free(j);
		return errmsg(err, errlen, -ENOMEM, "job %s: the box could not allocate %" PRIu64
				 " bytes of job memory (hugepages exhausted?)", name, max_bytes);
	}
	j->id = next_id(js, (unsigned)idx);
	js->table[idx] = j;
	js->nlive++;
	rc = install(js, j, per_lcore, key_cap, err, errlen);
	if (rc < 0) {
		jobs_start_remove(js, j, "install failed");
		return rc;
	}
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s (id %" PRIu32 "): admitted, world %" PRIu32
		", %" PRIu32 "-byte segments, %" PRIu64 " bytes", name, j->id, world,
		seg_bytes, max_bytes);
	*out = j;
	return 0;
}

static uint32_t effective_mtu(const struct jobs *js, uint32_t mtu)
{
	uint32_t box_mtu = js->box->layout.mtu;
	if (mtu == 0)
		mtu = box_mtu ? box_mtu : DEFAULT_MTU;
	return box_mtu && box_mtu < mtu ? box_mtu : mtu;
}

/* Engine memory of a job of world ranks at mtu on every lcore (what
 * new_job reserves at the arena's start). */
static uint64_t engine_bytes(const struct jobs *js, uint32_t world, uint32_t mtu)
{
	const struct box_config *cfg = &js->box->cfg;
	uint32_t seg = wire_seg_bytes(effective_mtu(js, mtu));

	if (seg == 0 || world == 0 || world > ENGINE_MAX_WORLD)
		return 0; /* jobs_create names the error */
	return ALIGN64(engine_job_mem_bytes((uint16_t)world, seg, jobs_key_cap(cfg->max_keys),
					    jobs_slots(cfg, world, seg))) * js->box->layout.nlcores;
}

int jobs_create(struct jobs *js, const char *name, uint32_t world,
		uint64_t max_bytes, uint32_t mtu, uint32_t weight,
		const struct job **out, char *err, size_t errlen)
{
	const struct box_config *cfg = &js->box->cfg;
	struct job *j = NULL;

	if (weight > ENGINE_WEIGHT_MAX)
		return errmsg(err, errlen, -EINVAL, "job %s: weight %" PRIu32 " is above %d",
			      name, weight, ENGINE_WEIGHT_MAX);
	int rc = check_admission(js, name, world, err, errlen);

	if (rc < 0)
		return rc;
	uint32_t seg = wire_seg_bytes(effective_mtu(js, mtu));
	if (seg == 0)
		return errmsg(err, errlen, -EINVAL, "job %s: MTU %" PRIu32 " is too small "
				 "(at least %d)", name, effective_mtu(js, mtu),
				 WIRE_IP_UDP_LEN + WIRE_HDR_LEN + WIRE_PAYLOAD_ALIGN);
	if (max_bytes == 0)
		max_bytes = cfg->default_job_bytes;
	if (max_bytes > cfg->max_job_bytes)
		max_bytes = cfg->max_job_bytes;
	uint8_t by_operator;
	rc = jobs_admit_budget(js, name, ALIGN64(max_bytes), &by_operator, err, errlen);
	if (rc < 0)
		return rc;
	rc = new_job(js, name, world, ALIGN64(max_bytes), seg, weight, &j, err, errlen);
	if (rc == 0)
		j->by_operator = by_operator;
	if (rc == 0 && out)
		*out = j;
	return rc;
}

/* ---- ranks ---- */

static void ip_str(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = { .s_addr = htonl(ip) };
	if (!inet_ntop(AF_INET, &a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

static int check_rank(const struct jobs *js, const struct job *j,
		      const struct jobs_join_args *a, char *err, size_t errlen)
{
	char ip[INET_ADDRSTRLEN];

	if (j->state == JOB_ABORTED)
		return errmsg(err, errlen, -ECONNABORTED, "job %s is aborted (%s); it is "
				 "removed once its workers disconnect", j->name, j->reason);
	if (a->world != j->world)
		return errmsg(err, errlen, -EINVAL, "job %s has world %u, rank %" PRIu32
				 " joined with world %" PRIu32, j->name, j->world, a->rank, a->world);
	if (a->rank >= j->world)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 " is outside "
				 "[0, %u)", j->name, a->rank, j->world);
	if (j->ranks[a->rank].joined) {
		ip_str(j->ranks[a->rank].ip, ip, sizeof(ip));
		return errmsg(err, errlen, -EEXIST, "job %s: rank %" PRIu32 " already joined "
				 "(data address %s:%u)", j->name, a->rank, ip, j->ranks[a->rank].port);
	}
	if (a->ip == 0 || a->port == 0)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 " has no data "
				 "address (data_ip and data_port must be set)", j->name, a->rank);
	if (a->ip >> 28 >= 0xE) {   /* 224/4 multicast, 240/4 reserved and broadcast */
		ip_str(a->ip, ip, sizeof(ip));
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 "'s data_ip %s is "
				 "not a unicast address: results go to one worker", j->name, a->rank,
				 ip);
	}
	for (unsigned r = 0; r < j->world; r++) {
		if (j->ranks[r].joined && j->ranks[r].ip == a->ip && j->ranks[r].port == a->port) {
			ip_str(a->ip, ip, sizeof(ip));
			return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 "'s data "
					 "address %s:%u is already rank %u's", j->name, a->rank,
					 ip, a->port, r);
		}
	}
	uint32_t mtu = effective_mtu(js, a->mtu);
	if (wire_seg_bytes(mtu) < j->seg_bytes)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 "'s MTU %" PRIu32
				 " is too small for the job's %" PRIu32 "-byte segments (needs %"
				 PRIu32 ")", j->name, a->rank, mtu, j->seg_bytes,
				 j->seg_bytes + WIRE_IP_UDP_LEN + WIRE_HDR_LEN);
	return 0;
}

static int add_rank(struct jobs *js, struct job *j, const struct jobs_join_args *a,
		    char *err, size_t errlen)
{
	unsigned failed;
	struct engine_msg m = {
		.type = ENGINE_MSG_WORKER_SET, .job = j->id,
		.u.worker = { .rank = (uint16_t)a->rank, .port = a->port, .ip = a->ip },
	};
	int rc = jobs_post_all(js, &m, &failed);

	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s: rank %" PRIu32 ": cannot reach lcore "
				 "%u (message ring full)", j->name, a->rank, failed);
	struct job_rank *r = &j->ranks[a->rank];
	r->joined = 1;
	r->ip = a->ip;
	r->port = a->port;
	r->mtu = effective_mtu(js, a->mtu);
	r->session = a->session;
	r->heartbeat_ms = a->heartbeat_ms;
	j->njoined++;
	j->empty_since = 0;
	if (j->njoined == j->world && j->state == JOB_FORMING)
		j->state = JOB_ACTIVE;
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s: rank %" PRIu32 " joined (%u of %u)",
		j->name, a->rank, j->njoined, j->world);
	return 0;
}

void jobs_set_replace_wait(struct jobs *js, const struct job *cj, uint32_t ms)
{
	(void)js;
	((struct job *)cj)->replace_wait_ms = ms;
}

/* The highest round any segment of k is done with (read while its lcores
 * run: none can complete a round meanwhile, the lost rank's contribution
 * missing from each, but one that had it; hence the margin of reset). */
static uint32_t key_done_max(const struct engine_key *ek)
{
	uint32_t d = ek->round0;

	for (uint32_t s = 0; s < ek->nsegs; s++) {
		uint32_t v = __atomic_load_n(&ek->segs[s].done, __ATOMIC_ACQUIRE);
		if ((int32_t)(v - d) > 0)
			d = v;
	}
	return d;
}

/* The lowest round every segment of k is done with (read once the lcores
 * dropped the job's open rounds: no round of it completes any more). */
static uint32_t key_done_min(const struct engine_key *ek)
{
	uint32_t d = ek->nsegs ? __atomic_load_n(&ek->segs[0].done, __ATOMIC_ACQUIRE) : ek->round0;

	for (uint32_t s = 1; s < ek->nsegs; s++) {
		uint32_t v = __atomic_load_n(&ek->segs[s].done, __ATOMIC_ACQUIRE);
		if ((int32_t)(v - d) < 0)
			d = v;
	}
	return d;
}

/* Rank r of j was replaced: every lcore drops the job's open rounds, and
 * rounds up to a base B, above any a rank may have opened, never open
 * again (ENGINE_MSG_JOB_RESET). Its keys' declarations answer B + 1 as
 * their first round at once; the rest waits until every lcore applied it
 * (reset_finish). */
static void reset_for(struct jobs *js, struct job *j, uint32_t r)
{
	struct engine_msg m = { .type = ENGINE_MSG_JOB_RESET, .job = j->id };
	uint32_t base = j->round_hwm;
	unsigned failed;

	if ((int32_t)(j->reset_base - base) > 0)
		base = j->reset_base;
	for (uint32_t i = 0; i < j->nkeys; i++) {
		const struct engine_key *ek = j->keys[i].ek;
		uint32_t d = ek ? key_done_max(ek) : 0;
		if ((int32_t)(d - base) > 0)
			base = d;
	}
	base += 2;   /* a round opened past the last done, and one it completed */
	m.u.round0 = base;
	if (jobs_post_all(js, &m, &failed) < 0) {
		jobs_abort_job(js, j, "a rank was replaced, but an lcore's message ring is full");
		return;
	}
	memcpy(j->reset_mark, js->posted, sizeof(j->reset_mark));
	j->reset_base = base;
	j->reset_rank = r;
	j->resetting = 1;
	j->resets++;
	j->ranks[r].lost_at = 0;
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s: rank %" PRIu32 " replaced "
		     "(was lost: %s); open rounds dropped, rounds start over at %" PRIu32,
		     j->name, r, j->ranks[r].lost_why, base + 1);
}

/* Every lcore dropped j's open rounds: each key's round0 becomes the base
 * (a PS key keeps its weights and state: its next round is an init round
 * that keeps them, "restored", and its step count goes on), and the other
 * ranks' sessions learn what is done and where to go on (job_reset). */
static void reset_finish(struct jobs *js, struct job *j)
{
	uint32_t (*done)[2] = calloc(j->nkeys ? j->nkeys : 1, sizeof(*done));
	char why[96];

	for (uint32_t i = 0; i < j->nkeys; i++) {
		struct engine_key *ek = j->keys[i].ek;
		if (!ek)
			continue;
		if (ek->ps) {
			uint32_t rounds = engine_key_rounds(ek, key_done_max(ek));
			if (rounds >= 1 && rounds < UINT32_MAX / 2) {   /* weights set: kept */
				ek->ps->step0 += rounds - 1;
				ek->ps->restored = 1;
			}
		}
		if (done) {
			done[i][0] = j->keys[i].key;
			done[i][1] = key_done_min(ek);
		}
		ek->round0 = j->reset_base;
	}
	j->round_hwm = j->reset_base;
	j->resetting = 0;
	if (!done) {
		jobs_abort_job(js, j, "a rank was replaced, but the box ran out of memory telling "
			       "the others");
		return;
	}
	snprintf(why, sizeof(why), "rank %" PRIu32 " was replaced: call again", j->reset_rank);
	struct jobs_reset_note note = { .reason = why, .base = j->reset_base, .nkeys = j->nkeys,
					.done = (const uint32_t (*)[2])done };
	for (unsigned o = 0; o < j->world; o++)
		if (o != j->reset_rank && j->ranks[o].session && js->notify)
			js->notify(js->notify_ctx, j->ranks[o].session, j, &note);
	free(done);
}

uint32_t jobs_first_round(const struct job *j, const struct job_key *k)
{
	uint32_t r0 = k->ek->round0;

	if (j->resetting && (int32_t)(j->reset_base - r0) > 0)
		r0 = j->reset_base;
	return r0 + 1;
}

void jobs_set_kept(struct jobs *js, const struct job *cj)
{
	(void)js;
	((struct job *)cj)->kept = 1;
}

uint32_t jobs_timeout(const struct jobs *js, uint32_t timeout_ms)
{
	uint32_t bound = js->box->cfg.stall_timeout_ms;

	if (!timeout_ms || (bound && timeout_ms > bound))
		return bound;
	return timeout_ms;
}

void jobs_set_timeout(struct jobs *js, const struct job *cj, uint32_t timeout_ms)
{
	struct job *j = (struct job *)cj;

	j->timeout_ms = jobs_timeout(js, timeout_ms);
}

int jobs_set_join_secret(struct jobs *js, const struct job *cj, const char *secret,
			 char *err, size_t errlen)
{
	struct job *j = (struct job *)cj;
	size_t n = secret ? strlen(secret) : 0;

	(void)js;
	if (n > JOB_SECRET_MAX)
		return errmsg(err, errlen, -EINVAL, "job %s: join secret longer than %d bytes",
				 j->name, JOB_SECRET_MAX);
	if (j->njoined)
		return errmsg(err, errlen, -EEXIST, "job %s: ranks joined already; its join "
				 "secret is set", j->name);
	memcpy(j->join_secret, secret ? secret : "", n + 1);
	j->join_secret_len = (uint32_t)n;
	return 0;
}

/* The joiner's secret against the job's, in time independent of where
 * they differ. */
static int secret_check(const struct job *j, const char *given, char *err, size_t errlen)
{
	size_t n = given ? strlen(given) : 0;

	if (j->join_secret_len == 0 && n == 0)
		return 0;
	if (j->join_secret_len == 0)
		return errmsg(err, errlen, -EACCES, "job %s has no join secret, but this worker "
				 "gave one (another job of that name?)", j->name);
	if (n == 0)
		return errmsg(err, errlen, -EACCES, "job %s needs its join secret "
				 "(pbox_opts.join_secret or PBOX_JOIN_SECRET)", j->name);
	if (!secret_equal(given, n, j->join_secret, j->join_secret_len))
		return errmsg(err, errlen, -EACCES, "job %s: wrong join secret", j->name);
	return 0;
}

/* A new group's join meets the aborted job of its name (a group that
 * torchrun restarted, with an old rank not gone yet): the old job gives
 * way at once. Its sessions were told of the abort; their later calls
 * find no job. */
static void replace_aborted(struct jobs *js, struct job *j, uint32_t rank)
{
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s (id %" PRIu32 "): aborted (%s); "
		     "rank %" PRIu32 " of a new group joined: replaced by a new job of that name",
		     j->name, j->id, j->reason, rank);
	for (unsigned r = 0; r < j->world; r++)
		j->ranks[r].session = NULL;
	jobs_start_remove(js, j, "aborted, replaced by a new job of its name");
}

/* The operator's aborted job old, made again as job_create made it (its
 * world, memory, weight, timeout, join secret and restore directory). */
static int remake_operator_job(struct jobs *js, const struct job *old, struct job **out,
			       char *err, size_t errlen)
{
	struct job *j;
	int rc = jobs_create(js, old->name, old->world, old->max_bytes, 0, old->weight,
			     (const struct job **)&j, err, errlen);

	if (rc < 0)
		return rc;
	rc = jobs_set_nonfinite(js, j, old->nonfinite, err, errlen);
	if (rc < 0) {
		jobs_start_remove(js, j, "its nonfinite policy could not be set");
		return rc;
	}
	j->timeout_ms = old->timeout_ms;
	j->replace_wait_ms = old->replace_wait_ms;
	j->kept = 1;
	memcpy(j->join_secret, old->join_secret, sizeof(j->join_secret));
	j->join_secret_len = old->join_secret_len;
	memcpy(j->restore, old->restore, sizeof(j->restore));
	*out = j;
	return 0;
}

/* The joiner's key placement hash against the one the job keeps (the
 * first given): every rank of a fleet job must compute the same
 * placement (docs/protocol.md "Fleet placement"). NULL: an older client,
 * not checked. *h is the parsed hash. */
static int placement_check(const struct job *j, const struct jobs_join_args *a, uint64_t *h,
			   char *err, size_t errlen)
{
	char *end;

	if (!a->placement)
		return 0;
	if (strlen(a->placement) != 16 || strspn(a->placement, "0123456789abcdefABCDEF") != 16)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 "'s placement \"%.32s\" "
				 "is not 16 hex digits", j->name, a->rank, a->placement);
	*h = strtoull(a->placement, &end, 16);
	if (j->placement_rank >= 0 && *h != j->placement)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 "'s key placement "
				 "(hash %016" PRIx64 ") differs from rank %" PRId32 "'s (%016"
				 PRIx64 "): every rank must list the same boxes in the same order "
				 "and declare the same keys", j->name, a->rank, *h,
				 j->placement_rank, j->placement);
	return 0;
}

int jobs_join(struct jobs *js, const struct jobs_join_args *a,
	      const struct job **out, char *err, size_t errlen)
{
	uint64_t placement = 0;
	struct job *j = (struct job *)jobs_find(js, a->name ? a->name : "");
	int created = 0, rc;

	if (j && j->state == JOB_ABORTED) {
		/* only a joiner the old job would have admitted replaces it */
		rc = secret_check(j, a->join_secret, err, errlen);
		if (rc < 0)
			return rc;
		struct job *old = j;
		replace_aborted(js, old, a->rank);
		j = NULL;
		if (old->kept) {   /* (its fields stay until its memory goes) */
			rc = remake_operator_job(js, old, &j, err, errlen);
			if (rc < 0)
				return rc;
			created = 1;
		}
	}
	if (!j) {
		if (a->world >= 1 && a->rank >= a->world)
			return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 " is outside "
					 "[0, %" PRIu32 ")", a->name, a->rank, a->world);
		uint32_t mtu = a->mtu ? a->mtu : DEFAULT_MTU;
		uint64_t max_bytes = a->max_bytes;
		if (!max_bytes && a->key_bytes) /* sized by what its keys need */
			max_bytes = engine_bytes(js, a->world, mtu) + a->key_bytes;
		rc = jobs_create(js, a->name, a->world, max_bytes, mtu, 0,
				 (const struct job **)&j, err, errlen);
		if (rc < 0)
			return rc;
		created = 1;
		jobs_set_timeout(js, j, a->timeout_ms);
		j->replace_wait_ms = a->replace_wait_ms;
		rc = jobs_set_nonfinite(js, j, a->nonfinite, err, errlen);
		if (rc == 0)
			rc = jobs_set_join_secret(js, j, a->join_secret, err, errlen);
	} else {
		rc = secret_check(j, a->join_secret, err, errlen);
	}
	if (rc == 0)
		rc = check_rank(js, j, a, err, errlen);
	if (rc == 0)
		rc = placement_check(j, a, &placement, err, errlen);
	bool replacing = rc == 0 && j->ranks[a->rank].lost_at != 0;
	if (rc == 0)
		rc = add_rank(js, j, a, err, errlen);
	if (rc == 0 && a->placement && j->placement_rank < 0) {
		j->placement = placement;
		j->placement_rank = (int32_t)a->rank;
	}
	if (rc == 0 && replacing)
		reset_for(js, j, a->rank);
	if (rc < 0 && created)
		jobs_start_remove(js, j, "first join failed");
	if (rc == 0)
		*out = j;
	return rc;
}

int jobs_leave(struct jobs *js, uint32_t job_id, uint32_t rank, void *session,
	       char *err, size_t errlen)
{
	struct job *j = (struct job *)jobs_find_id(js, job_id);

	if (!j)
		return errmsg(err, errlen, -ENOENT, "no job with id %" PRIu32, job_id);
	if (rank >= j->world || !j->ranks[rank].joined)
		return errmsg(err, errlen, -EINVAL, "job %s: rank %" PRIu32 " has not joined",
				 j->name, rank);
	if (j->ranks[rank].session != session)
		return errmsg(err, errlen, -EACCES, "job %s: rank %" PRIu32 " belongs to "
				 "another connection; only that one may leave", j->name, rank);
	j->ranks[rank].joined = 0;
	j->ranks[rank].session = NULL;
	j->njoined--;
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s: rank %" PRIu32 " left (%u still joined)",
		j->name, rank, j->njoined);
	if (j->njoined == 0 && j->kept && j->state != JOB_ABORTED) {
		/* an operator's job outlives its ranks; the next group starts
		 * from its keys' declarations (PS keys: its restore directory) */
		jobs_keys_release_all(js, j);
		j->empty_since = clock_s();
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s: every rank left; kept "
			     "(made by an operator) with its join secret and restore directory, "
			     "its keys released, until a group joins within --join-wait-ms",
			     j->name);
	} else if (j->njoined == 0) {
		jobs_start_remove(js, j, "every rank left");
	} else if (j->state == JOB_ABORTED && !job_has_session(j))
		jobs_aborted_idle(js, j);
	return 0;
}
