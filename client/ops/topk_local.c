/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_local.c - the host group of a hierarchical top-k key
 * (docs/architecture.md "Hierarchical top-k"): the local_size ranks of a
 * job on one host share, per key, one POSIX shared memory object
 *
 *   header (pages) | slot 0 | slot 1 | ... | slot L-1 | sum
 *
 * of count floats per slot and for the sum. A call puts the rank's
 * gradient into its slot, waits until every member has (barrier 1), sums
 * its slice of the elements over the slots in local rank order into the
 * sum (common/sum.h: the same bits on every CPU) and says so; the leader
 * (local rank 0) waits for every slice (barrier 2) and selects from the
 * sum. A member's next call on the key cannot start before the box
 * answered this one, and the box answers only after the leader sent,
 * which it does after barrier 2: so no slot or slice is written while
 * another member still reads it, with no third barrier.
 *
 * The barriers are per-member call counters on their own cache lines and
 * one futex word bumped by every arrival (waiters sleep on it, bounded by
 * the client's timeout_ms). A member that gives up marks the group broken
 * and wakes the others, who fail at once: a group never waits twice for a
 * member that is gone.
 *
 * The object's name carries the job id, a 32-bit digest of the job's
 * token (not the token: names in /dev/shm are visible to every user), the
 * leader's rank and the key. The leader creates it (mode 0600) and
 * removes the name once every member has mapped it; the memory goes with
 * the last mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client/ops/ops.h"
#include "client/ops/local_shm.h"
#include "common/sum.h"

#define LOCAL_MAGIC   0x50424c47u   /* "PBLG" once the leader has set it up */
#define LOCAL_VERSION 1u
#define LOCAL_PAGE    4096u
#define LOCAL_HDR_BYTES ((sizeof(struct local_hdr) + LOCAL_PAGE - 1) / LOCAL_PAGE * LOCAL_PAGE)
#define LOCAL_ALIGN   16u           /* a slice starts on a cache line */

struct local_member {
	uint64_t arrived;   /* calls whose gradient is in the slot (barrier 1) */
	uint64_t summed;    /* calls whose slice is in the sum (barrier 2) */
	uint8_t pad[48];
};

struct local_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t local_size;
	uint32_t key;
	uint64_t count;
	uint32_t attached;   /* members that mapped the object */
	uint32_t broken;     /* a member gave up: every wait fails */
	uint32_t bell;       /* futex word: bumped by every arrival */
	uint8_t pad[28];
	struct local_member m[PBOX_TOPK_LOCAL_MAX];
};

_Static_assert(sizeof(struct local_member) == 64, "one cache line per member");

struct topk_local {
	struct local_hdr *h;
	size_t map_bytes;
	size_t stride;        /* bytes per slot, page aligned */
	uint32_t local_rank, local_size;
	uint64_t calls;       /* calls of this member on the key so far */
	bool unlinked;        /* (leader) the name is gone */
	char name[96];
};

static void ring(struct local_hdr *h)
{
	bell_ring(&h->bell);
}

static uint64_t now_ms(void)
{
	return shm_now_ms();
}

static size_t slot_stride(size_t count)
{
	size_t b = count * sizeof(float);
	return (b + LOCAL_PAGE - 1) / LOCAL_PAGE * LOCAL_PAGE;
}

static float *slot_of(const struct topk_local *l, uint32_t i)
{
	return (float *)((uint8_t *)l->h + LOCAL_HDR_BYTES + (size_t)i * l->stride);
}

float *topk_local_slot(struct topk_local *l)
{
	return slot_of(l, l->local_rank);
}

void topk_local_free(struct topk_local *l)
{
	if (!l)
		return;
	if (l->local_rank == 0 && !l->unlinked)
		shm_unlink(l->name);
	munmap(l->h, l->map_bytes);
	free(l);
}

int topk_local_check(pbox_client *c, uint32_t key, uint32_t local_rank, uint32_t local_size)
{
	if (local_size <= 1)
		return 0;
	if (local_size > PBOX_TOPK_LOCAL_MAX || local_rank >= local_size)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: hierarchical "
				    "top-k: local_rank %u, local_size %u (local_rank < local_size "
				    "<= %d)", c->job, c->rank, key, local_rank, local_size,
				    PBOX_TOPK_LOCAL_MAX);
	if ((uint32_t)c->rank < local_rank ||
	    (uint64_t)c->rank - local_rank + local_size > (uint64_t)c->world)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: hierarchical "
				    "top-k: local_rank %u of %u puts the host's ranks at %d..%d, "
				    "outside the world of %d (a host's ranks are consecutive, "
				    "local rank 0 first)", c->job, c->rank, key, local_rank,
				    local_size, c->rank - (int)local_rank,
				    c->rank - (int)local_rank + (int)local_size - 1, c->world);
	return 0;
}

