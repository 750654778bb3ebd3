/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_fleet.c - a fleet's client (client/ops/fleet.c) against
 * three in-process boxes (box_inproc.h):
 *   - a key cut over the three boxes sums exactly, every box summing, and
 *     pbox_close ends every thread the clients started (a thread per box:
 *     counted in /proc/self/task);
 *   - a box lost under a call (its control plane gone, its data path
 *     silent) fails the call and the later ones with PBOX_ECLOSED naming
 *     that box, while the others go on serving until close.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/box_inproc.h"
#include "include/pbox.h"

#define NBOX 3
/* f32 elements of a key cut into 5 partitions of 512 KiB or less: over 3
 * boxes, each has one at least */
#define COUNT (5 * 131072 - 1000)

static unsigned threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void boxes_start(struct box_inproc *b[NBOX], char *list, size_t len)
{
	size_t at = 0;

	for (int i = 0; i < NBOX; i++) {
		b[i] = box_inproc_new(1);
		box_inproc_start(b[i]);
		at += (size_t)snprintf(list + at, len - at, "%s%s", i ? "," : "", b[i]->addr);
	}
	assert_true(at < len);
}

static void boxes_free(struct box_inproc *b[NBOX])
{
	for (int i = 0; i < NBOX; i++) {
		box_inproc_stop(b[i]);
		box_inproc_free(b[i]);
	}
}

static pbox_opts opts_ms(uint32_t ms)
{
	pbox_opts o;

	pbox_opts_init(&o);
	o.timeout_ms = ms;
	return o;
}

struct rank {
	pbox_client *c;
	int rank, rc;
	float *x;
};

static float value(int rank, size_t i, int it)
{
	return (float)((int)((i * 7 + (size_t)rank * 3 + (size_t)it) % 11) - 5);
}

static void *rank_main(void *arg)
{
	struct rank *r = arg;

	for (int it = 0; it < 3 && r->rc == 0; it++) {
		for (size_t i = 0; i < COUNT; i++)
			r->x[i] = value(r->rank, i, it);
		r->rc = pbox_allreduce(r->c, 7, r->x, COUNT, PBOX_F32);
		for (size_t i = 0; i < COUNT && r->rc == 0; i++)
			if (r->x[i] != value(0, i, it) + value(1, i, it))
				r->rc = -1000 - it;
	}
	return NULL;
}

static void fleet__three_boxes_exact_no_thread_left(void **state)
{
	struct box_inproc *b[NBOX];
	char list[128];
	struct rank r[2];
	pthread_t th[2];
	pbox_opts o = opts_ms(10000);

	(void)state;
	boxes_start(b, list, sizeof(list));
	unsigned before = threads_now();
	for (int i = 0; i < 2; i++) {
		r[i] = (struct rank){ .rank = i, .x = malloc(COUNT * sizeof(float)) };
		assert_non_null(r[i].x);
		assert_int_equal(pbox_connect(list, "fleet1t", i, 2, &o, &r[i].c), 0);
		/* a progress thread per box client */
		assert_true(threads_now() >= before + (unsigned)NBOX * (unsigned)(i + 1));
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		if (r[i].rc != 0)
			fail_msg("rank %d: %d %s", i, r[i].rc, pbox_last_error(r[i].c));
	}
	for (int i = 0; i < 2; i++) {
		pbox_close(r[i].c);
		free(r[i].x);
	}
	assert_int_equal(threads_now(), before);
	for (int i = 0; i < NBOX; i++) {
		assert_true(box_inproc_idle(b[i], 2000));
		box_inproc_stop(b[i]);
		assert_true(b[i]->f->eng[0].c.pushes > 0);   /* every box summed */
		box_inproc_free(b[i]);
	}
}

static void fleet__lost_box_named_others_served(void **state)
{
	struct box_inproc *b[NBOX];
	char list[128], want[128];
	pbox_opts o = opts_ms(1500);
	pbox_client *c;
	pbox_req *req;
	float *x = calloc(COUNT, sizeof(float));
	float y[64] = { 0 };

	(void)state;
	assert_non_null(x);
	boxes_start(b, list, sizeof(list));
	assert_int_equal(pbox_connect(list, "fleetlost", 0, 1, &o, &c), 0);
	assert_int_equal(pbox_allreduce(c, 1, x, COUNT, PBOX_F32), 0);   /* all well */
	/* box 2 goes: its data path silent, then its control plane */
	atomic_store(&b[1]->silent, 1);
	assert_int_equal(pbox_iallreduce(c, 1, x, COUNT, PBOX_F32, &req), 0);
	assert_true(box_inproc_wait_seen(b[1], 1, 2000));
	box_inproc_drop_control(b[1]);
	assert_int_equal(pbox_wait(req), PBOX_ECLOSED);
	snprintf(want, sizeof(want), "box %s: ", b[1]->addr);
	if (!strstr(pbox_last_error(c), want))
		fail_msg("not naming box 2 (%s): %s", b[1]->addr, pbox_last_error(c));
	assert_non_null(strstr(pbox_last_error(c), "lost the control connection to box"));
	/* a later call on box 2's partitions fails at once, naming it */
	assert_int_equal(pbox_allreduce(c, 1, x, COUNT, PBOX_F32), PBOX_ECLOSED);
	assert_non_null(strstr(pbox_last_error(c), want));
	/* the boxes left are still served: a collective
	 * goes whole to one box; those of keys placed on boxes 1 and 3 end */
	int done = 0;
	for (uint32_t key = 100; key < 140 && done < 4; key++) {
		int rc = pbox_broadcast(c, key, y, 64, PBOX_F32, 0);
		if (rc == 0) {
			done++;
			continue;
		}
		assert_int_equal(rc, PBOX_ECLOSED);   /* placed on box 2 */
		assert_non_null(strstr(pbox_last_error(c), want));
	}
	assert_int_equal(done, 4);
	pbox_close(c);
	free(x);
	boxes_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fleet__three_boxes_exact_no_thread_left),
		cmocka_unit_test(fleet__lost_box_named_others_served),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
