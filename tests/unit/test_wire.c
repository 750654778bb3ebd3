/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_wire.c - the wire header: layout on the wire, round trip, and every
 * check wire_decode makes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/drops.h"
#include "common/wire.h"

static struct wire_msg sample(void)
{
	return (struct wire_msg){ .type = WIRE_PUSH, .dtype = WIRE_F16, .flags = WIRE_FLAG_RETX,
		.job = 0x01020304, .rank = 0x0506, .count = 3, .token = 0x1112131415161718ull,
		.key = 0x21222324, .seg = 0x31323334, .round = 0x41424344 };
}

static void encode__bytes_are_big_endian_at_documented_offsets(void **state)
{
	(void)state;
	uint8_t b[WIRE_HDR_LEN];
	struct wire_msg m = sample();
	wire_encode(b, &m);
	static const uint8_t want[WIRE_HDR_LEN] = {
		'P', 'B', 'O', 'X', 1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 0, 3,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0x31, 0x32, 0x33, 0x34, 0x41, 0x42, 0x43, 0x44,
		0, 0, 0, 0 };
	assert_memory_equal(b, want, sizeof(want));
}

static void decode__round_trip(void **state)
{
	(void)state;
	uint8_t b[WIRE_HDR_LEN + 6] = { 0 };
	struct wire_msg m = sample(), d;
	wire_encode(b, &m);
	assert_int_equal(wire_decode(b, sizeof(b), &d), 0);
	assert_int_equal(d.type, m.type);
	assert_int_equal(d.dtype, m.dtype);
	assert_int_equal(d.flags, m.flags);
	assert_int_equal(d.job, m.job);
	assert_int_equal(d.rank, m.rank);
	assert_int_equal(d.count, m.count);
	assert_true(d.token == m.token);
	assert_int_equal(d.key, m.key);
	assert_int_equal(d.seg, m.seg);
	assert_int_equal(d.round, m.round);
	assert_int_equal(d.status, m.status);
}

static void decode__rejects_each_bad_field(void **state)
{
	(void)state;
	uint8_t b[WIRE_HDR_LEN + 6];
	struct wire_msg m = sample(), d;
	wire_encode(b, &m);

	assert_int_equal(wire_decode(b, WIRE_HDR_LEN - 1, &d), -DROP_BAD_LEN);
	assert_int_equal(wire_decode(b, sizeof(b) - 1, &d), -DROP_BAD_LEN);
	uint8_t c[sizeof(b)];
	memcpy(c, b, sizeof(b)); c[0] ^= 1;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_MAGIC);
	memcpy(c, b, sizeof(b)); c[4] = 2;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_VERSION);
	memcpy(c, b, sizeof(b)); c[5] = 0;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_TYPE);
	memcpy(c, b, sizeof(b)); c[5] = 8;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_TYPE);
	/* a probe: count 0 and any padding; a count is a length error */
	memcpy(c, b, sizeof(b)); c[5] = WIRE_PROBE;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_LEN);
	c[14] = c[15] = 0;
	assert_int_equal(wire_decode(c, sizeof(c), &d), 0);
	assert_int_equal(d.type, WIRE_PROBE);
	assert_int_equal(wire_decode(c, WIRE_HDR_LEN, &d), 0);
	memcpy(c, b, sizeof(b)); c[6] = 3;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_DTYPE);
	memcpy(c, b, sizeof(b)); c[7] = 0x40;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_FLAGS);
	/* SPARSE: count records of at least 8 bytes, a multiple of 4 in all,
	 * on PUSH and RESULT only */
	uint8_t sp[WIRE_HDR_LEN + 16] = { 0 };
	memcpy(sp, b, WIRE_HDR_LEN); sp[7] = WIRE_FLAG_SPARSE; sp[14] = 0; sp[15] = 0;
	assert_int_equal(wire_decode(sp, WIRE_HDR_LEN + 8, &d), -DROP_BAD_LEN); /* count 0 */
	sp[15] = 1;
	assert_int_equal(wire_decode(sp, WIRE_HDR_LEN + 8, &d), 0);
	assert_int_equal(d.plen, 8);
	assert_int_equal(wire_decode(sp, WIRE_HDR_LEN + 6, &d), -DROP_BAD_LEN);
	assert_int_equal(wire_decode(sp, WIRE_HDR_LEN + 10, &d), -DROP_BAD_LEN);
	sp[5] = WIRE_NACK;
	assert_int_equal(wire_decode(sp, WIRE_HDR_LEN + 16, &d), -DROP_BAD_FLAGS);
	/* bytes 38..39: reserved on every type but PUSH (its argument) */
	memcpy(c, b, sizeof(b)); c[5] = WIRE_RESULT; c[39] = 1;
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_FLAGS);
	memcpy(c, b, sizeof(b)); c[15] = 4; /* count 4 f16 = 8 bytes, have 6 */
	assert_int_equal(wire_decode(c, sizeof(c), &d), -DROP_BAD_LEN);
}

/* A PUSH's argument (a PS key's learning rate) fills bytes 36..39,
 * big-endian, where other types have status and reserved. */
static void push__argument_round_trip(void **state)
{
	(void)state;
	uint8_t b[WIRE_HDR_LEN + 6];
	struct wire_msg m = sample(), d;
	m.type = WIRE_PUSH;
	m.flags = WIRE_FLAG_INIT | WIRE_FLAG_NOTICE;
	m.arg = 0x3dcccccdu; /* 0.1f */
	wire_encode(b, &m);
	assert_int_equal(b[36], 0x3d);
	assert_int_equal(b[39], 0xcd);
	assert_int_equal(wire_decode(b, sizeof(b), &d), 0);
	assert_int_equal(d.arg, 0x3dcccccdu);
	assert_int_equal(d.status, 0);
	assert_int_equal(d.flags, WIRE_FLAG_INIT | WIRE_FLAG_NOTICE);
	m.type = WIRE_RESULT; /* not carried by other types */
	wire_encode(b, &m);
	assert_int_equal(wire_decode(b, sizeof(b), &d), 0);
	assert_int_equal(d.arg, 0);
	assert_int_equal(b[39], 0);
}

