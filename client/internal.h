/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h - libpbox's private structures and the interfaces between its
 * files. Users include only include/pbox.h.
 *
 * Threads and ownership:
 *   - The caller's threads run the public API (client.c, req.c): they
 *     validate arguments, queue requests under c->lock and wait on
 *     c->done_cond.
 *   - One progress thread per client (progress.c) owns the control TCP
 *     connection, the data transport (transport.h), the key table and every request between submission and
 *     completion. It learns of new requests through an eventfd. It touches a
 *     request's buffer only while the request is active; it sets `finished`
 *     under c->lock as the last thing it does with a request.
 *   - Counters (c->stats) are written by the progress thread with relaxed
 *     atomics and read the same way by client_stats (pbox_get_stats).
 *   - Device calls (gpu.h): the caller's threads use the caller's stream
 *     (an event at submission, a wait in pbox_wait/pbox_test); the progress
 *     thread alone enqueues on libpbox's two internal streams.
 * Lock order: c->lock is the only lock; nothing blocks while holding it.
 */
#ifndef PBOX_CLIENT_INTERNAL_H
#define PBOX_CLIENT_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/jsonl.h"
#include "include/pbox.h"
#include "client/gpu.h"
#include "client/recovery.h"
#include "client/segment.h"
#include "common/wire.h"
#include "client/transport.h"

#define CLIENT_MSG_LEN      512
#define XFER_BATCH          32     /* datagrams per sendmmsg / recvmmsg */
#define XFER_TX_BURST       256    /* datagrams handed to the transport at once */
#define XFER_RX_BURST       64     /* datagrams taken from it at once */
#define XFER_WIN_MIN        64     /* floor of the BDP window (segments) */
/* Window slots beyond opts.window, for sparse keys' records: they are
 * small, so their window is counted in bytes (cwnd x seg_bytes) and many
 * more of them are in flight at once. */
#define XFER_SPARSE_SLOTS   16384
#define XFER_RTO_MIN_US     5000   /* floor of the adaptive timeout */
#define XFER_RTO_MAX_US     1000000 /* cap of the adaptive timeout */
/* Cap of a segment's back-off while the box is silent (or rto, if larger).
 * The cap must leave many tries inside pboxd's stall watch
 * (--stall-timeout-ms, 5 s): 200 ms leaves 20+ (docs/reliability.md). A
 * segment the box has (WAIT) is paced by XFER_WAIT_MAX_US instead. */
#define XFER_BACKOFF_MAX_US 200000
/* Cap of the pause a WAIT sets (the time the round has been open): a
 * query a second keeps RESULT loss repaired well inside the stall watch
 * while a straggler holds the round. */
#define XFER_WAIT_MAX_US    1000000
#define CLIENT_CONNECT_MAX_MS 5000 /* TCP connect bound (or timeout_ms if less) */
#define CLIENT_LEAVE_MAX_MS 2000   /* job_leave bound at pbox_close */
#define ABORT_GRACE_MS      300    /* wait for job_aborted's reason after ERROR */
#define REDECLARE_MS        2      /* a key being released: declare again after */
#define UDP_SOCKBUF_BYTES   (8 << 20)

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

/* ---- ctrl.c: the control connection ------------------------------------ */

struct ctrl {
	int fd;                  /* -1 when closed */
	struct jsonl_buf in;
	uint64_t next_id;
	char addr[128];          /* "host:port" as given, for messages */
};

void ctrl_init(struct ctrl *k);
/* Connect to "host:port" within timeout_ms. 0, or PBOX_EINVAL (bad
 * address), PBOX_ECONNECT, PBOX_ENOMEM with the cause in err. */
int ctrl_connect(struct ctrl *k, const char *hostport, int timeout_ms,
		 char *err, size_t errlen);
void ctrl_close(struct ctrl *k);
/* Send a request; params is consumed. *id gets its id. 0 or PBOX_ENOMEM,
 * PBOX_ECLOSED, PBOX_ESYS (message in err). */
int ctrl_send(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
	      uint64_t *id, char *err, size_t errlen);
/* Send a request and wait for its answer (notifications are skipped), all
 * within timeout_ms. params is consumed; *result is a new reference on
 * success. 0, or PBOX_ETIMEDOUT, PBOX_ECLOSED, PBOX_EPROTO, PBOX_EREJECTED,
 * PBOX_EABORTED, PBOX_ENOMEM, PBOX_ESYS; err starts with the method. */
