/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_log.c - pboxd's log: the DPDK log type `pbox`, and the stream every
 * DPDK log line (the EAL's and pboxd's) is written to: stderr, with the
 * line's syslog priority in front ("<4>...") when stderr is the journal,
 * so journald keeps each line's level. See dp.h and dp_log.h.
 */
#include "dataplane/dp.h"
#include "dataplane/dp_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/logline.h"

RTE_LOG_REGISTER(dp_logtype, pbox, INFO);

struct dp_log {
	FILE *f;           /* what rte_openlog_stream was given */
	bool journal;      /* stderr is the journal: "<N>" in front of each line */
	bool at_start;     /* the next byte written starts a line */
};

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;     /* a log line that cannot be written is lost */
		p += k;
		n -= (size_t)k;
	}
}

/*
 * The stream's write function. The stream is unbuffered, so glibc hands
 * over each rte_log call's text at once, in the calling thread, under the
 * stream's lock: rte_log_cur_msg_loglevel() is that line's level.
 */
static ssize_t stream_write(void *cookie, const char *buf, size_t n)
{
	struct dp_log *l = cookie;
	char out[512];
	size_t done = 0;

	if (!l->journal) {
		write_all(STDERR_FILENO, buf, n);
		return (ssize_t)n;
	}
	int prio = rte_log_cur_msg_loglevel() - 1;
	while (done < n) {
		size_t olen;
		done += logline_prefix(out, sizeof(out), &olen, prio, buf + done, n - done,
				       &l->at_start);
		write_all(STDERR_FILENO, out, olen);
	}
	return (ssize_t)n;
}

int dp_log_open(struct dp_log **out, char *err, size_t errlen)
{
	struct dp_log *l = calloc(1, sizeof(*l));
	cookie_io_functions_t io = { .write = stream_write };

	*out = NULL;
	if (!l)
		return errmsg(err, errlen, -ENOMEM, "out of memory for the log");
	l->journal = logline_is_journal(getenv("JOURNAL_STREAM"), STDERR_FILENO);
	l->at_start = true;
	l->f = fopencookie(l, "w", io);
	if (!l->f || setvbuf(l->f, NULL, _IONBF, 0) != 0 || rte_openlog_stream(l->f) != 0) {
		/* the message first: closing may change errno */
		int rc = errmsg(err, errlen, -ENOMEM, "cannot open the log stream: %s",
				strerror(errno));
		if (l->f)
			fclose(l->f);
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void dp_log_close(struct dp_log *l)
{
	if (!l)
		return;
	rte_openlog_stream(NULL);
	fclose(l->f);
	free(l);
}

void dp_log_write(void *ctx, int prio, const char *msg)
{
	char line[1100];

	(void)ctx;
	if (!rte_log_can_log(dp_logtype, (uint32_t)prio + 1))
		return;
	logline_format(line, sizeof(line), "pboxd", prio, msg);
	rte_log((uint32_t)prio + 1, dp_logtype, "%s\n", line);
}

void dp_log(uint32_t level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!rte_log_can_log(dp_logtype, level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dp_log_write(NULL, (int)level - 1, msg);
}

int dp_log_level(void)
{
	int prio = rte_log_get_level(dp_logtype) - 1;

	if (prio < LOG_PRIO_ERR)
		return LOG_PRIO_ERR;
	return prio > LOG_PRIO_DEBUG ? LOG_PRIO_DEBUG : prio;
}

void dp_log_set_level(int prio)
{
	rte_log_set_level(dp_logtype, (uint32_t)prio + 1);
}
