/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_jobs.c - the job registry (control/jobs*.c) against a box of real
 * engines (box_fixture.h): admission, ranks, keys, limits, abort and
 * removal, and that every byte of job memory is given back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/box_fixture.h"
#include "control/jobs.h"
#include "control/jobs_core.h"
#include "control/jobs_nonfinite.h"

struct t {
	struct fixture *f;
	struct jobs *js;
	char err[512];
	void *notified[16];
	unsigned nnotified;
	char last_reason[192];
	uint32_t reset_base, reset_keys, reset_done0;   /* the last job_reset's */
};

static void on_abort(void *ctx, void *session, const struct job *j,
		     const struct jobs_reset_note *reset)
{
	struct t *t = ctx;
	if (t->nnotified < 16)
		t->notified[t->nnotified++] = session;
	snprintf(t->last_reason, sizeof(t->last_reason), "%s", reset ? reset->reason : j->reason);
	if (reset) {
		t->reset_base = reset->base;
		t->reset_keys = reset->nkeys;
		t->reset_done0 = reset->nkeys ? reset->done[0][1] : 0;
	}
}

/* calloc, wrapped (the Makefile links with --wrap=calloc): once
 * fail_calloc is n > 0, the nth call from then on returns NULL. */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
static unsigned fail_calloc;

void *__wrap_calloc(size_t n, size_t size)
{
	if (fail_calloc && --fail_calloc == 0)
		return NULL;
	return __real_calloc(n, size);
}

static int setup_box(void **state, unsigned nports, unsigned nlcores)
{
	struct t *t = calloc(1, sizeof(*t));
	int rc;

	t->f = fixture_new(nports, nlcores);
	if ((rc = jobs_open(&t->f->box, &t->js)) < 0) {   /* no teardown follows */
		print_error("jobs_open: %s\n", strerror(-rc));
		fixture_free(t->f);
		free(t);
		return -1;
	}
	t->f->box.jobs = t->js;
	jobs_set_notify(t->js, on_abort, t);
	*state = t;
	return 0;
}

static int setup(void **state) { return setup_box(state, 2, 4); }

static int teardown(void **state)
{
	struct t *t = *state;
	jobs_close(t->js);
	assert_int_equal(t->f->allocs, t->f->frees);     /* nothing leaked */
	assert_int_equal(t->f->live_bytes, 0);
	assert_int_equal(t->f->apply_errors, 0);         /* engines took every message */
	fixture_free(t->f);
	free(t);
	return 0;
}

static int join(struct t *t, const char *name, uint32_t rank, uint32_t world, void *session,
		const struct job **j)
{
	struct jobs_join_args a = { .name = name, .rank = rank, .world = world,
				    .ip = 0x0A000001u + rank, .port = (uint16_t)(40000 + rank),
				    .mtu = 1500, .session = session };
	const struct job *dummy;
	return jobs_join(t->js, &a, j ? j : &dummy, t->err, sizeof(t->err));
}

static int declare(struct t *t, uint32_t id, uint32_t rank, uint32_t key, uint64_t count,
		   unsigned dtype, const struct job_key **k)
{
	/* on the rank's own session (declare__other_session_refused tries others) */
	const struct job *j = jobs_find_id(t->js, id);
	struct jobs_declare_args a = { .job_id = id, .rank = rank, .key = key, .count = count,
				       .dtype = dtype,
				       .session = j && rank < j->world ? j->ranks[rank].session : NULL };
	const struct job_key *dummy;
	return jobs_declare(t->js, &a, k ? k : &dummy, t->err, sizeof(t->err));
}

/* ---- admission and join ---- */

static void join__creates_job(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "resnet", 0, 2, (void *)1, &j), 0);
	assert_non_null(jobs_find(t->js, "resnet"));
	assert_int_equal(j->state, JOB_FORMING);
	assert_int_not_equal(j->id, 0);
	assert_int_not_equal(j->token, 0);
	assert_int_equal(j->seg_bytes, 1408);
	assert_int_equal(jobs_count(t->js), 1);
	for (unsigned l = 0; l < 4; l++) {
		const struct engine_job *ej = &t->f->eng[l].jobs[engine_job_index(j->id)];
		assert_int_equal(ej->state, ENGINE_JOB_ACTIVE);
		assert_int_equal(ej->id, j->id);
		assert_int_equal(ej->token, j->token);
		assert_int_equal(ej->world, 2);
		assert_int_equal(ej->workers[0].ip, 0x0A000001u);
		assert_int_equal(ej->workers[0].port, 40000);
		assert_int_equal(ej->nslots, t->f->box.cfg.slots_per_lcore);
		assert_true(ej->key_cap >= 2 * t->f->box.cfg.max_keys);
	}
	assert_int_equal(join(t, "resnet", 1, 2, (void *)2, &j), 0);
	assert_int_equal(j->state, JOB_ACTIVE);
	assert_int_equal(j->njoined, 2);
}

static void join__world_mismatch(void **state)
{
	struct t *t = *state;

	assert_int_equal(join(t, "bert", 0, 2, NULL, NULL), 0);
	assert_int_equal(join(t, "bert", 1, 4, NULL, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "job bert has world 2"));
	assert_non_null(strstr(t->err, "rank 1 joined with world 4"));
}

static void join__rank_reuse_is_eexist(void **state)
{
	struct t *t = *state;

	assert_int_equal(join(t, "gpt", 1, 4, NULL, NULL), 0);
	assert_int_equal(join(t, "gpt", 1, 4, NULL, NULL), -EEXIST);
	assert_non_null(strstr(t->err, "rank 1 already joined"));
}

/* Results go to one worker: a multicast, reserved or broadcast data_ip is
 * refused (and the job the join would have made is not kept). */
static void join__data_ip_must_be_unicast(void **state)
{
	struct t *t = *state;
	const uint32_t bad[] = { 0xE0000001u, 0xEFFFFFFFu, 0xF0000001u, 0xFFFFFFFFu };

	for (unsigned i = 0; i < 4; i++) {
		struct jobs_join_args a = { .name = "mc", .rank = 0, .world = 2, .ip = bad[i],
					    .port = 40000, .mtu = 1500, .session = (void *)1 };
		const struct job *j;
		assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), -EINVAL);
		assert_non_null(strstr(t->err, "not a unicast address"));
		assert_null(jobs_find(t->js, "mc"));
		jobs_tick(t->js);
	}
	assert_int_equal(join(t, "mc", 0, 1, (void *)1, NULL), 0);   /* 10.0.0.1 */
	jobs_session_closed(t->js, (void *)1);
	jobs_tick(t->js);
}

static void join__out_of_range(void **state)
{
	struct t *t = *state;

	assert_int_equal(join(t, "x", 4, 4, NULL, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "rank 4"));
	assert_int_equal(join(t, "x", 0, 1025, NULL, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "world 1025"));
	assert_int_equal(join(t, "x", 0, 0, NULL, NULL), -EINVAL);
	assert_int_equal(join(t, "bad name!", 0, 1, NULL, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "A-Za-z0-9"));
	assert_int_equal(jobs_count(t->js), 0);
	assert_int_equal(t->f->allocs, 0);
}

static void join__same_data_address_rejected(void **state)
{
	struct t *t = *state;
	struct jobs_join_args a = { .name = "dup", .rank = 0, .world = 2, .ip = 0x0A000001,
				    .port = 5000 };
	const struct job *j;

	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	a.rank = 1;
	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), -EINVAL);
	assert_non_null(strstr(t->err, "already rank 0's"));
}

