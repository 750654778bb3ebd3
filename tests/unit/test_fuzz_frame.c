/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fuzz_frame.c - tests/fuzz/fuzz_frame.c's invariants, replayed with
 * gcc on frames the box accepts: the harness must take every frame the
 * product takes, or the fuzzer stops at a false crash (and `make check`'s
 * brief run fails on it) instead of finding real ones. The harness's
 * CHECK fails the cmocka test here instead of aborting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define PBOX_FUZZ_CHECK_H /* tests/fuzz/fuzz_check.h: replaced by this CHECK */
#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c))                                                      \
			fail_msg("%s:%d: invariant failed: %s", __FILE__,      \
				 __LINE__, #c);                                \
	} while (0)
#include "tests/fuzz/fuzz_frame.c"

#define PEER_IP 0xC6120002u
static const uint8_t peer_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 };

/* A UDP frame to MY_IP carrying a pbox header m and body bytes of 0xAB
 * (UDP checksum 0); its length. */
static size_t pbox_frame(uint8_t *f, const struct wire_msg *m, size_t body)
{
	frame_udp_headers(f, my_mac, peer_mac, PEER_IP, MY_IP, 40000, 47000, WIRE_HDR_LEN + body);
	wire_encode(f + FRAME_HDRS_LEN, m);
	memset(f + FRAME_HDRS_LEN + WIRE_HDR_LEN, 0xAB, body);
	return FRAME_HDRS_LEN + WIRE_HDR_LEN + body;
}

/* WAIT and NACK (box -> worker) pass wire_decode: count 0 and a 16-byte
 * notice body. */
static void harness__takes_wait_and_nack(void **state)
{
	(void)state;
	uint8_t f[128];
	struct wire_notice n = { .missing = 5, .open_us = 100 };

	for (uint8_t t = WIRE_WAIT; t <= WIRE_NACK; t++) {
		struct wire_msg m = { .type = t, .dtype = WIRE_F32, .job = 1, .key = 2, .round = 3 };
		size_t len = pbox_frame(f, &m, WIRE_NOTICE_LEN);
		wire_notice_encode(f + FRAME_HDRS_LEN + WIRE_HDR_LEN, &n);
		struct frame_info fi;
		struct wire_msg d;
		assert_int_equal(frame_parse(f, len, MY_IP, &fi), FRAME_UDP);
		assert_int_equal(wire_decode(fi.payload, fi.payload_len, &d), 0);
		assert_int_equal(LLVMFuzzerTestOneInput(f, len), 0);
	}
}

/* A UDP checksum holding the pseudo-header sum alone (left to an offload
 * that never ran): frame_verify accepts it as FRAME_CSUM_UNFILLED. */
static void harness__takes_unfilled_udp_checksum(void **state)
{
	(void)state;
	uint8_t f[128], pseudo[12];
	struct wire_msg m = { .type = WIRE_PUSH, .dtype = WIRE_F32, .job = 1, .count = 1, .round = 1 };
	size_t len = pbox_frame(f, &m, 4);

	memcpy(pseudo, f + FRAME_ETH_LEN + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = 17;
	memcpy(pseudo + 10, f + FRAME_ETH_LEN + 20 + 4, 2);
	uint64_t s = frame_csum_partial(pseudo, sizeof(pseudo), 0);
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	uint16_t c = (uint16_t)s;
	memcpy(f + FRAME_ETH_LEN + 20 + 6, &c, 2);
	assert_int_equal(frame_verify(f, len, FRAME_CSUM_IP | FRAME_CSUM_L4), FRAME_CSUM_UNFILLED);
	assert_int_equal(LLVMFuzzerTestOneInput(f, len), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(harness__takes_wait_and_nack),
		cmocka_unit_test(harness__takes_unfilled_udp_checksum),
	};
	return cmocka_run_group_tests_name("fuzz_frame harness", tests, NULL, NULL);
}
