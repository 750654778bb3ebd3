/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_port_queues.c - nic/port_queues.c: a tx queue per data lcore on
 * every port; net_af_packet's qpairs= and net_af_xdp's queue_count= equal
 * to the data lcores (their unpolled queues would lose frames: the
 * kernel's fanout, the NIC's queues without a socket), each refusal
 * naming the --vdev argument and the count to give; other PMDs may have
 * more rx queues than lcores. (An integration test cannot reach the
 * net_af_xdp case here: a veth has no combined channels, so the PMD
 * itself refuses queue_count above 1 before pboxd sees the port.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "nic/port_queues.h"

static char err[512];

static int check(const char *driver, unsigned rx, unsigned tx, unsigned nlcores)
{
	err[0] = 0;
	return port_queues_check(3, "net_x0", driver, rx, tx, nlcores, err, sizeof(err));
}

static void tx__one_per_data_lcore(void **state)
{
	(void)state;
	assert_int_equal(check("net_ice", 16, 1, 2), -EINVAL);
	assert_non_null(strstr(err, "port 3 (net_x0) has 1 tx queues; pboxd needs one per data"
				    " lcore (2)"));
	assert_null(strstr(err, "--vdev"));
	assert_int_equal(check("net_af_packet", 1, 1, 2), -EINVAL);
	assert_non_null(strstr(err, "use qpairs=2 in its --vdev"));
	assert_int_equal(check("net_af_xdp", 1, 1, 2), -EINVAL);
	assert_non_null(strstr(err, "use queue_count=2 in its --vdev"));
	assert_int_equal(check(NULL, 4, 4, 4), 0);
}

static void af_packet__qpairs_equal_the_lcores(void **state)
{
	(void)state;
	assert_int_equal(check("net_af_packet", 2, 2, 2), 0);
	assert_int_equal(check("net_af_packet", 2, 2, 1), -EINVAL);
	assert_non_null(strstr(err, "qpairs=N must equal the number of data lcores, 1: use"
				    " qpairs=1 in its --vdev (or 2 data lcores)"));
	assert_non_null(strstr(err, "the flows of the others would be lost"));
}

static void af_xdp__queue_count_equals_the_lcores(void **state)
{
	(void)state;
	assert_int_equal(check("net_af_xdp", 1, 1, 1), 0);
	assert_int_equal(check("net_af_xdp", 4, 4, 4), 0);
	assert_int_equal(check("net_af_xdp", 4, 4, 2), -EINVAL);
	assert_non_null(strstr(err, "port 3 (net_x0) has queue_count=4"));
	assert_non_null(strstr(err, "queue_count=N must equal the number of data lcores, 2: use"
				    " queue_count=2 in its --vdev (or 4 data lcores)"));
	assert_non_null(strstr(err, "would go to the kernel, not pboxd"));
}

static void others__may_have_more_rx_queues(void **state)
{
	(void)state;
	assert_int_equal(check("net_ice", 64, 64, 2), 0);
	assert_int_equal(check("net_mlx5", 1, 8, 4), 0);    /* fewer: pboxd uses one rx queue */
	assert_int_equal(check("net_af_xdp_", 4, 4, 2), 0); /* exact names only */
}

static void message__cut_to_the_buffer(void **state)
{
	char small[24];
	(void)state;
	memset(small, 'x', sizeof(small));
	assert_int_equal(port_queues_check(3, "net_x0", "net_af_xdp", 4, 1, 2, small,
					   sizeof(small)), -EINVAL);
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tx__one_per_data_lcore),
		cmocka_unit_test(af_packet__qpairs_equal_the_lcores),
		cmocka_unit_test(af_xdp__queue_count_equals_the_lcores),
		cmocka_unit_test(others__may_have_more_rx_queues),
		cmocka_unit_test(message__cut_to_the_buffer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
