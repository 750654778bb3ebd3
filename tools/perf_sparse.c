/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_sparse.c - pbox-perf's --sparse and --topk modes (perf_sparse.h).
 */
#include "tools/perf_sparse.h"

#include "common/topk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Whether rank r has entry i in iteration it: about density of them,
 * spread by a multiplicative hash. */
static int present(const struct perf_sparse *p, int r, size_t i, int it)
{
	uint32_t h = (uint32_t)((i * 2654435761u) ^ ((uint32_t)r * 0x9E3779B9u) ^
				((uint32_t)it * 0x85EBCA6Bu));
	h ^= h >> 15;
	h *= 0x2C1B3C6Du;
	h ^= h >> 12;
	return (double)h < p->density * 4294967296.0;
}

/* A small integer: every partial sum is exact in f32. */
static float sval(int r, size_t i, int it)
{
	return (float)((int)((i + (size_t)r * 3 + (size_t)it) % 9) - 4);
}

static int buffers(struct perf_sparse *p, size_t count)
{
	if (p->count == count)
		return 0;
	perf_sparse_free(p);
	size_t cap = PBOX_TOPK_MAX(count);
	p->idx = malloc(cap * sizeof(*p->idx));
	p->val = malloc(cap * sizeof(*p->val));
	p->expect = malloc(count * sizeof(float));
	if (p->mode == PERF_TOPK && p->check)
		p->resid = calloc((size_t)p->world * count, sizeof(float));
	if (!p->idx || !p->val || !p->expect || (p->mode == PERF_TOPK && p->check && !p->resid))
		return PBOX_ENOMEM;
	p->count = count;
	return 0;
}

/* --topk's gradient: the sum of four uniform hashes in [-1, 1) (near
 * normal), times 2^-20 of the time (a few large entries, as gradients
 * have). Distinct values, so the selection meets few ties. */
static float grad(int r, size_t i, int it)
{
	uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)r << 40 ^ (uint64_t)it << 52;
	float s = 0;
	for (int q = 0; q < 4; q++) {
		h ^= h >> 31;
		h *= 0xBF58476D1CE4E5B9ull;
		h ^= h >> 29;
		s += (float)(int32_t)(uint32_t)h * (1.0f / 2147483648.0f);
	}
	return (h >> 44) % 64 == 0 ? s * 8.0f : s;
}

void perf_sparse_fill(const struct perf_sparse *p, float *buf, size_t count, int it)
{
	for (size_t i = 0; i < count; i++)
		buf[i] = grad(p->rank, i, it);
}

/* --check through the host level (--local L, docs/protocol.md
 * "Host-local aggregation: the order"): each host's entries summed in
 * local rank order (sparse), or each host's sum cut in L parts on
 * 256-element bounds, each part selected with its own residual (top-k);
 * the hosts' summed in host order from +0. */
static int expect_host(struct perf_sparse *p, size_t count, int it)
{
	int L = p->host;
	size_t per = (count + (size_t)L - 1) / (size_t)L;

	per = (per + 255) / 256 * 256;
	memset(p->expect, 0, count * sizeof(float));
	for (int h = 0; h < p->world / L; h++) {
		int r0 = h * L;
		if (p->mode == PERF_SPARSE) {
			for (size_t i = 0; i < count; i++) {
				int any = 0;
				float s = 0;
				for (int r = r0; r < r0 + L; r++)
					if (present(p, r, i, it)) {
						s = any ? s + sval(r, i, it) : sval(r, i, it);
						any = 1;
					}
				if (any)
					p->expect[i] += s;
			}
			continue;
		}
		float *e = p->resid + (size_t)h * count;
		for (size_t i = 0; i < count; i++) {
			float s = grad(r0, i, it);
			for (int r = r0 + 1; r < r0 + L; r++)
				s += grad(r, i, it);
			e[i] += s;
		}
		for (size_t lo = 0; lo < count; lo += per) {
			size_t n = count - lo < per ? count - lo : per, m;
			int rc = pbox_topk(e + lo, n, topk_k_of_density(p->density, n), p->idx,
					   p->val, &m);
			if (rc < 0)
				return rc;
			for (size_t j = 0; j < m; j++) {
				p->expect[lo + p->idx[j]] += p->val[j];
				e[lo + p->idx[j]] = 0;
			}
		}
	}
	return 0;
}

