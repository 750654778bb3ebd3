/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sparse.c - encode, check, add and scatter the records of sparse keys
 * (sparse.h, docs/protocol.md "Sparse keys"). Scalar and simple: at the
 * densities sparse keys are for, a record is a few hundred bytes and the
 * box's cost is the packet, not these loops.
 */
#include "common/sparse.h"

#include <string.h>

#include "common/drops.h"
#include "common/sum.h"
#include "common/sum_impl.h"
#include "common/wire.h"

#define PAD4(x) (((x) + 3) & ~(size_t)3)

static inline uint16_t ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline void st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void st32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline size_t bitmap_words(uint32_t len)
{
	return ((size_t)len + 31) / 32;
}

/* One element of esz (2 or 4) bytes: fixed-size copies the compiler
 * inlines (a memcpy of a run-time size is a libc call per entry). */
static inline void cp_elem(void *d, const void *s, size_t esz)
{
	if (esz == 4)
		memcpy(d, s, 4);
	else
		memcpy(d, s, 2);
}

size_t sparse_body_bytes(unsigned form, uint32_t n, uint32_t len, size_t esz)
{
	switch (form) {
	case SPARSE_IDX:
		return PAD4((size_t)n * 2) + PAD4((size_t)n * esz);
	case SPARSE_BITMAP:
		return bitmap_words(len) * 4 + PAD4((size_t)n * esz);
	default:
		return PAD4((size_t)len * esz);
	}
}

unsigned sparse_best_form(uint32_t n, uint32_t len, size_t esz)
{
	unsigned best = SPARSE_IDX;

	for (unsigned f = SPARSE_BITMAP; f < SPARSE_NFORMS; f++)
		if (sparse_body_bytes(f, n, len, esz) < sparse_body_bytes(best, n, len, esz))
			best = f;
	return best;
}

void sparse_rec_header(const uint8_t *p, uint32_t *seg, uint16_t *n, uint8_t *form)
{
	*seg = ld32(p);
	*n = ld16(p + 4);
	*form = p[6];
}

int sparse_rec_parse(const uint8_t *p, size_t avail, size_t esz,
		     uint32_t (*len_of)(const void *ctx, uint32_t seg), const void *ctx,
		     struct sparse_rec *r)
{
	if (avail < SPARSE_REC_HDR)
		return -DROP_BAD_SPARSE;
	sparse_rec_header(p, &r->seg, &r->n, &r->form);
	if (r->form >= SPARSE_NFORMS || p[7] != 0)
		return -DROP_BAD_SPARSE;
	uint32_t len = len_of(ctx, r->seg);
	if (len == 0 || r->n > len)
		return -DROP_BAD_SPARSE;
	size_t bytes = SPARSE_REC_HDR + sparse_body_bytes(r->form, r->n, len, esz);
	if (bytes > avail || bytes > sparse_rec_max(len, esz))
		return -DROP_BAD_SPARSE;
	r->body = p + SPARSE_REC_HDR;
	r->bytes = (uint32_t)bytes;
	return 0;
}

/* Bytes from..to of p are zero. */
static int zero_pad(const uint8_t *p, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (p[i])
			return 0;
	return 1;
}

int sparse_rec_check(const struct sparse_rec *r, uint32_t len, size_t esz)
{
	const uint8_t *b = r->body;
	size_t vals_at, nvals = r->n;

	switch (r->form) {
	case SPARSE_IDX: {
		for (uint32_t j = 0; j < r->n; j++) {
			uint16_t i = ld16(b + 2 * j);
			if (i >= len || (j && i <= ld16(b + 2 * (j - 1))))
				return -DROP_BAD_SPARSE;
		}
		vals_at = PAD4((size_t)r->n * 2);
		if (!zero_pad(b, (size_t)r->n * 2, vals_at))
			return -DROP_BAD_SPARSE;
		break;
	}
	case SPARSE_BITMAP: {
		size_t words = bitmap_words(len);
		uint32_t bits = 0;
		for (size_t w = 0; w < words; w++) {
			uint32_t v = ld32(b + 4 * w);
			if (w == words - 1 && len % 32 && (v >> (len % 32)))
				return -DROP_BAD_SPARSE;
			bits += (uint32_t)__builtin_popcount(v);
		}
		if (bits != r->n)
			return -DROP_BAD_SPARSE;
		vals_at = words * 4;
		break;
	}
	case SPARSE_DENSE:
		if (r->n != len)
			return -DROP_BAD_SPARSE;
		vals_at = 0;
		break;
	default:
		return -DROP_BAD_SPARSE;
	}
	size_t end = vals_at + nvals * esz;
	return zero_pad(b, end, r->bytes - SPARSE_REC_HDR) ? 0 : -DROP_BAD_SPARSE;
}

