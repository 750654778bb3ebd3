/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_pmtu.c - libpbox's automatic MTU (pbox_opts.mtu = 0,
 * client/transport/pmtu.c) against the in-process box (tests/unit/box_inproc.h): the
 * smaller of the box's MTU and the route's (loopback: 65536), confirmed by
 * a probe that comes back; a path that loses large probes falls back to
 * 1500; PBOX_MTU and pbox_opts.mtu choose instead. The MTU and segment size
 * in use are read from pbox_get_stats, and every sum is exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/unit/box_inproc.h"
#include "include/pbox.h"

static int setup(void **state)
{
	struct box_inproc *b = box_inproc_new(2);

	b->f->box.layout.mtu = 9000;   /* a jumbo box */
	box_inproc_start(b);
	*state = b;
	unsetenv("PBOX_MTU");
	return 0;
}

static int teardown(void **state)
{
	struct box_inproc *b = *state;

	unsetenv("PBOX_MTU");
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_stop(b);
	assert_int_equal(b->f->apply_errors, 0);
	box_inproc_free(b);
	return 0;
}

/* Connect one rank with opts (NULL = defaults), sum 100000 floats, and
 * return the MTU and segment bytes it used. */
static void run(struct box_inproc *b, const char *job, const pbox_opts *o, pbox_stats *st)
{
	static float x[100000];
	pbox_client *c;

	for (size_t i = 0; i < 100000; i++)
		x[i] = (float)i;
	assert_int_equal(pbox_connect(b->addr, job, 0, 1, o, &c), 0);
	assert_int_equal(pbox_allreduce(c, 1, x, 100000, PBOX_F32), 0);
	for (size_t i = 0; i < 100000; i++)
		assert_true(x[i] == (float)i);
	pbox_get_stats(c, st);
	pbox_close(c);
}

static void auto__box_mtu_confirmed(void **state)
{
	pbox_stats st;

	run(*state, "auto", NULL, &st);
	assert_int_equal(st.mtu, 9000);
	assert_int_equal(st.seg_bytes, 8896);
}

static void auto__lost_probe_falls_back_to_1500(void **state)
{
	struct box_inproc *b = *state;
	pbox_stats st;

	atomic_store(&b->probe_max, WIRE_HDR_LEN + 1408);   /* jumbo probes are lost */
	run(b, "lossy", NULL, &st);
	assert_int_equal(st.mtu, 1500);
	assert_int_equal(st.seg_bytes, 1408);
}

static void env__pbox_mtu_chooses(void **state)
{
	pbox_stats st;
	pbox_client *c;

	setenv("PBOX_MTU", "1500", 1);
	run(*state, "env", NULL, &st);
	assert_int_equal(st.mtu, 1500);
	assert_int_equal(st.seg_bytes, 1408);
	setenv("PBOX_MTU", "12", 1);
	assert_int_equal(pbox_connect(((struct box_inproc *)*state)->addr, "env", 0, 1, NULL, &c),
			 PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "PBOX_MTU='12'"));
	pbox_close(c);
}

static void opts__explicit_mtu_used(void **state)
{
	pbox_opts o;
	pbox_stats st;

	pbox_opts_init(&o);
	o.mtu = 4000;
	run(*state, "explicit", &o, &st);
	assert_int_equal(st.mtu, 4000);
	assert_int_equal(st.seg_bytes, 3904);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(auto__box_mtu_confirmed, setup, teardown),
		cmocka_unit_test_setup_teardown(auto__lost_probe_falls_back_to_1500, setup, teardown),
		cmocka_unit_test_setup_teardown(env__pbox_mtu_chooses, setup, teardown),
		cmocka_unit_test_setup_teardown(opts__explicit_mtu_used, setup, teardown),
	};
	return cmocka_run_group_tests_name("client_pmtu", tests, NULL, NULL);
}
