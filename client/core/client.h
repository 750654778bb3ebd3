/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.h - the client: struct pbox_client, its errors (errors.c), its
 * options and counters as the caller's structs carry them (abi.c), and the
 * hooks through which the rooms above core keep state per client.
 *
 * libpbox is built as rooms, each using only the rooms below it
 * (docs/architecture.md "libpbox's rooms", checked by tests/layering.sh):
 *
 *   gpu/        device buffers: the GPU library, staging, GPUDirect, top-k
 *   ops/        the calls: connect/close, allreduce and the collectives,
 *               PS, sparse and top-k, release, stats
 *   xfer/       the progress thread: key declaration, window, segments'
 *               sending, results, loss recovery, sparse exchange
 *   core/       this room: the client, its errors and options, the control
 *               connection, the key table and layouts, requests and their
 *               submission, the op-kind table
 *   transport/  the roads to the box: kernel UDP, AF_XDP, RDMA verbs
 *
 * A room below learns of a room above only through a table of handlers the
 * room above fills: a request carries its kind's (struct req_op, req.h)
 * and a device call its device stages (struct req_dev_ops); per-client
 * state of ops/ and gpu/ attaches a struct client_ext.
 *
 * Threads and ownership:
 *   - The caller's threads run the public API: they validate arguments,
 *     queue requests under c->lock (req.c) and wait on c->done_cond.
 *   - One progress thread per client (xfer/progress.c) owns the control
 *     TCP connection, the data transport, the key table and every request
 *     between submission and completion. It learns of new requests through
 *     an eventfd. It touches a request's buffer only while the request is
 *     active; it sets `finished` under c->lock as the last thing it does
 *     with a request.
 *   - Counters (c->stats) are written by the progress thread with relaxed
 *     atomics and read the same way by client_stats (pbox_get_stats).
 *   - Device calls (gpu/): the caller's threads use the caller's stream
 *     (an event at submission, a wait in pbox_wait/pbox_test); the progress
 *     thread alone enqueues on libpbox's two internal streams.
 * Lock order: c->lock is the only lock of core; nothing blocks while
 * holding it.
 */
#ifndef PBOX_CLIENT_CORE_CLIENT_H
#define PBOX_CLIENT_CORE_CLIENT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client/core/ctrl.h"
#include "common/clock.h"
#include "common/secret.h"
#include "client/core/keys.h"
#include "client/transport/transport.h"
#include "include/pbox.h"

#define CLIENT_MSG_LEN      512
#define CLIENT_CONNECT_MAX_MS 5000 /* TCP connect bound (or timeout_ms if less) */
#define CLIENT_LEAVE_MAX_MS 2000   /* job_leave bound at pbox_close */
#define CLIENT_EXT_MAX      4      /* rooms above core that attach state */
/* The progress thread's heartbeat on the control connection (the box
 * finds a rank lost when it misses them: job_join's heartbeat_ms). */
#define CLIENT_HEARTBEAT_MS 1000

struct xfer;
struct pbox_req;
struct rpc_pending;

/*
 * What a room above core keeps per client (ops/: top-k residuals; gpu/:
 * device staging) and must hear of: attached with client_ext_attach by
 * the call that makes the state. Every hook may be NULL.
 */
struct client_ext {
	const char *name;
	/* pbox_release_keys released key: what the room kept of it goes */
	void (*forget_key)(pbox_client *c, uint32_t key);
	/* pbox_topk_reset of key: 0, PBOX_EBUSY (a call owns it), or 1 if the
	 * room has no top-k state of key */
	int (*topk_reset)(pbox_client *c, uint32_t key);
	/* progress thread, while c->x's staging count is not 0: chunks the
	 * device copied to the host may be sent */
	void (*staging_poll)(pbox_client *c, uint64_t now);
	/* pbox_close, after the progress thread stopped, before the transport
	 * closes: free the room's state */
	void (*close)(pbox_client *c);
	/* PBOX_DEBUG's summary at pbox_close: the room's lines (may be none) */
	void (*summary)(const pbox_client *c, FILE *f);
};

