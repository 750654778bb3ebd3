/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h - the pbox data-packet header, version 1 (docs/protocol.md).
 *
 * The one definition of the wire format, compiled into both the box and the
 * client. The packed struct mirrors the bytes on the wire (network order);
 * struct wire_msg is the decoded, host-order view the rest of the code uses.
 */
#ifndef PBOX_WIRE_H
#define PBOX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC    0x50424F58u /* "PBOX" */
#define WIRE_VERSION  1
#define WIRE_HDR_LEN  40
/* IPv4 (no options) + UDP + pbox header: what the MTU must also hold. */
#define WIRE_IP_UDP_LEN 28
#define WIRE_PAYLOAD_ALIGN 64
#define WIRE_MAX_PAYLOAD 8896 /* 9000-byte MTU */

enum wire_type {
	WIRE_PUSH   = 1, /* worker -> box: a contribution */
	WIRE_RESULT = 2, /* box -> worker: the summed segment */
	WIRE_ERROR  = 3, /* box -> worker: status says why, no payload */
	WIRE_PROBE  = 4, /* worker -> box: path MTU probe, count 0, any padding */
	WIRE_PROBE_ACK = 5, /* box -> worker: the probe sent back, same size */
	WIRE_WAIT   = 6, /* box -> worker: your contribution is in, the round
			    waits for the ranks named (struct wire_notice) */
	WIRE_NACK   = 7, /* box -> worker: your contribution to this open
			    round is missing: send it again (struct wire_notice) */
};

enum wire_dtype { /* values equal pbox_dtype in include/pbox.h */
	WIRE_F32  = 0,
	WIRE_F16  = 1,
	WIRE_BF16 = 2,
	WIRE_NDTYPES
};

#define WIRE_FLAG_RETX   0x01u /* PUSH: the sender retransmits this segment */
#define WIRE_FLAG_NOTICE 0x02u /* PUSH: the sender understands WAIT, NACK and CE */
#define WIRE_FLAG_CE     0x04u /* RESULT: the box is congested, slow down */
#define WIRE_FLAG_INIT   0x08u /* PUSH: round 1 of a PS key, the initial weights
				  (docs/protocol.md "PS keys") */
#define WIRE_FLAG_SPARSE 0x10u /* PUSH, RESULT: the payload is records of a
				  sparse key, count = how many (common/sparse.h,
				  docs/protocol.md "Sparse keys") */
#define WIRE_FLAG_FINAL  0x20u /* PUSH: the payload is the round's result,
				  known to the sender from a box that restarted
				  since (docs/protocol.md "Resuming after a box
				  restart") */
#define WIRE_FLAGS_KNOWN (WIRE_FLAG_RETX | WIRE_FLAG_NOTICE | WIRE_FLAG_CE | \
			  WIRE_FLAG_INIT | WIRE_FLAG_SPARSE | WIRE_FLAG_FINAL)
/* A sparse key's segments are this much shorter than seg_bytes, so a
 * record header and a dense body always fit one packet. */
#define WIRE_SPARSE_SLACK 64

enum wire_status {
	WIRE_ST_OK = 0,
	WIRE_ST_NO_JOB = 1, /* job unknown or aborted */
	WIRE_ST_NO_WEIGHTS = 2, /* a gradient for a PS key whose initial weights
				   are not uploaded yet: nothing applied */
	WIRE_ST_SKIPPED = 3, /* RESULT of a PS key: the round's gradient sum was
				not finite and the job's policy is skip: the
				weights are the round's start, not stepped
				(docs/protocol.md "Non-finite gradients") */
	WIRE_ST_NONFINITE = 4, /* ERROR: the round's gradient sum was not finite
				  and the job's policy is abort: the job is
				  stopped (its reason follows on the control
				  connection) */
	WIRE_ST_STALE = 5, /* ERROR answering a FINAL push: the segment is
			      past that round (or the key starts after it):
			      nobody needs it, stop sending it */
};

/* Bytes on the wire; multi-byte fields big-endian. */
struct wire_hdr {
	uint32_t magic;
	uint8_t  version;
	uint8_t  type;
	uint8_t  dtype;
	uint8_t  flags;
	uint32_t job;
	uint16_t rank;
	uint16_t count;
	uint64_t token;
	uint32_t key;
	uint32_t seg;
	uint32_t round;
	uint16_t status;   /* PUSH: with reserved, the 32-bit argument */
	uint16_t reserved;
} __attribute__((packed));

