/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * drops.h - every reason the box can drop a packet, listed once.
 *
 * One X-macro table expands into the enum and the names, so no counter can
 * lack a name (VPP's error-counter idiom). Names are what `pboxctl stats`
 * prints and what box_stats returns; the third column says what each
 * reason means, for the reader (no code prints it).
 */
#ifndef PBOX_DROPS_H
#define PBOX_DROPS_H

#define DROP_REASONS(X)                                                        \
	X(SHORT,        "short",        "frame shorter than its headers")      \
	X(NOT_IP,       "not_ip",       "ethertype neither IPv4 nor ARP")      \
	X(BAD_IP,       "bad_ip",       "bad IPv4 header or options")          \
	X(FRAGMENT,     "fragment",     "IPv4 fragment or reassembled datagram") \
	X(NOT_MINE,     "not_mine",     "IPv4 destination is not this port")   \
	X(NOT_UDP,      "not_udp",      "IPv4 protocol neither UDP nor ICMP")  \
	X(BAD_PORT,     "bad_port",     "UDP port owned by no lcore")          \
	X(BAD_CSUM,     "bad_csum",     "IPv4, UDP or ICMP checksum wrong")    \
	X(BAD_LEN,      "bad_len",      "lengths do not match the header")     \
	X(BAD_MAGIC,    "bad_magic",    "not a pbox packet")                   \
	X(BAD_VERSION,  "bad_version",  "unsupported protocol version")        \
	X(BAD_TYPE,     "bad_type",     "type is not PUSH")                    \
	X(BAD_DTYPE,    "bad_dtype",    "dtype unknown or not the key's")      \
	X(BAD_FLAGS,    "bad_flags",    "reserved flag or field set")          \
	X(NO_JOB,       "no_job",       "job unknown or being removed")        \
	X(BAD_TOKEN,    "bad_token",    "job token does not match")            \
	X(BAD_RANK,     "bad_rank",     "rank outside the job's world")        \
	X(BAD_SOURCE,   "bad_source",   "source is not the rank's address")    \
	X(NO_KEY,       "no_key",       "key not declared in this job")        \
	X(BAD_SEGMENT,  "bad_segment",  "segment outside the key")             \
	X(WRONG_LCORE,  "wrong_lcore",  "segment owned by another lcore")      \
	X(BAD_COUNT,    "bad_count",    "count differs from the segment's")    \
	X(STALE_ROUND,  "stale_round",  "round older than the last completed") \
	X(FUTURE_ROUND, "future_round", "round more than one ahead")           \
	X(NO_SLOT,      "no_slot",      "no free contribution slot")           \
	X(RING_FULL,    "ring_full",    "hand-off ring to the owner full")     \
	X(TX_FULL,      "tx_full",      "transmit queue full")                 \
	X(NO_MBUF,      "no_mbuf",      "mbuf pool empty")                     \
	X(BAD_ARG,      "bad_arg",      "PS push: learning rate not finite or < 0, or INIT misused") \
	X(BAD_SPARSE,   "bad_sparse",   "sparse records malformed (indices, bitmap, sizes, order)") \
	X(SPARSE_MISMATCH, "sparse_mismatch", "sparse push to a dense key or dense push to a sparse key")

enum drop_reason {
	DROP_NONE = 0,
#define X(e, name, text) DROP_##e,
	DROP_REASONS(X)
#undef X
	DROP_COUNT
};

/* Short name of a reason ("bad_token"), "none" for 0, "?" if out of range. */
const char *drop_name(int reason);

#endif
