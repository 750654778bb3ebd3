/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * b64.c - base64 encode and a strict decode (only the standard alphabet,
 * whole 4-character groups, '=' padding only at the end).
 */
#include "common/b64.h"

#include <errno.h>
#include <stdint.h>

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void b64_encode(char *out, const void *in, size_t n)
{
	const uint8_t *p = in;
	size_t i = 0;

	for (; i + 3 <= n; i += 3, out += 4) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[0] = alphabet[v >> 18];
		out[1] = alphabet[(v >> 12) & 63];
		out[2] = alphabet[(v >> 6) & 63];
		out[3] = alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		out[0] = alphabet[v >> 18];
		out[1] = alphabet[(v >> 12) & 63];
		out[2] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		out[3] = '=';
		out += 4;
	}
	*out = '\0';
}

static int value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long b64_decode(void *out, size_t max, const char *in, size_t len)
{
	uint8_t *o = out;
	size_t n = 0;

	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		int last = i + 4 == len;
		int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
		int a = value(in[i]), b = value(in[i + 1]);
		int c = pad >= 2 ? 0 : value(in[i + 2]), d = pad >= 1 ? 0 : value(in[i + 3]);
		if (a < 0 || b < 0 || c < 0 || d < 0 || (pad && !last))
			return -EINVAL;
		if (n + 3 - pad > max)
			return -ENOSPC;
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		o[n++] = (uint8_t)(v >> 16);
		if (pad < 2)
			o[n++] = (uint8_t)(v >> 8);
		if (pad < 1)
			o[n++] = (uint8_t)v;
	}
	return (long)n;
}
