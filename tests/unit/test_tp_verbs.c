/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tp_verbs.c - the verbs transport (client/transport/tp_verbs.c, verbs_dev.c)
 * on a fake RDMA device, since this machine has none (and no rxe).
 *
 * The fake replaces libibverbs at the link boundary: the exported verbs
 * are wrapped (-Wl,--wrap=ibv_open_device,... in the Makefile), and the
 * ones rdma-core inlines into the caller (ibv_post_send, ibv_poll_cq,
 * ibv_req_notify_cq, ibv_create_flow, ibv_query_port, ...) reach the fake
 * through the ops of the context it hands out (struct ibv_context.ops and
 * struct verbs_context), as a provider's would. The device's sysfs
 * directory (ibdev_path) is a temporary one with device/net/<ifname>.
 * netpath_resolve is wrapped too: no route or ARP entry is needed, and the
 * interfaces it names (pbxv0, pbxv1) exist nowhere, so no other transport
 * tried by `auto` can act on a real interface of the machine.
 *
 * The fake records every send work request (the frame in its buffer, its
 * flags) and lets a test complete sends and inject received frames (built
 * with rawframe_build, as the box would send them) into the posted
 * receive buffers, raising a completion event when the CQ is armed. In
 * "wire" mode it is a NIC on loopback: sent frames go out as UDP
 * datagrams from the transport's reserved port, datagrams arriving there
 * come back as frames, so a whole allreduce runs against the in-process
 * box (box_inproc.h) through the verbs code.
 *
 * GPUDirect: the fake keeps a table of the memory regions it handed out
 * (ibv_reg_mr, and ibv_reg_dmabuf_mr, wrapped too) and checks every piece
 * of every send against it, as a NIC's memory protection would. "Device
 * memory" (a range the test names, or the fake GPU library's) registers
 * by address only with F.peermem set, as nvidia-peermem allows; the
 * device-to-host staging's absence is read from the fake GPU's trace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include "client/gpu/gpu.h"
#include "client/ops/ops.h"
#include "client/transport/rawframe.h"
#include "client/transport/transport.h"
#include "common/frame.h"
#include "common/gpu_ops.h"
#include "include/pbox_cuda.h"
#include "tests/unit/fake_gpu.h"
#include "common/wire.h"
#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define LOG_MAX   2048           /* sends recorded */
#define RQ_MAX    4096           /* posted receives the fake holds */
#define CQ_MAX    4096

/* Addresses (RFC 2544 benchmarking range; nothing is sent to them). */
#define OUR_IP    "198.18.0.2"
#define BOX_IP    "198.18.0.1"
#define BOX_IP2   "198.18.0.3"
static const uint8_t OUR_MAC[6] = { 0x02, 0, 0, 0, 0, 0x02 };

/* ---- the fake device ------------------------------------------------------ */

struct fake_cq {
	struct ibv_cq cq;
	struct ibv_wc q[CQ_MAX];
	unsigned head, tail;      /* entries q[head..tail) */
	bool armed;
};

struct fake_ctx {
	struct verbs_context vc;  /* vc.context is what the library sees */
};

struct sent {
	uint8_t frame[2048];
	uint32_t len;
	unsigned flags;
	uint64_t wr_id;
	int nsge;
	uint32_t lkey[2];
};

#define MR_MAX 64

/* A memory region the fake handed out. */
struct fake_mr {
	struct ibv_mr *mr;
	uintptr_t lo, hi;
	bool dmabuf;
};

static struct fake {
	pthread_mutex_t mu;
	/* what the device is */
	int ndev;
	struct ibv_device dev[2];
	char sysfs[64];           /* temporary ibdev_path root */
	int qp_errno, flow_errno;
	int fail_step, step;      /* the fail_step-th fallible call fails (0: none) ... */
	int fail_errno;           /* ... with this errno */
	unsigned refuse_at;       /* post_send refuses (ENOMEM) its refuse_at-th request on (0: none) */
	uint32_t raw_caps;        /* raw_packet_caps */
	uint64_t cap_flags;       /* device_cap_flags */
	enum ibv_port_state port_state;
	uint8_t link_layer;
	int path_rc;              /* netpath_resolve's answer */
	char ifname[IF_NAMESIZE];
	in_addr_t other_if_ip;    /* an endpoint that routes through pbxv1 */
	/* live objects */
	int n_ctx, n_pd, n_chan, n_cq, n_qp, n_mr, n_flow;
	struct ibv_qp *qp;
	struct fake_cq *scq, *rcq;
	struct ibv_comp_channel *chan;
	int chan_wr;              /* write end of the channel's pipe */
	/* what the library did */
	enum ibv_qp_type qp_type;
	struct { enum ibv_qp_state state; int mask; uint8_t port; } mod[4];
	int nmod;
	uint8_t flow_attr[256];
	unsigned n_arm, n_events, n_acked, n_post_send, n_post_recv;
	struct sent *log;
	unsigned nsent;           /* sends posted (all; the first LOG_MAX logged) */
	uint64_t signaled[CQ_MAX]; /* wr_ids of signaled sends not yet completed */
	unsigned nsignaled;
	bool auto_complete;       /* complete signaled sends at once */
	struct { uint64_t wr_id, addr; uint32_t len; } rq[RQ_MAX];
	unsigned rq_head, rq_tail;
	uint64_t reposted[RQ_MAX]; /* wr_ids of the last post_recv call */
	unsigned nreposted;
	/* wire mode: a NIC on loopback */
	bool wire;
	bool verbs_opening;       /* between ibv_get_device_list and the port's reservation */
	pthread_t opener;         /* the thread that listed the devices */
	int wire_fd;              /* the transport's reserved UDP socket */
	uint16_t wire_port;
	pthread_t nic;
	volatile int nic_stop;
	unsigned rx_no_buffer;
	/* GPUDirect */
	int max_sge;              /* device_attr.max_sge */
	unsigned qp_send_sge;     /* what the QP was made with */
	struct fake_mr mrs[MR_MAX];
	uintptr_t dev_lo, dev_hi; /* "device memory" named by a test */
	const struct pbox_gpu_ops *gpu; /* or the fake GPU library's */
	bool peermem;             /* ibv_reg_mr takes device memory */
	int dmabuf_errno;         /* ibv_reg_dmabuf_mr fails with it */
	unsigned n_dmabuf_reg, n_dev_sends;
	bool dereg_while_pending; /* an MR went while a signaled send had not completed */
	bool watch_progress;      /* a client's progress thread runs: */
	pthread_t progress;       /* ... this one */
	bool dereg_off_progress;  /* a GPU MR went on another thread meanwhile */
} F;

/* malloc fails on demand: the next request of fail_malloc_size bytes on
 * the thread that set it (fail_malloc_hits counts them); all others go to
 * the allocator beneath (libc's, or the sanitizer's). */
static __thread size_t fail_malloc_size;
static __thread unsigned fail_malloc_hits;

void *malloc(size_t n)
{
	static void *(*next)(size_t);

	if (fail_malloc_size && n == fail_malloc_size) {
		fail_malloc_size = 0;
		fail_malloc_hits++;
		errno = ENOMEM;
		return NULL;
	}
	if (!next)
		next = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	return next(n);
}

static void lock(void) { pthread_mutex_lock(&F.mu); }
static void unlock(void) { pthread_mutex_unlock(&F.mu); }

/* Whether this call, one that can fail, is the one F.fail_step names. */
static bool fail_now(void)
{
	return F.fail_step && ++F.step == F.fail_step;
}

static void cq_push(struct fake_cq *c, const struct ibv_wc *w)
{
	assert_true(c->tail - c->head < CQ_MAX);
	c->q[c->tail++ % CQ_MAX] = *w;
	if (c->armed && c->cq.channel) {
		c->armed = false;
		assert_int_equal(write(F.chan_wr, "e", 1), 1);
	}
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fake_cq *c = (struct fake_cq *)cq;
	int got = 0;

	lock();
	while (got < n && c->head < c->tail)
		wc[got++] = c->q[c->head++ % CQ_MAX];
	unlock();
	return got;
}

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	assert_int_equal(solicited, 0);
	if (fail_now())
		return F.fail_errno;
	lock();
	((struct fake_cq *)cq)->armed = true;
	F.n_arm++;
	unlock();
	return 0;
}

/* A frame as a NIC would send it: UDP payload to its destination. */
static void wire_send(const uint8_t *frame, uint32_t len)
{
	struct frame_info fi;
	const uint8_t *ip = frame + FRAME_ETH_LEN;
	uint32_t dst;

	memcpy(&dst, ip + 16, 4);
	if (frame_parse(frame, len, ntohl(dst), &fi) != FRAME_UDP)
		return;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(fi.dst_port),
				  .sin_addr.s_addr = dst };
	if (sendto(F.wire_fd, fi.payload, fi.payload_len, 0, (struct sockaddr *)&to,
		   sizeof(to)) < 0) {
		/* a full socket buffer loses it, as a wire would */
	}
}

/* A piece of a send: inside a region the fake handed out (under lock). */
static void mr_check(uint32_t lkey, uint64_t addr, uint32_t len)
{
	for (unsigned i = 0; i < MR_MAX; i++)
		if (F.mrs[i].mr && F.mrs[i].mr->lkey == lkey) {
			assert_true(addr >= F.mrs[i].lo && addr + len <= F.mrs[i].hi);
			return;
		}
	fail_msg("a send's piece has lkey %u, which no region has", lkey);
}

static void mr_add(struct ibv_mr *mr, uintptr_t lo, size_t len, bool dmabuf)
{
	for (unsigned i = 0; i < MR_MAX; i++)
		if (!F.mrs[i].mr) {
			F.mrs[i] = (struct fake_mr){ mr, lo, lo + len, dmabuf };
			return;
		}
	fail_msg("more than %d memory regions", MR_MAX);
}