int ctrl_call(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
	      json_t **result, char *err, size_t errlen);
/* Read what the socket has and hand every complete message to cb (a new
 * parsed object, borrowed by cb). 0, PBOX_ECLOSED (end of stream or a read
 * error), or PBOX_EPROTO (a line is not JSON or too long); err says which. */
int ctrl_read(struct ctrl *k, void (*cb)(void *arg, json_t *msg), void *arg,
	      char *err, size_t errlen);
/* The same for the lines already read, without reading: a ctrl_call
 * stops at its answer, so lines that came in the same read (a
 * notification right after it) wait in the buffer, and the socket will
 * not become readable for them. 0 or PBOX_EPROTO. */
int ctrl_read_buffered(struct ctrl *k, void (*cb)(void *arg, json_t *msg), void *arg,
		       char *err, size_t errlen);
/* Map a JSON-RPC error object of `method` to a PBOX code and a message
 * "method: box message". */
int ctrl_error(const json_t *error, const char *method, char *err, size_t errlen);

/* ---- udp.c: the kernel UDP transport, and a helper the others share -- */

/* This host's source address toward dst (a throwaway connected socket). */
int udp_source_ip(const struct sockaddr_in *dst, struct in_addr *src,
		  char *err, size_t errlen);
/* A UDP socket bound to INADDR_ANY:0 (nonblocking); *port its port, host
 * order. The raw transports hold one so the kernel gives their port to
 * nobody else and answers nothing on it. 0 or PBOX_ESYS. */
int udp_reserve_port(int *fd, uint16_t *port, char *err, size_t errlen);

/* ---- keys.c: the key table of the progress thread ---------------------- */

enum key_phase {
	KEY_NEW = 0,      /* never declared, or the declaration failed */
	KEY_DECLARING,    /* key_declare sent, no answer yet */
	KEY_READY,        /* layout known; rounds can run */
};

struct pbox_req;

struct key_state {
	uint32_t key;
	uint8_t phase;               /* enum key_phase */
	uint8_t dtype;               /* as declared (PS: the gradients') */
	bool is_ps;                  /* declared with an optimizer */
	bool restored;               /* PS: the box has weights from a checkpoint */
	bool sparse;                 /* a sparse key (REQ_SPARSE calls only) */
	uint8_t coll;                /* enum key_coll */
	uint16_t root;               /* COLL_BROADCAST's root */
	uint8_t rdtype;              /* PS: dtype of the weights returned */
	uint64_t count;              /* as declared */
	pbox_optim optim;            /* PS: the optimizer as declared (lr: the
				        first declaration's; pushes carry c->lrs') */
	struct seg_layout lay;       /* valid when READY */
	uint32_t round;              /* rounds started so far */
	uint32_t first_round;        /* key_declare's first_round: a PS key's
				        init round (READY) */
	struct pbox_req *req;        /* the call now using the key, or NULL */
	uint32_t *slot_of;           /* nsegs: window slot + 1 of a segment in flight */
	uint64_t *got;               /* nsegs bits: result of this round in */
	uint32_t unsure;             /* key_write / key_release calls on it that
				        timed out, their answers still to come:
				        what the box did is unknown, so calls
				        on the key get PBOX_EBUSY meanwhile */
};

struct keytab {
	struct key_state **tab;      /* open addressing, cap entries */
	uint32_t cap;                /* power of two */
	uint32_t n;
};

void keytab_init(struct keytab *t);
void keytab_free(struct keytab *t);
struct key_state *keytab_find(const struct keytab *t, uint32_t key);
/* Find or add (phase KEY_NEW); NULL if out of memory. */
struct key_state *keytab_get(struct keytab *t, uint32_t key);
/* Install a checked layout (takes lay.chunk_ep) and allocate the per-
 * segment arrays. 0 or -1 (out of memory). */
int key_set_layout(struct key_state *ks, struct seg_layout *lay);
/* Back to KEY_NEW, as never used (pbox_release_keys): its next call
 * declares it afresh. Its unsure count stays. */
void key_reset(struct key_state *ks);

/* ---- requests ---------------------------------------------------------- */