static void join__seg_bytes_from_smallest_mtu(void **state)
{
	struct t *t = *state;
	struct jobs_join_args a = { .name = "jumbo", .rank = 0, .world = 2, .ip = 1,
				    .port = 1, .mtu = 9000 };
	const struct job *j;

	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->seg_bytes, wire_seg_bytes(1500)); /* box MTU is smaller */

	t->f->box.layout.mtu = 9000;
	a = (struct jobs_join_args){ .name = "j2", .rank = 0, .world = 2, .ip = 1, .port = 1,
				     .mtu = 9000 };
	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->seg_bytes, 8896);
	a.rank = 1;
	a.port = 2;
	a.mtu = 1500; /* too small for this job's segments */
	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), -EINVAL);
	assert_non_null(strstr(t->err, "MTU 1500"));
	a.mtu = 64;
	assert_int_equal(jobs_join(t->js, &(struct jobs_join_args){ .name = "tiny", .world = 1,
		.ip = 1, .port = 1, .mtu = 64 }, &j, t->err, sizeof(t->err)), -EINVAL);
	assert_non_null(strstr(t->err, "too small"));
}

static void create__limits(void **state)
{
	struct t *t = *state;
	const struct job *j;
	char name[16];

	t->f->box.cfg.max_jobs = 3;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "j%d", i);
		assert_int_equal(jobs_create(t->js, name, 2, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	}
	assert_int_equal(jobs_create(t->js, "j3", 2, 0, 0, 0, &j, t->err, sizeof(t->err)), -ENOSPC);
	assert_non_null(strstr(t->err, "--max-jobs"));
	assert_int_equal(jobs_create(t->js, "j0", 2, 0, 0, 0, &j, t->err, sizeof(t->err)), -EEXIST);
	assert_int_equal(jobs_create(t->js, "heavy", 2, 0, 0, ENGINE_WEIGHT_MAX + 1, &j, t->err,
				     sizeof(t->err)), -EINVAL);
	assert_non_null(strstr(t->err, "weight"));

	/* max_bytes above the box limit is capped; too little for the engine is ENOSPC */
	t->f->box.cfg.max_jobs = 16;
	assert_int_equal(jobs_create(t->js, "big", 2, 1ull << 40, 0, 0, &j, t->err,
				     sizeof(t->err)), 0);
	assert_int_equal(j->max_bytes, t->f->box.cfg.max_job_bytes);
	assert_int_equal(jobs_create(t->js, "small", 64, 1 << 20, 0, 0, &j, t->err,
				     sizeof(t->err)), -ENOSPC);
	assert_non_null(strstr(t->err, "engine memory"));

	t->f->fail_alloc = 1;
	assert_int_equal(jobs_create(t->js, "nomem", 2, 0, 0, 0, &j, t->err, sizeof(t->err)), -ENOMEM);
	assert_non_null(strstr(t->err, "could not allocate"));
}

/* Host-local lanes (issue 41): "X.lane<N>" is of X's family and a
 * family counts once against --max-jobs-per-peer, so a host's 8 lanes
 * and its flat job start under a cap of 3. */
static void create__lanes_count_as_their_family(void **state)
{
	struct t *t = *state;
	struct box_config *cfg = &t->f->box.cfg;
	const struct peer_addr a = { { [10] = 0xff, [11] = 0xff, [12] = 198, [15] = 3 } };
	char name[24];

	assert_int_equal(jobs_family_len("x.lane0"), 1);
	assert_int_equal(jobs_family_len("train.lane12"), 5);
	assert_int_equal(jobs_family_len("x.lane"), 6);     /* no number */
	assert_int_equal(jobs_family_len(".lane3"), 6);     /* no family */
	assert_int_equal(jobs_family_len("x.lane1234"), 10); /* above 999 */
	assert_int_equal(jobs_family_len("xlane3"), 6);
	cfg->max_jobs = 32;
	cfg->max_jobs_per_peer = 3;
	cfg->default_job_bytes = 4 << 20;
	t->f->box.log_peer = a;
	assert_int_equal(join(t, "x", 0, 1, (void *)1, NULL), 0);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "x.lane%d", i);
		assert_int_equal(join(t, name, 0, 1, (void *)1, NULL), 0);
	}
	/* lanes first, then their flat job: one family too */
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "y.lane%d", i);
		assert_int_equal(join(t, name, 0, 1, (void *)1, NULL), 0);
	}
	assert_int_equal(join(t, "y", 0, 1, (void *)1, NULL), 0);
	assert_int_equal(join(t, "z", 0, 1, (void *)1, NULL), 0);
	/* three families run: a fourth is refused, lanes of them are not */
	assert_int_equal(join(t, "w.lane0", 0, 1, (void *)1, NULL), -ENOSPC);
	assert_non_null(strstr(t->err, "already created 3 jobs"));
	assert_int_equal(join(t, "z.lane1", 0, 1, (void *)1, NULL), 0);
}

/* What one TCP peer may hold (issue 44.2: one connection joined 16 jobs of
 * world 1 and held every slot): --max-jobs-per-peer, --max-job-bytes-per-
 * peer, the operators' reserve and --total-job-bytes. */
