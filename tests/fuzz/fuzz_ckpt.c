/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_ckpt.c - the checkpoint loader's check of a file (ckpt_decode,
 * control/ckpt_file.h) on arbitrary bytes: the input is a whole
 * checkpoint file. It is checked against a fixed declaration (an SGD key
 * with momentum of 16 elements of job "fz", world 2) and against the one
 * its own header claims (read here at the documented offsets, so the
 * fuzzer reaches the job, world and size checks). An accepted file must
 * end exactly where its last array does, its version 2 header must
 * encode back to the same bytes, and every byte of its arrays is read
 * (ASan catches a read outside the input).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"
#include "control/ckpt_file.h"
#include "dataplane/dp.h"
#include "tests/fuzz/fuzz_check.h"

static volatile uint8_t sink; /* the arrays' bytes, read */

static void accepted(const uint8_t *buf, size_t len, const struct ckpt_hdr *got,
		     const uint8_t *data)
{
	uint64_t arrays = (1 + (uint64_t)got->planes) * got->count * sizeof(float);

	CHECK(data >= buf && data <= buf + len);
	CHECK((uint64_t)(buf + len - data) == arrays);
	CHECK(ckpt_file_bytes(got) == len);
	for (uint64_t i = 0; i < arrays; i++)
		sink ^= data[i];
	if (got->version == 2) {
		uint8_t head[CKPT_HDR + CKPT_NAME_MAX];
		size_t hlen = ckpt_head_bytes(got);
		CHECK(hlen <= len);
		ckpt_encode(head, got);
		CHECK(memcmp(head, buf, hlen) == 0);
	}
}

/* The declaration the header at b claims (len >= CKPT_HDR). */
static void claimed(const uint8_t *b, size_t len, struct ckpt_hdr *w)
{
	uint16_t nlen;

	memset(w, 0, sizeof(*w));
	memcpy(&w->key, b + 12, 4);
	memcpy(&w->count, b + 16, 8);
	w->dtype = b[24];
	w->rdtype = b[25];
	w->average = b[26];
	w->kind = b[27];
	w->nesterov = b[28];
	memcpy(&w->momentum, b + 32, 8);
	memcpy(&w->dampening, b + 40, 8);
	memcpy(&w->weight_decay, b + 48, 8);
	memcpy(&w->beta1, b + 56, 8);
	memcpy(&w->beta2, b + 64, 8);
	memcpy(&w->eps, b + 72, 8);
	memcpy(&w->planes, b + 88, 4);
	memcpy(&w->world, b + 96, 2);
	memcpy(&nlen, b + 98, 2);
	if (nlen > CKPT_NAME_MAX || len < (size_t)CKPT_HDR + nlen)
		nlen = 0;
	memcpy(w->job, b + CKPT_HDR, nlen);
	w->job[nlen] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes, so ASan sees a read past the end */
	uint8_t *buf = malloc(size ? size : 1);
	struct ckpt_hdr want = { .key = 7, .count = 16, .dtype = WIRE_F32,
				 .rdtype = WIRE_F32, .average = 1, .kind = OPTIM_SGD,
				 .momentum = 0.9, .planes = 1, .world = 2, .job = "fz" };
	struct ckpt_hdr got;
	const uint8_t *arrays;
	char err[512];

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (ckpt_decode(buf, size, &want, "fz.pboxckpt", &got, &arrays, err, sizeof(err)) == 0)
		accepted(buf, size, &got, arrays);
	else
		CHECK(err[0] != '\0');
	if (size >= CKPT_HDR) {
		claimed(buf, size, &want);
		if (ckpt_decode(buf, size, &want, "fz.pboxckpt", &got, &arrays, err,
				sizeof(err)) == 0)
			accepted(buf, size, &got, arrays);
		want.job[0] = '\0'; /* any job, any world: an explicit restore */
		want.world = 0;
		if (ckpt_decode(buf, size, &want, "fz.pboxckpt", &got, &arrays, err,
				sizeof(err)) == 0)
			accepted(buf, size, &got, arrays);
	}
	free(buf);
	return 0;
}
