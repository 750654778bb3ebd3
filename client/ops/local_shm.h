/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * local_shm.h - what the host groups in shared memory share (the
 * hierarchical top-k group, topk_local.c, and the host level, host_shm.c):
 * acquire loads of words other processes write, a futex "bell" every
 * arrival rings and waiters sleep on (never a busy loop), and the digest
 * of a job's token that their /dev/shm names carry (names are visible to
 * every user: the token itself must not be).
 */
#ifndef PBOX_CLIENT_OPS_LOCAL_SHM_H
#define PBOX_CLIENT_OPS_LOCAL_SHM_H

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

static inline uint32_t ld32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint64_t ld64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Bump the bell and wake every process sleeping on it. */
static inline void bell_ring(uint32_t *bell)
{
	__atomic_add_fetch(bell, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep until the bell moves from seen, or ms pass (at most 1 s). */
static inline void bell_wait(uint32_t *bell, uint32_t seen, uint64_t ms)
{
	struct timespec ts = { 0, (long)((ms < 1000 ? ms : 999) * 1000000u) };
	syscall(SYS_futex, bell, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static inline uint64_t shm_now_ms(void)
{
	return clock_ns() / 1000000u;
}

/* 32 bits of the job's token, mixed (splitmix64's finaliser). */
static inline uint32_t token_digest(uint64_t token)
{
	uint64_t x = token ^ 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (uint32_t)(x >> 32);
}

#endif