static void create__peer_budgets_and_reserve(void **state)
{
	struct t *t = *state;
	struct box_config *cfg = &t->f->box.cfg;
	const struct peer_addr a = { { [10] = 0xff, [11] = 0xff, [12] = 198, [15] = 3 } };
	const struct peer_addr b = { { [10] = 0xff, [11] = 0xff, [12] = 198, [15] = 4 } };
	const struct job *j;
	char name[16];

	cfg->max_jobs = 8;
	cfg->max_jobs_per_peer = 3;
	cfg->reserved_jobs = 2;
	cfg->default_job_bytes = 16 << 20;
	/* peer a: three jobs, then refused by name; its fourth never exists */
	t->f->box.log_peer = a;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "a%d", i);
		assert_int_equal(join(t, name, 0, 1, (void *)1, NULL), 0);
	}
	assert_int_equal(join(t, "a3", 0, 1, (void *)1, NULL), -ENOSPC);
	assert_non_null(strstr(t->err, "198.0.0.3 already created 3 jobs"));
	assert_non_null(strstr(t->err, "--max-jobs-per-peer"));
	assert_null(jobs_find(t->js, "a3"));
	/* joining a job that exists costs no slot */
	assert_int_equal(join(t, "a0", 0, 1, (void *)2, NULL), -EEXIST);
	/* peer b: three more; then 6 of 8 run and the last 2 are the reserve */
	t->f->box.log_peer = b;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "b%d", i);
		assert_int_equal(join(t, name, 0, 1, (void *)3, NULL), 0);
	}
	assert_int_equal(jobs_create(t->js, "b3", 1, 0, 0, 0, &j, t->err, sizeof(t->err)),
			 -ENOSPC);
	assert_non_null(strstr(t->err, "the last 2 of its 8 (--max-jobs) are reserved"));
	/* an operator (job_create's handler) takes the reserve */
	jobs_admit_as_operator(t->js, 1);
	assert_int_equal(jobs_create(t->js, "op0", 1, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->by_operator, 1);
	jobs_admit_as_operator(t->js, 0);
	/* so does anything over the Unix socket (no peer) */
	t->f->box.log_peer = (struct peer_addr){ { 0 } };
	assert_int_equal(join(t, "op1", 0, 1, (void *)4, NULL), 0);
	assert_int_equal(join(t, "op2", 0, 1, (void *)4, NULL), -ENOSPC);
	assert_non_null(strstr(t->err, "--max-jobs"));
	/* a's job ends (its rank leaves): a may create one again (the
	 * operators' jobs took the reserve, not the workers' 6) */
	assert_int_equal(jobs_leave(t->js, jobs_find(t->js, "a0")->id, 0, (void *)1, t->err,
				    sizeof(t->err)), 0);
	for (int i = 0; i < 10 && jobs_removing(t->js); i++)
		jobs_tick(t->js);
	t->f->box.log_peer = a;
	assert_int_equal(join(t, "a4", 0, 1, (void *)1, NULL), 0);

	/* memory: per peer, and the box's total less the operators' reserve */
	cfg->max_jobs = 16;
	cfg->max_jobs_per_peer = 0;
	cfg->max_job_bytes_per_peer = 64 << 20;   /* a holds 48 MiB */
	struct jobs_join_args big = { .name = "abig", .world = 1, .ip = 9, .port = 9,
				      .mtu = 1500, .session = (void *)1,
				      .max_bytes = 32 << 20 };
	assert_int_equal(jobs_join(t->js, &big, &j, t->err, sizeof(t->err)), -ENOSPC);
	assert_non_null(strstr(t->err, "--max-job-bytes-per-peer"));
	big.max_bytes = 16 << 20;
	assert_int_equal(jobs_join(t->js, &big, &j, t->err, sizeof(t->err)), 0);
	cfg->max_job_bytes_per_peer = 0;
	cfg->total_job_bytes = 180 << 20;         /* 9 jobs hold 144 MiB */
	cfg->reserved_job_bytes = 32 << 20;
	big.name = "abig2";
	assert_int_equal(jobs_join(t->js, &big, &j, t->err, sizeof(t->err)), -ENOSPC);
	assert_non_null(strstr(t->err, "--total-job-bytes"));
	assert_non_null(strstr(t->err, "--reserved-job-bytes"));
	jobs_admit_as_operator(t->js, 1);
	assert_int_equal(jobs_create(t->js, "op3", 1, 16 << 20, 0, 0, &j, t->err,
				     sizeof(t->err)), 0);
	assert_int_equal(jobs_create(t->js, "op4", 1, 32 << 20, 0, 0, &j, t->err,
				     sizeof(t->err)), -ENOSPC);
	jobs_admit_as_operator(t->js, 0);
	t->f->box.log_peer = (struct peer_addr){ { 0 } };
}

static void create__ids_unique_and_nonzero(void **state)
{
	struct t *t = *state;
	uint32_t seen[200];
	const struct job *j;
	char name[16];

	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		assert_int_equal(jobs_create(t->js, name, 1, 2 << 20, 0, 0, &j, t->err,
					     sizeof(t->err)), 0);
		seen[i] = j->id;
		assert_int_not_equal(j->id, 0);
		for (int k = 0; k < i; k++)
			assert_int_not_equal(seen[k], j->id);
		assert_int_equal(jobs_abort(t->js, name, "test", t->err, sizeof(t->err)), 0);
		jobs_tick(t->js); /* removed at once: no sessions, engines applied */
		assert_int_equal(jobs_removing(t->js), 0);
	}
	assert_int_equal(t->f->allocs, t->f->frees);
}

/* ---- keys ---- */

static void declare__creates_key_on_owners(void **state)
{
	struct t *t = *state;
	const struct job *j;
	const struct job_key *k;

	assert_int_equal(join(t, "k", 0, 2, NULL, &j), 0);
	uint64_t used0 = j->mem.used;
	assert_int_equal(declare(t, j->id, 0, 7, 1000000, WIRE_F32, &k), 0);
	assert_int_equal(k->geom.seg_elems, 352);
	assert_int_equal(k->geom.nsegs, 2841);
	assert_int_equal(k->geom.segs_per_chunk, 23);
	assert_int_equal(k->geom.nchunks, 124);
	assert_int_equal(k->bytes, engine_key_mem_bytes(1000000, WIRE_F32, 1408, 23));
	assert_int_equal(j->mem.used, used0 + k->bytes);
	assert_int_equal(j->nkeys, 1);
	/* every lcore owns chunks of a 124-chunk key over 8 endpoints */
	for (unsigned l = 0; l < 4; l++)
		assert_int_equal(t->f->eng[l].jobs[engine_job_index(j->id)].nkeys, 1);
	for (uint32_t c = 0; c < k->geom.nchunks; c++) {
		assert_true(k->chunk_ep[c] < t->f->box.layout.neps);
		assert_int_equal(k->ek->chunk_lcore[c], t->f->box.layout.eps[k->chunk_ep[c]].lcore);
	}
	/* a second declaration by another rank returns the same key */
	const struct job_key *k2;
	assert_int_equal(join(t, "k", 1, 2, NULL, NULL), 0);
	assert_int_equal(declare(t, j->id, 1, 7, 1000000, WIRE_F32, &k2), 0);
	assert_ptr_equal(k, k2);
	assert_int_equal(k->declared.w[0], 3);
	assert_int_equal(j->nkeys, 1);
}

static void declare__small_key_only_on_owner(void **state)
{
	struct t *t = *state;
	const struct job *j;
	const struct job_key *k;
	unsigned installed = 0;

	assert_int_equal(join(t, "s", 0, 1, NULL, &j), 0);
	assert_int_equal(declare(t, j->id, 0, 1, 10, WIRE_F16, &k), 0);
	assert_int_equal(k->geom.nchunks, 1);
	for (unsigned l = 0; l < 4; l++)
		installed += t->f->eng[l].jobs[engine_job_index(j->id)].nkeys;
	assert_int_equal(installed, 1);
}

static void declare__mismatch_names_key_ranks_sizes(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "m", 0, 2, NULL, &j), 0);
	assert_int_equal(join(t, "m", 1, 2, NULL, NULL), 0);
	assert_int_equal(declare(t, j->id, 0, 9, 1000, WIRE_F32, NULL), 0);
	assert_int_equal(declare(t, j->id, 1, 9, 2000, WIRE_F32, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "key 9"));
	assert_non_null(strstr(t->err, "rank 1 declares 2000 f32 (8000 bytes)"));
	assert_non_null(strstr(t->err, "rank 0 declared 1000 f32 (4000 bytes)"));
	assert_int_equal(declare(t, j->id, 1, 9, 1000, WIRE_BF16, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "bf16"));
}

static void declare__errors(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(declare(t, 12345, 0, 1, 10, WIRE_F32, NULL), -ENOENT);
	assert_non_null(strstr(t->err, "12345"));
	assert_int_equal(join(t, "e", 0, 2, NULL, &j), 0);
	assert_int_equal(declare(t, j->id, 1, 1, 10, WIRE_F32, NULL), -EINVAL); /* not joined */
	assert_non_null(strstr(t->err, "rank 1 has not joined"));
	assert_int_equal(declare(t, j->id, 0, 1, 0, WIRE_F32, NULL), -EINVAL);
	assert_int_equal(declare(t, j->id, 0, 1, 10, 7, NULL), -EINVAL);
	assert_int_equal(declare(t, j->id, 0, 1, UINT64_MAX / 2, WIRE_F32, NULL), -EINVAL);
}

