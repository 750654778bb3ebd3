/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_local_sparse.c - one rank of a host-local job's sparse calls
 * (test_host_local.sh, docs/architecture.md "The host level").
 *
 *   host_local_sparse CONTROL JOB RANK WORLD L MODE COUNT CALLS
 *
 * L ranks a host (pbox_opts.local_world, local_rank = RANK % L). MODE:
 *   sparse   pbox_allreduce_sparse of about a fifth of the elements per
 *            rank (overlapping), f32: the sum in the order (host, local
 *            rank), an index's values summed per host first;
 *   sparsebf the same in bf16: each host's sum rounded to bf16, the box's
 *            binary32 sum of the hosts' from +0 rounded once;
 *   topk     pbox_allreduce_topk at density 5% with error feedback, f32:
 *            each host's sum, each local rank's part of it (host_slice's
 *            cut) selected with the part's residual (pbox_topk on residual
 *            + sum), the hosts' selections summed in host order;
 *   hostsum  pbox_allreduce_host: the host's sum in local rank order.
 * Every rank computes the expected result of every call on its own and
 * compares bit for bit; prints "digest <hex>", "entries N" (the sparse
 * entries this rank sent, pbox_stats) and "ok CALLS".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbox.h"
#include "common/topk.h"
#include "host_local_data.h"

#define SLICE_ALIGN 256u   /* client/ops/host.h HOST_SLICE_ALIGN */
#define DENSITY 0.05

static int fail(pbox_client *c, const char *what, int rc)
{
	fprintf(stderr, "%s: %s: %s\n", what, pbox_strerror(rc), pbox_last_error(c));
	pbox_close(c);
	return 1;
}

/* rank r's entries of call k: about a fifth of the elements */
static int has(int r, size_t i, int k)
{
	return hl_mix((uint32_t)r + 7777u, (uint32_t)i, (uint32_t)k) % 5u == 0;
}

/* rank r's value at i in call k, as the mode's dtype holds it */
static float value(int bf, int r, size_t i, int k)
{
	return bf ? hl_from_bf16(hl_to_bf16(hl_value(r, i, k))) : hl_value(r, i, k);
}

int main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr, "usage: %s CONTROL JOB RANK WORLD L sparse|sparsebf|topk|hostsum COUNT "
			"CALLS\n",
			argv[0]);
		return 2;
	}
	const char *control = argv[1], *job = argv[2], *mode = argv[6];
	int rank = atoi(argv[3]), world = atoi(argv[4]), L = atoi(argv[5]);
	size_t count = strtoull(argv[7], NULL, 10);
	int calls = atoi(argv[8]), H = world / L, me = rank / L;
	int bf = strcmp(mode, "sparsebf") == 0, sparse = bf || strcmp(mode, "sparse") == 0;
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	o.local_world = (uint32_t)L;
	o.local_rank = (uint32_t)(rank % L);
	int rc = pbox_connect(control, job, rank, world, &o, &c);
	if (rc < 0)
		return fail(c, "connect", rc);
	float *buf = malloc(count * 4), *want = malloc(count * 4), *hsum = malloc(count * 4);
	float *resid = calloc((size_t)H * count, 4), *sel = malloc(count * 4);
	uint32_t *idx = malloc(count * 4);
	float *val = malloc(count * 4);
	uint16_t *val16 = malloc(count * 2), *out16 = malloc(count * 2);
	uint64_t digest = 0;
	size_t per = (count + L - 1) / L;
	per = (per + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
	pbox_topk_opts t;
	pbox_topk_opts_init(&t);
	t.density = DENSITY;

	for (int k = 0; k < calls; k++) {
		if (sparse) {
			size_t n = 0;
			for (size_t i = 0; i < count; i++)
				if (has(rank, i, k)) {
					idx[n] = (uint32_t)i;
					val16[n] = hl_to_bf16(hl_value(rank, i, k));
					val[n++] = hl_value(rank, i, k);
				}
			rc = bf ? pbox_allreduce_sparse(c, 9, count, PBOX_BF16, idx, val16, n, out16)
				: pbox_allreduce_sparse(c, 9, count, PBOX_F32, idx, val, n, buf);
			for (size_t i = 0; bf && i < count; i++)
				buf[i] = hl_from_bf16(out16[i]);
		} else {
			for (size_t i = 0; i < count; i++)
				buf[i] = hl_value(rank, i, k);
			rc = strcmp(mode, "topk") == 0 ?
				pbox_allreduce_topk(c, 9, buf, count, PBOX_F32, &t) :
				pbox_allreduce_host(c, 9, buf, count, PBOX_F32);
		}
		if (rc < 0)
			return fail(c, mode, rc);
		/* the expected result: hosts in order, each host's local ranks in order */
		memset(want, 0, count * 4);
		for (int h = 0; h < H; h++) {
			if (strcmp(mode, "hostsum") == 0 && h != me)
				continue;
			for (size_t i = 0; i < count; i++) {
				int any = 0;
				float s = 0;
				for (int l = 0; l < L; l++) {
					int r = h * L + l;
					if (sparse && !has(r, i, k))
						continue;
					s = any ? s + value(bf, r, i, k) : value(bf, r, i, k);
					any = 1;
				}
				hsum[i] = s;
				sel[i] = any ? (bf ? hl_from_bf16(hl_to_bf16(s)) : s) : 0;
			}
			if (strcmp(mode, "topk") == 0) {
				float *e = resid + (size_t)h * count;
				for (size_t lo = 0; lo < count; lo += per) {
					size_t n = lo + per < count ? per : count - lo, m;
					for (size_t i = lo; i < lo + n; i++) {
						e[i] += hsum[i];
						sel[i] = 0;
					}
					pbox_topk(e + lo, n, topk_k_of_density(DENSITY, n), idx, val, &m);
					for (size_t j = 0; j < m; j++) {
						sel[lo + idx[j]] = val[j];
						e[lo + idx[j]] = 0;
					}
				}
			}
			for (size_t i = 0; i < count; i++)
				want[i] = h ? want[i] + sel[i] : sel[i];
		}
		for (size_t i = 0; bf && i < count; i++)   /* the box rounds once */
			want[i] = hl_from_bf16(hl_to_bf16(want[i]));
		digest = 1469598103934665603ull;
		for (size_t i = 0; i < count; i++) {
			if (hl_u_of(buf[i]) != hl_u_of(want[i])) {
				fprintf(stderr, "%s call %d element %zu: got %a, want %a\n", mode, k, i,
					buf[i], want[i]);
				pbox_close(c);
				return 1;
			}
			digest = (digest ^ hl_u_of(buf[i])) * 1099511628211ull;
		}
	}
	pbox_stats st;
	pbox_get_stats(c, &st);
	printf("digest %016llx\nentries %llu\nok %d\n", (unsigned long long)digest,
	       (unsigned long long)st.sparse_entries, calls);
	pbox_close(c);
	free(buf);
	free(want);
	free(hsum);
	free(resid);
	free(sel);
	free(idx);
	free(val);
	free(val16);
	free(out16);
	return 0;
}
