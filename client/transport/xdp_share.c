/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xdp_share.c - the shared UMEM and XDP program of the xdp transports of
 * one process on one interface and queue (xdp_share.h).
 *
 * Process-wide state: `registry`, the shares made so far, and its mutex,
 * made on first use; the only mutable state of libpbox that is not a
 * client's own (a fleet's clients, one per box, are separate clients that
 * must meet on one interface). Each share is freed by its last socket.
 *
 * Set-up: the UMEM (mmap, charged to RLIMIT_MEMLOCK without
 * CAP_IPC_LOCK), the first socket bound zero-copy where the driver can,
 * else copy (later ones inherit the mode: XDP_SHARED_UMEM takes no other
 * bind flag), the program attached through a BPF link (it goes away with
 * the process, even on SIGKILL), native XDP where the driver has it, else
 * generic. libxdp's UMEM and socket calls are not thread-safe: they run
 * under the registry's lock.
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "client/transport/xdp_share.h"
#include "include/pbox.h"

#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)      /* Linux 6.6 uapi; older headers lack it */
#endif

#define XDP_BUSY_TRIES  20u      /* a busy queue is tried again ... */
#define XDP_BUSY_PAUSE_US 10000u /* ... every 10 ms, for 0.2 s */

/* The program's bytes (generated from client/transport/bpf/xdp_flow.bpf.c). */
extern const unsigned char tp_xdp_prog[];
extern const size_t tp_xdp_prog_len;

struct flow_key {                /* the program's flows map: key ... */
	uint32_t ip;
	uint16_t port;
	uint16_t pad;
};