static void declare__memory_exhausted_is_enospc(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(jobs_create(t->js, "tight", 1, 16 << 20, 0, 0, &j, t->err,
				     sizeof(t->err)), 0);
	assert_int_equal(join(t, "tight", 0, 1, NULL, NULL), 0);
	uint64_t left = j->max_bytes - j->mem.used;
	/* more than what is left but under max_bytes */
	uint64_t count = left / 4 + 1000;
	assert_int_equal(declare(t, j->id, 0, 3, count, WIRE_F32, NULL), -ENOSPC);
	assert_non_null(strstr(t->err, "key 3"));
	assert_non_null(strstr(t->err, "left"));
	assert_int_equal(j->nkeys, 0);
	assert_int_equal(declare(t, j->id, 0, 3, 1000, WIRE_F32, NULL), 0);
}

static void declare__key_limit_is_enospc_or_ebusy_while_releasing(void **state)
{
	struct t *t = *state;
	const struct job *j;

	t->f->box.cfg.max_keys = 3;
	assert_int_equal(join(t, "lim", 0, 1, NULL, &j), 0);
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(declare(t, j->id, 0, k * 64, 100, WIRE_F32, NULL), 0);
	assert_int_equal(declare(t, j->id, 0, 999, 100, WIRE_F32, NULL), -ENOSPC);
	assert_non_null(strstr(t->err, "--max-keys"));
	/* redeclaring an existing key is still fine */
	assert_int_equal(declare(t, j->id, 0, 64, 100, WIRE_F32, NULL), 0);
	/* while a key is being released the limit is EBUSY (libpbox retries
	 * it), as job memory is; once the key is gone there is room */
	uint32_t key = 0, removed[1], nremoved = 0;
	assert_int_equal(jobs_release(t->js, j->id, 0, j->ranks[0].session, &key, 1, removed,
				      &nremoved, t->err, sizeof(t->err)), 0);
	assert_int_equal(declare(t, j->id, 0, 999, 100, WIRE_F32, NULL), -EBUSY);
	assert_non_null(strstr(t->err, "being released"));
	for (int i = 0; i < 100 && j->keys_removing; i++)
		jobs_tick(t->js);
	assert_int_equal(j->keys_removing, 0);
	assert_int_equal(declare(t, j->id, 0, 999, 100, WIRE_F32, NULL), 0);
}

/* A released key's block is zeroed a bounded piece per tick (issue 44.2:
 * one 800 MB memset stalled the control thread for 2 s), and only then
 * goes back to the job, reading as zeros. */
static void release__large_key_zeroed_over_ticks(void **state)
{
	struct t *t = *state;
	const struct job *j;
	const struct job_key *k;
	uint32_t key = 7, removed[1], nremoved = 0;

	assert_int_equal(join(t, "big", 0, 1, NULL, &j), 0);
	uint64_t used0 = j->mem.used;
	assert_int_equal(declare(t, j->id, 0, key, 40u << 20, WIRE_F32, &k), 0);   /* 160 MiB */
	uint64_t off = k->off, bytes = k->bytes;
	assert_true(bytes >= 160u << 20);
	/* its sums, as traffic would leave them (the engine key at the
	 * block's start stays as it is: the engines read it to remove it) */
	memset(j->arena + off + bytes / 2, 0x5a, bytes - bytes / 2);
	assert_int_equal(jobs_release(t->js, j->id, 0, NULL, &key, 1, removed, &nremoved,
				      t->err, sizeof(t->err)), 0);
	unsigned ticks = 0;
	for (; ticks < 20 && j->keys_removing; ticks++) {
		jobs_tick(t->js);
		if (j->keys_removing)   /* not back before it is all zeros */
			assert_int_equal(j->mem.used, used0 + bytes);
	}
	assert_int_equal(j->keys_removing, 0);
	assert_true(ticks >= 3);   /* 160 MiB at 64 MiB a tick */
	assert_int_equal(j->mem.used, used0);
	for (uint64_t i = 0; i < bytes; i += 4093)
		assert_int_equal(j->arena[off + i], 0);
	assert_int_equal(j->arena[off + bytes - 1], 0);
}

/* A release that runs out of memory releases none of its keys: with
 * the second key's remove mark refused, the first is still live and
 * unreleased, nothing is counted as releasing, and the same release
 * again removes all three. */
static void release__out_of_memory_releases_nothing(void **state)
{
	struct t *t = *state;
	const struct job *j;
	uint32_t keys[3] = { 0, 64, 128 }, removed[3], nremoved = 9;

	assert_int_equal(join(t, "rel", 0, 1, NULL, &j), 0);
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(declare(t, j->id, 0, keys[k], 100, WIRE_F32, NULL), 0);
	fail_calloc = 3; /* the list of marks, the first key's, then the second's */
	assert_int_equal(jobs_release(t->js, j->id, 0, j->ranks[0].session, keys, 3, removed,
				      &nremoved, t->err, sizeof(t->err)), -ENOMEM);
	fail_calloc = 0;
	assert_non_null(strstr(t->err, "out of memory releasing 3 keys (none was released)"));
	assert_int_equal(nremoved, 0);
	for (uint32_t k = 0; k < 3; k++) {
		assert_string_equal(job_key_state(job_key_find(j, keys[k])), "live");
		assert_int_equal(job_key_find(j, keys[k])->nreleased, 0);
	}
	assert_int_equal(j->keys_releasing, 0);
	assert_int_equal(j->keys_removing, 0);
	assert_int_equal(jobs_release(t->js, j->id, 0, j->ranks[0].session, keys, 3, removed,
				      &nremoved, t->err, sizeof(t->err)), 0);
	assert_int_equal(nremoved, 3);
	for (int i = 0; i < 100 && j->keys_removing; i++)
		jobs_tick(t->js);
	assert_int_equal(j->nkeys, 0);
	assert_int_equal(j->keys_releasing, 0);
}

static void declare__many_keys_lookup(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "many", 0, 1, NULL, &j), 0);
	for (uint32_t k = 0; k < 1000; k++)
		assert_int_equal(declare(t, j->id, 0, k * 7919, 64 + k, WIRE_F32, NULL), 0);
	for (uint32_t k = 0; k < 1000; k++) {
		const struct job_key *jk = job_key_find(j, k * 7919);
		assert_non_null(jk);
		assert_int_equal(jk->geom.count, 64 + k);
	}
	assert_null(job_key_find(j, 1));
}

/* key_declare for a rank only on the connection that joined it: another
 * client that learned the job's id cannot declare the rank's keys. */
static void declare__other_session_refused(void **state)
{
	struct t *t = *state;
	const struct job *j;
	const struct job_key *k;

	assert_int_equal(join(t, "s", 0, 2, (void *)1, &j), 0);
	assert_int_equal(join(t, "s", 1, 2, (void *)2, NULL), 0);
	struct jobs_declare_args a = { .job_id = j->id, .rank = 1, .key = 7, .count = 1000,
				       .dtype = WIRE_F32, .session = (void *)3 };
	assert_int_equal(jobs_declare(t->js, &a, &k, t->err, sizeof(t->err)), -EACCES);
	assert_non_null(strstr(t->err, "belongs to another connection"));
	a.session = (void *)1;   /* rank 0's session, declaring for rank 1 */
	assert_int_equal(jobs_declare(t->js, &a, &k, t->err, sizeof(t->err)), -EACCES);
	assert_null(job_key_find(j, 7));
	a.session = (void *)2;
	assert_int_equal(jobs_declare(t->js, &a, &k, t->err, sizeof(t->err)), 0);
	assert_int_equal(k->geom.count, 1000);
}