_Static_assert(sizeof(struct wire_hdr) == WIRE_HDR_LEN, "wire header size");
_Static_assert(offsetof(struct wire_hdr, version) == 4, "version offset");
_Static_assert(offsetof(struct wire_hdr, type) == 5, "type offset");
_Static_assert(offsetof(struct wire_hdr, dtype) == 6, "dtype offset");
_Static_assert(offsetof(struct wire_hdr, flags) == 7, "flags offset");
_Static_assert(offsetof(struct wire_hdr, job) == 8, "job offset");
_Static_assert(offsetof(struct wire_hdr, rank) == 12, "rank offset");
_Static_assert(offsetof(struct wire_hdr, count) == 14, "count offset");
_Static_assert(offsetof(struct wire_hdr, token) == 16, "token offset");
_Static_assert(offsetof(struct wire_hdr, key) == 24, "key offset");
_Static_assert(offsetof(struct wire_hdr, seg) == 28, "segment offset");
_Static_assert(offsetof(struct wire_hdr, round) == 32, "round offset");
_Static_assert(offsetof(struct wire_hdr, status) == 36, "status offset");
_Static_assert(offsetof(struct wire_hdr, reserved) == 38, "reserved offset");

/* The body of WAIT and NACK (count 0, these 16 bytes after the header),
 * big-endian on the wire. */
#define WIRE_NOTICE_LEN 16
struct wire_notice {
	uint64_t missing;   /* bit r: rank base + r's contribution is not in yet */
	uint32_t open_us;   /* how long the round has been open at the box */
	uint32_t base;      /* a multiple of 64: the first rank missing names
			       (0 in worlds of up to 64 ranks; boxes before
			       0.13 sent 0 here as reserved) */
};

/* Encode n into the 16 bytes at buf; decode them (0, or -DROP_BAD_FLAGS
 * if reserved is not 0). */
void wire_notice_encode(void *buf, const struct wire_notice *n);
int wire_notice_decode(const void *buf, struct wire_notice *n);

/* Decoded header, host byte order. */
struct wire_msg {
	uint8_t  type;
	uint8_t  dtype;
	uint8_t  flags;
	uint16_t rank;
	uint16_t count;
	uint16_t status;
	uint32_t job;
	uint64_t token;
	uint32_t key;
	uint32_t seg;
	uint32_t round;
	uint32_t plen;      /* payload bytes after the header (decoded only;
			       wire_encode ignores it) */
	uint32_t arg;       /* PUSH only: bytes 36..39 (status and reserved on
			       other types), big-endian; a PUSH to a PS key
			       carries its learning rate there as binary32
			       bits, to a plain key 0 */
};

/* Size in bytes of one element of a wire dtype, 0 if out of range. */
static inline size_t wire_dtype_size(unsigned dtype)
{
	return dtype == WIRE_F32 ? 4 : (dtype == WIRE_F16 || dtype == WIRE_BF16) ? 2 : 0;
}

/* "f32", "f16", "bf16", or NULL. */
const char *wire_dtype_name(unsigned dtype);
/* Inverse of wire_dtype_name; -EINVAL if unknown (or NULL). */
int wire_dtype_parse(const char *name);

/* Segment payload bytes for a path MTU: a multiple of 64, capped at
 * WIRE_MAX_PAYLOAD; 0 if the MTU is too small to carry 64 bytes. */
uint32_t wire_seg_bytes(uint32_t mtu);

/*
 * Decode and check a pbox header + payload of len bytes (the UDP payload).
 * Checks length, magic, version, type, dtype, flags, reserved and that
 * len == header + count * dtype size (SPARSE PUSH and RESULT: count >= 1
 * records, at least 8 bytes each, a multiple of 4 bytes in all: the
 * records themselves are checked by common/sparse.h; PROBE and PROBE_ACK: count == 0 and
 * any padding after the header; WAIT and NACK: count == 0 and exactly
 * WIRE_NOTICE_LEN bytes after it).
 * Returns 0, or a negative drop reason -DROP_* (common/drops.h).
 */
int wire_decode(const void *buf, size_t len, struct wire_msg *out);

/* Encode m into the 40 header bytes at buf (magic and version filled in). */
void wire_encode(void *buf, const struct wire_msg *m);

#endif