/* Device memory: the test's range or the fake GPU's. */
static bool is_dev(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	return (a >= F.dev_lo && a < F.dev_hi) || (F.gpu && F.gpu->is_device(p) == 1);
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	*bad = NULL;
	lock();
	F.n_post_send++;
	for (unsigned k = 1; wr; wr = wr->next, k++) {
		static uint8_t f[4096];
		uint32_t len = 0;
		if (F.refuse_at && k >= F.refuse_at) {   /* the send queue is full */
			*bad = wr;
			unlock();
			return ENOMEM;
		}
		assert_true(wr->num_sge >= 1 && (unsigned)wr->num_sge <= F.qp_send_sge);
		assert_int_equal(wr->opcode, IBV_WR_SEND);
		for (int k = 0; k < wr->num_sge; k++) {   /* gather, as the NIC would */
			const struct ibv_sge *g = &wr->sg_list[k];
			mr_check(g->lkey, g->addr, g->length);
			assert_true(len + g->length <= sizeof(f));
			memcpy(f + len, (const void *)(uintptr_t)g->addr, g->length);
			len += g->length;
		}
		if (wr->num_sge == 2) {
			F.n_dev_sends++;
			assert_true(wr->send_flags & IBV_SEND_SIGNALED);
			assert_true(wr->send_flags & IBV_SEND_IP_CSUM);
		}
		if (F.nsent < LOG_MAX) {
			struct sent *s = &F.log[F.nsent];
			assert_true(len <= sizeof(s->frame));
			memcpy(s->frame, f, len);
			s->len = len;
			s->flags = wr->send_flags;
			s->wr_id = wr->wr_id;
			s->nsge = wr->num_sge;
			s->lkey[0] = wr->sg_list[0].lkey;
			s->lkey[1] = wr->num_sge > 1 ? wr->sg_list[1].lkey : 0;
		}
		F.nsent++;
		if (F.wire)
			wire_send(f, len);
		if (wr->send_flags & IBV_SEND_SIGNALED) {
			if (F.auto_complete) {
				struct ibv_wc w = { .wr_id = wr->wr_id, .status = IBV_WC_SUCCESS,
						    .opcode = IBV_WC_SEND };
				cq_push(F.scq, &w);
			} else {
				assert_true(F.nsignaled < CQ_MAX);
				F.signaled[F.nsignaled++] = wr->wr_id;
			}
		}
	}
	unlock();
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = NULL;
	if (fail_now()) {
		*bad = wr;
		return F.fail_errno;
	}
	lock();
	F.n_post_recv++;
	F.nreposted = 0;
	for (; wr; wr = wr->next) {
		assert_int_equal(wr->num_sge, 1);
		assert_true(F.rq_tail - F.rq_head < RQ_MAX);
		F.rq[F.rq_tail % RQ_MAX].wr_id = wr->wr_id;
		F.rq[F.rq_tail % RQ_MAX].addr = wr->sg_list[0].addr;
		F.rq[F.rq_tail % RQ_MAX].len = wr->sg_list[0].length;
		F.rq_tail++;
		F.reposted[F.nreposted++ % RQ_MAX] = wr->wr_id;
	}
	unlock();
	return 0;
}

static int fake_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *pa,
			   size_t len)
{
	(void)ctx;
	assert_int_equal(port, 1);
	if (fail_now())
		return F.fail_errno;
	memset(pa, 0, len);
	pa->state = F.port_state;
	pa->link_layer = F.link_layer;
	pa->active_mtu = IBV_MTU_1024;
	return 0;
}

static int fake_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
				struct ibv_device_attr_ex *a, size_t len)
{
	(void)ctx; (void)in;
	if (fail_now())
		return F.fail_errno;
	memset(a, 0, len);
	a->orig_attr.phys_port_cnt = 1;
	a->orig_attr.max_qp_wr = 32768;
	a->orig_attr.max_cqe = 65535;
	a->orig_attr.device_cap_flags = (unsigned)F.cap_flags;
	a->orig_attr.max_sge = F.max_sge;
	a->raw_packet_caps = F.raw_caps;
	return 0;
}

static void *nic_main(void *arg);

static struct ibv_flow *fake_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *attr)
{
	if (F.flow_errno || fail_now()) {
		errno = F.flow_errno ? F.flow_errno : F.fail_errno;
		return NULL;
	}
	assert_true(attr->size <= sizeof(F.flow_attr));
	memcpy(F.flow_attr, attr, attr->size);
	struct ibv_flow *fl = calloc(1, sizeof(*fl));
	assert_non_null(fl);
	fl->context = qp->context;
	F.n_flow++;
	if (F.wire) {
		F.nic_stop = 0;
		assert_int_equal(pthread_create(&F.nic, NULL, nic_main, NULL), 0);
	}
	return fl;
}

static int fake_destroy_flow(struct ibv_flow *fl)
{
	if (F.wire) {
		F.nic_stop = 1;
		pthread_join(F.nic, NULL);
	}
	free(fl);
	F.n_flow--;
	return 0;
}

/* ---- the wrapped exported verbs ------------------------------------------- */

struct ibv_device **__wrap_ibv_get_device_list(int *n);
void __wrap_ibv_free_device_list(struct ibv_device **list);
const char *__wrap_ibv_get_device_name(struct ibv_device *d);
struct ibv_context *__wrap_ibv_open_device(struct ibv_device *d);
int __wrap_ibv_close_device(struct ibv_context *ctx);
int __wrap_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a);
struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *ctx);
int __wrap_ibv_dealloc_pd(struct ibv_pd *pd);
struct ibv_comp_channel *__wrap_ibv_create_comp_channel(struct ibv_context *ctx);
int __wrap_ibv_destroy_comp_channel(struct ibv_comp_channel *ch);
struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
				    struct ibv_comp_channel *ch, int vec);
int __wrap_ibv_destroy_cq(struct ibv_cq *cq);
struct ibv_qp *__wrap_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a);
int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask);
int __wrap_ibv_destroy_qp(struct ibv_qp *qp);
struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx);
void __wrap_ibv_ack_cq_events(struct ibv_cq *cq, unsigned n);
int __wrap_netpath_resolve(const struct sockaddr_in *dst, int wait_ms, struct netpath *np,
			   char *err, size_t errlen);
int __real_udp_reserve_port(int *fd, uint16_t *port, char *err, size_t errlen);
int __wrap_udp_reserve_port(int *fd, uint16_t *port, char *err, size_t errlen);

struct ibv_device **__wrap_ibv_get_device_list(int *n)
{
	struct ibv_device **l = calloc((size_t)F.ndev + 1, sizeof(*l));

	assert_non_null(l);
	lock();
	F.verbs_opening = true;
	F.opener = pthread_self();
	unlock();
	for (int i = 0; i < F.ndev; i++)
		l[i] = &F.dev[i];
	*n = F.ndev;
	return l;
}

void __wrap_ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *__wrap_ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

struct ibv_context *__wrap_ibv_open_device(struct ibv_device *d)
{
	if (fail_now()) {
		errno = F.fail_errno;
		return NULL;
	}
	struct fake_ctx *fc = calloc(1, sizeof(*fc));

	assert_non_null(fc);
	struct ibv_context *ctx = &fc->vc.context;
	ctx->device = d;
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = fake_poll_cq;
	ctx->ops.req_notify_cq = fake_req_notify_cq;
	ctx->ops.post_send = fake_post_send;
	ctx->ops.post_recv = fake_post_recv;
	fc->vc.sz = sizeof(fc->vc);
	fc->vc.query_port = fake_query_port;
	fc->vc.query_device_ex = fake_query_device_ex;
	fc->vc.ibv_create_flow = fake_create_flow;
	fc->vc.ibv_destroy_flow = fake_destroy_flow;
	F.n_ctx++;
	return ctx;
}

int __wrap_ibv_close_device(struct ibv_context *ctx)
{
	free(ctx ? (struct fake_ctx *)((uint8_t *)ctx - offsetof(struct fake_ctx, vc.context)) :
	     NULL);
	F.n_ctx--;
	return 0;
}

int __wrap_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	(void)ctx; (void)a;
	fail_msg("ibv_query_device: the library should use ibv_query_device_ex");
	return EOPNOTSUPP;
}

struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *ctx)
{
	if (fail_now()) {
		errno = F.fail_errno;
		return NULL;
	}
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	assert_non_null(pd);
	pd->context = ctx;
	F.n_pd++;
	return pd;
}

int __wrap_ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	F.n_pd--;
	return 0;
}

struct ibv_comp_channel *__wrap_ibv_create_comp_channel(struct ibv_context *ctx)
{
	if (fail_now()) {
		errno = F.fail_errno;
		return NULL;
	}
	struct ibv_comp_channel *ch = calloc(1, sizeof(*ch));
	int p[2];

	assert_non_null(ch);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	ch->context = ctx;
	ch->fd = p[0];
	F.chan_wr = p[1];
	F.chan = ch;
	F.n_chan++;
	return ch;
}

int __wrap_ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	close(ch->fd);
	close(F.chan_wr);
	F.chan_wr = -1;
	F.chan = NULL;
	free(ch);
	F.n_chan--;
	return 0;
}

struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
				    struct ibv_comp_channel *ch, int vec)
{
	if (fail_now()) {
		errno = F.fail_errno;
		return NULL;
	}
	struct fake_cq *c = calloc(1, sizeof(*c));

	(void)vec;
	assert_non_null(c);
	assert_true(cqe > 0 && cqe <= CQ_MAX);
	c->cq.context = ctx;
	c->cq.channel = ch;
	c->cq.cq_context = cq_ctx;
	c->cq.cqe = cqe;
	if (ch)
		F.rcq = c;
	else
		F.scq = c;
	F.n_cq++;
	return &c->cq;
}

int __wrap_ibv_destroy_cq(struct ibv_cq *cq)
{
	struct fake_cq *c = (struct fake_cq *)cq;

	if (c == F.rcq)
		F.rcq = NULL;
	if (c == F.scq)
		F.scq = NULL;
	free(c);
	F.n_cq--;
	return 0;
}

struct ibv_qp *__wrap_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	if (F.qp_errno || fail_now()) {
		errno = F.qp_errno ? F.qp_errno : F.fail_errno;
		return NULL;
	}
	struct ibv_qp *qp = calloc(1, sizeof(*qp));
	assert_non_null(qp);
	F.qp_type = a->qp_type;
	F.qp_send_sge = a->cap.max_send_sge;
	assert_true(a->cap.max_send_sge >= 1 && (int)a->cap.max_send_sge <= F.max_sge);
	assert_int_equal(a->sq_sig_all, 0);
	assert_true(a->cap.max_send_wr >= 64 && a->cap.max_recv_wr >= 64);
	qp->context = pd->context;
	qp->pd = pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->qp_type = a->qp_type;
	qp->state = IBV_QPS_RESET;
	F.qp = qp;
	F.n_qp++;
	return qp;
}