/* ---- leave, abort, removal ---- */

static void leave__last_rank_removes_and_frees(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "l", 0, 2, (void *)1, &j), 0);
	assert_int_equal(join(t, "l", 1, 2, (void *)2, NULL), 0);
	uint32_t id = j->id;
	assert_int_equal(declare(t, id, 0, 1, 100000, WIRE_F32, NULL), 0);
	assert_int_equal(jobs_leave(t->js, id, 0, (void *)2, t->err, sizeof(t->err)), -EACCES);
	assert_non_null(strstr(t->err, "another connection"));
	assert_int_equal(jobs_leave(t->js, id, 0, (void *)1, t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_leave(t->js, id, 0, (void *)1, t->err, sizeof(t->err)), -EINVAL);
	assert_non_null(jobs_find_id(t->js, id));
	assert_int_equal(jobs_leave(t->js, id, 1, (void *)2, t->err, sizeof(t->err)), 0);
	assert_null(jobs_find_id(t->js, id));
	jobs_tick(t->js);
	assert_int_equal(t->f->allocs, 1);
	assert_int_equal(t->f->frees, 1);
	assert_int_equal(t->f->eng[0].jobs[engine_job_index(id)].state, ENGINE_JOB_FREE);
	for (unsigned e = 0; e < t->f->box.layout.neps; e++) /* chunk loads given back */
		assert_int_equal(jobs_ep_load(t->js)[e], 0);
	assert_int_equal(jobs_leave(t->js, id, 1, NULL, t->err, sizeof(t->err)), -ENOENT);
}

static void abort__memory_freed_only_after_lcores_applied(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(jobs_create(t->js, "a", 2, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	uint32_t id = j->id;
	t->f->deferred = 1;
	assert_int_equal(jobs_abort(t->js, "a", "operator", t->err, sizeof(t->err)), 0);
	assert_null(jobs_find(t->js, "a"));   /* gone from lookups at once */
	assert_int_equal(jobs_removing(t->js), 1);
	jobs_tick(t->js);
	assert_int_equal(t->f->frees, 0);     /* lcores have not applied the REMOVE */
	assert_int_equal(t->f->eng[2].jobs[engine_job_index(id)].state, ENGINE_JOB_ACTIVE);
	fixture_drain(t->f);
	assert_int_equal(t->f->eng[2].jobs[engine_job_index(id)].state, ENGINE_JOB_FREE);
	jobs_tick(t->js);
	assert_int_equal(t->f->frees, 1);
	assert_int_equal(jobs_removing(t->js), 0);
	assert_int_equal(jobs_abort(t->js, "a", NULL, t->err, sizeof(t->err)), -ENOENT);
}

static void remove__full_ring_retried_by_tick(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "r", 0, 1, (void *)1, &j), 0);
	uint32_t id = j->id;
	t->f->full_posts = 2;   /* the REMOVEs to lcores 0 and 1 find a full ring */
	assert_int_equal(jobs_leave(t->js, id, 0, (void *)1, t->err, sizeof(t->err)), 0);
	jobs_tick(t->js);       /* posts them now, and all are applied */
	assert_int_equal(t->f->frees, 1);
	assert_int_equal(t->f->eng[0].jobs[engine_job_index(id)].state, ENGINE_JOB_FREE);
}

static int join_secret(struct t *t, const char *name, uint32_t rank, const char *secret)
{
	struct jobs_join_args a = { .name = name, .rank = rank, .world = 3,
				    .ip = 0x0A000001u + rank, .port = (uint16_t)(40000 + rank),
				    .mtu = 1500, .session = (void *)(uintptr_t)(rank + 1),
				    .join_secret = secret };
	const struct job *dummy;
	return jobs_join(t->js, &a, &dummy, t->err, sizeof(t->err));
}

/* The first joiner's join secret binds the job: later joiners need the
 * same one; a job without one refuses joiners that bring one. */
static void join__secret(void **state)
{
	struct t *t = *state;

	assert_int_equal(join_secret(t, "sec", 0, "open sesame"), 0);
	assert_int_equal(join_secret(t, "sec", 1, NULL), -EACCES);
	assert_non_null(strstr(t->err, "needs its join secret"));
	assert_int_equal(join_secret(t, "sec", 1, "open sesamE"), -EACCES);
	assert_non_null(strstr(t->err, "wrong join secret"));
	assert_int_equal(join_secret(t, "sec", 1, "open sesame"), 0);
	assert_int_equal(join_secret(t, "plain", 0, NULL), 0);
	assert_int_equal(join_secret(t, "plain", 1, "x"), -EACCES);
	assert_non_null(strstr(t->err, "has no join secret"));
	const struct job *j = jobs_find(t->js, "sec");
	assert_int_equal(jobs_set_join_secret(t->js, j, "late", t->err, sizeof(t->err)), -EEXIST);
	for (uintptr_t s = 1; s <= 2; s++)
		jobs_session_closed(t->js, (void *)s);
	jobs_tick(t->js);
}

static int join_placement(struct t *t, const char *name, uint32_t rank, const char *placement)
{
	struct jobs_join_args a = { .name = name, .rank = rank, .world = 4,
				    .ip = 0x0A000001u + rank, .port = (uint16_t)(40000 + rank),
				    .mtu = 1500, .session = (void *)(uintptr_t)(rank + 1),
				    .placement = placement };
	const struct job *dummy;
	return jobs_join(t->js, &a, &dummy, t->err, sizeof(t->err));
}

/* The first key placement hash given binds the job: a rank with another
 * is refused naming both ranks and hashes; a rank with none (an older
 * client) is not checked; a malformed one is refused. */
static void join__placement_hash(void **state)
{
	struct t *t = *state;

	assert_int_equal(join_placement(t, "fleet", 1, NULL), 0);   /* not checked */
	assert_int_equal(join_placement(t, "fleet", 0, "00c0ffee00c0ffee"), 0);
	assert_int_equal(join_placement(t, "fleet", 2, "00c0ffee00c0ffef"), -EINVAL);
	assert_string_equal(t->err, "job fleet: rank 2's key placement (hash 00c0ffee00c0ffef) "
			    "differs from rank 0's (00c0ffee00c0ffee): every rank must list the "
			    "same boxes in the same order and declare the same keys");
	assert_int_equal(join_placement(t, "fleet", 2, "c0ffee"), -EINVAL);
	assert_non_null(strstr(t->err, "rank 2's placement \"c0ffee\" is not 16 hex digits"));
	assert_int_equal(join_placement(t, "fleet", 2, "00c0ffee00c0ffeg"), -EINVAL);
	assert_non_null(strstr(t->err, "is not 16 hex digits"));
	assert_int_equal(join_placement(t, "fleet", 2, "00C0FFEE00C0FFEE"), 0);   /* any case */
	assert_int_equal(join_placement(t, "fleet", 3, NULL), 0);
	const struct job *j = jobs_find(t->js, "fleet");
	assert_int_equal(j->njoined, 4);
	assert_int_equal(j->placement_rank, 0);
	for (uintptr_t s = 1; s <= 4; s++)
		jobs_session_closed(t->js, (void *)s);
	jobs_tick(t->js);
}