struct flow_to {                 /* ... and value */
	uint32_t xsk;
	uint32_t queue;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xdp_share *registry;

/* ---- set-up --------------------------------------------------------------- */

static int sys_err(int e, char *err, size_t errlen, const char *what, const char *ifname)
{
	snprintf(err, errlen, "%s on %s: %s", what, ifname, strerror(e));
	return e == EPERM || e == EACCES ? PBOX_EPERM
	       : e == EOPNOTSUPP || e == ENOTSUP || e == EINVAL || e == EBUSY ? PBOX_ENOTSUP
	       : PBOX_ESYS;
}

static bool ipc_lock_effective(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	return syscall(SYS_capget, &h, d) == 0 &&
	       ((d[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1);
}

/* The kernel charges the UMEM to RLIMIT_MEMLOCK unless the process has
 * CAP_IPC_LOCK: say so before it refuses with a bare ENOBUFS. */
static int memlock_check(size_t len, char *err, size_t errlen)
{
	struct rlimit rl;

	if (ipc_lock_effective() || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= len)
		return 0;
	snprintf(err, errlen, "the AF_XDP UMEM (%zu MiB) exceeds the locked-memory limit "
		 "(ulimit -l: %llu KiB): raise it to %zu KiB or grant CAP_IPC_LOCK",
		 len >> 20, (unsigned long long)rl.rlim_cur >> 10, len >> 10);
	return PBOX_EPERM;
}

static int umem_create(struct xdp_share *sh, char *err, size_t errlen)
{
	uint32_t slot_chunks = (sh->frame_max + XDP_CHUNK - 1) / XDP_CHUNK;
	int rc;

	sh->area_len = ((size_t)XDP_RX_CHUNKS + XDP_TX_CHUNKS) * XDP_CHUNK;
	sh->area = mmap(NULL, sh->area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	if (sh->area == MAP_FAILED) {
		sh->area = NULL;
		snprintf(err, errlen, "cannot map %zu bytes for the UMEM: %s", sh->area_len,
			 strerror(errno));
		return PBOX_ENOMEM;
	}
	if (xsk_slots_init(&sh->slots, (uint64_t)XDP_RX_CHUNKS * XDP_CHUNK,
			   (uint64_t)slot_chunks * XDP_CHUNK, XDP_TX_CHUNKS / slot_chunks) < 0) {
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	if ((rc = memlock_check(sh->area_len, err, errlen)) < 0)
		return rc;
	struct xsk_umem_config uc = { .fill_size = XDP_RING, .comp_size = XDP_RING,
				      .frame_size = XDP_CHUNK, .frame_headroom = 0 };
	rc = xsk_umem__create(&sh->umem, sh->area, sh->area_len, &sh->fill, &sh->comp, &uc);
	if (rc) {
		sh->umem = NULL;
		return sys_err(-rc, err, errlen, "registering the AF_XDP UMEM", sh->ifname);
	}
	return 0;
}

static struct xsk_socket_config socket_config(uint16_t bind_flags)
{
	return (struct xsk_socket_config){
		.rx_size = XDP_RING, .tx_size = XDP_RING,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = bind_flags,
	};
}

/* The first socket, in mode (zero-copy or copy): 0 or the libxdp error. A
 * socket closed just now (another process's, or a share freed just now)
 * frees its queue asynchronously, so a bind in that window finds it busy
 * (some 40 ms): tried again for a while. */
static int bind_mode(struct xdp_share *sh, uint16_t mode, struct xsk_socket **xsk,
		     struct xsk_ring_cons *rx, struct xsk_ring_prod *tx)
{
	struct xsk_socket_config sc = socket_config(
		(uint16_t)(mode | XDP_USE_NEED_WAKEUP | (sh->sg ? XDP_USE_SG : 0)));

	for (unsigned busy = 0;; busy++) {
		int rc = xsk_socket__create(xsk, sh->ifname, sh->queue, sh->umem, rx, tx, &sc);
		if (rc == 0)
			return 0;
		*xsk = NULL;
		if (rc != -EBUSY || busy == XDP_BUSY_TRIES)
			return rc;
		usleep(XDP_BUSY_PAUSE_US);
	}
}

/* Bind the first socket: zero-copy if the driver can, else copy;
 * multi-buffer if frames can exceed a chunk (rx_needs_sg). */
static int first_socket(struct xdp_share *sh, struct xsk_socket **xsk, struct xsk_ring_cons *rx,
			struct xsk_ring_prod *tx, char *err, size_t errlen)
{
	static const uint16_t modes[] = { XDP_ZEROCOPY, XDP_COPY };
	int rc = 0;

	for (unsigned m = 0; m < 2; m++) {
		rc = bind_mode(sh, modes[m], xsk, rx, tx);
		if (rc == 0) {
			sh->zerocopy = modes[m] == XDP_ZEROCOPY;
			return 0;
		}
		if (rc == -EPERM || rc == -EACCES || rc == -EBUSY)
			break;
	}
	if (rc == -EINVAL && sh->sg) {
		snprintf(err, errlen, "AF_XDP on %s refuses multi-buffer frames (XDP_USE_SG, "
			 "Linux >= 6.6), needed for MTU %u (frames over %u bytes)",
			 sh->ifname, sh->frame_max - 14, XDP_CHUNK - XDP_HEADROOM);
		return PBOX_ENOTSUP;
	}
	if (rc == -EBUSY) {
		snprintf(err, errlen, "queue %u of %s already has an AF_XDP socket (another "
			 "worker on this interface?) for %u ms", sh->queue, sh->ifname,
			 XDP_BUSY_TRIES * XDP_BUSY_PAUSE_US / 1000);
		return PBOX_ENOTSUP;
	}
	return sys_err(-rc, err, errlen, "creating the AF_XDP socket", sh->ifname);
}

/* Every rx chunk to the fill ring (the share is new: nobody else sees it). */
static void fill_all(struct xdp_share *sh)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&sh->fill, XDP_RX_CHUNKS, &idx) != XDP_RX_CHUNKS)
		return; /* cannot happen: the ring holds XDP_RING >= XDP_RX_CHUNKS */
	for (uint32_t i = 0; i < XDP_RX_CHUNKS; i++)
		*xsk_ring_prod__fill_addr(&sh->fill, idx + i) = (uint64_t)i * XDP_CHUNK;
	xsk_ring_prod__submit(&sh->fill, XDP_RX_CHUNKS);
}

static int prog_attach(struct xdp_share *sh, bool skb_mode, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "pbox_xdp_flow");
	sh->obj = bpf_object__open_mem(tp_xdp_prog, tp_xdp_prog_len, &oo);
	if (!sh->obj) {
		int e = errno;
		sh->obj = NULL;
		return sys_err(e, err, errlen, "opening the XDP program", sh->ifname);
	}
	int rc = bpf_object__load(sh->obj);
	if (rc)
		return sys_err(-rc, err, errlen, "loading the XDP program", sh->ifname);
	struct bpf_program *p = bpf_object__find_program_by_name(sh->obj, "pbox_flow");
	sh->flows_fd = bpf_object__find_map_fd_by_name(sh->obj, "flows");
	sh->xsks_fd = bpf_object__find_map_fd_by_name(sh->obj, "xsks");
	if (!p || sh->flows_fd < 0 || sh->xsks_fd < 0) {
		snprintf(err, errlen, "the XDP program lacks pbox_flow, flows or xsks");
		return PBOX_ESYS;
	}
	/* Native first; generic where the driver has no XDP. */
	static const uint32_t modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	for (unsigned m = skb_mode ? 1 : 0; m < 2; m++) {
		LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = modes[m]);
		sh->link_fd = bpf_link_create(bpf_program__fd(p), sh->ifindex, BPF_XDP, &lo);
		if (sh->link_fd >= 0) {
			sh->native = modes[m] == XDP_FLAGS_DRV_MODE;
			return 0;
		}
		if (errno == EBUSY || errno == EEXIST) {
			snprintf(err, errlen, "%s already has an XDP program (another process's, "
				 "or pboxd's): one xdp worker process per interface", sh->ifname);
			return PBOX_ENOTSUP;
		}
		if (errno == EPERM || errno == EACCES)
			break;
	}
	return sys_err(errno, err, errlen, "attaching the XDP program", sh->ifname);
}