int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if (fail_now())
		return F.fail_errno;
	assert_true(F.nmod < 4);
	F.mod[F.nmod].state = a->qp_state;
	F.mod[F.nmod].mask = mask;
	F.mod[F.nmod].port = (mask & IBV_QP_PORT) ? a->port_num : 0;
	F.nmod++;
	qp->state = a->qp_state;
	return 0;
}

int __wrap_ibv_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	F.qp = NULL;
	F.n_qp--;
	return 0;
}

static uint32_t next_key = 100;

struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	(void)access;
	if (fail_now()) {
		errno = F.fail_errno;
		return NULL;
	}
	if (is_dev(addr) && !F.peermem) {
		errno = EFAULT;   /* the RDMA core cannot pin GPU memory by itself */
		return NULL;
	}
	struct ibv_mr *mr = calloc(1, sizeof(*mr));
	assert_non_null(mr);
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	lock();
	mr->lkey = mr->rkey = next_key++;
	mr_add(mr, (uintptr_t)addr, len, false);
	unlock();
	F.n_mr++;
	return mr;
}

struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access);
struct ibv_mr *__wrap_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access)
{
	(void)access;
	assert_true(fcntl(fd, F_GETFD) >= 0);   /* a live descriptor, closed after */
	assert_int_equal(offset, 0);
	assert_int_equal(iova % 4096, 0);
	assert_int_equal(len % 4096, 0);
	if (F.dmabuf_errno) {
		errno = F.dmabuf_errno;
		return NULL;
	}
	struct ibv_mr *mr = calloc(1, sizeof(*mr));
	assert_non_null(mr);
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = (void *)(uintptr_t)iova;
	mr->length = len;
	lock();
	mr->lkey = mr->rkey = next_key++;
	mr_add(mr, (uintptr_t)iova, len, true);
	F.n_dmabuf_reg++;
	unlock();
	F.n_mr++;
	return mr;
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	lock();
	for (unsigned i = 0; i < MR_MAX; i++)
		if (F.mrs[i].mr == mr) {
			/* a GPU region goes only once its sends completed */
			if (F.mrs[i].dmabuf || is_dev(mr->addr)) {
				F.dereg_while_pending |= F.nsignaled > 0;
				/* the send queue (and its reaping) is the progress thread's */
				F.dereg_off_progress |= F.watch_progress &&
							!pthread_equal(pthread_self(), F.progress);
			}
			F.mrs[i].mr = NULL;
		}
	unlock();
	free(mr);
	F.n_mr--;
	return 0;
}

int __wrap_ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx)
{
	char b;

	assert_true(fcntl(ch->fd, F_GETFL) & O_NONBLOCK); /* the library never blocks here */
	if (read(ch->fd, &b, 1) != 1)
		return -1;
	*cq = &F.rcq->cq;
	*cq_ctx = F.rcq->cq.cq_context;
	F.n_events++;
	return 0;
}

void __wrap_ibv_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	assert_ptr_equal(cq, &F.rcq->cq);
	F.n_acked += n;
}

static void ip_mac(in_addr_t ip, uint8_t mac[6])
{
	const uint8_t *b = (const uint8_t *)&ip;

	mac[0] = 0x02; mac[1] = 0xbb; mac[2] = b[0]; mac[3] = b[1]; mac[4] = b[2]; mac[5] = b[3];
}

int __wrap_netpath_resolve(const struct sockaddr_in *dst, int wait_ms, struct netpath *np,
			   char *err, size_t errlen)
{
	(void)wait_ms;
	memset(np, 0, sizeof(*np));
	if (F.path_rc) {
		snprintf(err, errlen, "no IPv4 route to the box (fake)");
		return F.path_rc;
	}
	snprintf(np->ifname, sizeof(np->ifname), "%s",
		 dst->sin_addr.s_addr == F.other_if_ip ? "pbxv1" : F.ifname);
	np->ifindex = 2;
	np->mtu = 1500;
	np->src.s_addr = dst->sin_addr.s_addr == htonl(INADDR_LOOPBACK) ? dst->sin_addr.s_addr :
			 inet_addr(OUR_IP);
	np->nexthop = dst->sin_addr;
	memcpy(np->src_mac, OUR_MAC, 6);
	ip_mac(dst->sin_addr.s_addr, np->dst_mac);
	return 0;
}

int __wrap_udp_reserve_port(int *fd, uint16_t *port, char *err, size_t errlen)
{
	int rc = __real_udp_reserve_port(fd, port, err, errlen);

	/* the verbs transport's (its thread listed the devices first), not
	 * another client's udp transport, opened by a thread of the same test
	 * at the same time */
	lock();
	if (F.verbs_opening && pthread_equal(F.opener, pthread_self())) {
		F.wire_fd = rc == 0 ? *fd : -1;
		F.wire_port = rc == 0 ? *port : 0;
		F.verbs_opening = false;
	}
	unlock();
	return rc;
}

/* ---- what tests do to the fake --------------------------------------------- */

/* Put a frame into the oldest posted receive buffer and complete it. */
static bool inject(const uint8_t *frame, uint32_t len, enum ibv_wc_status st, unsigned wc_flags)
{
	lock();
	if (F.rq_head == F.rq_tail) {
		F.rx_no_buffer++;
		unlock();
		return false;
	}
	unsigned i = F.rq_head++ % RQ_MAX;
	assert_true(len <= F.rq[i].len);
	memcpy((void *)(uintptr_t)F.rq[i].addr, frame, len);
	struct ibv_wc w = { .wr_id = F.rq[i].wr_id, .status = st, .opcode = IBV_WC_RECV,
			    .byte_len = len, .wc_flags = wc_flags };
	cq_push(F.rcq, &w);
	unlock();
	return true;
}

/* The NIC completes every signaled send so far. */
static void complete_sends(void)
{
	lock();
	for (unsigned i = 0; i < F.nsignaled; i++) {
		struct ibv_wc w = { .wr_id = F.signaled[i], .status = IBV_WC_SUCCESS,
				    .opcode = IBV_WC_SEND };
		cq_push(F.scq, &w);
	}
	F.nsignaled = 0;
	unlock();
}

static unsigned rq_posted(void)
{
	lock();
	unsigned n = F.rq_tail - F.rq_head;
	unlock();
	return n;
}

/* Wire mode: datagrams reaching the reserved port come back as frames. */
static void *nic_main(void *arg)
{
	static uint8_t dg[9216], frame[9216 + RAWFRAME_HDRS];
	(void)arg;

	while (!F.nic_stop) {
		struct pollfd p = { .fd = F.wire_fd, .events = POLLIN };
		if (poll(&p, 1, 5) <= 0)
			continue;
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(F.wire_fd, dg, sizeof(dg), MSG_DONTWAIT, (struct sockaddr *)&from,
				     &fl);
		if (n <= 0)
			continue;
		uint8_t smac[6];
		ip_mac(from.sin_addr.s_addr, smac);
		frame_udp_headers(frame, OUR_MAC, smac, ntohl(from.sin_addr.s_addr),
				  INADDR_LOOPBACK, ntohs(from.sin_port), F.wire_port, (size_t)n);
		memcpy(frame + RAWFRAME_HDRS, dg, (size_t)n);
		frame_udp_csum(frame, 0, frame_csum_partial(dg, (size_t)n, 0));
		inject(frame, (uint32_t)n + RAWFRAME_HDRS, IBV_WC_SUCCESS, 0);
	}
	return NULL;
}

/* ---- set-up ----------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

/* A device named name whose sysfs directory lists interface ifname. */
static void add_device(const char *name, const char *ifname)
{
	struct ibv_device *d = &F.dev[F.ndev++];
	char p[512];

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->ibdev_path, sizeof(d->ibdev_path), "%s/%s", F.sysfs, name);
	assert_int_equal(mkdir(d->ibdev_path, 0755), 0);
	snprintf(p, sizeof(p), "%s/device", d->ibdev_path);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/device/net", d->ibdev_path);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/device/net/%s", d->ibdev_path, ifname);
	assert_int_equal(mkdir(p, 0755), 0);
}

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	pthread_mutex_init(&F.mu, NULL);
	F.log = calloc(LOG_MAX, sizeof(*F.log));
	assert_non_null(F.log);
	snprintf(F.sysfs, sizeof(F.sysfs), "/tmp/pbox-verbs-XXXXXX");
	if (!mkdtemp(F.sysfs)) {   /* no teardown follows a failed setup */
		print_error("mkdtemp %s: %s\n", F.sysfs, strerror(errno));
		free(F.log);
		F.log = NULL;
		return -1;
	}
	F.port_state = IBV_PORT_ACTIVE;
	F.link_layer = IBV_LINK_LAYER_ETHERNET;
	F.chan_wr = F.wire_fd = -1;
	F.auto_complete = true;
	F.max_sge = 30;
	snprintf(F.ifname, sizeof(F.ifname), "pbxv0");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	/* Everything the library opened is released (ASan checks the memory). */
	assert_int_equal(F.n_ctx, 0);
	assert_int_equal(F.n_pd, 0);
	assert_int_equal(F.n_chan, 0);
	assert_int_equal(F.n_cq, 0);
	assert_int_equal(F.n_qp, 0);
	assert_int_equal(F.n_mr, 0);
	assert_int_equal(F.n_flow, 0);
	nftw(F.sysfs, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(F.log);
	pthread_mutex_destroy(&F.mu);
	return 0;
}

static struct sockaddr_in ep_addr(const char *ip, uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port),
				     .sin_addr.s_addr = inet_addr(ip) };
}

static struct sockaddr_in EPS[2];

static struct tp_config config(unsigned neps)
{
	EPS[0] = ep_addr(BOX_IP, 7471);
	EPS[1] = ep_addr(BOX_IP2, 7472);
	return (struct tp_config){ .eps = EPS, .neps = neps,
				   .max_dgram = WIRE_HDR_LEN + WIRE_MAX_PAYLOAD, .mtu = 1500 };
}

