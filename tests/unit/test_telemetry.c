/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_telemetry.c - the telemetry answers' builder (control/tel_tree.c)
 * and the snapshot pboxd publishes for /pbox/stats, /pbox/jobs and
 * /pbox/info (control/telemetry.c), against a box of real engines
 * (box_fixture.h); tel_publish is faked to catch what is published.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/box_fixture.h"
#include "control/jobs.h"
#include "control/tel_tree.h"
#include "control/telemetry.h"

/* The node at a path of keys joined by '/' from the top, or NULL. */
static const struct dp_tel_node *at(const struct dp_tel_answer *a, const char *path)
{
	unsigned i = 0;

	while (*path) {
		size_t len = strcspn(path, "/");
		unsigned j = i + 1, k;
		if (a->nodes[i].kind != DP_TEL_DICT)
			return NULL;
		for (k = 0; k < a->nodes[i].nkids; k++, j += a->nodes[j].span)
			if (strlen(a->nodes[j].name) == len && memcmp(a->nodes[j].name, path, len) == 0)
				break;
		if (k == a->nodes[i].nkids)
			return NULL;
		i = j;
		path += len + (path[len] == '/');
	}
	return &a->nodes[i];
}

static uint64_t u64_at(const struct dp_tel_answer *a, const char *path)
{
	const struct dp_tel_node *n = at(a, path);
	assert_non_null(n);
	assert_int_equal(n->kind, DP_TEL_U64);
	return n->val;
}

static const char *str_at(const struct dp_tel_answer *a, const char *path)
{
	const struct dp_tel_node *n = at(a, path);
	assert_non_null(n);
	assert_int_equal(n->kind, DP_TEL_STR);
	return a->strs + n->val;
}

static void free_answer(struct dp_tel_answer *a)
{
	free(a->nodes);
	free(a->strs);
}

static void tree__nested_dicts_in_preorder(void **state)
{
	struct tel_tree t;
	struct dp_tel_answer a;

	(void)state;
	tel_tree_init(&t);
	tel_u64(&t, "a", 1);
	tel_dict(&t, "d", "alias-1.x");
	tel_dict(&t, "e", NULL);
	tel_u64(&t, "deep", 7);
	tel_end(&t);
	tel_str(&t, "s", "say \"hi\"\\\n");
	tel_end(&t);
	tel_u64(&t, "z", 9);
	assert_int_equal(tel_tree_finish(&t, &a), 0);

	assert_int_equal(a.n, 7);
	assert_int_equal(a.nodes[0].nkids, 3);
	assert_int_equal(a.nodes[0].span, 7);
	const struct dp_tel_node *d = at(&a, "d");
	assert_int_equal(d->nkids, 2);
	assert_int_equal(d->span, 4);
	assert_string_equal(a.strs + d->val - 1, "alias-1.x");
	assert_int_equal(u64_at(&a, "d/e/deep"), 7);
	assert_int_equal(u64_at(&a, "z"), 9);
	assert_string_equal(str_at(&a, "d/s"), "say 'hi'''"); /* DPDK does not escape */
	free_answer(&a);
}

static void tree__errors(void **state)
{
	struct tel_tree t;
	struct dp_tel_answer a;
	char long_str[300];

	(void)state;
	tel_tree_init(&t);
	tel_u64(&t, "bad.key", 1);               /* DPDK refuses '.' in keys */
	tel_u64(&t, "fine", 1);                  /* ignored after a failure */
	assert_int_equal(tel_tree_finish(&t, &a), -EINVAL);
	assert_null(a.nodes);

	tel_tree_init(&t);
	tel_u64(&t, "this_key_is_longer_than_31_bytes", 1);
	assert_int_equal(tel_tree_finish(&t, &a), -EINVAL);

	tel_tree_init(&t);
	tel_dict(&t, "open", NULL);
	assert_int_equal(tel_tree_finish(&t, &a), -EPROTO);

	tel_tree_init(&t);
	tel_end(&t);
	assert_int_equal(tel_tree_finish(&t, &a), -EPROTO);

	tel_tree_init(&t);
	for (int i = 0; i < TEL_TREE_DEPTH; i++)
		tel_dict(&t, "d", NULL);
	assert_int_equal(tel_tree_finish(&t, &a), -E2BIG);

	/* strings are cut to what DPDK keeps; many nodes grow the arrays */
	memset(long_str, 'x', sizeof(long_str) - 1);
	long_str[sizeof(long_str) - 1] = '\0';
	tel_tree_init(&t);
	tel_str(&t, "long", long_str);
	for (int i = 0; i < 1000; i++)
		tel_u64(&t, "n", (uint64_t)i);
	assert_int_equal(tel_tree_finish(&t, &a), 0);
	assert_int_equal(strlen(str_at(&a, "long")), DP_TEL_STR_MAX - 1);
	assert_int_equal(a.n, 1002);
	free_answer(&a);
}

struct t {
	struct fixture *f;
	struct jobs *js;
	struct dp_tel_snapshot *published;
	unsigned npublished;
	char err[512];
};