struct pbox_client {
	/* set by pbox_connect, read-only afterwards */
	char control[1024];          /* "host:port", or a fleet's list of them */
	char job[64];
	int rank, world;
	pbox_opts opts;
	uint32_t job_id;
	uint64_t token;
	uint32_t seg_bytes, chunk_bytes;
	uint32_t box_slots;          /* open segment rounds per job per box lcore
					(job_join's "slots") */
	uint32_t box_mtu;            /* box_endpoints' mtu, 0 if not given */
	bool mtu_auto;               /* opts.mtu was 0 and PBOX_MTU unset */
	unsigned neps;
	struct sockaddr_in *eps;     /* box_endpoints, index = endpoint */
	struct ctrl ctrl;
	struct transport tp;
	int evfd;                    /* wakes the progress thread */
	bool joined;
	bool resume;                 /* PBOX_RESUME: rejoin after a lost
					connection (xfer/resume.c) */
	char secret[SECRET_MAX_LEN + 1]; /* the join secret, "" none: a
					rejoin sends it again */
	/* progress thread */
	pthread_t thread;
	bool thread_started;
	struct xfer *x;              /* its state (xfer/xfer.h) */
	struct keytab keys;          /* its key table */
	struct rpc_pending *rpcs;    /* its control calls awaiting an answer */
	bool ctrl_open;              /* the control connection has not ended */
	/* shared, under lock */
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	bool stop;
	struct pbox_req *sub_head, *sub_tail;
	struct pbox_req *live;
	int fatal_rc;                /* 0, or the error every call now gets */
	char fatal_msg[CLIENT_MSG_LEN];
	char last_err[CLIENT_MSG_LEN];  /* the latest failure, any thread's */
	uint64_t serial;             /* client_serial_next: whose a thread's
					last error is (errors.c) */
	struct lr_entry { uint32_t key; float lr; } *lrs; /* pbox_set_lr, by key */
	uint32_t nlrs, lrs_cap;
	struct topk_state *topk;     /* pbox_allreduce_topk's residuals, by key
					(ops/topk_call.c) */
	struct client_gpu *gpu;      /* the device calls' state, from the first
					one on (gpu/gpu.h; set under lock) */
	const struct client_ext *ext[CLIENT_EXT_MAX]; /* (under lock) */
	/* written by the progress thread (relaxed atomics) */
	pbox_stats stats;
	/* a fleet of boxes (ops/fleet.c): c has no box of its own, its calls
	 * go to the clients of its boxes, one each */
	struct fleet *fleet;
	pbox_client **subs;          /* nsubs clients, one per box, in list order */
	unsigned nsubs;
	char placement[17];          /* job_join's "placement" hash, "" none */
	/* host-local aggregation (ops/host.c): its host group and lane, or
	 * NULL; c itself is the flat job's client (or fleet) */
	struct host *host;
	pbox_client *lane;           /* the host level's lane client (host.c sets
				      * it), its counters summed into pbox_stats */
};

static inline void stat_add(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

static inline void stat_set(uint64_t *ctr, uint64_t v)
{
	__atomic_store_n(ctr, v, __ATOMIC_RELAXED);
}

/* ---- errors.c ---------------------------------------------------------- */

/* Store a formatted message as c's last error, for the calling thread and
 * as c's latest (pbox_last_error); returns rc. */
int client_error(pbox_client *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same with a ready message, c->lock held. */
void client_error_locked(pbox_client *c, const char *msg);
/* A number no other client of this process had (c->serial). */
uint64_t client_serial_next(void);

/* ---- abi.c: version, struct sizes, sized copies of opts and stats ------- */

/* Set c->opts from the caller's opts (NULL = defaults), reading only the
 * opts->size bytes the caller has; 0 or PBOX_EINVAL with c's message. */
int client_opts_read(pbox_client *c, const pbox_opts *in);
/* The rule for a caller's struct `what` of `size` bytes (its size field)
 * when this library knows `known` bytes of it: bytes beyond them must be 0
 * (fields of a newer libpbox left at their default), else PBOX_EINVAL with
 * c's message naming the byte; never silently ignored. 0 if size <= known. */
int client_struct_tail(pbox_client *c, const char *what, const void *in, size_t size,
		       size_t known);
/* c's counters now (this library's whole pbox_stats). */
void client_stats(const pbox_client *c, pbox_stats *out);

/* ---- join.c: job_join's request and answer (pbox_connect and a
 * rejoin after a lost connection) ---------------------------------------- */

/* job_join's params for c (its job, rank, world, the transport's address,
 * the job's settings if this join creates it); NULL if out of memory. */
json_t *client_join_params(pbox_client *c);
/* Take job_join's answer: job_id, token, seg_bytes, chunk_bytes, slots.
 * 0, or PBOX_EPROTO / PBOX_EREJECTED with c's message. */
int client_join_answer(pbox_client *c, const json_t *res);

/* ---- ext.c: the rooms above ------------------------------------------- */

/* Attach e to c (once; later calls with the same e do nothing): 0, or
 * PBOX_ENOMEM with c's message if CLIENT_EXT_MAX are attached. Under
 * c->lock. */
int client_ext_attach_locked(pbox_client *c, const struct client_ext *e);
/* key was released: every attached room forgets it. */
void client_forget_key(pbox_client *c, uint32_t key);
/* pbox_topk_reset of key in the rooms attached: the first one's 0 or
 * PBOX_EBUSY that has a state of key, else 1. */
int client_ext_topk_reset(pbox_client *c, uint32_t key);
/* Progress thread, while device chunks are on their way to the host:
 * every attached room's staging_poll. */
void client_ext_staging_poll(pbox_client *c, uint64_t now);
/* PBOX_DEBUG's summary at pbox_close: every attached room's lines. */
void client_ext_summary(const pbox_client *c, FILE *f);
/* pbox_close: every attached room frees its state. */
void client_ext_close(pbox_client *c);
/* Wake the progress thread. */
void client_kick(pbox_client *c);

#endif