/* What a request does. */
enum req_kind {
	REQ_ALLREDUCE = 0, /* buf summed in place */
	REQ_DECLARE,       /* key_declare of a PS key, nothing streamed */
	REQ_PS_INIT,       /* PS init round: src = weights (rank 0) or nothing */
	REQ_PUSH_PULL,     /* PS step: src gradients, buf gets the weights */
	REQ_PS_READ,       /* key_read pieces into buf (ps_rpc.c) */
	REQ_PS_WRITE,      /* key_write pieces from src, or only steps */
	REQ_SPARSE,        /* sparse key: records in enc, buf gets the dense sum */
	REQ_COLL,          /* broadcast, allgather, reduce_scatter: coll.c */
	REQ_RELEASE,       /* key_release of rel_keys[0..count): release.c */
};

/* What a key's rounds do (docs/protocol.md "Collective keys"); the
 * numbering is key_declare's order. */
enum key_coll {
	COLL_ALLREDUCE = 0,
	COLL_BROADCAST,
	COLL_ALLGATHER,
	COLL_REDUCE_SCATTER,
};

/* key_declare's name of a collective ("allreduce", "broadcast", ...). */
const char *key_coll_name(unsigned coll);

/* The rank owning segment s of ks: its slice's (broadcast: the root). */
static inline int key_seg_owner(const struct key_state *ks, uint32_t s)
{
	return ks->root + (int)seg_slice(&ks->lay, s);
}

/* Whether this rank sends segment s's data (a gather key's segment is
 * its owner's; the others send a query of count 0). */
static inline bool key_sends_data(const struct key_state *ks, uint32_t s, int rank)
{
	return (ks->coll != COLL_BROADCAST && ks->coll != COLL_ALLGATHER) ||
	       key_seg_owner(ks, s) == rank;
}

/* Whether this rank gets segment s's data back (a scatter key's sum goes
 * to the owner; the others get a header of count 0). */
static inline bool key_gets_data(const struct key_state *ks, uint32_t s, int rank)
{
	return ks->coll != COLL_REDUCE_SCATTER || key_seg_owner(ks, s) == rank;
}

/* State of a request inside the progress thread. */
enum req_state {
	REQ_QUEUED = 0,  /* submitted, not yet seen by the thread */
	REQ_DECLARING,   /* waiting for its key's key_declare answer */
	REQ_STREAMING,   /* segments being sent and results collected */
	REQ_RPC,         /* PS read/write: a key_read/key_write awaits its
			    answer; a key_release its one */
};

struct pbox_req {
	pbox_client *c;
	uint32_t key;
	uint8_t kind;                         /* enum req_kind */
	uint8_t dtype;                        /* of src (PS init: f32) */
	uint8_t rdtype;                       /* of buf (PS: the weights') */
	bool empty;                           /* PS init: send count 0 */
	uint32_t arg;                         /* PUSH argument (learning rate bits) */
	const void *src;                      /* what is pushed (allreduce: buf) */
	uint32_t src_mkey;                    /* GPUDirect: src is GPU memory the NIC
						 reads (transport.h tp_pkt.mkey); 0 */
	void *buf;                            /* where results go */
	size_t count;                         /* elements of the key */
	uint8_t coll;                         /* REQ_COLL: enum key_coll */
	uint16_t root;                        /* REQ_COLL broadcast: its root */
	uint64_t src_first;                   /* key element at src[0] (allgather:
						 rank * count / world) */
	uint64_t buf_first;                   /* key element at buf[0] (reduce_scatter:
						 rank * count / world) */
	pbox_optim optim;                     /* REQ_DECLARE */
	uint8_t part;                         /* REQ_PS_READ/WRITE: pbox_ps_part */
	bool set_steps;                       /* REQ_PS_WRITE: steps, no data */
	uint64_t steps;                       /* read: steps held; write: to set */
	uint64_t *steps_out;                  /* REQ_PS_READ: where steps go */
	size_t done_elems;                    /* REQ_PS_READ/WRITE: progress */
	const uint32_t *sp_idx;               /* REQ_SPARSE: the entries (sorted) */
	const uint8_t *sp_val;
	size_t *sp_first;                     /* nsegs + 1: each segment's first entry */
	void *sp_own;                         /* the request's copy of idx and val */
	bool sp_out_zero;                     /* buf is all zero at submission */
	uint32_t *rel_keys;                   /* REQ_RELEASE: the keys (count) */
	struct gpu_key *gk;                   /* a device call: its key's staging
						 state (gpu.h); NULL for host calls */
	/* under c->lock */
	bool finished;
	int rc;
	char msg[CLIENT_MSG_LEN];
	struct pbox_req *sub_next;            /* submission queue */
	struct pbox_req *live_prev, *live_next; /* not yet waited for */
	/* progress thread only */
	uint8_t state;                        /* enum req_state */
	struct pbox_req *act_prev, *act_next; /* active list, FIFO */
	struct key_state *ks;
	uint32_t round;
	uint32_t next_seg;                    /* first segment never sent */
	uint32_t ready_seg;                   /* segments below it may be sent: all
						 (nsegs), or a device call's that are
						 on the host (gpu_stage.c) */
	uint32_t ndone;                       /* segments with their result */
	uint32_t epoch;                       /* bumped on progress: resets RTO */
	uint64_t progress_ns;                 /* last new result (or start) */
	uint64_t redeclare_ns;                /* declare again then: the box said
						 the key is still being released
						 (0 = not waiting) */
	bool held_elsewhere;                  /* ... which it said at least once */
};