static void fake_publish(void *ctx, struct dp_tel_snapshot *s)
{
	struct t *t = ((struct fixture *)ctx)->on_post_ctx;
	box_telemetry_free(t->published);
	t->published = s;
	t->npublished++;
}

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	int rc;

	t->f = fixture_new(2, 3);
	t->f->on_post_ctx = t; /* fake_publish finds t through the fixture */
	if ((rc = jobs_open(&t->f->box, &t->js)) < 0) {   /* no teardown follows */
		print_error("jobs_open: %s\n", strerror(-rc));
		fixture_free(t->f);
		free(t);
		return -1;
	}
	t->f->box.jobs = t->js;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	box_telemetry_free(t->published);
	jobs_close(t->js);
	assert_int_equal(t->f->allocs, t->f->frees);
	fixture_free(t->f);
	free(t);
	return 0;
}

static void build__stats_jobs_info(void **state)
{
	struct t *t = *state;
	struct box *b = &t->f->box;
	const struct job *j;
	struct dp_tel_snapshot *s;
	char path[64];

	int session;
	struct jobs_join_args ja = { .name = "my-job.1", .rank = 0, .world = 4, .ip = 0xC6120063u,
				     .port = 5000, .mtu = 1500, .session = &session };
	assert_int_equal(jobs_join(t->js, &ja, &j, t->err, sizeof(t->err)), 0);
	t->f->lstats[1].rx = 42;
	t->f->lstats[2].drops[DROP_BAD_TOKEN] = 3;
	t->f->lstats[0].drops[DROP_BAD_TOKEN] = 2;
	t->f->eng[2].c.completes = 11;

	assert_int_equal(box_telemetry_build(b, &s), 0);
	const struct dp_tel_answer *st = &s->answer[DP_TEL_STATS];
	assert_int_equal(u64_at(st, "jobs"), 1);
	assert_int_equal(u64_at(st, "ports/1/ipackets"), 101); /* the fixture's */
	assert_int_equal(u64_at(st, "ports/0/link_up"), 1);
	assert_int_equal(u64_at(st, "lcores/1/rx"), 42);
	assert_int_equal(u64_at(st, "lcores/2/completes"), 11);
	assert_int_equal(u64_at(st, "drops/bad_token"), 5);   /* summed over lcores */
	assert_non_null(at(st, "drops/stale_round"));
	assert_null(at(st, "lcores/3"));

	const struct dp_tel_answer *jb = &s->answer[DP_TEL_JOBS];
	snprintf(path, sizeof(path), "%u", j->id);
	const struct dp_tel_node *jn = at(jb, path);
	assert_non_null(jn);
	assert_string_equal(jb->strs + jn->val - 1, "my-job.1"); /* its alias */
	snprintf(path, sizeof(path), "%u/job", j->id);
	assert_string_equal(str_at(jb, path), "my-job.1");
	snprintf(path, sizeof(path), "%u/state", j->id);
	assert_string_equal(str_at(jb, path), "forming");
	snprintf(path, sizeof(path), "%u/world", j->id);
	assert_int_equal(u64_at(jb, path), 4);
	snprintf(path, sizeof(path), "%u/rounds", j->id);
	assert_int_equal(u64_at(jb, path), 0);
	snprintf(path, sizeof(path), "%u/reason", j->id);
	assert_null(at(jb, path));

	const struct dp_tel_answer *in = &s->answer[DP_TEL_INFO];
	assert_string_equal(str_at(in, "ports/1/ip"), "198.18.0.2/24");
	assert_string_equal(str_at(in, "ports/0/name"), "net_test0");
	assert_int_equal(u64_at(in, "lcores/2/lcore"), 3);
	assert_int_equal(u64_at(in, "lcores/2/udp_port"), b->cfg.udp_base + 2u);
	box_telemetry_free(s);

	/* an aborted job (kept while its rank's session lives) says why */
	assert_int_equal(jobs_abort(t->js, "my-job.1", "operator \"test\"", t->err,
				    sizeof(t->err)), 0);
	assert_int_equal(box_telemetry_build(b, &s), 0);
	snprintf(path, sizeof(path), "%u/reason", j->id);
	assert_non_null(strstr(str_at(&s->answer[DP_TEL_JOBS], path), "operator 'test'"));
	box_telemetry_free(s);
	jobs_session_closed(t->js, &session);
	jobs_tick(t->js);
}

static void tick__publishes_every_period_only_when_on(void **state)
{
	struct t *t = *state;
	struct box *b = &t->f->box;

	box_telemetry_tick(b);                      /* telemetry off: nothing */
	assert_int_equal(t->npublished, 0);
	b->dp.tel_publish = fake_publish;
	box_telemetry_tick(b);
	assert_int_equal(t->npublished, 1);
	assert_non_null(t->published);
	box_telemetry_tick(b);                      /* within TELEMETRY_MS */
	assert_int_equal(t->npublished, 1);
	b->tel_watch.at -= TELEMETRY_MS / 1000.0;
	box_telemetry_tick(b);
	assert_int_equal(t->npublished, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tree__nested_dicts_in_preorder),
		cmocka_unit_test(tree__errors),
		cmocka_unit_test_setup_teardown(build__stats_jobs_info, setup, teardown),
		cmocka_unit_test_setup_teardown(tick__publishes_every_period_only_when_on, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