/* The leader: a new object, its header set up last (magic). */
static int create_group(pbox_client *c, struct topk_local *l, uint32_t key, size_t count)
{
	shm_unlink(l->name);   /* a leftover of a crashed leader of this job */
	int fd = shm_open(l->name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0)
		return client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: hierarchical top-k: "
				    "shm_open %s: %s", c->job, c->rank, key, l->name,
				    strerror(errno));
	int err = posix_fallocate(fd, 0, (off_t)l->map_bytes);
	if (err) {
		close(fd);
		shm_unlink(l->name);
		return client_error(c, err == ENOSPC ? PBOX_ENOMEM : PBOX_ESYS,
				    "job '%s' rank %d key %u: hierarchical top-k: %zu MiB of "
				    "shared memory for %u ranks x %zu elements: %s (is /dev/shm "
				    "large enough? containers: --shm-size)", c->job, c->rank, key,
				    l->map_bytes >> 20, l->local_size, count, strerror(err));
	}
	l->h = mmap(NULL, l->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (l->h == MAP_FAILED) {
		l->h = NULL;
		shm_unlink(l->name);
		return client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: hierarchical top-k: "
				    "mmap of %zu bytes: %s", c->job, c->rank, key, l->map_bytes,
				    strerror(errno));
	}
	l->h->version = LOCAL_VERSION;
	l->h->local_size = l->local_size;
	l->h->key = key;
	l->h->count = count;
	l->h->attached = 1;
	__atomic_store_n(&l->h->magic, LOCAL_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* A member: wait for the leader's object (its header set up), check
 * that it is this group's and key's, map all of it. */
static int join_group(pbox_client *c, struct topk_local *l, uint32_t key, size_t count)
{
	uint64_t give_up = now_ms() + c->opts.timeout_ms;
	struct local_hdr *h = NULL;
	struct stat st;
	int fd = -1;

	for (;;) {
		fd = shm_open(l->name, O_RDWR, 0);
		if (fd < 0 && errno != ENOENT)
			return client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: hierarchical "
					    "top-k: shm_open %s: %s", c->job, c->rank, key, l->name,
					    strerror(errno));
		if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size >= LOCAL_HDR_BYTES) {
			h = mmap(NULL, LOCAL_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (h == MAP_FAILED) {
				close(fd);
				return client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: "
						    "hierarchical top-k: mmap of %s: %s", c->job,
						    c->rank, key, l->name, strerror(errno));
			}
			if (ld32(&h->magic) == LOCAL_MAGIC)
				break;
			munmap(h, LOCAL_HDR_BYTES);
		}
		if (fd >= 0)
			close(fd);   /* not set up yet */
		if (now_ms() >= give_up)
			return client_error(c, PBOX_ETIMEDOUT, "job '%s' rank %d key %u: "
					    "hierarchical top-k: the host group's leader (rank %d) "
					    "set up no shared memory for the key within %u ms (does "
					    "it call on this key with local_size %u?)", c->job,
					    c->rank, key, c->rank - (int)l->local_rank,
					    c->opts.timeout_ms, l->local_size);
		usleep(1000);
	}
	bool same = h->version == LOCAL_VERSION && h->local_size == l->local_size &&
		    h->key == key && h->count == count && (size_t)st.st_size >= l->map_bytes;
	int rc = 0;
	if (!same)
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: hierarchical top-k: "
				  "the leader (rank %d) set the group up for %u ranks x %llu "
				  "elements, this rank calls with %u x %zu", c->job, c->rank, key,
				  c->rank - (int)l->local_rank, h->local_size,
				  (unsigned long long)h->count, l->local_size, count);
	munmap(h, LOCAL_HDR_BYTES);
	if (rc == 0) {
		l->h = mmap(NULL, l->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (l->h == MAP_FAILED) {
			l->h = NULL;
			rc = client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: hierarchical "
					  "top-k: mmap of %zu bytes: %s", c->job, c->rank, key,
					  l->map_bytes, strerror(errno));
		}
	}
	close(fd);
	if (rc < 0)
		return rc;
	__atomic_add_fetch(&l->h->attached, 1, __ATOMIC_ACQ_REL);
	ring(l->h);
	return 0;
}

int topk_local_open(pbox_client *c, uint32_t key, size_t count, uint32_t local_rank,
		    uint32_t local_size, struct topk_local **out)
{
	struct topk_local *l = calloc(1, sizeof(*l));

	if (!l)
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory",
				    c->job, c->rank, key);
	l->local_rank = local_rank;
	l->local_size = local_size;
	l->stride = slot_stride(count);
	l->map_bytes = LOCAL_HDR_BYTES + (size_t)(local_size + 1) * l->stride;
	snprintf(l->name, sizeof(l->name), "/pbox-j%u-%08x-r%d-k%u", c->job_id,
		 token_digest(c->token), c->rank - (int)local_rank, key);
	int rc = local_rank == 0 ? create_group(c, l, key, count) : join_group(c, l, key, count);
	if (rc < 0) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* The members (local and job ranks, as "1 (rank 5), 3 (rank 7)") whose counter at field
 * offset is below n. */