/* ---- xfer.c: the send/receive/retransmit engine ------------------------ */

struct xslot {
	struct pbox_req *req;        /* NULL = free */
	uint32_t seg;
	uint32_t nretx;              /* retransmissions since req's epoch */
	uint32_t epoch;
	bool retxed;                 /* sent more than once: no RTT sample */
	bool box_has;                /* a WAIT said the box has it: RACK by
				        first sending (rack_wait_due) */
	uint32_t bytes;              /* payload bytes (a sparse record's) */
	uint64_t first_ns;           /* first transmission (round trips) */
	uint64_t sent_ns;            /* last transmission (RACK, NACKs) */
	uint64_t deadline_ns;        /* next retransmission */
	uint64_t wait_seq;           /* rack_wait_seq at the last WAIT (with box_has) */
	bool rack_timed;             /* deadline is a RACK timer (rack_timer) */
};

struct rpc_pending {
	uint64_t id;
	struct key_state *ks;        /* a key_declare's key ... */
	struct pbox_req *req;        /* ... or the PS read/write it serves
				        (NULL once that request finished) */
	size_t elems;                /* elements this piece carries */
	bool release;                /* a key_release of req */
	uint32_t *held;              /* a key_write's or key_release's call that
				        ended without this answer (timed out):
				        its keys, each counted in key_state
				        unsure until the answer comes */
	size_t nheld;
	struct rpc_pending *next;
};

/* Everything the progress thread owns besides the sockets. */
struct xfer {
	struct xslot *slots;         /* opts.window */
	uint64_t redeclare_ns;       /* earliest req redeclare_ns, 0 = none */
	struct seg_window win;
	struct pbox_req *act_head, *act_tail;
	struct keytab keys;
	struct rpc_pending *rpcs;    /* key_declare calls awaiting an answer */
	uint64_t next_retx_ns;       /* earliest slot deadline, UINT64_MAX none */
	uint64_t abort_seen_ns;      /* first ERROR packet, 0 none */
	struct rtt_est rtt;          /* PUSH -> RESULT round trip, sets the RTO */
	struct bdp_est bdp;          /* bandwidth x round trip, sets cwnd */
	uint32_t cwnd;               /* segments in flight allowed now (<= wmax) */
	uint32_t wmax;               /* opts.window (win.cap is larger: sparse) */
	uint64_t inflight_bytes;     /* payload bytes of the slots in flight */
	struct sendq sendq;          /* slots in order of last sending (RACK) */
	struct rack rack;
	uint64_t wait_scan_seq;      /* rack.order_at_seq at the last waited-slot scan */
	uint32_t nwaited;            /* slots in flight with box_has */
	struct aimd aimd;            /* the congestion window under cwnd */
	bool ctrl_open;
	uint32_t gpu_staging;        /* active device calls with chunks not yet
				        on the host: the loop polls their events */
	uint16_t *sp_open;           /* per endpoint: txq index + 1 of the sparse
				        packet still taking records, 0 none
				        (until the next flush) */
	uint32_t *sp_last;           /* per endpoint: the open packet's last segment */
	uint32_t *sp_inflight;       /* per endpoint: sparse records in flight */
	uint8_t *sp_buf;             /* XFER_TX_BURST payloads of sparse packets */
	unsigned ntxq;               /* datagrams queued in txq */
	struct tp_pkt txq[XFER_TX_BURST];
	struct tp_dgram rxq[XFER_RX_BURST];
	char err[CLIENT_MSG_LEN];    /* scratch for socket errors */
	int pend_rc;                 /* socket error to apply (xfer_apply_pending) */
	char pend_msg[CLIENT_MSG_LEN];
};

