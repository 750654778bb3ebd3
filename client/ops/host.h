/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.h - host-local aggregation (docs/architecture.md "The host level"):
 * the L ranks of a job on one host sum each dense call among themselves
 * through shared memory and the box gets one contribution per host.
 *
 *   host_slice.c  the pure rules: the layout (which ranks form a host,
 *                 what is refused) and a key's parts (one per local rank)
 *   host_shm.c    the host group in shared memory: rendezvous at
 *                 connect, the two barriers of a call, liveness of the
 *                 members, the keys' memory, stale names
 *   host.c        pbox_connect's host level (the lane's client), the host
 *                 thread that runs the calls, pbox_close's
 *   (gpu/gpu_host.c, a room above: device buffers through host.c's calls)
 *
 * c (the caller's client) stays the flat job's client (or fleet) for every
 * call that is not a host-level sum; c->host holds the rest.
 */
#ifndef PBOX_CLIENT_OPS_HOST_H
#define PBOX_CLIENT_OPS_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/ops/ops.h"

#define HOST_SLICE_ALIGN 256u    /* a part starts on a multiple of this many elements */
#define HOST_JOB_NAME_MAX 56     /* "<job>.lane<l>" must fit in 63 characters */

/* ---- host_slice.c ---------------------------------------------------------- */

/* Where a rank sits: host `host` of `hosts`, local rank `local` of
 * `local_world` (rank = host * local_world + local). */
struct host_layout {
	uint32_t local, local_world;
	uint32_t host, hosts;
};

/* The layout of rank in world with local_rank of local_world (local_world
 * > 1; job's name for its length). 0, or PBOX_EINVAL with the reason in
 * err naming the rank: local_world above PBOX_HOST_LOCAL_MAX, a world it
 * does not divide, a local_rank that is not rank % local_world, a job
 * name above HOST_JOB_NAME_MAX. */
int host_layout_of(int rank, int world, uint32_t local_rank, uint32_t local_world,
		   const char *job, struct host_layout *out, char *err, size_t len);

/* Part l of L of a key of count elements: [*lo, *hi), near-equal parts
 * on HOST_SLICE_ALIGN bounds, in order, covering count (the last ones may
 * be empty for a small key). */
void host_slice(size_t count, uint32_t L, uint32_t l, size_t *lo, size_t *hi);

/* ---- host_shm.c ------------------------------------------------------------ */

struct hgroup;

/* The barriers of a call (host_shm.c's member counters). */
enum hg_phase { HG_ARRIVED = 0, HG_SUMMED = 1 };

/* Join the host group of c's job (its id and token name it): register
 * this process as local rank lay->local, remove stale names of killed jobs
 * first, wait (bounded by c's timeout_ms) until every local rank has
 * registered. 0 and *out, or PBOX_EINVAL (local_world or local rank
 * disputed: named), PBOX_ETIMEDOUT (local ranks that did not come: named),
 * PBOX_ESYS, PBOX_ENOMEM, each with c's message. */
int hgroup_open(pbox_client *c, const struct host_layout *lay, struct hgroup **out);
/* Say this member is gone (the others fail at their next wait) and free. */
void hgroup_close(struct hgroup *g);
/* Wake this process's waits (a caller that set its stop flag). */
void hgroup_wake(struct hgroup *g);

/* What a call's tag (hgroup_barrier) is, in words, for a mismatch's
 * message: host.c's "a top-k call of f32". */
typedef void (*hg_tag_text_fn)(unsigned tag, char *out, size_t len);

/* Barrier `phase` of call n (key, count, tag: every member's n-th call
 * must be the same; text names a tag): say this member reached it, wait
 * for every member.
 * A member that died, closed, failed or calls something else breaks the
 * group. 0, or PBOX_EABORTED (the group broke: msg says who and why),
 * PBOX_ETIMEDOUT (members that did not come within bound_ms: named; the
 * group is broken now), PBOX_EINVAL (another call), PBOX_ECLOSED (*stop):
 * the text in msg. */
int hgroup_barrier(struct hgroup *g, unsigned phase, uint64_t n, uint32_t key, uint64_t count,
		   unsigned tag, hg_tag_text_fn text, uint64_t bound_ms, const bool *stop,
		   char *msg, size_t len);
/* A word each member leaves for the others between the barriers of a
 * call (pbox_ps_read's steps): set before HG_SUMMED, read after it. */
void hgroup_set_aux(struct hgroup *g, uint64_t v);
uint64_t hgroup_aux(const struct hgroup *g, uint32_t local);
/* A member's progress within call n between the barriers (ops/host.c:
 * the elements of its part that hold their results): publish says that
 * this member's is done (elements below 2^40; rings the bell), published
 * reads local's (0 while it published none for call n). */
#define HG_PUBLISH_MAX (1ull << 40)
void hgroup_publish(struct hgroup *g, uint64_t n, uint64_t done);
uint64_t hgroup_published(const struct hgroup *g, uint32_t local, uint64_t n);
/* The group's bell (bumped by every arrival, publication and ring), a
 * wait of at most ms for it to move from seen, and a ring (g: the
 * struct hgroup; any thread, the lane's progress thread's drain hook). */
uint32_t hgroup_bell(const struct hgroup *g);
void hgroup_bell_wait(struct hgroup *g, uint32_t seen, uint32_t ms);
void hgroup_ring(void *g);
/* Break the group with this member's reason (the first one is kept). */
void hgroup_break(struct hgroup *g, const char *why);

/* The key's shared memory, made or mapped by every member: a page, then
 * L slots and two result areas of stride bytes each. NULL with msg. */
void *hgroup_key_map(struct hgroup *g, uint32_t key, uint64_t count, unsigned dtype,
		     size_t stride, char *msg, size_t len);
/* Remove the key's name (once every member has it mapped). */
void hgroup_key_unlink(struct hgroup *g, uint32_t key, uint64_t count, unsigned dtype);
void hgroup_key_unmap(struct hgroup *g, void *mem, size_t stride);
/* Slot i (< L: local rank i's; L, L + 1: the result areas) of a key's memory. */
static inline uint8_t *hgroup_slot(void *mem, size_t stride, uint32_t i)
{
	return (uint8_t *)mem + 4096 + (size_t)i * stride;
}

/* Remove /dev/shm names of host groups and keys (pbox-h*) that no live
 * process holds: those of jobs killed before every member mapped them.
 * The number removed. */
unsigned hgroup_sweep_stale(void);

/* ---- host.c ---------------------------------------------------------------- */

/* pbox_connect, after c joined the flat job: the host level if on
 * (pbox_opts.local_world or LOCAL_WORLD_SIZE above 1, PBOX_HOST_LOCAL not
 * off): the layout, the host group, the lane's client. 0 (also when off),
 * or an error with c's message. */
int host_connect(pbox_client *c);
/* pbox_close: the host thread stopped (calls queued fail PBOX_ECLOSED),
 * the lane closed, the group left. */
void host_close(pbox_client *c);
/* The checks of a host-level call's buffer in the caller's thread (the
 * lane's client checks the rest, later): buf, count and dtype, and for a
 * sparse or top-k key a count within 32-bit indices. 0 or PBOX_EINVAL
 * with c's message. */
int host_check_buf(pbox_client *c, uint32_t key, const void *buf, size_t count,
		   pbox_dtype dtype, bool sparse);
/* pbox_iallreduce of a host buffer through the host level. */
int host_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		    pbox_req **req);
/* pbox_iallreduce_dev through the host level (gpu/gpu_host.c): a dense
 * call of count elements of wire whose data gk's stages (dev: host_in,
 * host_out) bring from the device into bounce and take back from it;
 * the host thread runs it as host_iallreduce does a host buffer of
 * wire, in the same order with the host calls. 0 and *req, or an error
 * with c's message (gk dropped: dev->drop). */
int host_iallreduce_dev(pbox_client *c, uint32_t key, void *bounce, size_t count,
			pbox_dtype wire, const pbox_topk_opts *topk, struct gpu_key *gk,
			const struct req_dev_ops *dev, pbox_req **req);
/* pbox_iallreduce_topk through the host level (topk_call.c, o read and
 * checked, local_size 1): the host's sum, each rank's part of it selected
 * on its lane with the lane's residual and momentum (o's density applies
 * to each part). */
int host_iallreduce_topk(pbox_client *c, uint32_t key, void *buf, size_t count,
			 pbox_dtype dtype, const pbox_topk_opts *o, pbox_req **req);
/* pbox_iallreduce_sparse through the host level (sparse_call.c, the
 * entries checked): the host's entries merged, each rank's part of them
 * sent on its lane (a copy of idx and val is taken). */
int host_iallreduce_sparse(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
			   const uint32_t *idx, const void *val, size_t nnz, void *out,
			   pbox_req **req);
/* pbox_allreduce_host with the host level: the host's sum, waited for. */
int host_allreduce_host(pbox_client *c, uint32_t key, void *buf, size_t count,
			pbox_dtype dtype);
/* pbox_host_layout: c's place in its host (0 of 1 without the host level). */
void host_layout_get(const pbox_client *c, uint32_t *local_rank, uint32_t *local_world);
/* pbox_topk_reset of a host-level top-k key: 0 or an error with c's
 * message; 1 if key is no top-k key of the host level. */
int host_topk_reset(pbox_client *c, uint32_t key);
/* PS keys (ps.c and ps_rpc.c come here first, their arguments checked):
 * each rank's part a PS key of its lane, the mean over the job's world.
 * pbox_ps_init, pbox_ipush_pull and pbox_ps_read are host-level calls
 * (every local rank, in the host's order); pbox_ps_write and
 * pbox_ps_set_steps too, by every rank of host 0. */
int host_declare_optimizer(pbox_client *c, uint32_t key, size_t count, pbox_dtype grad,
			   const pbox_optim *o);
int host_set_lr(pbox_client *c, uint32_t key, double lr);
/* Whether key is a PS key of the host level (pbox_set_lr: a learning
 * rate set before the declaration stays the flat client's). */
bool host_has_ps_key(pbox_client *c, uint32_t key);
int host_ps_init(pbox_client *c, uint32_t key, const float *weights, void *weights_out);
int host_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		    size_t count, pbox_dtype dtype, pbox_req **req);
/* read (in NULL: out filled, *steps local rank 0's part's) or write */
int host_ps_rw(pbox_client *c, uint32_t key, pbox_ps_part part, float *out, const float *in,
	       size_t count, uint64_t *steps);
int host_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps);
/* pbox_release_keys with a host level: its keys released on the lane
 * (and their shared memory unmapped), the others on the flat job. */
int host_release(pbox_client *c, const uint32_t *keys, size_t n);
/* release.c: pbox_release_keys without the host level. */
int release_keys_flat(pbox_client *c, const uint32_t *keys, size_t n);
/* connect.c: a client as pbox_connect makes it without the host level
 * (one box's, or a fleet's for a list). */
int client_connect_flat(const char *control, const char *job, int rank, int world,
			const pbox_opts *opts, pbox_client **out);

#endif