/* Frees what was made of sh (not in the registry, no socket left). */
static void share_free(struct xdp_share *sh)
{
	if (sh->link_fd >= 0)
		close(sh->link_fd);
	if (sh->umem)
		xsk_umem__delete(sh->umem);
	if (sh->obj)
		bpf_object__close(sh->obj);
	if (sh->area)
		munmap(sh->area, sh->area_len);
	xsk_slots_fini(&sh->slots);
	pthread_mutex_destroy(&sh->lock);
	free(sh);
}

/* A new share with its first socket bound, or an error (nothing left). */
static int share_make(const struct xdp_member *m, struct xdp_share **out, struct xsk_socket **xsk,
		      struct xsk_ring_cons *rx, struct xsk_ring_prod *tx, char *err, size_t errlen)
{
	struct xdp_share *sh = calloc(1, sizeof(*sh));
	int rc;

	if (!sh) {
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	pthread_mutex_init(&sh->lock, NULL);
	sh->link_fd = sh->flows_fd = sh->xsks_fd = -1;
	sh->netns = m->netns;
	sh->ifindex = m->np->ifindex;
	sh->queue = 0;
	snprintf(sh->ifname, sizeof(sh->ifname), "%s", m->np->ifname);
	sh->frame_max = m->frame_max;
	sh->sg = rx_needs_sg(m->frame_max);
	if ((rc = umem_create(sh, err, errlen)) == 0 &&
	    (rc = first_socket(sh, xsk, rx, tx, err, errlen)) == 0) {
		fill_all(sh);
		if ((rc = prog_attach(sh, m->skb_mode, err, errlen)) < 0) {
			xsk_socket__delete(*xsk);
			*xsk = NULL;
		}
	}
	if (rc < 0) {
		share_free(sh);
		return rc;
	}
	*out = sh;
	return 0;
}

/* One more socket on sh's queue (its mode, its fill and completion rings). */
static int share_add(struct xdp_share *sh, const struct xdp_member *m, struct xsk_socket **xsk,
		     struct xsk_ring_cons *rx, struct xsk_ring_prod *tx, char *err, size_t errlen)
{
	if (m->frame_max > sh->frame_max) {
		snprintf(err, errlen, "the AF_XDP sockets of %s share tx slots for %u-byte frames, "
			 "not %u (MTU changed?)", sh->ifname, sh->frame_max, m->frame_max);
		return PBOX_ENOTSUP;
	}
	if (sh->xsk_used == UINT64_MAX) {
		snprintf(err, errlen, "%s already has %u AF_XDP sockets of this process on queue "
			 "%u", sh->ifname, XDP_MAX_SOCKETS, sh->queue);
		return PBOX_ENOTSUP;
	}
	struct xsk_socket_config sc = socket_config(0);
	int rc = xsk_socket__create_shared(xsk, sh->ifname, sh->queue, sh->umem, rx, tx,
					   &sh->fill, &sh->comp, &sc);
	if (rc) {
		*xsk = NULL;
		return sys_err(-rc, err, errlen, "creating a shared AF_XDP socket", sh->ifname);
	}
	return 0;
}

/* Steer m's flow to xsk: its xsks index in *idx. */
static int steer(struct xdp_share *sh, const struct xdp_member *m, struct xsk_socket *xsk,
		 unsigned *idx, char *err, size_t errlen)
{
	unsigned i = (unsigned)__builtin_ctzll(~sh->xsk_used);
	int fd = xsk_socket__fd(xsk);
	struct flow_key k = { .ip = m->np->src.s_addr, .port = htons(m->port) };
	struct flow_to to = { .xsk = i, .queue = sh->queue };

	if (bpf_map_update_elem(sh->xsks_fd, &i, &fd, BPF_ANY) ||
	    bpf_map_update_elem(sh->flows_fd, &k, &to, BPF_ANY)) {
		int e = errno;
		bpf_map_delete_elem(sh->xsks_fd, &i);
		return sys_err(e, err, errlen, "filling the XDP maps", sh->ifname);
	}
	__atomic_or_fetch(&sh->xsk_used, 1ull << i, __ATOMIC_RELAXED);
	*idx = i;
	return 0;
}

int xdp_share_join(const struct xdp_member *m, struct xdp_share **out, struct xsk_socket **xsk,
		   struct xsk_ring_cons *rx, struct xsk_ring_prod *tx, unsigned *idx,
		   unsigned *others, char *err, size_t errlen)
{
	struct xdp_share *sh;
	int rc;

	*xsk = NULL;
	pthread_mutex_lock(&registry_lock);
	for (sh = registry; sh; sh = sh->next)
		if (sh->netns == m->netns && sh->ifindex == m->np->ifindex && sh->queue == 0)
			break;
	bool made = !sh;
	rc = made ? share_make(m, &sh, xsk, rx, tx, err, errlen)
		  : share_add(sh, m, xsk, rx, tx, err, errlen);
	if (rc == 0 && (rc = steer(sh, m, *xsk, idx, err, errlen)) < 0) {
		xsk_socket__delete(*xsk);
		*xsk = NULL;
		if (made)
			share_free(sh);
	}
	if (rc == 0) {
		*others = __atomic_fetch_add(&sh->members, 1, __ATOMIC_RELAXED);
		if (made) {
			sh->next = registry;
			registry = sh;
		}
		*out = sh;
	}
	pthread_mutex_unlock(&registry_lock);
	return rc;
}

void xdp_share_unsteer(struct xdp_share *sh, unsigned idx, uint32_t ip, uint16_t port)
{
	struct flow_key k = { .ip = ip, .port = htons(port) };

	bpf_map_delete_elem(sh->flows_fd, &k);
	bpf_map_delete_elem(sh->xsks_fd, &idx);
}

void xdp_share_leave(struct xdp_share *sh, struct xsk_socket *xsk, unsigned idx)
{
	pthread_mutex_lock(&registry_lock);
	if (xsk)
		xsk_socket__delete(xsk);
	__atomic_and_fetch(&sh->xsk_used, ~(1ull << idx), __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&sh->members, 1, __ATOMIC_RELAXED) == 0) {
		for (struct xdp_share **p = &registry; *p; p = &(*p)->next)
			if (*p == sh) {
				*p = sh->next;
				break;
			}
		share_free(sh);
	}
	pthread_mutex_unlock(&registry_lock);
}

void xdp_share_reap_locked(struct xdp_share *sh)
{
	uint32_t idx, n = xsk_ring_cons__peek(&sh->comp, XDP_RING, &idx);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = *xsk_ring_cons__comp_addr(&sh->comp, idx + i);
		xsk_slots_complete(&sh->slots, &a, 1);
	}
	xsk_ring_cons__release(&sh->comp, n);
}
