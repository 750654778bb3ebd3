/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_local_prog.c - one rank of a host-local job (test_host_local.sh,
 * docs/architecture.md "The host level").
 *
 *   host_local_prog CONTROL JOB RANK WORLD L DTYPE COUNT CALLS
 *
 * L > 0 sets pbox_opts.local_world = L and local_rank = RANK % L (or
 * $HL_LOCAL_RANK); L = 0 leaves them to LOCAL_WORLD_SIZE / LOCAL_RANK.
 * DTYPE is f32 or bf16. Each call allreduces COUNT elements of values
 * that depend on (rank, element, call) and have fractional bits, so the
 * order of the additions shows in the result; every rank computes the
 * expected sum in the order (host, then local rank) of docs/protocol.md
 * "Host-local aggregation" on its own (binary32 sums, rounded once per
 * host and once at the end) and compares bit for bit. Prints "connected",
 * then "digest <hex>" of the last result and "ok CALLS"; exit 1 with the
 * error otherwise. $HL_STALL_AT=k: print "stalling" and sleep before call
 * k (a victim to kill -9). $HL_DEV=1: the calls are pbox_allreduce_dev on
 * a device buffer of the GPU library $PBOX_GPU_LIB names (the fake GPU of
 * the unit tests: build/tests/libpbox-gpu-fake.so), the inputs copied in
 * and the result read back after the stream.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include "pbox.h"
#include "pbox_cuda.h"
#include "common/gpu_ops.h"
#include "host_local_data.h"

/* $HL_DEV: the GPU library's device buffer and stream */
struct dev {
	const struct pbox_gpu_ops *ops;
	void *buf, *stream, *ev;
};

static int dev_open(struct dev *d, size_t bytes)
{
	const char *lib = getenv("PBOX_GPU_LIB");
	void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
	pbox_gpu_ops_fn get = h ? (pbox_gpu_ops_fn)dlsym(h, PBOX_GPU_SYMBOL) : NULL;

	if (!get) {
		fprintf(stderr, "HL_DEV: no GPU library (PBOX_GPU_LIB=%s)\n", lib ? lib : "");
		return -1;
	}
	d->ops = get();
	if (d->ops->init() < 0 || d->ops->dev_alloc(&d->buf, bytes) < 0 ||
	    d->ops->stream_create(&d->stream) < 0 || d->ops->event_create(&d->ev) < 0) {
		fprintf(stderr, "HL_DEV: %s\n", d->ops->last_error());
		return -1;
	}
	return 0;
}

/* pbox_allreduce_dev of buf's count elements through the device buffer */
static int dev_allreduce(struct dev *d, pbox_client *c, void *buf, size_t count, size_t esz,
			 pbox_dtype dt)
{
	const struct pbox_gpu_ops *o = d->ops;

	if (o->memcpy_sync(d->buf, buf, count * esz) < 0)
		return PBOX_ESYS;
	int rc = pbox_allreduce_dev(c, 7, d->buf, count, dt, d->stream, NULL);
	if (rc < 0)
		return rc;
	if (o->event_record(d->ev, d->stream) < 0 || o->event_sync(d->ev) < 0 ||
	    o->memcpy_sync(buf, d->buf, count * esz) < 0)
		return PBOX_ESYS;
	return 0;
}


/* rank r's input at element i of call k, as the dtype holds it */
static float input(int r, size_t i, int k, int bf)
{
	float v = hl_value(r, i, k);
	return bf ? hl_from_bf16(hl_to_bf16(v)) : v;
}

static float rnd(float f, int bf)
{
	return bf ? hl_from_bf16(hl_to_bf16(f)) : f;
}

int main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr, "usage: %s CONTROL JOB RANK WORLD L f32|bf16 COUNT CALLS\n",
			argv[0]);
		return 2;
	}
	const char *control = argv[1], *job = argv[2];
	int rank = atoi(argv[3]), world = atoi(argv[4]), L = atoi(argv[5]);
	int bf = strcmp(argv[6], "bf16") == 0;
	size_t count = strtoull(argv[7], NULL, 10);
	int calls = atoi(argv[8]);
	int stall = getenv("HL_STALL_AT") ? atoi(getenv("HL_STALL_AT")) : -1;
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	if (L > 0) {
		o.local_world = (uint32_t)L;
		o.local_rank = getenv("HL_LOCAL_RANK") ? (uint32_t)atoi(getenv("HL_LOCAL_RANK"))
						       : (uint32_t)(rank % L);
	}
	int rc = pbox_connect(control, job, rank, world, &o, &c);
	if (rc < 0) {
		fprintf(stderr, "connect: %s: %s\n", pbox_strerror(rc), c ? pbox_last_error(c) : "");
		pbox_close(c);
		return 1;
	}
	printf("connected\n");
	fflush(stdout);
	if (L == 0) {
		const char *lw = getenv("LOCAL_WORLD_SIZE");
		L = lw ? atoi(lw) : 1;
	}
	int hosts = world / (L > 0 ? L : 1);
	size_t esz = bf ? 2 : 4;
	uint8_t *buf = malloc(count * esz);
	uint64_t digest = 0;
	struct dev dv = { 0 };
	int on_dev = getenv("HL_DEV") && atoi(getenv("HL_DEV"));
	if (on_dev && dev_open(&dv, count * esz) < 0) {
		pbox_close(c);
		return 1;
	}
	for (int k = 0; k < calls; k++) {
		if (k == stall) {
			printf("stalling\n");
			fflush(stdout);
			sleep(120);
		}
		for (size_t i = 0; i < count; i++) {
			float v = input(rank, i, k, bf);
			if (bf) {
				uint16_t b = hl_to_bf16(v);
				memcpy(buf + i * 2, &b, 2);
			} else {
				memcpy(buf + i * 4, &v, 4);
			}
		}
		rc = on_dev ? dev_allreduce(&dv, c, buf, count, esz, bf ? PBOX_BF16 : PBOX_F32)
			    : pbox_allreduce(c, 7, buf, count, bf ? PBOX_BF16 : PBOX_F32);
		if (rc < 0) {
			fprintf(stderr, "call %d: %s: %s\n", k, pbox_strerror(rc), pbox_last_error(c));
			pbox_close(c);
			return 1;
		}
		digest = 1469598103934665603ull;
		for (size_t i = 0; i < count; i++) {
			float total = 0;
			for (int h = 0; h < hosts; h++) {
				float s = input(h * L, i, k, bf);
				for (int l = 1; l < L; l++)
					s += input(h * L + l, i, k, bf);
				s = rnd(s, bf);
				total = h ? total + s : s;
			}
			total = rnd(total, bf);
			uint32_t want = bf ? hl_to_bf16(total) : hl_u_of(total), got;
			if (bf) {
				uint16_t b;
				memcpy(&b, buf + i * 2, 2);
				got = b;
			} else {
				memcpy(&got, buf + i * 4, 4);
			}
			if (got != want) {
				fprintf(stderr, "call %d element %zu: got 0x%x, want 0x%x\n", k, i, got,
					want);
				pbox_close(c);
				return 1;
			}
			digest = (digest ^ got) * 1099511628211ull;
		}
	}
	printf("digest %016llx\nok %d\n", (unsigned long long)digest, calls);
	pbox_close(c);
	free(buf);
	return 0;
}
