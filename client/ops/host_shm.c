/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_shm.c - the host group of the host level in shared memory (host.h,
 * docs/architecture.md "The host level").
 *
 * Per job and host one POSIX shared memory object (mode 0600),
 *
 *   /pbox-h<job id>-<token digest>-n<host>
 *   page 0   owners: magic, the host's L (set by the first member), the
 *            pid of each local rank
 *   page 1.. header: the broken flag and the first failure's text, the
 *            futex bell, and per member (a cache line each) its two
 *            barrier counters and the key, count and tag (kind, dtype) of its call
 *
 * and per key `...-k<key>-c<count>-t<dtype>`: an owners page (the pids
 * that mapped it, for the stale sweep), L slots and two result areas.
 * Every member creates or opens the objects (O_CREAT, the same size), so
 * no member waits for another to make them; a name is removed as soon as
 * every member has it mapped (the group: at the rendezvous; a key: at its
 * first call's first barrier). A name of a job killed before that is
 * removed by the next pbox_connect on the host (hgroup_sweep_stale): no
 * pid in it is alive (or none was written and it is older than 60 s).
 *
 * Waits sleep on the bell at most 100 ms at a time; at every wake-up a
 * waiter looks at the members it waits for: one that died (no such pid,
 * or a zombie), closed its client or broke the group ends the wait at
 * once, naming it, and breaks the group for all.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "client/ops/host.h"
#include "client/ops/local_shm.h"

#define HG_MAGIC   0x50424847u      /* "PBHG": the owners page is set up */
#define HG_PAGE    4096u
#define HG_STALE_S 60               /* a name with no pid in it: stale after this */
#define HG_WHY_LEN 448

struct hg_owners {                  /* page 0 of every object */
	uint32_t magic;
	uint32_t local_world;       /* group: L as its first member said */
	uint32_t l_by;              /* ... that member's local rank + 1 */
	uint32_t pad;
	int32_t pid[PBOX_HOST_LOCAL_MAX];   /* local rank -> its pid, 0 none */
};

struct hg_member {
	uint64_t at[2];             /* calls that reached HG_ARRIVED, HG_SUMMED */
	uint64_t count;             /* its current call's */
	uint32_t key, tag;          /* its current call's (hgroup_barrier) */
	uint32_t closed;            /* its client closed */
	uint32_t pad0;
	uint64_t aux;               /* hgroup_set_aux */
	uint64_t out;               /* hgroup_publish: call << 40 | elements */
	uint8_t pad[8];
};

struct hg_hdr {                     /* from page 1 of the group's object */
	uint32_t broken;            /* set after why: every wait fails */
	uint32_t claim;             /* the first breaker's, before why */
	uint32_t bell;              /* futex word: bumped by every arrival */
	uint8_t pad[52];
	char why[HG_WHY_LEN];
	struct hg_member m[PBOX_HOST_LOCAL_MAX];
};

#define HG_GROUP_BYTES (HG_PAGE + (sizeof(struct hg_hdr) + HG_PAGE - 1) / HG_PAGE * HG_PAGE)

_Static_assert(sizeof(struct hg_member) == 64, "one cache line per member");
_Static_assert(sizeof(struct hg_owners) <= HG_PAGE, "owners fit their page");

struct hgroup {
	struct hg_owners *own;
	struct hg_hdr *h;
	struct host_layout lay;
	int rank0;                  /* job rank of local rank 0 */
	uint32_t timeout_ms;
	char base[64];              /* the group's name */
	char who[96];               /* "job 'x' rank 3" */
};

/* Whether pid is a live process (not gone, not a zombie). */
static bool pid_alive(int32_t pid)
{
	char path[48], buf[256];

	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;   /* (no /proc: kill said it exists) */
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* Create or open name with bytes, mapped; with claim its owners page
 * names this process as local rank l. NULL with msg. */
static void *map_object(const char *name, size_t bytes, uint32_t l, bool claim, char *msg,
			size_t len)
{
	int fd = shm_open(name, O_CREAT | O_RDWR, 0600);

	if (fd < 0) {
		snprintf(msg, len, "shm_open %s: %s", name, strerror(errno));
		return NULL;
	}
	int err = posix_fallocate(fd, 0, (off_t)bytes);
	if (err) {
		close(fd);
		snprintf(msg, len, "%zu MiB of shared memory for %s: %s (is /dev/shm large "
			 "enough? containers: --shm-size)", bytes >> 20, name, strerror(err));
		return NULL;
	}
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(msg, len, "mmap of %zu bytes of %s: %s", bytes, name, strerror(errno));
		return NULL;
	}
	struct hg_owners *o = p;
	uint32_t zero = 0;
	__atomic_compare_exchange_n(&o->magic, &zero, HG_MAGIC, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
	if (claim)
		__atomic_store_n(&o->pid[l], (int32_t)getpid(), __ATOMIC_RELEASE);
	return p;
}

unsigned hgroup_sweep_stale(void)
{
	DIR *d = opendir("/dev/shm");
	unsigned removed = 0;
	struct dirent *e;
	char name[300];

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "pbox-h", 6) != 0)
			continue;
		snprintf(name, sizeof(name), "/%s", e->d_name);
		int fd = shm_open(name, O_RDONLY, 0);
		struct stat st;
		if (fd < 0)
			continue;
		if (fstat(fd, &st) < 0 || (size_t)st.st_size < HG_PAGE) {
			close(fd);
			continue;
		}
		const struct hg_owners *o = mmap(NULL, HG_PAGE, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (o == MAP_FAILED)
			continue;
		bool any = false, live = false;
		for (unsigned i = 0; i < PBOX_HOST_LOCAL_MAX && !live; i++) {
			int32_t pid = __atomic_load_n(&o->pid[i], __ATOMIC_ACQUIRE);
			any |= pid != 0;
			live = pid_alive(pid);
		}
		munmap((void *)o, HG_PAGE);
		if (!live && (any || time(NULL) - st.st_ctime > HG_STALE_S) &&
		    shm_unlink(name) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

static void ring(struct hgroup *g)
{
	bell_ring(&g->h->bell);
}

void hgroup_break(struct hgroup *g, const char *why)
{
	uint32_t zero = 0;

	if (__atomic_compare_exchange_n(&g->h->claim, &zero, 1, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		snprintf(g->h->why, sizeof(g->h->why), "%s", why);
		__atomic_store_n(&g->h->broken, 1, __ATOMIC_RELEASE);
	}
	ring(g);
}

void hgroup_wake(struct hgroup *g)
{
	ring(g);
}

/* "rank 5 (local rank 1, pid 77), rank 7 (local rank 3, pid 79)": the members whose pid is 0
 * (at == NULL) or whose counter at[phase] is below n. */
static void missing(const struct hgroup *g, int phase, uint64_t n, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < g->lay.local_world && at + 40 < len; i++) {
		int32_t pid = __atomic_load_n(&g->own->pid[i], __ATOMIC_ACQUIRE);
		bool miss = phase < 0 ? pid == 0 : ld64(&g->h->m[i].at[phase]) < n;
		if (!miss)
			continue;
		at += (size_t)snprintf(buf + at, len - at, "%srank %d (local rank %u",
				       at ? ", " : "", g->rank0 + (int)i, i);
		at += (size_t)(pid ? snprintf(buf + at, len - at, ", pid %d)", (int)pid)
				   : snprintf(buf + at, len - at, ")"));
	}
}

static int broken_error(struct hgroup *g, char *msg, size_t len)
{
	snprintf(msg, len, "%s: the host group (ranks %d..%d) broke: %.300s", g->who, g->rank0,
		 g->rank0 + (int)g->lay.local_world - 1, g->h->why);
	return PBOX_EABORTED;
}

/* Members that cannot come any more (died, closed): the group breaks,
 * naming the first. */
static int check_gone(struct hgroup *g, int phase, uint64_t n, char *msg, size_t len)
{
	char why[HG_WHY_LEN];

	for (uint32_t i = 0; i < g->lay.local_world; i++) {
		if (i == g->lay.local || ld64(&g->h->m[i].at[phase]) >= n)
			continue;
		int32_t pid = __atomic_load_n(&g->own->pid[i], __ATOMIC_ACQUIRE);
		if (ld32(&g->h->m[i].closed))
			snprintf(why, sizeof(why), "local rank %u (rank %d, pid %d) closed its "
				 "client", i, g->rank0 + (int)i, (int)pid);
		else if (!pid_alive(pid))
			snprintf(why, sizeof(why), "local rank %u (rank %d, pid %d) died", i,
				 g->rank0 + (int)i, (int)pid);
		else
			continue;
		hgroup_break(g, why);
		return broken_error(g, msg, len);
	}
	return 0;
}

int hgroup_open(pbox_client *c, const struct host_layout *lay, struct hgroup **out)
{
	struct hgroup *g = calloc(1, sizeof(*g));
	char msg[CLIENT_MSG_LEN];
	uint32_t job_id = c->nsubs ? c->subs[0]->job_id : c->job_id;
	uint64_t token = c->nsubs ? c->subs[0]->token : c->token;

	if (!g)
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d: out of memory", c->job,
				    c->rank);
	g->lay = *lay;
	g->rank0 = (int)(lay->host * lay->local_world);
	g->timeout_ms = c->opts.timeout_ms;
	snprintf(g->who, sizeof(g->who), "job '%s' rank %d", c->job, c->rank);
	snprintf(g->base, sizeof(g->base), "/pbox-h%u-%08x-n%u", job_id, token_digest(token),
		 lay->host);
	if (lay->local == 0)
		hgroup_sweep_stale();
	void *p = map_object(g->base, HG_GROUP_BYTES, lay->local, false, msg, sizeof(msg));
	if (!p) {
		free(g);
		return client_error(c, PBOX_ESYS, "job '%s' rank %d: host-local aggregation: %s",
				    c->job, c->rank, msg);
	}
	g->own = p;
	g->h = (struct hg_hdr *)((uint8_t *)p + HG_PAGE);
	int rc = 0;
	/* the host's L: the first member's; another is refused */
	uint32_t zero = 0;
	if (__atomic_compare_exchange_n(&g->own->local_world, &zero, lay->local_world, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		__atomic_store_n(&g->own->l_by, lay->local + 1, __ATOMIC_RELEASE);
	uint32_t L = ld32(&g->own->local_world);
	if (L != lay->local_world) {
		uint32_t by = ld32(&g->own->l_by);
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d: host-local aggregation: this "
				  "rank says host %u has %u local ranks, local rank %d (rank %d) of "
				  "it said %u (LOCAL_WORLD_SIZE or pbox_opts.local_world differ)",
				  c->job, c->rank, lay->host, lay->local_world, (int)by - 1,
				  g->rank0 + (int)by - 1, L);
	}
	/* this local rank: this process's, unless a live one holds it */
	int32_t other = 0, mine = (int32_t)getpid();
	while (rc == 0 && !__atomic_compare_exchange_n(&g->own->pid[lay->local], &other, mine,
						       false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (pid_alive(other))   /* (a dead holder gives way: the loop retries) */
			rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d: host-local "
					  "aggregation: local rank %u of host %u is claimed by pid "
					  "%d and by this process (pid %d): two ranks claim one "
					  "local rank", c->job, c->rank, lay->local, lay->host,
					  (int)other, (int)mine);
	}
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "rank %d: %s", c->rank, pbox_last_error(c));
		hgroup_break(g, msg);
	}
	ring(g);
	uint64_t give_up = shm_now_ms() + g->timeout_ms;
	while (rc == 0) {
		uint32_t bell = ld32(&g->h->bell);
		uint32_t i = 0;
		while (i < lay->local_world && __atomic_load_n(&g->own->pid[i], __ATOMIC_ACQUIRE))
			i++;
		if (i == lay->local_world)
			break;
		if (ld32(&g->h->broken)) {
			broken_error(g, msg, sizeof(msg));
			rc = client_error(c, PBOX_EABORTED, "%s", msg);
			break;
		}
		uint64_t t = shm_now_ms();
		if (t >= give_up) {
			char who[256];
			missing(g, -1, 0, who, sizeof(who));
			rc = client_error(c, PBOX_ETIMEDOUT, "job '%s' rank %d: host-local "
					  "aggregation: %s of host %u did not come to "
					  "this host's shared memory within %u ms (do they run on this "
					  "host, with the same job and LOCAL_WORLD_SIZE %u?)", c->job,
					  c->rank, who, lay->host, g->timeout_ms, lay->local_world);
			hgroup_break(g, "a local rank did not come at pbox_connect");
			break;
		}
		bell_wait(&g->h->bell, bell, give_up - t < 100 ? give_up - t : 100);
	}
	/* every member has it mapped (or the group failed): the name goes */
	shm_unlink(g->base);
	if (rc < 0) {
		hgroup_close(g);
		return rc;
	}
	*out = g;
	return 0;
}

void hgroup_close(struct hgroup *g)
{
	if (!g)
		return;
	__atomic_store_n(&g->h->m[g->lay.local].closed, 1, __ATOMIC_RELEASE);
	ring(g);
	munmap(g->own, HG_GROUP_BYTES);
	free(g);
}

int hgroup_barrier(struct hgroup *g, unsigned phase, uint64_t n, uint32_t key, uint64_t count,
		   unsigned tag, hg_tag_text_fn text, uint64_t bound_ms, const bool *stop,
		   char *msg, size_t len)
{
	struct hg_hdr *h = g->h;
	struct hg_member *me = &h->m[g->lay.local];
	uint64_t give_up = shm_now_ms() + bound_ms;

	if (phase == HG_ARRIVED) {
		me->key = key;
		me->count = count;
		me->tag = tag;
	}
	__atomic_store_n(&me->at[phase], n, __ATOMIC_RELEASE);
	ring(g);
	for (;;) {
		uint32_t bell = ld32(&h->bell);
		if (ld32(&h->broken))
			return broken_error(g, msg, len);
		if (__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
			snprintf(msg, len, "%s key %u: the client is closing", g->who, key);
			return PBOX_ECLOSED;
		}
		uint32_t i = 0;
		for (; i < g->lay.local_world; i++) {
			const struct hg_member *m = &h->m[i];
			if (ld64(&m->at[phase]) < n)
				break;
			if (phase != HG_ARRIVED || (m->key == key && m->count == count &&
						    m->tag == tag))
				continue;
			char why[HG_WHY_LEN], theirs[64], mine[64];
			text(m->tag, theirs, sizeof(theirs));
			text(tag, mine, sizeof(mine));
			snprintf(why, sizeof(why), "call %llu differs: local rank %u (rank %d) calls "
				 "key %u with %s of %llu elements, local rank %u (rank %d) key %u "
				 "with %s of %llu (the ranks of a host must make their calls in the "
				 "same order)", (unsigned long long)n, i, g->rank0 + (int)i, m->key,
				 theirs, (unsigned long long)m->count, g->lay.local,
				 g->rank0 + (int)g->lay.local, key, mine, (unsigned long long)count);
			hgroup_break(g, why);
			snprintf(msg, len, "%s key %u: host level: %s", g->who, key, why);
			return PBOX_EINVAL;
		}
		if (i == g->lay.local_world)
			return 0;
		int rc = check_gone(g, (int)phase, n, msg, len);
		if (rc < 0)
			return rc;
		uint64_t t = shm_now_ms();
		if (t >= give_up) {
			char who[256], why[HG_WHY_LEN];
			missing(g, (int)phase, n, who, sizeof(who));
			snprintf(why, sizeof(why), "call %llu on key %u: %s stalled: %s within %llu "
				 "ms", (unsigned long long)n, key, who, phase == HG_ARRIVED ?
				 "no buffer in the host's shared memory" :
				 "no part's result", (unsigned long long)bound_ms);
			hgroup_break(g, why);
			snprintf(msg, len, "%s: host level: %s; the host group is broken now", g->who,
				 why);
			return PBOX_ETIMEDOUT;
		}
		bell_wait(&h->bell, bell, give_up - t < 100 ? give_up - t : 100);
	}
}

static void key_name(const struct hgroup *g, uint32_t key, uint64_t count, unsigned dtype,
		     char *buf, size_t len)
{
	snprintf(buf, len, "%s-k%u-c%llu-t%u", g->base, key, (unsigned long long)count, dtype);
}

void *hgroup_key_map(struct hgroup *g, uint32_t key, uint64_t count, unsigned dtype,
		     size_t stride, char *msg, size_t len)
{
	char name[128], err[CLIENT_MSG_LEN];

	key_name(g, key, count, dtype, name, sizeof(name));
	void *p = map_object(name, HG_PAGE + (g->lay.local_world + 2) * stride, g->lay.local, true,
			     err, sizeof(err));
	if (!p)
		snprintf(msg, len, "%s key %u: host level: %s", g->who, key, err);
	return p;
}

void hgroup_key_unlink(struct hgroup *g, uint32_t key, uint64_t count, unsigned dtype)
{
	char name[128];

	key_name(g, key, count, dtype, name, sizeof(name));
	shm_unlink(name);
}

void hgroup_key_unmap(struct hgroup *g, void *mem, size_t stride)
{
	munmap(mem, HG_PAGE + (g->lay.local_world + 2) * stride);
}

void hgroup_set_aux(struct hgroup *g, uint64_t v)
{
	__atomic_store_n(&g->h->m[g->lay.local].aux, v, __ATOMIC_RELEASE);
}

uint64_t hgroup_aux(const struct hgroup *g, uint32_t local)
{
	return ld64(&g->h->m[local].aux);
}

#define HG_OUT_BITS 40   /* a published word: the call's low 24 bits, then
			    40 bits of elements */

void hgroup_publish(struct hgroup *g, uint64_t n, uint64_t done)
{
	__atomic_store_n(&g->h->m[g->lay.local].out, n << HG_OUT_BITS | done, __ATOMIC_RELEASE);
	ring(g);
}

uint64_t hgroup_published(const struct hgroup *g, uint32_t local, uint64_t n)
{
	uint64_t w = ld64(&g->h->m[local].out);

	return w >> HG_OUT_BITS == (n & ((1ull << (64 - HG_OUT_BITS)) - 1)) ?
	       w & ((1ull << HG_OUT_BITS) - 1) : 0;
}

uint32_t hgroup_bell(const struct hgroup *g)
{
	return ld32(&g->h->bell);
}

void hgroup_ring(void *g)
{
	ring(g);
}

void hgroup_bell_wait(struct hgroup *g, uint32_t seen, uint32_t ms)
{
	bell_wait(&g->h->bell, seen, ms);
}