/* The sum --check expects: every rank's entries (replayed) summed in rank
 * order from +0, as the box does (hierarchical: every host leader's). */
static int expect_sum(struct perf_sparse *p, size_t count, int it)
{
	if (p->host > 1)
		return expect_host(p, count, it);
	size_t k = topk_k_of_density(p->density, count);
	memset(p->expect, 0, count * sizeof(float));
	for (int r = 0; r < p->world; r++) {
		if (p->mode == PERF_SPARSE) {
			for (size_t i = 0; i < count; i++)
				if (present(p, r, i, it))
					p->expect[i] += sval(r, i, it);
			continue;
		}
		int per = p->local > 1 ? p->local : 1;
		if (r % per)
			continue;   /* hierarchical: the host's leader sends for it */
		float *e = p->resid + (size_t)r * count;
		size_t m;
		for (size_t i = 0; i < count; i++) {
			float s = grad(r, i, it);   /* the host's sum in rank order */
			for (int q = 1; q < per; q++)
				s += grad(r + q, i, it);
			e[i] += s;
		}
		int rc = pbox_topk(e, count, k > count ? count : k, p->idx, p->val, &m);
		if (rc < 0)
			return rc;
		for (size_t j = 0; j < m; j++) {
			p->expect[p->idx[j]] += p->val[j];
			e[p->idx[j]] = 0;
		}
	}
	return 0;
}

int perf_sparse_prepare(struct perf_sparse *p, uint32_t key, size_t count, int it)
{
	int rc = buffers(p, count);

	/* pbox_allreduce_topk keeps a residual per key, zero at its first
	 * call: two sizes of one count are two keys */
	if (rc == 0 && p->resid && (!p->keyed || p->key != key)) {
		memset(p->resid, 0, (size_t)p->world * count * sizeof(float));
		p->key = key;
		p->keyed = 1;
	}
	if (rc == 0 && p->check)
		rc = expect_sum(p, count, it);
	if (rc < 0 || p->mode != PERF_SPARSE)
		return rc;
	p->n = 0;
	for (size_t i = 0; i < count; i++)
		if (present(p, p->rank, i, it)) {
			p->idx[p->n] = (uint32_t)i;
			p->val[p->n++] = sval(p->rank, i, it);
		}
	return 0;
}

int perf_sparse_call(pbox_client *c, struct perf_sparse *p, uint32_t key, float *buf,
		     size_t count)
{
	if (p->mode == PERF_TOPK) {
		pbox_topk_opts o;
		pbox_req *r;
		pbox_topk_opts_init(&o);
		o.density = p->density;
		if (p->local > 1) {
			o.local_size = (uint32_t)p->local;
			o.local_rank = (uint32_t)(p->rank % p->local);
		}
		double t0 = mono_us();
		int rc = pbox_iallreduce_topk(c, key, buf, count, PBOX_F32, &o, &r);
		double t1 = mono_us();
		if (rc == 0)
			rc = pbox_wait(r);
		p->select_us += t1 - t0;
		p->call_us += mono_us() - t0;
		p->calls++;
		return rc;
	}
	return pbox_allreduce_sparse(c, key, count, PBOX_F32, p->idx, p->val, p->n, buf);
}

size_t perf_sparse_wrong(const struct perf_sparse *p, const float *buf, size_t count, int it)
{
	size_t wrong = 0;

	for (size_t i = 0; i < count; i++)
		if (memcmp(&buf[i], &p->expect[i], sizeof(float)) != 0 && wrong++ == 0)
			fprintf(stderr, "pbox-perf: rank %d %s iteration %d: element %zu expected "
				"%g got %g\n", p->rank, p->mode == PERF_TOPK ? "topk" : "sparse", it,
				i, (double)p->expect[i], (double)buf[i]);
	return wrong;
}

void perf_sparse_free(struct perf_sparse *p)
{
	free(p->idx);
	free(p->val);
	free(p->resid);
	free(p->expect);
	p->idx = NULL;
	p->val = NULL;
	p->resid = NULL;
	p->expect = NULL;
	p->count = 0;
	p->keyed = 0;
}
