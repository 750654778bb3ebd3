/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_b64.c - base64 (common/b64.c): RFC 4648's test vectors, round trips
 * of every length, and the strict decoder's refusals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/b64.h"

static void rfc4648__vectors(void **state)
{
	static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const out[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==",
					   "Zm9vYmE=", "Zm9vYmFy" };
	char buf[16];
	uint8_t dec[16];

	(void)state;
	for (int i = 0; i < 7; i++) {
		b64_encode(buf, in[i], strlen(in[i]));
		assert_string_equal(buf, out[i]);
		assert_int_equal(b64_len(strlen(in[i])), strlen(out[i]));
		assert_int_equal(b64_decode(dec, sizeof(dec), out[i], strlen(out[i])),
				 strlen(in[i]));
		assert_memory_equal(dec, in[i], strlen(in[i]));
	}
}

static void round_trip__every_byte_and_length(void **state)
{
	uint8_t data[300], dec[300];
	char text[404];

	(void)state;
	for (int i = 0; i < 300; i++)
		data[i] = (uint8_t)(i * 37 + 11);
	for (size_t n = 0; n <= sizeof(data); n++) {
		b64_encode(text, data, n);
		assert_int_equal(b64_decode(dec, sizeof(dec), text, strlen(text)), (long)n);
		assert_memory_equal(dec, data, n);
	}
}

static void decode__refuses_what_is_not_padded_base64(void **state)
{
	uint8_t dec[16];

	(void)state;
	assert_int_equal(b64_decode(dec, sizeof(dec), "Zg=", 3), -EINVAL);      /* not 4k */
	assert_int_equal(b64_decode(dec, sizeof(dec), "Z*==", 4), -EINVAL);     /* alphabet */
	assert_int_equal(b64_decode(dec, sizeof(dec), "Zg==Zg==", 8), -EINVAL); /* pad inside */
	assert_int_equal(b64_decode(dec, sizeof(dec), "Z===", 4), -EINVAL);
	assert_int_equal(b64_decode(dec, 2, "Zm9v", 4), -ENOSPC);               /* no room */
	assert_int_equal(b64_decode(dec, 3, "Zm9v", 4), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rfc4648__vectors),
		cmocka_unit_test(round_trip__every_byte_and_length),
		cmocka_unit_test(decode__refuses_what_is_not_padded_base64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