static void open_ok(struct transport *t, unsigned neps)
{
	struct tp_config cfg = config(neps);
	char err[256] = "";

	add_device("mlx5_0", "pbxv0");
	memset(t, 0, sizeof(*t));
	int rc = transport_open(t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err));
	if (rc != 0)
		fail_msg("transport_open: %d %s", rc, err);
}

/* Ring sizes and buffer length, as the info line states them. */
static void rings(const struct transport *t, unsigned *ntx, unsigned *nrx, unsigned *len)
{
	const char *s = strstr(t->info, "raw packet QP, ");

	assert_non_null(s);
	assert_int_equal(sscanf(s, "raw packet QP, %u send + %u receive buffers of %u B", ntx, nrx,
				len), 3);
}

static struct tp_counters counters(const struct transport *t)
{
	struct tp_counters c;

	t->ops->counters(t, &c);
	return c;
}

/* A RESULT datagram from the box's endpoint to us, as a frame. */
static uint32_t box_frame(uint8_t *out, const struct transport *t, uint16_t seg, uint16_t to_port,
			  const uint8_t *payload, uint32_t len)
{
	struct netpath box = { .src.s_addr = inet_addr(BOX_IP) };
	struct sockaddr_in us = { .sin_family = AF_INET, .sin_port = htons(to_port),
				  .sin_addr = t->src };
	struct wire_msg h = { .type = WIRE_RESULT, .dtype = 0, .count = (uint16_t)(len / 4),
			      .job = 7, .token = 99, .key = 3, .seg = seg, .round = 1 };

	ip_mac(box.src.s_addr, box.src_mac);
	memcpy(box.dst_mac, OUR_MAC, 6);
	return (uint32_t)rawframe_build(out, &box, 7471, &us, &h, payload, len);
}

/* ---- device discovery -------------------------------------------------------- */

static void open__no_device__enotsup(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_ENOTSUP);
	assert_string_equal(err, "no RDMA device (ibv_get_device_list found none)");
	assert_null(t.ops);
}

static void open__auto_without_device__says_why_verbs_was_skipped(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	/* No path for the raw transports either: xdp never touches an
	 * interface of this machine, auto ends on udp. */
	F.path_rc = PBOX_ENOTSUP;
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_AUTO, &cfg, err, sizeof(err)), 0);
	assert_int_not_equal(t.kind, PBOX_TRANSPORT_VERBS);
	assert_non_null(strstr(t.info, "verbs skipped: no RDMA device (ibv_get_device_list "
			       "found none)"));
	transport_close(&t);
}

static void open__device_on_other_interface__enotsup_names_it(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	add_device("mlx5_0", "pbxv1");
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_ENOTSUP);
	assert_string_equal(err, "no RDMA device on interface pbxv0 (found mlx5_0 on pbxv1)");
}

static void open__second_device_on_our_interface__chosen(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	add_device("mlx5_0", "pbxv1");
	add_device("mlx5_1", "pbxv0");
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)), 0);
	assert_non_null(strstr(t.info, "verbs on mlx5_1 port 1 (pbxv0), raw packet QP"));
	transport_close(&t);
}

static void open__raw_qp_without_cap_net_raw__eperm(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	add_device("mlx5_0", "pbxv0");
	F.qp_errno = EPERM;
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_EPERM);
	assert_non_null(strstr(err, "raw packet QP on mlx5_0 needs CAP_NET_RAW"));
	assert_null(t.ops);
	/* teardown: PD, channel, CQs and device were released */
}

static void open__flow_rule_refused__eperm(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	add_device("mlx5_0", "pbxv0");
	F.flow_errno = EPERM;
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_EPERM);
	assert_non_null(strstr(err, "ibv_create_flow"));
	assert_non_null(strstr(err, "CAP_NET_RAW"));
}

static void open__port_not_ethernet_or_down__enotsup(void **state)
{
	struct transport t;
	struct tp_config cfg = config(1);
	char err[256] = "";

	(void)state;
	add_device("mlx5_0", "pbxv0");
	F.link_layer = IBV_LINK_LAYER_INFINIBAND;
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_ENOTSUP);
	assert_non_null(strstr(err, "mlx5_0 port 1 (pbxv0) is not Ethernet"));
	F.link_layer = IBV_LINK_LAYER_ETHERNET;
	F.port_state = IBV_PORT_DOWN;
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_ENOTSUP);
	assert_non_null(strstr(err, "is not active"));
}

static void open__endpoints_on_two_interfaces__enotsup_names_both(void **state)
{
	struct transport t;
	struct tp_config cfg = config(2);
	char err[256] = "";

	(void)state;
	add_device("mlx5_0", "pbxv0");
	F.other_if_ip = inet_addr(BOX_IP2);
	assert_int_equal(transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err)),
			 PBOX_ENOTSUP);
	assert_non_null(strstr(err, BOX_IP " via pbxv0, " BOX_IP2 " via pbxv1"));
}

/* Every call of the open that can fail, failed in turn (the device, its
 * queries, PD, channel, both CQs, QP and its three state changes, both
 * rings' registrations, the receives' posting, the CQ's arming, the flow
 * rule): each fails the open with a message, and undoes every verbs
 * object made before it (the teardown's checks, after each one). */
static void open__each_failing_step_undoes_the_rest(void **state)
{
	struct tp_config cfg = config(1);
	int steps = 0;

	(void)state;
	add_device("mlx5_0", "pbxv0");
	F.fail_errno = EIO;
	for (int k = 1;; k++) {
		struct transport t;
		char err[256] = "";
		F.step = 0;
		F.fail_step = k;
		F.nmod = 0;
		int rc = transport_open(&t, PBOX_TRANSPORT_VERBS, &cfg, err, sizeof(err));
		if (rc == 0) {   /* beyond the last call that can fail */
			transport_close(&t);
			break;
		}
		steps++;
		if (rc != PBOX_ESYS || !strstr(err, "mlx5_0"))
			fail_msg("call %d failing: %d '%s'", k, rc, err);
		assert_null(t.ops);
		assert_int_equal(F.n_ctx + F.n_pd + F.n_chan + F.n_cq + F.n_qp + F.n_mr + F.n_flow, 0);
	}
	F.fail_step = 0;
	assert_int_equal(steps, 16);
}

static void open__qp_flow_and_receives_set_up(void **state)
{
	struct transport t;
	unsigned ntx, nrx, len;
	int fds[TP_MAX_FDS];

	(void)state;
	open_ok(&t, 1);
	rings(&t, &ntx, &nrx, &len);
	assert_non_null(strstr(t.info, "verbs on mlx5_0 port 1 (pbxv0), raw packet QP"));
	assert_non_null(strstr(t.info, "send checksums in software"));
	assert_int_equal(len, 1536);          /* 1500 + 14, rounded up to 64 */
	/* the reserved port and our address are what job_join announces */
	assert_int_equal(t.port, F.wire_port);
	assert_int_not_equal(t.port, 0);
	assert_int_equal(t.src.s_addr, inet_addr(OUR_IP));
	/* a raw packet QP: port in INIT, then state changes only */
	assert_int_equal(F.qp_type, IBV_QPT_RAW_PACKET);
	assert_int_equal(F.nmod, 3);
	assert_int_equal(F.mod[0].state, IBV_QPS_INIT);
	assert_int_equal(F.mod[0].mask, IBV_QP_STATE | IBV_QP_PORT);
	assert_int_equal(F.mod[0].port, 1);
	assert_int_equal(F.mod[1].state, IBV_QPS_RTR);
	assert_int_equal(F.mod[1].mask, IBV_QP_STATE);
	assert_int_equal(F.mod[2].state, IBV_QPS_RTS);
	assert_int_equal(F.mod[2].mask, IBV_QP_STATE);
	/* every receive buffer posted, in one call; the CQ armed */
	assert_int_equal(rq_posted(), nrx);
	assert_int_equal(F.n_post_recv, 1);
	assert_true(F.rcq->armed);
	/* the flow rule: our MAC, IPv4, our address, UDP to our port */
	const struct ibv_flow_attr *fa = (const void *)F.flow_attr;
	const struct ibv_flow_spec_eth *eth = (const void *)(fa + 1);
	const struct ibv_flow_spec_ipv4 *ip = (const void *)((const uint8_t *)eth + eth->size);
	const struct ibv_flow_spec_tcp_udp *udp = (const void *)((const uint8_t *)ip + ip->size);
	assert_int_equal(fa->type, IBV_FLOW_ATTR_NORMAL);
	assert_int_equal(fa->num_of_specs, 3);
	assert_int_equal(fa->port, 1);
	assert_int_equal(fa->size, sizeof(*fa) + eth->size + ip->size + udp->size);
	assert_int_equal(eth->type, IBV_FLOW_SPEC_ETH);
	assert_int_equal(eth->size, sizeof(*eth));
	assert_memory_equal(eth->val.dst_mac, OUR_MAC, 6);
	assert_memory_equal(eth->mask.dst_mac, "\xff\xff\xff\xff\xff\xff", 6);
	assert_int_equal(eth->val.ether_type, htons(0x0800));
	assert_int_equal(ip->type, IBV_FLOW_SPEC_IPV4);
	assert_int_equal(ip->val.dst_ip, inet_addr(OUR_IP));
	assert_int_equal(ip->mask.dst_ip, 0xFFFFFFFFu);
	assert_int_equal(ip->mask.src_ip, 0);
	assert_int_equal(udp->type, IBV_FLOW_SPEC_UDP);
	assert_int_equal(udp->val.dst_port, htons(t.port));
	assert_int_equal(udp->mask.dst_port, 0xFFFF);
	/* the progress thread sleeps on the completion channel */
	assert_int_equal(t.ops->poll_fds(&t, fds), 1);
	assert_int_equal(fds[0], F.chan->fd);
	transport_close(&t);
}

/* ---- send --------------------------------------------------------------------- */

/* n datagrams alternating over the endpoints, payload i bytes of i; in
 * registered GPU memory if mkey is set. */