/* Ranks that have not joined get --join-wait-ms from the job's creation;
 * then the job is aborted naming them. A job no rank joined (job_create)
 * is removed. */
static void watch__join_wait(void **state)
{
	struct t *t = *state;
	const struct job *j, *c;

	t->f->box.cfg.join_wait_ms = 60000;
	assert_int_equal(join(t, "late", 0, 3, (void *)1, &j), 0);
	assert_int_equal(jobs_create(t->js, "idle", 2, 0, 0, 0, &c, t->err, sizeof(t->err)), 0);
	jobs_tick(t->js);
	assert_int_equal(j->state, JOB_FORMING);   /* within the wait */
	((struct job *)j)->created -= 61.0;
	((struct job *)c)->created -= 61.0;
	jobs_tick(t->js);
	assert_int_equal(j->state, JOB_ABORTED);
	assert_string_equal(j->reason, "ranks 1, 2 never joined within 60000 ms (--join-wait-ms)");
	assert_string_equal(t->last_reason, j->reason);
	assert_null(jobs_find(t->js, "idle"));     /* no session: removed */
	jobs_session_closed(t->js, (void *)1);
	jobs_tick(t->js);
}

/* A wide job's reason counts the ranks that do not fit and still ends with
 * the cause. */
static void watch__join_wait_wide_job_keeps_the_cause(void **state)
{
	struct t *t = *state;
	const struct job *j;

	t->f->box.cfg.join_wait_ms = 1000;
	assert_int_equal(join(t, "wide", 0, 64, (void *)1, &j), 0);
	((struct job *)j)->created -= 2.0;
	jobs_tick(t->js);
	assert_int_equal(j->state, JOB_ABORTED);
	assert_true(strncmp(j->reason, "ranks 1, 2, 3, ", 15) == 0);
	const char *more = strstr(j->reason, " more never joined within 1000 ms (--join-wait-ms)");
	assert_non_null(more);
	assert_string_equal(more, " more never joined within 1000 ms (--join-wait-ms)");
	unsigned last = 0, extra = 0;
	const char *and = strstr(j->reason, " and ");
	assert_non_null(and);
	assert_int_equal(sscanf(and, " and %u more", &extra), 1);
	for (const char *p = j->reason; p < and; p++)
		if (*p == ',' || *p == ' ')
			last = (unsigned)strtoul(p + 1, NULL, 10);
	assert_int_equal(last + extra, 63);   /* ranks 1..last listed, the rest counted */
	jobs_session_closed(t->js, (void *)1);
	jobs_tick(t->js);
}

/* An aborted job is removed JOB_ABORT_LINGER_S after the abort even while
 * a session stays open (its slot and memory are not held by a connection
 * that never closes), and such a session holds nothing (the idle timeout
 * applies to it). */
static void abort__lingers_then_is_removed_with_sessions_open(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "sq", 0, 2, (void *)1, &j), 0);
	assert_int_equal(jobs_session_holds(t->js, (void *)1), 1);
	assert_int_equal(jobs_abort(t->js, "sq", "test", t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_session_holds(t->js, (void *)1), 0);
	jobs_tick(t->js);
	assert_non_null(jobs_find(t->js, "sq"));    /* listed with its reason a while */
	assert_int_equal(t->f->frees, 0);
	((struct job *)j)->aborted_at -= JOB_ABORT_LINGER_S;
	jobs_tick(t->js);
	assert_null(jobs_find(t->js, "sq"));
	assert_int_equal(t->f->frees, 1);
	jobs_session_closed(t->js, (void *)1);      /* later: nothing left to do */
	jobs_tick(t->js);
	assert_int_equal(join(t, "sq", 0, 2, (void *)2, &j), 0);   /* the name is free */
	jobs_session_closed(t->js, (void *)2);
	jobs_tick(t->js);
}

static void session_close__aborts_and_notifies(void **state)
{
	struct t *t = *state;
	const struct job *j;
	void *a = (void *)0xA, *b = (void *)0xB;

	assert_int_equal(join(t, "s", 0, 2, a, &j), 0);
	assert_int_equal(join(t, "s", 1, 2, b, NULL), 0);
	uint32_t id = j->id;
	jobs_session_closed(t->js, a);
	assert_int_equal(j->state, JOB_ABORTED);
	assert_string_equal(j->reason, "rank 0 lost (control connection closed)");
	assert_int_equal(t->nnotified, 1);
	assert_ptr_equal(t->notified[0], b);
	assert_string_equal(t->last_reason, "rank 0 lost (control connection closed)");
	for (unsigned l = 0; l < 4; l++)
		assert_int_equal(t->f->eng[l].jobs[engine_job_index(id)].state, ENGINE_JOB_ABORTED);
	/* its ranks' declarations see the abort */
	assert_int_equal(declare(t, id, 1, 1, 10, WIRE_F32, NULL), -ECONNABORTED);
	/* the last session going removes it */
	jobs_session_closed(t->js, b);
	assert_null(jobs_find(t->js, "s"));
	jobs_tick(t->js);
	assert_int_equal(t->f->frees, 1);
	/* the name is free again */
	assert_int_equal(join(t, "s", 0, 2, a, &j), 0);
	assert_int_not_equal(j->id, id);
}

/* A new group's join meets the aborted job of its name while an old rank
 * is still connected (a group torchrun restarted): the old job gives way
 * at once, but only to a joiner it would have admitted (its secret). */
static void join__replaces_an_aborted_job_of_its_name(void **state)
{
	struct t *t = *state;
	const struct job *j, *n;

	assert_int_equal(join_secret(t, "again", 0, "s3cret"), 0);
	assert_int_equal(join_secret(t, "again", 1, "s3cret"), 0);
	j = jobs_find(t->js, "again");
	uint32_t old = j->id;
	jobs_session_closed(t->js, (void *)1);          /* rank 0 dies: aborted */
	assert_int_equal(j->state, JOB_ABORTED);
	assert_ptr_equal(jobs_find(t->js, "again"), j); /* rank 1's session lingers */
	/* a stranger cannot take its name */
	assert_int_equal(join_secret(t, "again", 0, "guess"), -EACCES);
	assert_ptr_equal(jobs_find(t->js, "again"), j);
	assert_int_equal(j->state, JOB_ABORTED);
	/* the new group's rank 0 replaces it */
	assert_int_equal(join_secret(t, "again", 0, "s3cret"), 0);
	n = jobs_find(t->js, "again");
	assert_non_null(n);
	assert_int_not_equal(n->id, old);
	assert_int_equal(n->state, JOB_FORMING);
	assert_null(jobs_find_id(t->js, old));
	/* the old rank 1's calls find no job; the new rank 1 joins */
	assert_int_equal(declare(t, old, 1, 1, 10, WIRE_F32, NULL), -ENOENT);
	assert_int_equal(join_secret(t, "again", 1, "s3cret"), 0);
	assert_int_equal(join_secret(t, "again", 2, "s3cret"), 0);   /* (world 3) */
	for (int i = 0; i < 100 && jobs_removing(t->js); i++)
		jobs_tick(t->js);
	assert_int_equal(jobs_removing(t->js), 0);
	assert_int_equal(n->state, JOB_ACTIVE);
}