/* WAIT and NACK: count 0 and exactly the 16-byte notice after the header. */
static void notice__layout_and_checks(void **state)
{
	(void)state;
	uint8_t b[WIRE_HDR_LEN + WIRE_NOTICE_LEN + 1];
	struct wire_msg m = sample(), d;
	struct wire_notice n = { .missing = 0x8000000000000005ull, .open_us = 1234 }, o;

	m.type = WIRE_NACK;
	m.count = 0;
	wire_encode(b, &m);
	wire_notice_encode(b + WIRE_HDR_LEN, &n);
	static const uint8_t want[WIRE_NOTICE_LEN] = { 0x80, 0, 0, 0, 0, 0, 0, 5,
						       0, 0, 0x04, 0xD2, 0, 0, 0, 0 };
	assert_memory_equal(b + WIRE_HDR_LEN, want, sizeof(want));
	assert_int_equal(wire_decode(b, WIRE_HDR_LEN + WIRE_NOTICE_LEN, &d), 0);
	assert_int_equal(d.type, WIRE_NACK);
	assert_int_equal(wire_notice_decode(b + WIRE_HDR_LEN, &o), 0);
	assert_true(o.missing == n.missing);
	assert_int_equal(o.open_us, 1234);
	assert_int_equal(o.base, 0);
	/* a base: a multiple of 64 below 65536 (ranks base .. base + 63) */
	n.base = 640;
	wire_notice_encode(b + WIRE_HDR_LEN, &n);
	assert_int_equal(b[WIRE_HDR_LEN + 14], 0x02);
	assert_int_equal(b[WIRE_HDR_LEN + 15], 0x80);
	assert_int_equal(wire_notice_decode(b + WIRE_HDR_LEN, &o), 0);
	assert_int_equal(o.base, 640);
	n.base = 65;
	wire_notice_encode(b + WIRE_HDR_LEN, &n);
	assert_int_equal(wire_notice_decode(b + WIRE_HDR_LEN, &o), -DROP_BAD_FLAGS);
	n.base = 0;
	wire_notice_encode(b + WIRE_HDR_LEN, &n);
	assert_int_equal(wire_decode(b, WIRE_HDR_LEN + WIRE_NOTICE_LEN - 1, &d), -DROP_BAD_LEN);
	assert_int_equal(wire_decode(b, sizeof(b), &d), -DROP_BAD_LEN);
	b[15] = 1; /* a count */
	assert_int_equal(wire_decode(b, WIRE_HDR_LEN + WIRE_NOTICE_LEN, &d), -DROP_BAD_LEN);
	b[15] = 0;
	b[5] = WIRE_WAIT;
	assert_int_equal(wire_decode(b, WIRE_HDR_LEN + WIRE_NOTICE_LEN, &d), 0);
	b[WIRE_HDR_LEN + 15] = 1; /* reserved */
	assert_int_equal(wire_notice_decode(b + WIRE_HDR_LEN, &o), -DROP_BAD_FLAGS);
}

static void seg_bytes__multiple_of_64_from_mtu(void **state)
{
	(void)state;
	assert_int_equal(wire_seg_bytes(1500), 1408);
	assert_int_equal(wire_seg_bytes(9000), 8896);
	/* above 9000 the cap, not the formula (docs/protocol.md) */
	assert_int_equal(wire_seg_bytes(9216), 8896);
	assert_int_equal(wire_seg_bytes(65535), WIRE_MAX_PAYLOAD);
	assert_int_equal(wire_seg_bytes(28 + 40 + 64), 64);
	assert_int_equal(wire_seg_bytes(28 + 40 + 63), 0);
	assert_int_equal(wire_seg_bytes(0), 0);
}

static void dtype__names_and_sizes(void **state)
{
	(void)state;
	assert_string_equal(wire_dtype_name(WIRE_BF16), "bf16");
	assert_null(wire_dtype_name(3));
	assert_int_equal(wire_dtype_parse("f16"), WIRE_F16);
	assert_int_equal(wire_dtype_parse("float"), -EINVAL);
	assert_int_equal(wire_dtype_parse(NULL), -EINVAL);
	assert_int_equal(wire_dtype_size(WIRE_F32), 4);
	assert_int_equal(wire_dtype_size(9), 0);
}

static void drops__every_reason_named(void **state)
{
	(void)state;
	for (int r = 1; r < DROP_COUNT; r++) {
		assert_true(strlen(drop_name(r)) > 0);
		assert_string_not_equal(drop_name(r), "?");
		for (int s = 1; s < r; s++)
			assert_string_not_equal(drop_name(r), drop_name(s));
	}
	assert_string_equal(drop_name(DROP_COUNT), "?");
	assert_string_equal(drop_name(DROP_BAD_TOKEN), "bad_token");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode__bytes_are_big_endian_at_documented_offsets),
		cmocka_unit_test(decode__round_trip),
		cmocka_unit_test(decode__rejects_each_bad_field),
		cmocka_unit_test(push__argument_round_trip),
		cmocka_unit_test(notice__layout_and_checks),
		cmocka_unit_test(seg_bytes__multiple_of_64_from_mtu),
		cmocka_unit_test(dtype__names_and_sizes),
		cmocka_unit_test(drops__every_reason_named),
	};
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