static void send_burst_mkey(struct transport *t, unsigned neps, unsigned n, unsigned first_seg,
			    uint8_t payloads[][1024], int expect, uint32_t mkey)
{
	static struct tp_pkt p[1024];

	for (unsigned i = 0; i < n; i++) {
		unsigned plen = 4 * (1 + (first_seg + i) % 200);
		memset(payloads[i], (int)(first_seg + i), plen);
		p[i] = (struct tp_pkt){
			.hdr = { .type = WIRE_PUSH, .dtype = 0, .rank = 1, .count = (uint16_t)(plen / 4),
				 .job = 7, .token = 99, .key = 3, .seg = first_seg + i, .round = 2 },
			.payload = payloads[i], .len = plen, .ep = (uint16_t)(i % neps), .mkey = mkey,
		};
	}
	char err[256] = "";
	int rc = t->ops->tx_burst(t, p, n, err, sizeof(err));
	if (rc != expect)
		fail_msg("tx_burst: %d, expected %d (%s)", rc, expect, err);
}

static void send_burst(struct transport *t, unsigned neps, unsigned n, unsigned first_seg,
		       uint8_t payloads[][1024], int expect)
{
	send_burst_mkey(t, neps, n, first_seg, payloads, expect, 0);
}

/* Sent frame k is the datagram of segment seg to endpoint ep. */
static void check_frame(const struct transport *t, const struct sent *s, unsigned seg, unsigned ep,
			bool nic_csum)
{
	const struct sockaddr_in *to = &EPS[ep];
	struct frame_info fi;
	struct wire_msg h;
	uint8_t mac[6], want[1024];
	unsigned plen = 4 * (1 + seg % 200);

	assert_int_equal(frame_parse(s->frame, s->len, ntohl(to->sin_addr.s_addr), &fi), FRAME_UDP);
	ip_mac(to->sin_addr.s_addr, mac);
	assert_memory_equal(s->frame, mac, 6);              /* Ethernet dst: the box's MAC */
	assert_memory_equal(s->frame + 6, OUR_MAC, 6);      /* src: ours */
	assert_int_equal(fi.src_ip, ntohl(inet_addr(OUR_IP)));
	assert_int_equal(fi.src_port, t->port);
	assert_int_equal(fi.dst_port, ntohs(to->sin_port));
	assert_int_equal(s->len, RAWFRAME_HDRS + WIRE_HDR_LEN + plen);
	/* software checksums are complete; with the NIC's offload the UDP
	 * field holds the pseudo header's sum for the NIC to finish */
	assert_int_equal(frame_verify(s->frame, s->len, FRAME_CSUM_IP), 0);
	assert_int_equal(frame_verify(s->frame, s->len, FRAME_CSUM_IP | FRAME_CSUM_L4),
			 nic_csum ? FRAME_CSUM_UNFILLED : 0);
	assert_int_equal(!!(s->flags & IBV_SEND_IP_CSUM), nic_csum);
	assert_int_equal(fi.payload_len, WIRE_HDR_LEN + plen);
	assert_int_equal(wire_decode(fi.payload, fi.payload_len, &h), 0);
	assert_int_equal(h.type, WIRE_PUSH);
	assert_int_equal(h.seg, seg);
	assert_int_equal(h.rank, 1);
	assert_int_equal(h.job, 7);
	assert_true(h.token == 99);
	assert_int_equal(h.round, 2);
	assert_int_equal(h.count, plen / 4);
	memset(want, (int)seg, plen);
	assert_memory_equal(fi.payload + WIRE_HDR_LEN, want, plen);
}

static uint8_t PAY[1024][1024];

static void tx__burst_becomes_one_chain_of_correct_frames(void **state)
{
	struct transport t;

	(void)state;
	open_ok(&t, 2);
	send_burst(&t, 2, 40, 0, PAY, 40);
	assert_int_equal(F.n_post_send, 1);   /* one ibv_post_send per burst */
	assert_int_equal(F.nsent, 40);
	for (unsigned k = 0; k < 40; k++) {
		check_frame(&t, &F.log[k], k, k % 2, false);
		/* one send in 32 asks for a completion */
		assert_int_equal(!!(F.log[k].flags & IBV_SEND_SIGNALED), k == 31);
	}
	struct tp_counters c = counters(&t);
	assert_int_equal(c.tx_dgrams, 40);
	assert_int_equal(c.tx_dropped, 0);
	assert_int_equal(c.wakeups, 0);       /* doorbells, no system calls */
	transport_close(&t);
}

static void tx__nic_checksums_where_offered(void **state)
{
	struct transport t;

	(void)state;
	F.raw_caps = IBV_RAW_PACKET_CAP_IP_CSUM;
	F.cap_flags = IBV_DEVICE_RAW_IP_CSUM;
	open_ok(&t, 2);
	assert_non_null(strstr(t.info, "send checksums by the NIC"));
	send_burst(&t, 2, 8, 100, PAY, 8);
	for (unsigned k = 0; k < 8; k++)
		check_frame(&t, &F.log[k], 100 + k, k % 2, true);
	transport_close(&t);
}

static void tx__ring_full_drops_and_counts(void **state)
{
	struct transport t;
	unsigned ntx, nrx, len;

	(void)state;
	F.auto_complete = false;              /* the NIC holds every send */
	open_ok(&t, 1);
	rings(&t, &ntx, &nrx, &len);
	unsigned sent = 0;
	while (sent + 256 <= ntx) {
		send_burst(&t, 1, 256, sent, PAY, 256);
		sent += 256;
	}
	/* 10 more than the ring holds: those are dropped after a short wait */
	send_burst(&t, 1, ntx - sent + 10, sent, PAY, (int)(ntx - sent));
	struct tp_counters c = counters(&t);
	assert_int_equal(c.tx_dgrams, ntx);
	assert_int_equal(c.tx_dropped, 10);
	assert_int_equal(F.nsent, ntx);
	/* the NIC finishes: every buffer is free again */
	complete_sends();
	send_burst(&t, 1, 5, 0, PAY, 5);
	c = counters(&t);
	assert_int_equal(c.tx_dgrams, ntx + 5);
	assert_int_equal(c.tx_dropped, 10);
	check_frame(&t, &F.log[ntx], 0, 0, false);
	transport_close(&t);
}

static void tx__failed_send_completion__esys(void **state)
{
	struct transport t;
	struct tp_pkt p = { .hdr = { .type = WIRE_PUSH, .count = 1 }, .payload = "abcd", .len = 4 };
	char err[256] = "";

	(void)state;
	open_ok(&t, 1);
	struct ibv_wc w = { .wr_id = 0, .status = IBV_WC_LOC_PROT_ERR, .opcode = IBV_WC_SEND,
			    .vendor_err = 0x33 };
	lock();
	cq_push(F.scq, &w);
	unlock();
	assert_int_equal(t.ops->tx_burst(&t, &p, 1, err, sizeof(err)), PBOX_ESYS);
	assert_non_null(strstr(err, "a send on mlx5_0 port 1 failed"));
	assert_non_null(strstr(err, "0x33"));
	transport_close(&t);
}

static void tx__datagram_larger_than_mtu__einval(void **state)
{
	struct transport t;
	static uint8_t big[1500];
	struct tp_pkt p = { .hdr = { .type = WIRE_PUSH, .count = 375 }, .payload = big,
			    .len = sizeof(big) };
	char err[256] = "";

	(void)state;
	open_ok(&t, 1);
	assert_int_equal(t.ops->tx_burst(&t, &p, 1, err, sizeof(err)), PBOX_EINVAL);
	assert_non_null(strstr(err, "does not fit the MTU"));
	transport_close(&t);
}

/* ---- receive ------------------------------------------------------------------ */

static void rx__good_frames_returned_bad_ones_counted(void **state)
{
	struct transport t;
	struct tp_dgram d[16];
	uint8_t f[7][2048], pay[256];
	uint32_t fl[7];
	char err[256] = "";

	(void)state;
	open_ok(&t, 1);
	for (unsigned i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i * 7);
	fl[0] = box_frame(f[0], &t, 10, t.port, pay, 256);        /* good */
	fl[1] = box_frame(f[1], &t, 11, t.port, pay, 256);        /* payload corrupted */
	f[1][fl[1] - 3] ^= 0x40;
	fl[2] = box_frame(f[2], &t, 12, (uint16_t)(t.port + 1), pay, 256); /* wrong port */
	fl[3] = box_frame(f[3], &t, 13, t.port, pay, 256);        /* truncated */
	fl[3] = 30;
	fl[4] = box_frame(f[4], &t, 14, t.port, pay, 256);        /* NIC: length error */
	fl[5] = box_frame(f[5], &t, 15, t.port, pay, 64);         /* good */
	fl[6] = box_frame(f[6], &t, 16, t.port, pay, 128);        /* NIC verified: not summed again */
	f[6][RAWFRAME_HDRS - 2] ^= 0x01;                          /* (its UDP checksum is off) */
	for (unsigned i = 0; i < 7; i++)
		assert_true(inject(f[i], fl[i], i == 4 ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS,
				   i == 6 ? IBV_WC_IP_CSUM_OK : 0));

	int n = t.ops->rx_burst(&t, d, 16, err, sizeof(err));
	assert_int_equal(n, 3);
	uint32_t want_len[3] = { 256, 64, 128 };
	uint32_t want_seg[3] = { 10, 15, 16 };
	for (int i = 0; i < n; i++) {
		struct wire_msg h;
		assert_int_equal(d[i].len, WIRE_HDR_LEN + want_len[i]);
		assert_int_equal(wire_decode(d[i].data, d[i].len, &h), 0);
		assert_int_equal(h.type, WIRE_RESULT);
		assert_int_equal(h.seg, want_seg[i]);
		assert_memory_equal(d[i].data + WIRE_HDR_LEN, pay, want_len[i]);
	}
	struct tp_counters c = counters(&t);
	assert_int_equal(c.rx_dgrams, 3);
	assert_int_equal(c.rx_bad, 4);
	transport_close(&t);
}

