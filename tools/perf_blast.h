/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_blast.h - pbox-perf --blast: the wire limit for one client. Sends
 * UDP datagrams of the size pbox uses (header + one segment) as fast as
 * the kernel takes them, with the same sendmmsg batching as libpbox, to
 * ADDR:PORT for a fixed time. Against a box data port (pboxd counts them
 * as drops: bad magic) it tells what one sender can put on the wire over
 * this path, beside what pbox-perf achieves with real allreduces.
 */
#ifndef PBOX_PERF_BLAST_H
#define PBOX_PERF_BLAST_H

#include <stddef.h>
#include <stdint.h>

struct blast_result {
	uint64_t datagrams;    /* accepted by the kernel */
	uint64_t bytes;        /* UDP payload bytes of those */
	uint64_t dropped;      /* refused with ENOBUFS/EAGAIN after a wait */
	double seconds;
	int gso;               /* 1 if UDP_SEGMENT was used */
};

/* Blast to target "ADDR:PORT" for seconds; dgram_bytes of UDP payload
 * each; gso: group up to 32 datagrams per send with UDP_SEGMENT (falls
 * back to plain sends if the kernel refuses). 0, or -1 with err. */
int perf_blast(const char *target, double seconds, size_t dgram_bytes, int gso,
	       struct blast_result *r, char *err, size_t errlen);

#endif
