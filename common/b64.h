/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * b64.h - standard base64 (RFC 4648, with padding), for binary data in
 * JSON-RPC messages (a PS key's weights and optimizer state, docs/rpc.md
 * key_read and key_write).
 */
#ifndef PBOX_B64_H
#define PBOX_B64_H

#include <stddef.h>

/* Characters b64_encode writes for n bytes, without the NUL. */
static inline size_t b64_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Encode n bytes of in into out (b64_len(n) + 1 bytes, NUL-terminated). */
void b64_encode(char *out, const void *in, size_t n);

/* Decode the len characters at in into out (room for max bytes). Returns
 * the bytes written; -EINVAL if in is not padded base64, -ENOSPC if it
 * does not fit (on either, out may hold the groups decoded before). */
long b64_decode(void *out, size_t max, const char *in, size_t len);

#endif
