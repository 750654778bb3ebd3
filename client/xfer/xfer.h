/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xfer.h - the progress thread and its transfer engine: the xfer room
 * (client/xfer/), above core and transport. progress.c runs the thread's
 * loop (the eventfd, the control connection, the transport), declares
 * keys and dispatches to the kinds of call through their req_op;
 * xfer.c streams a request's segments within a window, takes RESULTs and
 * retransmits (recovery.h's estimators); sparse_xfer.c packs and unpacks
 * sparse keys' records (docs/protocol.md).
 */
#ifndef PBOX_CLIENT_XFER_XFER_H
#define PBOX_CLIENT_XFER_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "client/core/client.h"
#include "client/core/req.h"
#include "client/transport/transport.h"
#include "client/xfer/recovery.h"
#include "common/clock.h"
#include "common/wire.h"

#define XFER_TX_BURST       256    /* datagrams handed to the transport at once */
#define XFER_RX_BURST       TP_RX_BURST /* datagrams taken from it at once */
#define XFER_WIN_MIN        64     /* floor of the BDP window (segments) */
/* Window slots beyond opts.window, for sparse keys' records: they are
 * small, so their window is counted in bytes (cwnd x seg_bytes) and many
 * more of them are in flight at once. */
#define XFER_SPARSE_SLOTS   16384
#define XFER_RTO_MIN_US     5000   /* floor of the adaptive timeout */
#define XFER_RTO_MAX_US     1000000 /* cap of the adaptive timeout */
/* Cap of a segment's back-off while the box is silent (or rto, if larger):
 * 200 ms leaves 20+ tries in the shortest heartbeat timeout a box allows
 * (docs/reliability.md). A segment the box has (WAIT) is paced by
 * XFER_WAIT_MAX_US instead. */
#define XFER_BACKOFF_MAX_US 200000
/* Cap of the pause a WAIT sets (the time the round has been open): while a
 * late rank holds a round for minutes, each waiting segment asks at most
 * every 2 s (no storm), and a RESULT lost after it came is asked for
 * again within 2 s. */
#define XFER_WAIT_MAX_US    2000000
/* A call that waits this long for late ranks says so once at
 * PBOX_DEBUG=INFO, naming them. */
#define XFER_LATE_NOTE_US   1000000
/* A call whose contribution the box has (WAIT) gives the box this long
 * past its timeout_ms to abort the job naming the late ranks before it
 * fails PBOX_ETIMEDOUT on its own. */
#define XFER_WAIT_GRACE_MS  3000
#define XFER_HEARTBEAT_MS   CLIENT_HEARTBEAT_MS
/* The progress loop's sleep while device chunks are being copied to the
 * host (their events have no fd: struct client_ext staging_poll). */
#define XFER_STAGING_POLL_NS 20000
#define ABORT_GRACE_MS      300    /* wait for job_aborted's reason after ERROR */
#define REDECLARE_MS        2      /* a key being released: declare again after */

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


/* Everything the progress thread owns besides the sockets. */
struct xfer {
	struct xslot *slots;         /* opts.window */
	uint64_t redeclare_ns;       /* earliest req redeclare_ns, 0 = none */
	struct seg_window win;
	struct pbox_req *act_head, *act_tail;
	uint64_t next_retx_ns;       /* earliest slot deadline, UINT64_MAX none */
	uint64_t abort_seen_ns;      /* first ERROR packet, 0 none */
	uint64_t heartbeat_ns;       /* next heartbeat on the control connection */
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
	uint32_t staging;            /* active device calls with chunks not yet
				        on the host: the loop polls their events
				        (client_ext staging_poll) */
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
	/* resume.c: rejoining after the control connection was lost */
	uint8_t rc_state;            /* 1 while reconnecting */
	uint32_t rc_tries;
	uint32_t rc_backoff_ms;
	uint64_t rc_since_ns;        /* the loss */
	uint64_t rc_next_ns;         /* the next try */
	char rc_why[CLIENT_MSG_LEN]; /* what ended the connection */
	uint32_t finals;             /* keys with FINAL pushes unanswered */
};

/* c->x made for a window of opts.window segments (timeouts from
 * opts.rto_ms): 0 or PBOX_ENOMEM. */
int xfer_init(pbox_client *c);
/* Free c->x (NULL: nothing). */
void xfer_free(pbox_client *c);

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
/* The box dropped the job's open rounds (job_reset: a lost rank was
 * replaced). A call whose round every segment of its key is done with at
 * the box (done: {key, round} pairs) goes on: its lost RESULTs are still
 * answered; every other call fails PBOX_EAGAIN with msg. Every key's next
 * round is base + 1 (a PS key's an init round that keeps the box's
 * weights: pbox_ps_init again). */
void xfer_job_reset(pbox_client *c, const char *msg, uint32_t base,
		    const uint32_t (*done)[2], size_t n);
/* Fail the client with a socket error recorded during I/O, if any. */
void xfer_apply_pending(pbox_client *c);
/* Declare r's key again in REDECLARE_MS (the box is still removing it). */
void xfer_redeclare_later(pbox_client *c, struct pbox_req *r, uint64_t now);
/* Poll timeout in ms until the next timer. */
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

/* ---- sparse_xfer.c: sparse keys' packets (docs/protocol.md) ------------ */

/* Payload bytes of segment s's record of r (a sparse call). */
uint32_t sparse_rec_bytes(const struct pbox_req *r, uint32_t s);
/* Free the sparse packets' buffers (xfer_free). */
void sparse_free(struct xfer *x);
/* Whether another sparse record may be in flight to endpoint ep: fewer
 * than half the box's slots on its lcore, over that lcore's endpoints on
 * every port (each open segment round takes one, and the other ranks may
 * lag); false if the buffers cannot be had. */
bool sparse_room(pbox_client *c, unsigned ep);
/* Queue segment s of r (a sparse call) with flags: its record joins the
 * packet being filled for its endpoint, or starts one. */
void sparse_send(pbox_client *c, struct pbox_req *r, uint32_t s, uint8_t flags);
/* A SPARSE RESULT that passed the header checks, for r's round: every
 * record checked, then each new one scattered into r's buffer. */
void sparse_result(pbox_client *c, struct pbox_req *r, const struct wire_msg *m,
		   const uint8_t *payload, uint64_t now);

/* Send every segment of r in flight again now (its key resumed at a
 * rejoined box: resume.c), with a fresh back-off. */
void xfer_resend_all(pbox_client *c, struct pbox_req *r, uint64_t now);

/* ---- resume.c: after the control connection was lost ------------------- */

/* Whether ks's calls can resume at a rejoined box (a dense key every rank
 * gets the whole result of); such keys keep a shadow when PBOX_RESUME. */
bool resume_key_ok(const struct key_state *ks);
/* The control connection ended (why): start reconnecting, true; false if
 * PBOX_RESUME is off (the caller fails the calls). */
bool resume_begin(pbox_client *c, const char *why, uint64_t now);
/* While reconnecting: the next try if due (rejoins, or fails every call
 * once the timeout passed). */
void resume_poll(pbox_client *c, uint64_t now);
/* The answer to a key_declare sent by a rejoin (ks->resuming), parsed into
 * *l: ks takes it (a resumed key: if it is the layout it had, and its
 * results go out as FINAL pushes). 0, or PBOX_ENOMEM. */
int resume_declared(pbox_client *c, struct key_state *ks, struct seg_layout *l, uint64_t now);
/* Send the FINAL pushes that are due. */
void resume_finals(pbox_client *c, uint64_t now);
/* A RESULT or ERROR m for ks (may be NULL): clears the FINAL push it
 * answers; true if m was only that (ERROR STALE), nothing more to do. */
bool resume_answered(pbox_client *c, struct key_state *ks, const struct wire_msg *m);
/* ms until resume's next timer, or -1 for none. */
int resume_poll_ms(const pbox_client *c, uint64_t now);

/* ---- progress.c -------------------------------------------------------- */

void *progress_main(void *arg);
/* Finish r with rc and a formatted message. */
void progress_finish(pbox_client *c, struct pbox_req *r, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Send method(params) for request r as pending p (its other fields set by
 * the caller), which then waits in c->rpcs for its answer; its answer goes to
 * r->op->answer. 0, or the
 * send's error: p freed and r finished with it. */
int progress_rpc_send(pbox_client *c, struct pbox_req *r, const char *method,
		      json_t *params, struct rpc_pending *p);
/* r ends without p's answer: the keys of a call that changes the box
 * (req_op.changes_box) stay unsure until it comes (rpc_pending held). */
void progress_rpc_orphan(pbox_client *c, struct rpc_pending *p, const struct pbox_req *r);
/* The start of a call that streams its round (req_op.start NULL): its
 * count and dtype checked against its key's declaration (else r finishes
 * with PBOX_EINVAL), then xfer_start. */
void xfer_start_checked(pbox_client *c, struct pbox_req *r, uint64_t now);
/* Send r's key_declare (its key's first use, or again after EBUSY). */
void progress_declare(pbox_client *c, struct pbox_req *r);
/* Handle a request the thread has just taken from the submission queue. */
void progress_admit(pbox_client *c, struct pbox_req *r, uint64_t now);

#endif
