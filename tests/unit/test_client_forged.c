/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_forged.c - libpbox takes a RESULT, WAIT, NACK or ERROR only
 * from the box endpoint its segment belongs to (address and port), against
 * the in-process box (box_inproc.h). An attacker who sniffed the job's
 * token sends valid-looking datagrams to the worker's data port from
 * elsewhere: a RESULT of 666.0 for every element and an ERROR (the job
 * aborted) from the box's own address but another port, and the same
 * from another address with the endpoint's port. While the box's real
 * RESULTs are held back (lose_results_to) they are the only answers the
 * worker has; the call must still end with the true sum, every forged
 * datagram counted in foreign_packets, and the genuine ones not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include/pbox.h"
#include "tests/unit/box_inproc.h"

#define COUNT 64        /* one segment of f32 */
#define KEY   7

/* What an attacker who watched the wire knows. */
struct sniffed {
	const char *job;
	uint32_t id;
	uint64_t token;
	uint32_t rank_ip;   /* rank 0's data address, host order */
	uint16_t rank_port;
	uint16_t ep_port;   /* endpoint 0's port, host order */
};

static void sniff_fn(struct box_inproc *b, void *arg)
{
	struct sniffed *s = arg;
	const struct job *j = jobs_find(b->f->box.jobs, s->job);
	struct sockaddr_in ep;
	socklen_t el = sizeof(ep);

	if (!j)
		return;
	s->id = j->id;
	s->token = j->token;
	s->rank_ip = j->ranks[0].ip;
	s->rank_port = j->ranks[0].port;
	if (getsockname(b->fd[0], (struct sockaddr *)&ep, &el) == 0)
		s->ep_port = ntohs(ep.sin_port);
}

/* A UDP socket bound to ip:port (host order; port 0: any). */
static int bound_socket(uint32_t ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(ip) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Send from fd to rank 0 a datagram of type (RESULT: COUNT x 666.0). */
static void forge(int fd, const struct sniffed *s, uint8_t type)
{
	uint8_t pkt[WIRE_HDR_LEN + COUNT * sizeof(float)];
	struct wire_msg m = { .type = type, .dtype = WIRE_F32, .rank = 0, .job = s->id,
			      .token = s->token, .key = KEY, .seg = 0, .round = 1 };
	size_t len = WIRE_HDR_LEN;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(s->rank_port),
				  .sin_addr.s_addr = htonl(s->rank_ip) };

	if (type == WIRE_RESULT) {
		m.count = COUNT;
		float v = 666.0f;
		for (int i = 0; i < COUNT; i++)
			memcpy(pkt + WIRE_HDR_LEN + i * sizeof(v), &v, sizeof(v));
		len += COUNT * sizeof(float);
	} else if (type == WIRE_ERROR) {
		m.status = WIRE_ST_NO_JOB;
	} else {   /* WAIT, NACK: the notice */
		wire_notice_encode(pkt + WIRE_HDR_LEN, &(struct wire_notice){ .open_us = 1000 });
		len += WIRE_NOTICE_LEN;
	}
	wire_encode(pkt, &m);
	assert_int_equal(sendto(fd, pkt, len, 0, (struct sockaddr *)&to, sizeof(to)),
			 (ssize_t)len);
}

static uint64_t foreign(const pbox_client *c)
{
	pbox_stats st;

	assert_int_equal(pbox_get_stats(c, &st), 0);
	return st.foreign_packets;
}

static void forged__results_from_elsewhere_dropped_and_counted(void **state)
{
	struct box_inproc *b = box_inproc_new(1);
	pbox_client *c = NULL;
	pbox_req *req = NULL;
	pbox_opts o;
	float buf[COUNT];
	struct sniffed s = { .job = "forged" };

	(void)state;
	box_inproc_start(b);
	pbox_opts_init(&o);
	o.transport = PBOX_TRANSPORT_UDP;
	o.timeout_ms = 10000;
	assert_int_equal(pbox_connect(b->addr, "forged", 0, 1, &o, &c), 0);
	atomic_store(&b->lose_results_to, 1);   /* the box's answers to rank 0 held back */
	for (int i = 0; i < COUNT; i++)
		buf[i] = (float)(i + 1);
	assert_int_equal(pbox_iallreduce(c, KEY, buf, COUNT, PBOX_F32, &req), 0);
	assert_true(box_inproc_wait_seen(b, 1, 2000));   /* the PUSH is in: round 1 open */
	box_inproc_call(b, sniff_fn, &s);
	assert_int_not_equal(s.token, 0);
	assert_int_not_equal(s.ep_port, 0);

	/* the box's address, another port; another address, the box's port */
	int other_port = bound_socket(BI_LOOPBACK, 0);
	int other_ip = bound_socket(BI_LOOPBACK + 1, s.ep_port);
	uint8_t types[] = { WIRE_RESULT, WIRE_WAIT, WIRE_NACK, WIRE_ERROR };
	unsigned sent = 0;
	for (unsigned k = 0; k < sizeof(types); k++) {
		forge(other_port, &s, types[k]);
		forge(other_ip, &s, types[k]);
		sent += 2;
	}
	for (int i = 0; i < 1000 && foreign(c) < sent; i++)
		usleep(1000);
	/* an ERROR taken for the box's would abort the call within 300 ms
	 * (ABORT_GRACE_MS): wait past that before letting the real answer in */
	usleep(400 * 1000);
	atomic_store(&b->lose_results_to, 0);
	int rc = pbox_wait(req);
	for (int i = 0; i < COUNT; i++)
		if (buf[i] != (float)(i + 1))
			fail_msg("element %d is %g, not %d: a forged RESULT was taken", i,
				 (double)buf[i], i + 1);
	if (rc != 0)
		fail_msg("the call failed %d (%s): a forged datagram was taken", rc,
			 pbox_last_error(c));
	assert_int_equal(foreign(c), sent);   /* the box's own RESULT is not foreign */
	close(other_port);
	close(other_ip);
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_stop(b);
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(forged__results_from_elsewhere_dropped_and_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