static void rx__buffers_reposted_at_the_next_call(void **state)
{
	struct transport t;
	struct tp_dgram d[8];
	uint8_t f[2048], pay[64], copy[4][128];
	unsigned ntx, nrx, len;
	char err[256] = "";

	(void)state;
	open_ok(&t, 1);
	rings(&t, &ntx, &nrx, &len);
	memset(pay, 0x5a, sizeof(pay));
	uint64_t taken[4];
	lock();
	for (unsigned i = 0; i < 4; i++)
		taken[i] = F.rq[(F.rq_head + i) % RQ_MAX].wr_id;
	unlock();
	for (unsigned i = 0; i < 4; i++) {
		uint32_t n = box_frame(f, &t, (uint16_t)i, t.port, pay, sizeof(pay));
		assert_true(inject(f, n, IBV_WC_SUCCESS, 0));
	}
	assert_int_equal(rq_posted(), nrx - 4);
	assert_int_equal(t.ops->rx_burst(&t, d, 8, err, sizeof(err)), 4);
	for (unsigned i = 0; i < 4; i++)
		memcpy(copy[i], d[i].data, d[i].len);
	/* handed out: not posted again until the next rx_burst */
	assert_int_equal(rq_posted(), nrx - 4);
	unsigned calls = F.n_post_recv;
	for (unsigned i = 0; i < 4; i++)
		assert_memory_equal(copy[i], d[i].data, d[i].len);
	assert_int_equal(t.ops->rx_burst(&t, d, 8, err, sizeof(err)), 0);
	assert_int_equal(rq_posted(), nrx);
	assert_int_equal(F.n_post_recv, calls + 1);     /* one chain */
	assert_int_equal(F.nreposted, 4);
	for (unsigned i = 0; i < 4; i++)
		assert_true(F.reposted[i] == taken[i]);
	/* an empty call posts nothing */
	assert_int_equal(t.ops->rx_burst(&t, d, 8, err, sizeof(err)), 0);
	assert_int_equal(F.n_post_recv, calls + 1);
	transport_close(&t);
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void rx__completion_channel_wakes_and_is_rearmed(void **state)
{
	struct transport t;
	struct tp_dgram d[8];
	uint8_t f[2048], pay[32] = { 1 };
	int fds[TP_MAX_FDS];
	char err[256] = "";

	(void)state;
	open_ok(&t, 1);
	unsigned arms = F.n_arm;
	assert_int_equal(t.ops->poll_fds(&t, fds), 1);
	assert_false(readable(fds[0]));
	for (unsigned i = 0; i < 5; i++) {
		uint32_t n = box_frame(f, &t, (uint16_t)i, t.port, pay, sizeof(pay));
		assert_true(inject(f, n, IBV_WC_SUCCESS, 0));
	}
	assert_true(readable(fds[0]));            /* one event for the armed CQ */
	/* room for 2: the rest stays, and poll_fds says to come back at once */
	assert_int_equal(t.ops->rx_burst(&t, d, 2, err, sizeof(err)), 2);
	assert_int_equal(F.n_events, 1);
	assert_int_equal(F.n_acked, 1);
	assert_false(readable(fds[0]));
	assert_int_equal(t.ops->poll_fds(&t, fds), 2);
	assert_true(readable(fds[1]));
	assert_int_equal(t.ops->rx_burst(&t, d, 2, err, sizeof(err)), 2);
	assert_int_equal(t.ops->poll_fds(&t, fds), 2);
	/* the last one; the CQ is empty, armed again, and polled once more */
	assert_int_equal(t.ops->rx_burst(&t, d, 2, err, sizeof(err)), 1);
	assert_int_equal(F.n_arm, arms + 1);
	assert_true(F.rcq->armed);
	assert_int_equal(t.ops->poll_fds(&t, fds), 1);
	assert_false(readable(fds[0]));
	/* a new frame raises a new event */
	uint32_t n = box_frame(f, &t, 9, t.port, pay, sizeof(pay));
	assert_true(inject(f, n, IBV_WC_SUCCESS, 0));
	assert_true(readable(fds[0]));
	assert_int_equal(t.ops->rx_burst(&t, d, 8, err, sizeof(err)), 1);
	assert_int_equal(F.n_acked, 2);
	assert_int_equal(F.n_arm, arms + 2);
	transport_close(&t);
}

static void rx__flushed_receive__esys(void **state)
{
	struct transport t;
	struct tp_dgram d[8];
	uint8_t f[2048], pay[32] = { 0 };
	char err[256] = "";

	(void)state;
	open_ok(&t, 1);
	uint32_t n = box_frame(f, &t, 1, t.port, pay, sizeof(pay));
	assert_true(inject(f, n, IBV_WC_WR_FLUSH_ERR, 0));
	assert_int_equal(t.ops->rx_burst(&t, d, 8, err, sizeof(err)), PBOX_ESYS);
	assert_non_null(strstr(err, "error state"));
	transport_close(&t);
}

static void close__releases_everything_after_traffic(void **state)
{
	struct transport t;
	struct tp_dgram d[8];
	uint8_t f[2048], pay[32] = { 0 };
	char err[256] = "";

	(void)state;
	open_ok(&t, 2);
	send_burst(&t, 2, 100, 0, PAY, 100);
	uint32_t n = box_frame(f, &t, 1, t.port, pay, sizeof(pay));
	assert_true(inject(f, n, IBV_WC_SUCCESS, 0));
	assert_int_equal(t.ops->rx_burst(&t, d, 8, err, sizeof(err)), 1);
	int fd = t.port ? F.wire_fd : -1;
	transport_close(&t);
	assert_null(t.ops);
	/* teardown checks the verbs objects; the reserved port is closed */
	assert_int_equal(fcntl(fd, F_GETFD), -1);
}

/* ---- a whole allreduce through the fake NIC ------------------------------------ */

static void allreduce__through_fake_nic_to_inproc_box(void **state)
{
	static float x[300000];
	struct box_inproc *b = box_inproc_new(2);
	pbox_opts o;
	pbox_client *c;
	pbox_stats st;

	(void)state;
	add_device("mlx5_0", "pbxv0");
	F.wire = true;
	box_inproc_start(b);
	pbox_opts_init(&o);
	o.transport = PBOX_TRANSPORT_VERBS;
	o.mtu = 1500;
	int rc = pbox_connect(b->addr, "verbs", 0, 1, &o, &c);
	if (rc != 0)
		fail_msg("pbox_connect: %s", pbox_last_error(c));
	assert_non_null(strstr(pbox_transport_info(c), "verbs on mlx5_0 port 1 (pbxv0)"));
	for (unsigned call = 0; call < 3; call++) {
		size_t count = call == 0 ? 1 : call == 1 ? 1000 : 300000;
		for (size_t i = 0; i < count; i++)
			x[i] = (float)(i % 1000) + (float)call;
		assert_int_equal(pbox_allreduce(c, call + 1, x, count, PBOX_F32), 0);
		for (size_t i = 0; i < count; i++)
			assert_true(x[i] == (float)(i % 1000) + (float)call);
	}
	pbox_get_stats(c, &st);
	assert_int_equal(st.transport, PBOX_TRANSPORT_VERBS);
	assert_int_equal(st.bad_packets, 0);
	assert_true(st.pkts_sent >= 300000 * 4 / 1500);
	assert_int_equal(F.nsent, st.pkts_sent - st.tx_dropped); /* every send was a frame */
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
}

/* ---- GPUDirect ---------------------------------------------------------------- */

/* "GPU memory" for the transport-level tests: 64 pages the fake treats as
 * device memory (ibv_reg_mr refuses it without F.peermem). */
static uint8_t DEVMEM[64][1024] __attribute__((aligned(4096)));

static void devmem_on(void)
{
	F.dev_lo = (uintptr_t)DEVMEM;
	F.dev_hi = (uintptr_t)DEVMEM + sizeof(DEVMEM);
	F.raw_caps = IBV_RAW_PACKET_CAP_IP_CSUM;
	F.cap_flags = IBV_DEVICE_RAW_IP_CSUM;
}

static int mem_reg(struct transport *t, int fd, struct tp_mem *m, char *err, size_t errlen)
{
	struct tp_mem_src src = { .base = DEVMEM, .size = sizeof(DEVMEM), .dmabuf_fd = fd };
	return t->ops->mem_reg(t, &src, m, err, errlen);
}

static void gpudirect__dmabuf_region_and_two_piece_sends(void **state)
{
	struct transport t;
	struct tp_mem m;
	char err[256] = "";
	int fd = memfd_create("dmabuf", MFD_CLOEXEC);

	(void)state;
	devmem_on();
	open_ok(&t, 2);
	int mrs = F.n_mr;
	assert_int_equal(F.qp_send_sge, 2);
	if (mem_reg(&t, fd, &m, err, sizeof(err)) != 0)
		fail_msg("mem_reg: %s", err);
	close(fd);
	assert_string_equal(m.how, "dma-buf");
	assert_int_equal(F.n_dmabuf_reg, 1);
	assert_int_equal(F.n_mr, mrs + 1);
	assert_true(m.mkey != 0);
	/* 8 datagrams from GPU memory, then 4 from the host */
	send_burst_mkey(&t, 2, 8, 100, DEVMEM, 8, m.mkey);
	send_burst(&t, 2, 4, 108, PAY, 4);
	for (unsigned k = 0; k < 12; k++) {
		check_frame(&t, &F.log[k], 100 + k, k % 2, true);   /* the NIC's checksums */
		assert_int_equal(F.log[k].nsge, k < 8 ? 2 : 1);
		if (k < 8) {
			/* headers from the ring, the payload read from the GPU */
			assert_int_equal(F.log[k].lkey[1], m.mkey);
			assert_true(F.log[k].flags & IBV_SEND_SIGNALED);
		}
	}
	assert_int_equal(F.n_dev_sends, 8);
	t.ops->mem_dereg(&t, &m);
	assert_int_equal(F.n_mr, mrs);
	assert_false(F.dereg_while_pending);
	transport_close(&t);
}

static void *complete_later(void *arg)
{
	(void)arg;
	usleep(50000);
	complete_sends();
	return NULL;
}

static void gpudirect__dereg_waits_for_the_nics_last_read(void **state)
{
	struct transport t;
	struct tp_mem m;
	char err[256] = "";
	pthread_t th;

	(void)state;
	devmem_on();
	open_ok(&t, 1);
	if (mem_reg(&t, memfd_create("dmabuf", MFD_CLOEXEC), &m, err, sizeof(err)) != 0)
		fail_msg("mem_reg: %s", err);
	F.auto_complete = false;
	send_burst_mkey(&t, 1, 3, 7, DEVMEM, 3, m.mkey);
	assert_int_equal(F.nsignaled, 3);            /* each GPU send asks for a completion */
	pthread_create(&th, NULL, complete_later, NULL);
	t.ops->mem_dereg(&t, &m);                    /* returns once they completed */
	pthread_join(th, NULL);
	assert_false(F.dereg_while_pending);
	assert_int_equal(F.nsignaled, 0);
	transport_close(&t);
}

/* A GPU send the device refuses (ibv_post_send ENOMEM: dropped and
 * counted) never reads the region: mem_dereg does not wait for it. It
 * waited VERBS_DEREG_WAIT_NS (1 s), the progress thread spinning, for a
 * completion that cannot come. */
static void gpudirect__dereg_does_not_wait_for_a_refused_send(void **state)
{
	struct transport t;
	struct tp_mem m;
	char err[256] = "";

	(void)state;
	devmem_on();
	open_ok(&t, 1);
	if (mem_reg(&t, memfd_create("dmabuf", MFD_CLOEXEC), &m, err, sizeof(err)) != 0)
		fail_msg("mem_reg: %s", err);
	F.refuse_at = 3;                             /* the third of three is refused */
	send_burst_mkey(&t, 1, 3, 7, DEVMEM, 2, m.mkey);
	assert_int_equal(counters(&t).tx_dropped, 1);
	F.refuse_at = 0;
	uint64_t t0 = clock_ns();
	t.ops->mem_dereg(&t, &m);                    /* the two posted ones completed */
	uint64_t took = clock_ns() - t0;
	if (took > 100000000)
		fail_msg("mem_dereg took %.2f s", (double)took / 1e9);
	assert_false(F.dereg_while_pending);
	/* a later GPU send still makes mem_dereg wait for it */
	F.auto_complete = false;
	if (mem_reg(&t, memfd_create("dmabuf", MFD_CLOEXEC), &m, err, sizeof(err)) != 0)
		fail_msg("mem_reg: %s", err);
	send_burst_mkey(&t, 1, 1, 10, DEVMEM, 1, m.mkey);
	pthread_t th;
	pthread_create(&th, NULL, complete_later, NULL);
	t.ops->mem_dereg(&t, &m);
	pthread_join(th, NULL);
	assert_false(F.dereg_while_pending);
	transport_close(&t);
}

static void gpudirect__peermem_when_dmabuf_refused(void **state)
{
	struct transport t;
	struct tp_mem m;
	char err[256] = "";

	(void)state;
	devmem_on();
	F.dmabuf_errno = EOPNOTSUPP;
	F.peermem = true;
	open_ok(&t, 1);
	if (mem_reg(&t, memfd_create("dmabuf", MFD_CLOEXEC), &m, err, sizeof(err)) != 0)
		fail_msg("mem_reg: %s", err);
	assert_string_equal(m.how, "nvidia-peermem");
	assert_int_equal(F.n_dmabuf_reg, 0);
	send_burst_mkey(&t, 1, 2, 0, DEVMEM, 2, m.mkey);
	assert_int_equal(F.n_dev_sends, 2);
	t.ops->mem_dereg(&t, &m);
	transport_close(&t);
}

/* mem_reg refuses with want in its message; the transport is closed. */
static void refused(struct transport *t, const char *want)
{
	struct tp_mem m;
	char err[512] = "";

	assert_int_equal(mem_reg(t, -1, &m, err, sizeof(err)), PBOX_ENOTSUP);
	if (!strstr(err, want))
		fail_msg("mem_reg said '%s', not '%s'", err, want);
	transport_close(t);
}

static void gpudirect__refused_without_checksum_offload(void **state)
{
	struct transport t;

	(void)state;
	/* the CPU would have to sum GPU memory */
	F.dev_lo = (uintptr_t)DEVMEM;
	F.dev_hi = F.dev_lo + sizeof(DEVMEM);
	open_ok(&t, 1);
	refused(&t, "IBV_SEND_IP_CSUM");
}

static void gpudirect__refused_with_sends_of_one_piece(void **state)
{
	struct transport t;

	(void)state;
	devmem_on();
	F.max_sge = 1;
	open_ok(&t, 1);
	assert_int_equal(F.qp_send_sge, 1);
	refused(&t, "gathers 1");
}

static void gpudirect__refused_without_dmabuf_or_peermem(void **state)
{
	struct transport t;
	struct tp_mem m;
	char err[512] = "";

	(void)state;
	devmem_on();
	F.dmabuf_errno = EOPNOTSUPP;
	open_ok(&t, 1);
	int mrs = F.n_mr;
	int fd = memfd_create("dmabuf", MFD_CLOEXEC);
	assert_int_equal(mem_reg(&t, fd, &m, err, sizeof(err)), PBOX_ENOTSUP);
	close(fd);
	assert_non_null(strstr(err, "ibv_reg_dmabuf_mr: Operation not supported"));
	assert_non_null(strstr(err, "is nvidia-peermem loaded?"));
	assert_int_equal(F.n_mr, mrs);               /* nothing left registered */
	transport_close(&t);
}

/* The fake GPU library beside this program, as libpbox will load it. */
static const struct pbox_gpu_ops *fake_gpu(void **h)
{
	static char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);

	assert_true(n > 0);
	path[n] = '\0';
	strcpy(strrchr(path, '/') + 1, "libpbox-gpu-fake.so");
	setenv("PBOX_GPU_LIB", path, 1);
	*h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!*h)
		fail_msg("dlopen %s: %s", path, dlerror());
	pbox_gpu_ops_fn get = (pbox_gpu_ops_fn)dlsym(*h, PBOX_GPU_SYMBOL);
	assert_non_null(get);
	const struct pbox_gpu_ops *ops = get();
	assert_int_equal(ops->init(), 0);
	return ops;
}