int xfer_init(struct xfer *x, uint32_t window, uint32_t rto_ms);
void xfer_free(struct xfer *x);

/* Append r to the active list. */
void xfer_activate(pbox_client *c, struct pbox_req *r);
/* Start round streaming of r (key READY, sizes checked). */
void xfer_start(pbox_client *c, struct pbox_req *r, uint64_t now);
/* Send new segments while the window has room. */
void xfer_fill(pbox_client *c, uint64_t now);
/* Receive and apply what the transport has. */
void xfer_recv(pbox_client *c, uint64_t now);
/* Retransmit overdue segments; fail requests without progress. */
void xfer_timers(pbox_client *c, uint64_t now);
/* Complete r with rc (and msg when rc < 0): leave the active list, release
 * its slots and key, wake waiters. r must not be touched afterwards. */
void xfer_finish(pbox_client *c, struct pbox_req *r, int rc, const char *msg);
/* Fail every active request and remember rc/msg for later calls. */
void xfer_fatal(pbox_client *c, int rc, const char *msg);
/* Fail the client with a socket error recorded during I/O, if any. */
void xfer_apply_pending(pbox_client *c);
/* Poll timeout in ms until the next timer. */
/* Declare r's key again in REDECLARE_MS (the box is still removing it). */
void xfer_redeclare_later(pbox_client *c, struct pbox_req *r, uint64_t now);
int xfer_poll_ms(const pbox_client *c, uint64_t now);
/* Hand the queued datagrams to the transport as one burst. */
void xfer_flush(pbox_client *c);
/* Segment seg of r got its result (bytes of it, flags of its RESULT):
 * the window, round trip, congestion and progress bookkeeping; finishes
 * r when it was the last (or its device copy failed). The caller checked
 * it is new and stored it. False when r is finished: not the caller's to
 * touch any more. */
bool xfer_seg_done(pbox_client *c, struct pbox_req *r, uint32_t seg, uint32_t bytes,
		   uint8_t flags, uint64_t now);

/* ---- sparse_call.c: the submission of sparse calls ------------------------- */

/* The checks every sparse call shares (req_check, 32-bit indices, room
 * for records). 0 or PBOX_EINVAL with c's message. */
int sparse_check(pbox_client *c, uint32_t key, const void *buf, size_t count,
		 pbox_dtype dtype);
/* pbox_topk_opts as this library knows them (in NULL: the defaults),
 * checked, and k for count entries: 0 or PBOX_EINVAL. (topk_call.c) */
int topk_opts_read(pbox_client *c, uint32_t key, const pbox_topk_opts *in, size_t count,
		   pbox_topk_opts *o, size_t *k);
/* Queue a REQ_SPARSE request for out (count of dtype) carrying the nnz
 * entries (checked: increasing, below count): copied with
 * SPARSE_SUBMIT_COPY, else borrowed until the request ends. With
 * SPARSE_SUBMIT_OUT_ZERO, out is all zero already (the progress thread
 * does not clear each segment before writing its result). gk: a device
 * call's key state (out is its slab; given back if this fails, unless
 * gk->caller_keeps), or NULL. 0 and *req, or an error with c's message. */
int sparse_submit(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		  const uint32_t *idx, const void *val, size_t nnz, void *out, unsigned flags,
		  struct gpu_key *gk, pbox_req **req);
#define SPARSE_SUBMIT_COPY     1u
#define SPARSE_SUBMIT_OUT_ZERO 2u
/* ---- topk_local.c: hierarchical top-k's host group ---------------------- */

struct topk_local;
/* local_rank/local_size of pbox_topk_opts against c's rank and world: 0
 * or PBOX_EINVAL with c's message (local_size <= 1: flat, always 0). */
