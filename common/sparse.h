/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sparse.h - the records of a sparse key's packets (docs/protocol.md
 * "Sparse keys"): one definition of the format, compiled into the box and
 * the client. Encoding picks the smallest of three forms per segment;
 * checking is complete (a record that passes sparse_rec_check is safe to
 * add or scatter); adding and scattering are the box's rank-ordered sum
 * and the client's dense result. No allocation, no state.
 *
 *   record = u32 seg | u16 n | u8 form | u8 0 | body (4-byte padded)
 *   IDX:    n u16 indices (strictly increasing, < len), pad, n values
 *   BITMAP: ceil(len/32) u32 words (n bits set, none >= len), n values
 *   DENSE:  len values (n == len)
 * All little-endian; values are elements of the key's dtype.
 */
#ifndef PBOX_SPARSE_H
#define PBOX_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#define SPARSE_REC_HDR 8

enum sparse_form {
	SPARSE_IDX = 0,
	SPARSE_BITMAP = 1,
	SPARSE_DENSE = 2,
	SPARSE_NFORMS
};

/* A parsed record; body points into the packet (or a copy of it). */
struct sparse_rec {
	uint32_t seg;
	uint16_t n;
	uint8_t form;
	const uint8_t *body;
	uint32_t bytes;          /* the whole record, header included */
};

/* Elements per segment of a sparse key for the job's seg_bytes and an
 * element size; 0 if seg_bytes leaves no room. */
static inline uint32_t sparse_seg_elems(uint32_t seg_bytes, size_t esz)
{
	return seg_bytes > 64 && esz ? (uint32_t)((seg_bytes - 64) / esz) : 0;
}

/* Body bytes of a record of form with n entries in a segment of len
 * elements of esz bytes (padding included). */
size_t sparse_body_bytes(unsigned form, uint32_t n, uint32_t len, size_t esz);

/* The smallest form for n entries (IDX on a tie, then BITMAP). */
unsigned sparse_best_form(uint32_t n, uint32_t len, size_t esz);

/* Largest record for a segment of len elements: what a buffer needs. */
static inline size_t sparse_rec_max(uint32_t len, size_t esz)
{
	return SPARSE_REC_HDR + sparse_body_bytes(SPARSE_DENSE, len, len, esz);
}

/*
 * Read the record header at p (avail bytes left in the payload) and its
 * size; the body is not looked at. 0, or -DROP_BAD_SPARSE (short, unknown
 * form, nonzero pad byte, body overruns avail, or the record is larger
 * than sparse_rec_max: an IDX or BITMAP record with nearly every entry
 * present, which a sender never picks over DENSE and which would overrun
 * a receiver's record buffer). len_of(ctx, seg) gives the segment's
 * length, 0 if seg is outside the key.
 */
int sparse_rec_parse(const uint8_t *p, size_t avail, size_t esz,
		     uint32_t (*len_of)(const void *ctx, uint32_t seg), const void *ctx,
		     struct sparse_rec *r);

/* Check a parsed record's body against its segment's length: the rules
 * of the header comment, padding zero. 0 or -DROP_BAD_SPARSE. */
int sparse_rec_check(const struct sparse_rec *r, uint32_t len, size_t esz);

/* acc[i] += value of entry i (widened to binary32), for every entry of a
 * checked record, in index order. */
void sparse_rec_add(float *acc, const struct sparse_rec *r, unsigned dtype, uint32_t len);

/* The end of a sum of records (sparse_rec_add into an acc that started
 * at +0): a NaN becomes the canonical quiet NaN (the rule of common/sum.h
 * for sums), then the len values are rounded once to dtype at dst. */
void sparse_sum_round(void *dst, float *acc, uint32_t len, unsigned dtype);

/* Words of the `touched` bitmap sparse_sum needs for segments of len. */
#define SPARSE_TOUCHED_WORDS(len) (((len) + 63) / 64)

/*
 * The sum of a segment: the nrec checked records recs[] (the ranks' in
 * rank order) added from +0 in binary32 (sparse_rec_add), rounded once
 * (sparse_sum_round), encoded as one record for seg at out
 * (sparse_rec_max(len, esz) bytes) holding the entries whose bits are not
 * zero, in the smallest form; returns its bytes. acc (len floats) and
 * touched (SPARSE_TOUCHED_WORDS(len)) must be all zero, and are left so:
 * the work is in the entries present, not the segment's length (but for
 * DENSE records and results).
 */
size_t sparse_sum(void *out, uint32_t seg, const uint8_t *const *recs, unsigned nrec,
		  unsigned dtype, uint32_t len, float *acc, uint64_t *touched);

/* Write the segment's len elements at dst: the record's values where
 * present, zero bits elsewhere. */
void sparse_rec_scatter(void *dst, const struct sparse_rec *r, size_t esz, uint32_t len);

/* Write only the record's present values into the segment at dst (the
 * rest of dst is left as it is: zeroed beforehand by the caller). */
void sparse_rec_put(void *dst, const struct sparse_rec *r, size_t esz, uint32_t len);

/*
 * Encode a segment given densely (len values of esz bytes at vals): the
 * entries whose bits are not all zero, in the smallest form, as a record
 * for seg at out (sparse_rec_max(len, esz) bytes). Returns its bytes.
 */
size_t sparse_encode_dense(void *out, uint32_t seg, const void *vals, uint32_t len,
			   size_t esz);

/*
 * Encode n entries given by segment-relative indices idx[j] - base
 * (strictly increasing, below len: the caller checked) and values val
 * (n elements of esz) as a record for seg at out (sparse_rec_max(len,
 * esz) bytes). Returns its bytes.
 */
size_t sparse_encode_entries(void *out, uint32_t seg, const uint32_t *idx, uint32_t base,
			     const void *val, uint32_t n, uint32_t len, size_t esz);

/* The record header at p: its fields, unchecked (p holds >= 8 bytes). */
void sparse_rec_header(const uint8_t *p, uint32_t *seg, uint16_t *n, uint8_t *form);

#endif