static inline float widen(const uint8_t *v, unsigned dtype)
{
	if (dtype == WIRE_F32)
		return elem_bits_f32(ld32(v));
	return dtype == WIRE_F16 ? elem_h2f(ld16(v)) : elem_b2f(ld16(v));
}

void sparse_rec_add(float *acc, const struct sparse_rec *r, unsigned dtype, uint32_t len)
{
	const uint8_t *b = r->body;
	size_t esz = wire_dtype_size(dtype);

	switch (r->form) {
	case SPARSE_IDX: {
		const uint8_t *v = b + PAD4((size_t)r->n * 2);
		for (uint32_t j = 0; j < r->n; j++)
			acc[ld16(b + 2 * j)] += widen(v + j * esz, dtype);
		break;
	}
	case SPARSE_BITMAP: {
		const uint8_t *v = b + bitmap_words(len) * 4;
		for (size_t w = 0; w < bitmap_words(len); w++)
			for (uint32_t m = ld32(b + 4 * w); m; m &= m - 1, v += esz)
				acc[w * 32 + (unsigned)__builtin_ctz(m)] += widen(v, dtype);
		break;
	}
	default:
		for (uint32_t i = 0; i < len; i++)
			acc[i] += widen(b + i * esz, dtype);
		break;
	}
}

void sparse_sum_round(void *dst, float *acc, uint32_t len, unsigned dtype)
{
	for (uint32_t i = 0; i < len; i++)
		acc[i] = sum_canon(acc[i]);
	sum_narrow(dst, acc, len, dtype);
}

/* The header of a record at out; returns the body. */
static uint8_t *put_header(uint8_t *out, uint32_t seg, uint32_t n, unsigned form)
{
	st32(out, seg);
	st16(out + 4, (uint16_t)n);
	out[6] = (uint8_t)form;
	out[7] = 0;
	return out + SPARSE_REC_HDR;
}

/* acc += the record's entries, marking them in touched. */
static void add_touch(float *acc, uint64_t *touched, const struct sparse_rec *r,
		      unsigned dtype, uint32_t len)
{
	const uint8_t *b = r->body;
	size_t esz = wire_dtype_size(dtype);

	if (r->form == SPARSE_IDX) {
		const uint8_t *v = b + PAD4((size_t)r->n * 2);
		for (uint32_t j = 0; j < r->n; j++) {
			uint16_t i = ld16(b + 2 * j);
			acc[i] += widen(v + j * esz, dtype);
			touched[i / 64] |= 1ull << (i % 64);
		}
		return;
	}
	sparse_rec_add(acc, r, dtype, len);
	if (r->form == SPARSE_DENSE) {
		memset(touched, 0xff, SPARSE_TOUCHED_WORDS(len) * 8);
		if (len % 64)
			touched[len / 64] = (1ull << (len % 64)) - 1;
		return;
	}
	for (size_t w = 0; w < bitmap_words(len); w++)
		touched[w / 2] |= (uint64_t)ld32(b + 4 * w) << (w % 2 * 32);
}

size_t sparse_sum(void *out, uint32_t seg, const uint8_t *const *recs, unsigned nrec,
		  unsigned dtype, uint32_t len, float *acc, uint64_t *touched)
{
	size_t esz = wire_dtype_size(dtype), words = SPARSE_TOUCHED_WORDS(len);
	uint8_t val[4];
	uint32_t n = 0;

	for (unsigned r = 0; r < nrec; r++) {
		struct sparse_rec rec;
		sparse_rec_header(recs[r], &rec.seg, &rec.n, &rec.form);
		rec.body = recs[r] + SPARSE_REC_HDR;
		add_touch(acc, touched, &rec, dtype, len);
	}
	/* round the touched entries in place (as bits in the float array), and
	 * drop from touched those that are zero bits now */
	for (size_t w = 0; w < words; w++)
		for (uint64_t m = touched[w]; m; m &= m - 1) {
			size_t i = w * 64 + (unsigned)__builtin_ctzll(m);
			sparse_sum_round(val, &acc[i], 1, dtype);
			uint32_t bits = esz == 4 ? ld32(val) : ld16(val);
			if (bits) {
				n++;
				cp_elem(&acc[i], val, esz); /* the rounded bits, for below */
			} else {
				touched[w] &= ~(1ull << (i % 64));
				acc[i] = 0;
			}
		}
	unsigned form = sparse_best_form(n, len, esz);
	size_t body = sparse_body_bytes(form, n, len, esz);
	uint8_t *b = put_header(out, seg, form == SPARSE_DENSE ? len : n, form);
	uint8_t *v = b + (form == SPARSE_IDX ? PAD4((size_t)n * 2)
			  : form == SPARSE_BITMAP ? bitmap_words(len) * 4 : 0);
	uint32_t j = 0;

	memset(b, 0, body);
	for (size_t w = 0; w < words; w++) {
		for (uint64_t m = touched[w]; m; m &= m - 1) {
			size_t i = w * 64 + (unsigned)__builtin_ctzll(m);
			if (form == SPARSE_IDX)
				st16(b + 2 * j, (uint16_t)i);
			else if (form == SPARSE_BITMAP)
				b[i / 8] |= (uint8_t)(1u << (i % 8));
			cp_elem(v + (form == SPARSE_DENSE ? i : j) * esz, &acc[i], esz);
			j++;
		}
		for (uint64_t m = touched[w]; m; m &= m - 1) /* leave acc zero */
			acc[w * 64 + (unsigned)__builtin_ctzll(m)] = 0;
		touched[w] = 0;
	}
	return SPARSE_REC_HDR + body;
}

