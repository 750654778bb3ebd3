/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_metrics.c - pboxd's metrics HTTP server (control/metrics.c): the
 * request head it reads and the answer it writes, on arbitrary bytes
 * from a scraper, through its own sockets (metrics_open on 127.0.0.1,
 * metrics_poll) in front of the unit tests' fixture box
 * (tests/unit/box_fixture.h, 2 ports x 2 lcores).
 *
 * The input's first byte says where to cut the rest in two; the two parts
 * are sent one after the other on one connection (the server is polled
 * between them), then the connection's sending side is shut. Checked, as
 * the server reads its request as text (the bytes before the first NUL,
 * at most METRICS_REQ_MAX - 1 of them): once that text holds a blank line
 * (the end of the head) an answer comes; an answer is one HTTP/1.0 status
 * line, a head ending in a blank line, and exactly Content-Length bytes of
 * body (none for HEAD); a 200 answers only GET or HEAD of /metrics; the
 * connection is closed after it; nothing leaks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/jobs.h"
#include "control/metrics.h"
#include "tests/unit/box_fixture.h"

#include "tests/fuzz/fuzz_check.h"

#define ANSWER_MAX (1 << 20)

static struct fixture *F;
static struct metrics_server *M;
static unsigned port;
static char *answer;

static void setup(void)
{
	char err[256];

	F = fixture_new(2, 2);
	CHECK(F);
	CHECK(jobs_open(&F->box, &F->box.jobs) == 0);   /* an empty registry */
	/* every input is a new connection from 127.0.0.1, thousands a second:
	 * the per-peer limits (test_control_limits tests them) are off here */
	F->box.cfg.metrics_rate_per_peer = 0;
	F->box.cfg.metrics_conns_per_peer = 0;
	CHECK(metrics_open(&M, &F->box, "127.0.0.1:0", &port, err, sizeof(err)) == 0);
	answer = malloc(ANSWER_MAX);
	CHECK(answer);
}

static void put_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;   /* the server closed: what it got is what counts */
		p += w;
		n -= (size_t)w;
	}
}

/* Poll the server and read its answer into answer[] until it closes. */
static size_t drain(int fd, size_t have)
{
	for (int i = 0; i < 100000; i++) {
		metrics_poll(M);
		ssize_t r = recv(fd, answer + have, ANSWER_MAX - have, MSG_DONTWAIT);
		if (r == 0)
			return have;
		if (r > 0)
			have += (size_t)r;
		CHECK(have < ANSWER_MAX);
	}
	CHECK(!"the server neither answered nor closed");
	return have;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!F)
		setup();
	if (size < 1)
		return 0;
	size_t cut = (size - 1) * data[0] / 255;
	const uint8_t *req = data + 1;
	size_t len = size - 1;

	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	metrics_poll(M);   /* accepted */
	put_all(fd, req, cut);
	metrics_poll(M);
	put_all(fd, req + cut, len - cut);
	shutdown(fd, SHUT_WR);
	size_t got = drain(fd, 0);
	close(fd);

	/* the request as the server reads it */
	size_t tl = len < METRICS_REQ_MAX - 1 ? len : METRICS_REQ_MAX - 1;
	const uint8_t *nul = memchr(req, '\0', tl);
	if (nul)
		tl = (size_t)(nul - req);
	char text[METRICS_REQ_MAX];
	memcpy(text, req, tl);
	text[tl] = '\0';
	int complete = strstr(text, "\r\n\r\n") || strstr(text, "\n\n");
	if (complete)
		CHECK(got > 0);
	if (got == 0)
		return 0;

	answer[got] = '\0';
	CHECK(got > 12 && memcmp(answer, "HTTP/1.0 ", 9) == 0);
	int status = atoi(answer + 9);
	CHECK(status >= 100 && status <= 599);
	const char *end = strstr(answer, "\r\n\r\n");
	CHECK(end);
	size_t head = (size_t)(end - answer) + 4;
	const char *cl = strstr(answer, "\r\nContent-Length: ");
	CHECK(cl && cl < end);
	size_t n = strtoul(cl + 18, NULL, 10);
	int head_only = strncmp(text, "HEAD ", 5) == 0;
	CHECK(got - head == (head_only ? 0 : n));
	if (status == 200) {
		const char *path = text + (head_only ? 5 : 4);
		CHECK(head_only || strncmp(text, "GET ", 4) == 0);
		CHECK(strncmp(path, "/metrics", 8) == 0);
	}
	return 0;
}