/* Wait for the legacy stream's work (the sum's copies back). */
static void stream0_sync(const struct pbox_gpu_ops *ops)
{
	void *e;

	assert_int_equal(ops->event_create(&e), 0);
	assert_int_equal(ops->event_record(e, NULL), 0);
	assert_int_equal(ops->event_sync(e), 0);
	ops->event_destroy(e);
}

struct host_rank {
	const char *addr;
	float *x;
	size_t count;
	unsigned calls;
	int rc;
};

/* Rank 1: host memory over the kernel's UDP, one allreduce per call. */
static void *host_rank_main(void *arg)
{
	struct host_rank *h = arg;
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	o.transport = PBOX_TRANSPORT_UDP;
	h->rc = pbox_connect(h->addr, "gdr", 1, 2, &o, &c);
	for (unsigned i = 0; h->rc == 0 && i < h->calls; i++) {
		for (size_t k = 0; k < h->count; k++)
			h->x[k] = (float)(k % 131) - 3.0f * (float)i;
		h->rc = pbox_allreduce(c, 1, h->x, h->count, PBOX_F32);
	}
	if (h->rc)
		fprintf(stderr, "host rank: %s\n", pbox_last_error(c));
	pbox_close(c);
	return NULL;
}

/* D2H copies in the fake GPU's trace. */
static size_t d2h_copies(fake_gpu_trace_fn trace)
{
	static struct fake_gpu_op ops[4096];
	size_t n = trace(ops, 4096), d = 0;

	for (size_t i = 0; i < n && i < 4096; i++)
		d += ops[i].kind == FAKE_D2H;
	return d;
}

/* The fake NIC in wire mode with checksum offload, the fake GPU's memory
 * as device memory, and the in-process box started. */
static void gdr_start(struct box_inproc *b, const struct pbox_gpu_ops *ops)
{
	F.gpu = ops;
	add_device("mlx5_0", "pbxv0");
	F.raw_caps = IBV_RAW_PACKET_CAP_IP_CSUM;
	F.cap_flags = IBV_DEVICE_RAW_IP_CSUM;
	F.wire = true;
	box_inproc_start(b);
}

/* Rank 0 of job "gdr" on the verbs transport. */
static pbox_client *gdr_rank0(struct box_inproc *b, int world)
{
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	o.transport = PBOX_TRANSPORT_VERBS;
	o.mtu = 1500;
	if (pbox_connect(b->addr, "gdr", 0, world, &o, &c) != 0)
		fail_msg("pbox_connect: %s", pbox_last_error(c));
	return c;
}

static void allreduce_dev__gpudirect_sends_from_gpu_memory(void **state)
{
	enum { N = 100000, CALLS = 3 };
	static float hx[N], got[N];
	struct box_inproc *b = box_inproc_new(2);
	struct host_rank hr = { .x = hx, .count = N, .calls = CALLS };
	pbox_dev_opts d;
	pbox_stats st;
	pbox_client *c;
	pthread_t th;
	void *h, *dev[2];

	(void)state;
	const struct pbox_gpu_ops *ops = fake_gpu(&h);
	fake_gpu_trace_fn trace = (fake_gpu_trace_fn)dlsym(h, "fake_gpu_trace");
	fake_gpu_trace_reset_fn trace_reset = (fake_gpu_trace_reset_fn)dlsym(h, "fake_gpu_trace_reset");
	assert_true(trace && trace_reset);
	gdr_start(b, ops);
	hr.addr = b->addr;
	pthread_create(&th, NULL, host_rank_main, &hr);
	c = gdr_rank0(b, 2);
	assert_int_equal(ops->dev_alloc(&dev[0], N * 4), 0);
	assert_int_equal(ops->dev_alloc(&dev[1], N * 4), 0);
	pbox_dev_opts_init(&d);
	d.gpudirect = PBOX_GPUDIRECT_ON;
	d.scale = 0.5;
	int mrs = F.n_mr;
	for (unsigned call = 0; call < CALLS; call++) {
		static float x[N];
		void *buf = dev[call == 2];   /* the third call: another buffer */
		for (size_t i = 0; i < N; i++)
			x[i] = (float)(i % 977) * 0.25f + (float)call;
		assert_int_equal(ops->memcpy_sync(buf, x, sizeof(x)), 0);
		trace_reset();
		int rc = pbox_allreduce_dev(c, 1, buf, N, PBOX_F32, NULL, &d);
		if (rc)
			fail_msg("pbox_allreduce_dev: %s", pbox_last_error(c));
		stream0_sync(ops);
		assert_int_equal(ops->memcpy_sync(got, buf, sizeof(got)), 0);
		for (size_t i = 0; i < N; i++)
			if (got[i] != (x[i] + ((float)(i % 131) - 3.0f * (float)call)) * 0.5f)
				fail_msg("call %u element %zu: %g", call, i, (double)got[i]);
		assert_int_equal(d2h_copies(trace), 0);     /* nothing staged to the host */
	}
	pthread_join(th, NULL);
	assert_int_equal(hr.rc, 0);
	pbox_get_stats(c, &st);
	assert_int_equal(st.gpu_direct_calls, CALLS);
	assert_int_equal(st.gpu_staged_calls, 0);
	assert_true(F.n_dev_sends >= CALLS * (N * 4 / 1500));
	assert_int_equal(F.n_dmabuf_reg, 2);            /* once per buffer, kept between calls */
	assert_int_equal(F.n_mr, mrs + 1);              /* the first one deregistered */
	assert_false(F.dereg_while_pending);
	pbox_close(c);
	ops->dev_free(dev[0]);
	ops->dev_free(dev[1]);
	F.gpu = NULL;
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
	dlclose(h);
}