int topk_local_check(pbox_client *c, uint32_t key, uint32_t local_rank, uint32_t local_size);
/* Key's host group for this rank: the leader (local_rank 0) creates its
 * shared memory, the others wait for it (up to timeout_ms) and check it.
 * 0 and *out, or an error with c's message. */
int topk_local_open(pbox_client *c, uint32_t key, size_t count, uint32_t local_rank,
		    uint32_t local_size, struct topk_local **out);
/* This member's slot: count floats, where a call puts its gradient. */
float *topk_local_slot(struct topk_local *l);
/* Barrier, this member's slice of the sum, and (leader) the barrier of
 * the slices: 0 with *sum (the host's sum, count floats; NULL but for
 * the leader), PBOX_ETIMEDOUT or PBOX_EABORTED with c's message. */
int topk_local_reduce(pbox_client *c, struct topk_local *l, const float **sum);
/* Mark the group broken (a member failed after the sum): the others fail. */
void topk_local_break(struct topk_local *l);
void topk_local_free(struct topk_local *l);

/* Payload bytes of segment s's record of r (REQ_SPARSE). */
uint32_t sparse_rec_bytes(const struct pbox_req *r, uint32_t s);

/* ---- sparse_xfer.c: sparse keys' packets (docs/protocol.md) ------------ */

/* Free the sparse packets' buffers (xfer_free). */
void sparse_free(struct xfer *x);
/* Whether another sparse record may be in flight to endpoint ep: fewer
 * than half the box's slots on its lcore, over that lcore's endpoints on
 * every port (each open segment round takes one, and the other ranks may
 * lag); false if the buffers cannot be had. */
bool sparse_room(pbox_client *c, unsigned ep);
/* Queue segment s of r (REQ_SPARSE) with flags: its record joins the
 * packet being filled for its endpoint, or starts one. */
void sparse_send(pbox_client *c, struct pbox_req *r, uint32_t s, uint8_t flags);
/* A SPARSE RESULT that passed the header checks, for r's round: every
 * record checked, then each new one scattered into r's buffer. */
void sparse_result(pbox_client *c, struct pbox_req *r, const struct wire_msg *m,
		   const uint8_t *payload, uint64_t now);

/* ---- pmtu.c: the automatic MTU ------------------------------------------ */

/* The route's MTU toward dst (IP_MTU of a connected socket). 0 or PBOX_ESYS. */
int pmtu_route(const struct sockaddr_in *dst, uint32_t *mtu, char *err, size_t errlen);
/* mtu lowered to the smallest route MTU toward the box's addresses. */
uint32_t pmtu_route_min(const struct sockaddr_in *eps, unsigned neps, uint32_t mtu);
/* A full-segment PROBE for mtu to every box address came back through fd
 * (within ~0.6 s): 0, else PBOX_ETIMEDOUT. */
int pmtu_confirm(int fd, const struct sockaddr_in *eps, unsigned neps, uint32_t mtu);

/* ---- ps_rpc.c: PS reads and writes through the control connection ----- */

#define PS_RPC_PIECE 8192 /* floats per key_read / key_write (a JSON line
			     holds 64 KiB) */
/* Start r (a PS read or write on its READY PS key): its count and part
 * checked against the key's (else r finishes with PBOX_EINVAL), then its
 * first piece. */
void ps_rpc_start(pbox_client *c, struct pbox_req *r, uint64_t now);

/* ---- release.c: key_release on the progress thread ---------------------- */

/* Send r's key_release (r->kind REQ_RELEASE). */
void release_start(pbox_client *c, struct pbox_req *r, uint64_t now);
/* Its answer (p->req may be NULL: the request timed out). */
void release_answer(pbox_client *c, struct rpc_pending *p, const json_t *msg);
/* The answer (result or error) to piece p of a PS read/write. */
void ps_rpc_answer(pbox_client *c, struct rpc_pending *p, const json_t *msg, uint64_t now);

/* ---- progress.c -------------------------------------------------------- */