static void missing_members(const struct topk_local *l, int base, size_t off, uint64_t n,
			    char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (uint32_t i = 0; i < l->local_size && at + 32 < len; i++) {
		const uint64_t *p = (const uint64_t *)((const uint8_t *)&l->h->m[i] + off);
		if (ld64(p) < n)
			at += (size_t)snprintf(buf + at, len - at, "%s%u (rank %d)", at ? ", " : "",
					       i, base + (int)i);
	}
}

/* Wait until every member's counter at off has reached n (all members,
 * or only the leader's view of them: the same). 0, or the group broke
 * (PBOX_EABORTED) or the wait ran out (PBOX_ETIMEDOUT, the group broken). */
static int wait_all(pbox_client *c, struct topk_local *l, size_t off, uint64_t n,
		    const char *what)
{
	uint64_t give_up = now_ms() + c->opts.timeout_ms;
	struct local_hdr *h = l->h;

	for (;;) {
		uint32_t bell = ld32(&h->bell);
		if (ld32(&h->broken))
			return client_error(c, PBOX_EABORTED, "job '%s' rank %d key %u: "
					    "hierarchical top-k: the host group (ranks %d..%d) broke: "
					    "a member gave up or failed (its own error names why)",
					    c->job, c->rank, h->key, c->rank - (int)l->local_rank,
					    c->rank - (int)l->local_rank + (int)l->local_size - 1);
		uint32_t i = 0;
		while (i < l->local_size &&
		       ld64((const uint64_t *)((const uint8_t *)&h->m[i] + off)) >= n)
			i++;
		if (i == l->local_size)
			return 0;
		uint64_t t = now_ms();
		if (t >= give_up) {
			char who[256];
			missing_members(l, c->rank - (int)l->local_rank, off, n, who, sizeof(who));
			__atomic_store_n(&h->broken, 1, __ATOMIC_RELEASE);
			ring(h);
			return client_error(c, PBOX_ETIMEDOUT, "job '%s' rank %d key %u: "
					    "hierarchical top-k call %llu: local ranks %s of the "
					    "host group (ranks %d..%d) %s within %u ms; the group is "
					    "broken now", c->job, c->rank, h->key,
					    (unsigned long long)n, who, c->rank - (int)l->local_rank,
					    c->rank - (int)l->local_rank + (int)l->local_size - 1,
					    what, c->opts.timeout_ms);
		}
		bell_wait(&h->bell, bell, give_up - t < 100 ? give_up - t : 100);
	}
}

void topk_local_break(struct topk_local *l)
{
	__atomic_store_n(&l->h->broken, 1, __ATOMIC_RELEASE);
	ring(l->h);
}

int topk_local_reduce(pbox_client *c, struct topk_local *l, const float **sum)
{
	struct local_hdr *h = l->h;
	uint64_t n = ++l->calls;
	size_t count = (size_t)h->count;
	uint32_t me = l->local_rank, ls = l->local_size;

	*sum = NULL;
	__atomic_store_n(&h->m[me].arrived, n, __ATOMIC_RELEASE);
	ring(h);
	int rc = wait_all(c, l, offsetof(struct local_member, arrived), n,
			  "put no gradient into the shared memory");
	if (rc < 0)
		return rc;
	if (me == 0 && !l->unlinked && ld32(&h->attached) == ls) {
		shm_unlink(l->name);   /* all mapped: nothing to leave behind */
		l->unlinked = true;
	}
	/* this member's slice, on cache-line bounds */
	size_t per = (count + ls - 1) / ls;
	per = (per + LOCAL_ALIGN - 1) / LOCAL_ALIGN * LOCAL_ALIGN;
	size_t lo = (size_t)me * per < count ? (size_t)me * per : count;
	size_t hi = lo + per < count ? lo + per : count;
	if (hi > lo) {
		const void *src[PBOX_TOPK_LOCAL_MAX];
		for (uint32_t i = 0; i < ls; i++)
			src[i] = slot_of(l, i) + lo;
		sum_chosen()->fn[WIRE_F32](slot_of(l, ls) + lo, src, ls, hi - lo);
	}
	__atomic_store_n(&h->m[me].summed, n, __ATOMIC_RELEASE);
	ring(h);
	if (me != 0)
		return 0;
	rc = wait_all(c, l, offsetof(struct local_member, summed), n,
		      "summed no slice of the gradients");
	if (rc == 0)
		*sum = slot_of(l, ls);
	return rc;
}