void sparse_rec_scatter(void *dst, const struct sparse_rec *r, size_t esz, uint32_t len)
{
	if (r->form != SPARSE_DENSE)
		memset(dst, 0, (size_t)len * esz);
	sparse_rec_put(dst, r, esz, len);
}

void sparse_rec_put(void *dst, const struct sparse_rec *r, size_t esz, uint32_t len)
{
	uint8_t *d = dst;
	const uint8_t *b = r->body;

	if (r->form == SPARSE_DENSE) {
		memcpy(d, b, (size_t)len * esz);
		return;
	}
	if (r->form == SPARSE_IDX) {
		const uint8_t *v = b + PAD4((size_t)r->n * 2);
		for (uint32_t j = 0; j < r->n; j++)
			cp_elem(d + (size_t)ld16(b + 2 * j) * esz, v + j * esz, esz);
		return;
	}
	const uint8_t *v = b + bitmap_words(len) * 4;
	for (size_t w = 0; w < bitmap_words(len); w++)
		for (uint32_t m = ld32(b + 4 * w); m; m &= m - 1, v += esz)
			cp_elem(d + (w * 32 + (unsigned)__builtin_ctz(m)) * esz, v, esz);
}

static inline int nonzero(const uint8_t *v, size_t esz)
{
	return esz == 4 ? ld32(v) != 0 : ld16(v) != 0;
}

size_t sparse_encode_dense(void *out, uint32_t seg, const void *vals, uint32_t len,
			   size_t esz)
{
	const uint8_t *v = vals;
	uint32_t n = 0;

	for (uint32_t i = 0; i < len; i++)
		n += (uint32_t)nonzero(v + i * esz, esz);
	unsigned form = sparse_best_form(n, len, esz);
	size_t body = sparse_body_bytes(form, n, len, esz);
	uint8_t *b = put_header(out, seg, form == SPARSE_DENSE ? len : n, form);

	memset(b, 0, body);
	if (form == SPARSE_DENSE) {
		memcpy(b, v, (size_t)len * esz);
	} else if (form == SPARSE_IDX) {
		uint8_t *ov = b + PAD4((size_t)n * 2);
		uint32_t j = 0;
		for (uint32_t i = 0; i < len; i++)
			if (nonzero(v + i * esz, esz)) {
				st16(b + 2 * j, (uint16_t)i);
				cp_elem(ov + (size_t)j++ * esz, v + i * esz, esz);
			}
	} else {
		uint8_t *ov = b + bitmap_words(len) * 4;
		uint32_t j = 0;
		for (uint32_t i = 0; i < len; i++)
			if (nonzero(v + i * esz, esz)) {
				b[i / 8] |= (uint8_t)(1u << (i % 8));
				cp_elem(ov + (size_t)j++ * esz, v + i * esz, esz);
			}
	}
	return SPARSE_REC_HDR + body;
}

size_t sparse_encode_entries(void *out, uint32_t seg, const uint32_t *idx, uint32_t base,
			     const void *val, uint32_t n, uint32_t len, size_t esz)
{
	const uint8_t *v = val;
	unsigned form = sparse_best_form(n, len, esz);
	size_t body = sparse_body_bytes(form, n, len, esz);
	uint8_t *b = put_header(out, seg, form == SPARSE_DENSE ? len : n, form);

	memset(b, 0, body);
	if (form == SPARSE_IDX) {
		uint8_t *ov = b + PAD4((size_t)n * 2);
		for (uint32_t j = 0; j < n; j++)
			st16(b + 2 * j, (uint16_t)(idx[j] - base));
		if (n)   /* (an empty record may come with no arrays at all) */
			memcpy(ov, v, (size_t)n * esz);
	} else if (form == SPARSE_BITMAP) {
		for (uint32_t j = 0; j < n; j++) {
			uint32_t i = idx[j] - base;
			b[i / 8] |= (uint8_t)(1u << (i % 8));
		}
		memcpy(b + bitmap_words(len) * 4, v, (size_t)n * esz);
	} else {
		for (uint32_t j = 0; j < n; j++)
			cp_elem(b + (size_t)(idx[j] - base) * esz, v + (size_t)j * esz, esz);
	}
	return SPARSE_REC_HDR + body;
}