void *progress_main(void *arg);
/* Finish r with rc and a formatted message. */
void progress_finish(pbox_client *c, struct pbox_req *r, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Send method(params) for request r as pending p (its other fields set by
 * the caller), which then waits in c->x.rpcs for its answer. 0, or the
 * send's error: p freed and r finished with it. */
int progress_rpc_send(pbox_client *c, struct pbox_req *r, const char *method,
		      json_t *params, struct rpc_pending *p);
/* r ends without p's answer: a key_write's or key_release's keys stay
 * unsure until it comes (rpc_pending held). */
void progress_rpc_orphan(pbox_client *c, struct rpc_pending *p, const struct pbox_req *r);
/* Send r's key_declare (its key's first use, or again after EBUSY). */
void progress_declare(pbox_client *c, struct pbox_req *r);
/* Handle a request the thread has just taken from the submission queue. */
void progress_admit(pbox_client *c, struct pbox_req *r, uint64_t now);

/* ---- the client -------------------------------------------------------- */

struct pbox_client {
	/* set by pbox_connect, read-only afterwards */
	char control[128];
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
	/* progress thread */
	pthread_t thread;
	bool thread_started;
	struct xfer x;
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
					(topk_call.c) */
	struct client_gpu *gpu;      /* the device calls' state, from the first
					one on (gpu.h; set under lock) */
	/* written by the progress thread (relaxed atomics) */
	pbox_stats stats;
};

static inline void stat_add(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

static inline void stat_set(uint64_t *ctr, uint64_t v)
{
	__atomic_store_n(ctr, v, __ATOMIC_RELAXED);
}

/* ---- req.c / ps.c: submission ------------------------------------------ */

/* The checks of a call that need no connection, then those that need the
 * job's seg_bytes (count cut into segments of layout's elements: the
 * dtype, or f32 for PS keys). 0 or PBOX_EINVAL with c's message. */
int req_check(pbox_client *c, uint32_t key, const void *buf, size_t count,
	      pbox_dtype dtype, unsigned layout);
/* Queue r (filled by the caller) for the progress thread and wake it; r is
 * freed on failure. 0, or PBOX_EBUSY / the client's fatal code. */
int req_submit(pbox_client *c, struct pbox_req *r);
/* A zeroed request of kind for key, or NULL with PBOX_ENOMEM's message
 * set on c. */
struct pbox_req *req_new(pbox_client *c, uint32_t key, uint8_t kind);
/* Whether a call on key is submitted and not finished (under c->lock). */
bool req_key_busy_locked(const pbox_client *c, uint32_t key);
/* Free a request and what it owns. */
void req_free(struct pbox_req *r);
/* Free c's top-k states (pbox_close). */
void topk_free_all(pbox_client *c);
/* A released key (pbox_release_keys): its host top-k state goes (size,
 * residual, momentum), unless a call on it is selecting. */
void topk_forget_key(pbox_client *c, uint32_t key);
/* A released key: what the client kept of it beside the key table goes
 * (the device state of gpu_forget_key, the host top-k state). */
void release_forget_key(pbox_client *c, uint32_t key);
/* The learning rate PS pushes of key carry (pbox_set_lr; 0 if never set),
 * under c->lock. */
float ps_lr_locked(const pbox_client *c, uint32_t key);
/* key_declare's name of an optimizer kind ("sgd", "adam", "adamw"; "?"). */
const char *ps_optim_name(uint32_t kind);
/* State planes the box keeps for o (dataplane/optim.c optim_planes): SGD
 * 1 with momentum (the momentum buffer), else 0; Adam(W) 2. */
unsigned ps_optim_planes(const pbox_optim *o);
/* Whether now declares another optimizer than was: its kind or a
 * hyperparameter key_declare sends (not lr: it travels in each push);
 * the first difference named in out ("momentum 0.9, this call 0.8"). */
bool ps_optim_differs(const pbox_optim *was, const pbox_optim *now, char *out, size_t len);

/* ---- debug.c: PBOX_DEBUG diagnostics ----------------------------------- */

/* pbox_connect ended with rc: the join's summary (PBOX_DEBUG). */
void client_debug_joined(const pbox_client *c, int rc);
/* pbox_close: the client's summary (PBOX_DEBUG). */
void client_debug_closing(const pbox_client *c);

/* Wake the progress thread. */
void client_kick(pbox_client *c);

/* c's counters now (this library's whole pbox_stats). */
void client_stats(const pbox_client *c, pbox_stats *out);

#endif