/* An operator's job (job_create with a join secret and a restore
 * directory) outlives its ranks: when the last leaves, its keys are
 * released and it keeps its secret and restore directory for the next
 * group; aborted, the next join makes it again as the operator did; empty
 * for --join-wait-ms, it is removed. (Before: removed when its first rank
 * left, and made again by the next join without secret or restore.) */
static void operator_job__outlives_its_ranks(void **state)
{
	struct t *t = *state;
	const struct job *j;

	char dir[] = "/tmp/pbox-op-XXXXXX";   /* a restore directory of ours, 0700 */

	assert_non_null(mkdtemp(dir));
	t->f->box.cfg.join_wait_ms = 60000;
	assert_int_equal(jobs_create(t->js, "op", 3, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_set_join_secret(t->js, j, "s3cret", t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_set_restore(t->js, j, dir, t->err, sizeof(t->err)), 0);
	jobs_set_kept(t->js, j);
	for (uint32_t r = 0; r < 3; r++)
		assert_int_equal(join_secret(t, "op", r, "s3cret"), 0);
	assert_int_equal(declare(t, j->id, 0, 7, 100, WIRE_F32, NULL), 0);
	for (uint32_t r = 0; r < 3; r++)
		assert_int_equal(jobs_leave(t->js, j->id, r, (void *)(uintptr_t)(r + 1), t->err,
					    sizeof(t->err)), 0);
	/* kept, with its secret and restore directory; its key released */
	assert_ptr_equal(jobs_find(t->js, "op"), j);
	assert_string_equal(j->restore, dir);
	assert_int_equal(j->keys_removing, 1);
	for (int i = 0; i < 100 && j->nkeys; i++)
		jobs_tick(t->js);
	assert_int_equal(j->nkeys, 0);
	assert_int_equal(join_secret(t, "op", 0, NULL), -EACCES);
	assert_int_equal(join_secret(t, "op", 0, "s3cret"), 0);
	assert_ptr_equal(jobs_find(t->js, "op"), j);
	/* aborted (rank 0 lost): the next join makes it again as it was */
	jobs_session_closed(t->js, (void *)1);
	assert_int_equal(j->state, JOB_ABORTED);
	assert_int_equal(join_secret(t, "op", 0, "guess"), -EACCES);
	assert_int_equal(join_secret(t, "op", 0, "s3cret"), 0);
	const struct job *n = jobs_find(t->js, "op");
	assert_non_null(n);
	assert_ptr_not_equal(n, j);
	assert_string_equal(n->restore, dir);
	assert_int_equal(n->kept, 1);
	assert_int_equal(n->world, 3);
	assert_int_equal(join_secret(t, "op", 1, NULL), -EACCES);
	/* empty for the join wait: removed */
	assert_int_equal(jobs_leave(t->js, n->id, 0, (void *)1, t->err, sizeof(t->err)), 0);
	assert_ptr_equal(jobs_find(t->js, "op"), n);
	((struct job *)n)->empty_since -= 61.0;
	jobs_tick(t->js);
	assert_null(jobs_find(t->js, "op"));
	for (int i = 0; i < 100 && jobs_removing(t->js); i++)
		jobs_tick(t->js);
	rmdir(dir);
}

/* A job that waits for replacements (job_join's replace_wait_ms): a lost
 * rank does not abort it; a process that joins with its rank is admitted,
 * every lcore drops the job's open rounds and counts every key's rounds
 * from a new base (key_declare's first_round), and the other ranks'
 * sessions get job_reset. A lost rank nobody replaces in time aborts it,
 * named. */
static void replace__a_lost_rank_is_taken_over(void **state)
{
	struct t *t = *state;
	const struct job *j;
	const struct job_key *k;
	struct jobs_join_args a = { .name = "el", .rank = 0, .world = 3, .ip = 0x0A000001u,
				    .port = 40000, .mtu = 1500, .session = (void *)1,
				    .replace_wait_ms = 5000 };

	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->replace_wait_ms, 5000);
	assert_int_equal(join(t, "el", 1, 3, (void *)2, NULL), 0);
	assert_int_equal(join(t, "el", 2, 3, (void *)3, NULL), 0);
	assert_int_equal(declare(t, j->id, 0, 5, 4000, WIRE_F32, &k), 0);
	jobs_session_closed(t->js, (void *)2);           /* rank 1's process dies */
	assert_int_equal(j->state, JOB_ACTIVE);
	assert_int_equal(t->nnotified, 0);
	assert_true(j->ranks[1].lost_at > 0);
	assert_string_equal(j->ranks[1].lost_why, "control connection closed");
	assert_int_equal(j->njoined, 2);
	jobs_tick(t->js);                                /* within its window */
	assert_int_equal(j->state, JOB_ACTIVE);
	/* its replacement, from another address */
	struct jobs_join_args b = { .name = "el", .rank = 1, .world = 3, .ip = 0x0A000009u,
				    .port = 40009, .mtu = 1500, .session = (void *)9 };
	assert_int_equal(jobs_join(t->js, &b, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->ranks[1].lost_at, 0);
	assert_int_equal(j->resets, 1);
	assert_int_equal(j->njoined, 3);
	/* its declarations start over above any round opened before, at once */
	assert_int_equal(jobs_first_round(j, k), 3);
	/* once every lcore dropped the open rounds, the others learn it */
	for (unsigned l = 0; l < 4; l++)
		assert_int_equal(t->f->eng[l].jobs[engine_job_index(j->id)].floor, 2);
	jobs_tick(t->js);
	assert_int_equal(t->nnotified, 2);               /* ranks 0 and 2 */
	assert_ptr_equal(t->notified[0], (void *)1);
	assert_ptr_equal(t->notified[1], (void *)3);
	assert_string_equal(t->last_reason, "rank 1 was replaced: call again");
	assert_int_equal(t->reset_base, 2);
	assert_int_equal(t->reset_keys, 1);
	assert_int_equal(t->reset_done0, 0);             /* no round of key 5 done */
	assert_int_equal(k->ek->round0, 2);
	assert_int_equal(jobs_first_round(j, k), 3);
	/* the replacement declares the key like the others */
	assert_int_equal(declare(t, j->id, 1, 5, 4000, WIRE_F32, NULL), 0);
	/* rank 2 lost and nobody in its place within the window: aborted */
	jobs_session_closed(t->js, (void *)3);
	assert_int_equal(j->state, JOB_ACTIVE);
	((struct job *)j)->ranks[2].lost_at -= 5.1;
	jobs_tick(t->js);
	assert_int_equal(j->state, JOB_ABORTED);
	assert_string_equal(j->reason, "rank 2 lost (control connection closed) and not "
			    "replaced within 5000 ms");
	jobs_session_closed(t->js, (void *)1);
	jobs_session_closed(t->js, (void *)9);
	for (int i = 0; i < 100 && jobs_removing(t->js); i++)
		jobs_tick(t->js);
}

/* An operator's job aborted by a failure is made again with its nonfinite
 * policy (issue 44.8: remade, it had the default). */
static void operator_job__remade_with_its_nonfinite_policy(void **state)
{
	struct t *t = *state;
	const struct job *j;

	t->f->box.cfg.join_wait_ms = 60000;
	assert_int_equal(jobs_create(t->js, "opnf", 3, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_set_nonfinite(t->js, j, ENGINE_NF_SKIP, t->err, sizeof(t->err)), 0);
	jobs_set_kept(t->js, j);
	assert_int_equal(join_secret(t, "opnf", 0, NULL), 0);
	jobs_session_closed(t->js, (void *)1);   /* rank 0 lost */
	assert_int_equal(j->state, JOB_ABORTED);
	assert_int_equal(join_secret(t, "opnf", 0, NULL), 0);
	const struct job *n = jobs_find(t->js, "opnf");
	assert_non_null(n);
	assert_ptr_not_equal(n, j);
	assert_int_equal(n->nonfinite, ENGINE_NF_SKIP);
	assert_string_equal(jobs_nonfinite_name(n->nonfinite), "skip");
	assert_int_equal(jobs_abort(t->js, "opnf", "done", t->err, sizeof(t->err)), 0);
	for (int i = 0; i < 100 && jobs_removing(t->js); i++)
		jobs_tick(t->js);
}

/* The job's timeout: its creator's, capped by --stall-timeout-ms; none
 * given is the cap. */
static void join__timeout_is_the_creators_capped_by_the_box(void **state)
{
	struct t *t = *state;
	const struct job *j;
	struct jobs_join_args a = { .name = "tmo", .rank = 0, .world = 2, .ip = 0x0A000001u,
				    .port = 40000, .mtu = 1500, .session = (void *)1,
				    .timeout_ms = 40000 };

	t->f->box.cfg.stall_timeout_ms = 3600000;
	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->timeout_ms, 40000);
	/* a later joiner's timeout does not change it */
	a.rank = 1, a.ip++, a.port++, a.session = (void *)2, a.timeout_ms = 5;
	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(j->timeout_ms, 40000);
	assert_int_equal(jobs_timeout(t->js, 0), 3600000);
	assert_int_equal(jobs_timeout(t->js, 7200000), 3600000);
	t->f->box.cfg.stall_timeout_ms = 0;   /* no bound */
	assert_int_equal(jobs_timeout(t->js, 7200000), 7200000);
	assert_int_equal(jobs_timeout(t->js, 0), 0);
}

/* A session whose worker fell silent: its rank is lost with the reason. */
static void session_lost__names_the_reason(void **state)
{
	struct t *t = *state;
	const struct job *j;
	struct jobs_join_args a = { .name = "hb", .rank = 0, .world = 2, .ip = 0x0A000001u,
				    .port = 40000, .mtu = 1500, .session = (void *)1,
				    .heartbeat_ms = 1000 };

	assert_int_equal(jobs_join(t->js, &a, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(join(t, "hb", 1, 2, (void *)2, NULL), 0);
	assert_int_equal(jobs_session_heartbeat(t->js, (void *)1), 1000);
	assert_int_equal(jobs_session_heartbeat(t->js, (void *)2), 0);
	jobs_session_lost(t->js, (void *)1, "no heartbeat for 6.0 s");
	assert_int_equal(j->state, JOB_ABORTED);
	assert_string_equal(j->reason, "rank 0 lost (no heartbeat for 6.0 s)");
	assert_int_equal(jobs_session_heartbeat(t->js, (void *)1), 0);
	jobs_session_closed(t->js, (void *)2);
	jobs_tick(t->js);
}

static void session_close__after_leave_is_quiet(void **state)
{
	struct t *t = *state;
	const struct job *j;

	assert_int_equal(join(t, "q", 0, 2, (void *)1, &j), 0);
	assert_int_equal(join(t, "q", 1, 2, (void *)2, NULL), 0);
	assert_int_equal(jobs_leave(t->js, j->id, 0, (void *)1, t->err, sizeof(t->err)), 0);
	jobs_session_closed(t->js, (void *)1);
	assert_int_equal(j->state, JOB_ACTIVE);
	assert_int_equal(t->nnotified, 0);
}

static void list__iterates_live_jobs(void **state)
{
	struct t *t = *state;
	const struct job *j;
	unsigned n = 0;

	assert_int_equal(jobs_create(t->js, "a", 1, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_create(t->js, "b", 1, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	assert_int_equal(jobs_create(t->js, "c", 1, 0, 0, 0, &j, t->err, sizeof(t->err)), 0);
	t->f->deferred = 1;
	assert_int_equal(jobs_abort(t->js, "b", NULL, t->err, sizeof(t->err)), 0);
	for (j = jobs_next(t->js, NULL); j; j = jobs_next(t->js, j)) {
		assert_string_not_equal(j->name, "b");
		n++;
	}
	assert_int_equal(n, 2);
	fixture_drain(t->f);
	t->f->deferred = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(join__creates_job, setup, teardown),
		cmocka_unit_test_setup_teardown(join__world_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(join__rank_reuse_is_eexist, setup, teardown),
		cmocka_unit_test_setup_teardown(join__out_of_range, setup, teardown),
		cmocka_unit_test_setup_teardown(join__data_ip_must_be_unicast, setup, teardown),
		cmocka_unit_test_setup_teardown(join__same_data_address_rejected, setup, teardown),
		cmocka_unit_test_setup_teardown(join__seg_bytes_from_smallest_mtu, setup, teardown),
		cmocka_unit_test_setup_teardown(create__limits, setup, teardown),
		cmocka_unit_test_setup_teardown(create__lanes_count_as_their_family, setup, teardown),
		cmocka_unit_test_setup_teardown(create__peer_budgets_and_reserve, setup, teardown),
		cmocka_unit_test_setup_teardown(release__large_key_zeroed_over_ticks, setup, teardown),
		cmocka_unit_test_setup_teardown(create__ids_unique_and_nonzero, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__creates_key_on_owners, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__small_key_only_on_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__mismatch_names_key_ranks_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__errors, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__memory_exhausted_is_enospc, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__key_limit_is_enospc_or_ebusy_while_releasing, setup, teardown),
		cmocka_unit_test_setup_teardown(release__out_of_memory_releases_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(declare__many_keys_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(declare__other_session_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(join__secret, setup, teardown),
		cmocka_unit_test_setup_teardown(join__placement_hash, setup, teardown),
		cmocka_unit_test_setup_teardown(watch__join_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(watch__join_wait_wide_job_keeps_the_cause, setup,
						teardown),
		cmocka_unit_test_setup_teardown(abort__lingers_then_is_removed_with_sessions_open,
						setup, teardown),
		cmocka_unit_test_setup_teardown(leave__last_rank_removes_and_frees, setup, teardown),
		cmocka_unit_test_setup_teardown(abort__memory_freed_only_after_lcores_applied, setup, teardown),
		cmocka_unit_test_setup_teardown(remove__full_ring_retried_by_tick, setup, teardown),
		cmocka_unit_test_setup_teardown(session_close__aborts_and_notifies, setup, teardown),
		cmocka_unit_test_setup_teardown(join__replaces_an_aborted_job_of_its_name, setup,
						teardown),
		cmocka_unit_test_setup_teardown(join__timeout_is_the_creators_capped_by_the_box,
						setup, teardown),
		cmocka_unit_test_setup_teardown(session_lost__names_the_reason, setup, teardown),
		cmocka_unit_test_setup_teardown(operator_job__outlives_its_ranks, setup, teardown),
		cmocka_unit_test_setup_teardown(replace__a_lost_rank_is_taken_over, setup, teardown),
		cmocka_unit_test_setup_teardown(operator_job__remade_with_its_nonfinite_policy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(session_close__after_leave_is_quiet, setup, teardown),
		cmocka_unit_test_setup_teardown(list__iterates_live_jobs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