/* A call on another buffer drops the key's registration of the last one
 * (gpu_direct_prepare, the caller's thread). Out of memory there, it was
 * deregistered at once on the caller's thread, whose mem_dereg reaps the
 * send CQ (tx_reap) while the progress thread may be doing the same in
 * tx_burst: a GPU registration goes on the progress thread only. */
static void allreduce_dev__gpudirect_out_of_memory_dereg_on_progress_thread(void **state)
{
	enum { N = 5000 };
	static float x[N];
	struct box_inproc *b = box_inproc_new(1);
	pbox_dev_opts d;
	pbox_client *c;
	void *h, *dev[2];

	(void)state;
	const struct pbox_gpu_ops *ops = fake_gpu(&h);
	gdr_start(b, ops);
	c = gdr_rank0(b, 1);
	F.progress = c->thread;
	F.watch_progress = true;
	for (size_t i = 0; i < N; i++)
		x[i] = (float)i;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ops->dev_alloc(&dev[i], N * 4), 0);
		assert_int_equal(ops->memcpy_sync(dev[i], x, sizeof(x)), 0);
	}
	pbox_dev_opts_init(&d);
	d.gpudirect = PBOX_GPUDIRECT_ON;
	if (pbox_allreduce_dev(c, 1, dev[0], N, PBOX_F32, NULL, &d) != 0)
		fail_msg("pbox_allreduce_dev: %s", pbox_last_error(c));
	stream0_sync(ops);
	int mrs = F.n_mr;
	/* the next call, on dev[1], with one gpu_mr's allocation failing */
	d.gpudirect = PBOX_GPUDIRECT_AUTO;
	fail_malloc_hits = 0;
	fail_malloc_size = sizeof(struct gpu_mr);
	int rc = pbox_allreduce_dev(c, 1, dev[1], N, PBOX_F32, NULL, &d);
	fail_malloc_size = 0;
	if (rc != 0)
		fail_msg("pbox_allreduce_dev out of memory: %s", pbox_last_error(c));
	stream0_sync(ops);
	assert_int_equal(fail_malloc_hits, 1);
	assert_true(F.n_mr <= mrs);               /* dev[0]'s registration went */
	bool off = F.dereg_off_progress;
	F.watch_progress = false;                 /* pbox_close deregisters after it */
	pbox_close(c);
	ops->dev_free(dev[0]);
	ops->dev_free(dev[1]);
	F.gpu = NULL;
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
	dlclose(h);
	if (off)
		fail_msg("a GPU memory region was deregistered on the caller's thread while the "
			 "progress thread ran");
	assert_false(F.dereg_while_pending);
}

/* AUTO stages what cannot go direct and says why; ON refuses it. */
static void allreduce_dev__gpudirect_auto_stages_on_refuses(void **state)
{
	enum { N = 5000 };
	static float x[N], got[N];
	struct box_inproc *b = box_inproc_new(1);
	pbox_dev_opts d;
	pbox_stats st;
	pbox_client *c;
	void *h, *dev;

	(void)state;
	const struct pbox_gpu_ops *ops = fake_gpu(&h);
	gdr_start(b, ops);
	c = gdr_rank0(b, 1);
	assert_int_equal(ops->dev_alloc(&dev, N * 4), 0);
	for (size_t i = 0; i < N; i++)
		x[i] = (float)i;
	assert_int_equal(ops->memcpy_sync(dev, x, sizeof(x)), 0);
	pbox_dev_opts_init(&d);
	/* a bf16 wire: the cast runs in the copy to the host */
	d.wire_dtype = PBOX_BF16;
	d.gpudirect = PBOX_GPUDIRECT_ON;
	assert_int_equal(pbox_allreduce_dev(c, 1, dev, N, PBOX_F32, NULL, &d), PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "the wire dtype (bf16) is not the buffer's"));
	setenv("PBOX_GPUDIRECT", "auto", 1);
	d.gpudirect = PBOX_GPUDIRECT_DEFAULT;
	assert_int_equal(pbox_allreduce_dev(c, 1, dev, N, PBOX_F32, NULL, &d), 0);
	/* no dma-buf and no nvidia-peermem: auto stages, on names both */
	setenv("PBOX_FAKE_GPU_DMABUF", "0", 1);
	d.wire_dtype = -1;
	stream0_sync(ops);
	assert_int_equal(ops->memcpy_sync(dev, x, sizeof(x)), 0);
	assert_int_equal(pbox_allreduce_dev(c, 2, dev, N, PBOX_F32, NULL, &d), 0);
	stream0_sync(ops);
	assert_int_equal(ops->memcpy_sync(got, dev, sizeof(got)), 0);
	assert_memory_equal(got, x, sizeof(x));       /* world 1, scale 1: the same bits */
	setenv("PBOX_GPUDIRECT", "on", 1);
	assert_int_equal(pbox_allreduce_dev(c, 3, dev, N, PBOX_F32, NULL, &d), PBOX_ENOTSUP);
	assert_non_null(strstr(pbox_last_error(c), "no export on this device"));
	assert_non_null(strstr(pbox_last_error(c), "is nvidia-peermem loaded?"));
	setenv("PBOX_GPUDIRECT", "sometimes", 1);
	assert_int_equal(pbox_allreduce_dev(c, 3, dev, N, PBOX_F32, NULL, &d), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "PBOX_GPUDIRECT='sometimes'"));
	/* with nvidia-peermem it goes direct */
	unsetenv("PBOX_GPUDIRECT");
	F.peermem = true;
	assert_int_equal(pbox_allreduce_dev(c, 4, dev, N, PBOX_F32, NULL, &d), 0);
	pbox_get_stats(c, &st);
	assert_int_equal(st.gpu_staged_calls, 2);
	assert_int_equal(st.gpu_direct_calls, 1);
	unsetenv("PBOX_FAKE_GPU_DMABUF");
	pbox_close(c);
	ops->dev_free(dev);
	F.gpu = NULL;
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
	dlclose(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(open__no_device__enotsup, setup, teardown),
		cmocka_unit_test_setup_teardown(open__auto_without_device__says_why_verbs_was_skipped,
						setup, teardown),
		cmocka_unit_test_setup_teardown(open__device_on_other_interface__enotsup_names_it,
						setup, teardown),
		cmocka_unit_test_setup_teardown(open__second_device_on_our_interface__chosen, setup,
						teardown),
		cmocka_unit_test_setup_teardown(open__raw_qp_without_cap_net_raw__eperm, setup,
						teardown),
		cmocka_unit_test_setup_teardown(open__flow_rule_refused__eperm, setup, teardown),
		cmocka_unit_test_setup_teardown(open__port_not_ethernet_or_down__enotsup, setup,
						teardown),
		cmocka_unit_test_setup_teardown(open__endpoints_on_two_interfaces__enotsup_names_both,
						setup, teardown),
		cmocka_unit_test_setup_teardown(open__each_failing_step_undoes_the_rest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(open__qp_flow_and_receives_set_up, setup, teardown),
		cmocka_unit_test_setup_teardown(tx__burst_becomes_one_chain_of_correct_frames, setup,
						teardown),
		cmocka_unit_test_setup_teardown(tx__nic_checksums_where_offered, setup, teardown),
		cmocka_unit_test_setup_teardown(gpudirect__dmabuf_region_and_two_piece_sends, setup,
						teardown),
		cmocka_unit_test_setup_teardown(gpudirect__dereg_waits_for_the_nics_last_read, setup,
						teardown),
		cmocka_unit_test_setup_teardown(gpudirect__dereg_does_not_wait_for_a_refused_send,
						setup, teardown),
		cmocka_unit_test_setup_teardown(gpudirect__peermem_when_dmabuf_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(gpudirect__refused_without_checksum_offload, setup,
						teardown),
		cmocka_unit_test_setup_teardown(gpudirect__refused_with_sends_of_one_piece, setup,
						teardown),
		cmocka_unit_test_setup_teardown(gpudirect__refused_without_dmabuf_or_peermem, setup,
						teardown),
		cmocka_unit_test_setup_teardown(tx__ring_full_drops_and_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(tx__failed_send_completion__esys, setup, teardown),
		cmocka_unit_test_setup_teardown(tx__datagram_larger_than_mtu__einval, setup, teardown),
		cmocka_unit_test_setup_teardown(rx__good_frames_returned_bad_ones_counted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(rx__buffers_reposted_at_the_next_call, setup, teardown),
		cmocka_unit_test_setup_teardown(rx__completion_channel_wakes_and_is_rearmed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(rx__flushed_receive__esys, setup, teardown),
		cmocka_unit_test_setup_teardown(close__releases_everything_after_traffic, setup,
						teardown),
		cmocka_unit_test_setup_teardown(allreduce__through_fake_nic_to_inproc_box, setup,
						teardown),
		cmocka_unit_test_setup_teardown(allreduce_dev__gpudirect_sends_from_gpu_memory, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			allreduce_dev__gpudirect_out_of_memory_dereg_on_progress_thread, setup,
			teardown),
		cmocka_unit_test_setup_teardown(allreduce_dev__gpudirect_auto_stages_on_refuses, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
