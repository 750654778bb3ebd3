/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_log.c - pboxd's log without DPDK: the line format and level names
 * (common/logline.c), the journal's "<N>" priority prefix and its
 * detection from $JOURNAL_STREAM, and ctl_log's level filter, sink and
 * stderr fallback (control/log.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/logline.h"
#include "control/log.h"

static void format__level_word_except_notice(void **state)
{
	char buf[128];

	(void)state;
	assert_int_equal(logline_format(buf, sizeof(buf), "pboxd", LOG_PRIO_ERR, "x failed"), 22);
	assert_string_equal(buf, "pboxd: error: x failed");
	logline_format(buf, sizeof(buf), "pboxd", LOG_PRIO_WARNING, "w");
	assert_string_equal(buf, "pboxd: warn: w");
	logline_format(buf, sizeof(buf), "pboxd", LOG_PRIO_INFO, "job a admitted");
	assert_string_equal(buf, "pboxd: info: job a admitted");
	logline_format(buf, sizeof(buf), "pboxd", LOG_PRIO_DEBUG, "d");
	assert_string_equal(buf, "pboxd: debug: d");
	/* the life-cycle lines scripts wait for keep their old form */
	logline_format(buf, sizeof(buf), "pboxd", LOG_PRIO_NOTICE, "ready");
	assert_string_equal(buf, "pboxd: ready");
	/* truncated, still terminated */
	assert_true(logline_format(buf, 10, "pboxd", LOG_PRIO_ERR, "long message") > 10);
	assert_string_equal(buf, "pboxd: er");
}

static void format__level_names_clamped(void **state)
{
	(void)state;
	assert_string_equal(logline_level_name(-1), "crit");
	assert_string_equal(logline_level_name(2), "crit");
	assert_string_equal(logline_level_name(3), "error");
	assert_string_equal(logline_level_name(5), "notice");
	assert_string_equal(logline_level_name(7), "debug");
	assert_string_equal(logline_level_name(9), "debug");
}

/* Run the input through logline_prefix in pieces of `chunk` input bytes
 * with an output buffer of `cap`, as a stream would see it. */
static void prefixed(const char *in, size_t chunk, size_t cap, int prio, char *out, size_t outlen)
{
	bool at_start = true;
	size_t n = strlen(in), done = 0, o = 0;
	char buf[256];

	assert_true(cap <= sizeof(buf));
	while (done < n) {
		size_t piece = n - done < chunk ? n - done : chunk, used = 0;
		while (used < piece) {
			size_t olen, k = logline_prefix(buf, cap, &olen, prio, in + done + used,
							 piece - used, &at_start);
			assert_true(k > 0);
			assert_true(o + olen < outlen);
			memcpy(out + o, buf, olen);
			o += olen;
			used += k;
		}
		done += piece;
	}
	out[o] = '\0';
}

static void prefix__every_line_once(void **state)
{
	char out[512];

	(void)state;
	prefixed("pboxd: error: x\n", 1000, 256, 3, out, sizeof(out));
	assert_string_equal(out, "<3>pboxd: error: x\n");
	prefixed("a\nb\n\nc\n", 1000, 256, 4, out, sizeof(out));
	assert_string_equal(out, "<4>a\n<4>b\n<4>\n<4>c\n");
	/* a line split over writes gets one prefix */
	prefixed("partial line\nnext\n", 3, 256, 6, out, sizeof(out));
	assert_string_equal(out, "<6>partial line\n<6>next\n");
	/* a small output buffer still makes progress and loses nothing */
	prefixed("EAL: one\nEAL: two\n", 1000, 8, 7, out, sizeof(out));
	assert_string_equal(out, "<7>EAL: one\n<7>EAL: two\n");
	/* a level outside syslog's is written as info */
	prefixed("x\n", 1000, 256, -1, out, sizeof(out));
	assert_string_equal(out, "<6>x\n");
	prefixed("x\n", 1000, 256, 42, out, sizeof(out));
	assert_string_equal(out, "<6>x\n");
}

static void journal__stream_names_the_fd(void **state)
{
	char path[] = "/tmp/pbox-test-log-XXXXXX", js[64];
	int fd = mkstemp(path);
	struct stat st;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	snprintf(js, sizeof(js), "%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
	assert_true(logline_is_journal(js, fd));
	snprintf(js, sizeof(js), "%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino + 1);
	assert_false(logline_is_journal(js, fd));     /* another file: stderr was redirected */
	snprintf(js, sizeof(js), "%ju:%jux", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
	assert_false(logline_is_journal(js, fd));
	assert_false(logline_is_journal("", fd));
	assert_false(logline_is_journal("8", fd));
	assert_false(logline_is_journal(NULL, fd));
	close(fd);
	unlink(path);
	assert_false(logline_is_journal("1:1", fd));  /* closed */
}

/* ---- ctl_log ---- */

struct capture {
	int calls;
	int prio;
	char msg[256];
};

static void capture_write(void *ctx, int prio, const char *msg)
{
	struct capture *c = ctx;
	c->calls++;
	c->prio = prio;
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
}

static void ctl_log__filters_by_level_then_sinks(void **state)
{
	static struct box box;
	struct capture cap = { 0 };

	(void)state;
	box.cfg.log_level = LOG_PRIO_WARNING;
	box.log = (struct box_log_sink){ .write = capture_write, .ctx = &cap };
	ctl_log(&box, CTL_LOG_INFO, "job %s admitted", "a");
	ctl_log(&box, CTL_LOG_NOTICE, "ready");
	ctl_log(&box, CTL_LOG_DEBUG, "chatter");
	assert_int_equal(cap.calls, 0);
	ctl_log(&box, CTL_LOG_WARN, "job %s aborted", "b");
	assert_int_equal(cap.calls, 1);
	assert_int_equal(cap.prio, LOG_PRIO_WARNING);
	assert_string_equal(cap.msg, "job b aborted");   /* the sink formats the line */
	ctl_log(&box, CTL_LOG_ERROR, "e");
	assert_int_equal(cap.calls, 2);
	assert_int_equal(cap.prio, LOG_PRIO_ERR);

	box.cfg.log_level = LOG_PRIO_DEBUG;
	assert_true(ctl_log_enabled(&box, CTL_LOG_DEBUG));
	ctl_log(&box, CTL_LOG_DEBUG, "chatter");
	assert_int_equal(cap.calls, 3);
	assert_false(ctl_log_enabled(&(struct box){ .cfg.log_level = LOG_PRIO_ERR }, CTL_LOG_WARN));
	assert_true(ctl_log_enabled(NULL, CTL_LOG_DEBUG));
}

/* Run fn with stderr going to a file; return what it wrote. */
static char *stderr_of(void (*fn)(const struct box *), const struct box *box)
{
	char path[] = "/tmp/pbox-test-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	static char out[1024];

	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	fn(box);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	ssize_t n = pread(fd, out, sizeof(out) - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return out;
}

static void log_three(const struct box *box)
{
	ctl_log(box, CTL_LOG_WARN, "control connection %s: too long", "peer");
	ctl_log(box, CTL_LOG_NOTICE, "ready");
	ctl_log(box, CTL_LOG_DEBUG, "hidden at info");
}

static void ctl_log__stderr_without_sink(void **state)
{
	static struct box box;

	(void)state;
	box.cfg.log_level = LOG_PRIO_INFO;
	assert_string_equal(stderr_of(log_three, &box),
			    "pboxd: warn: control connection peer: too long\npboxd: ready\n");
	/* no box: every level, same format */
	assert_string_equal(stderr_of(log_three, NULL),
			    "pboxd: warn: control connection peer: too long\npboxd: ready\n"
			    "pboxd: debug: hidden at info\n");
}

static void escape__controls_and_bad_utf8_as_hex(void **state)
{
	char buf[128];

	(void)state;
	/* a newline with a forged line after it, and a terminal escape */
	assert_int_equal(logline_escape(buf, sizeof(buf), "x\npboxd: stopped\x1b[2K\r\t\x7f"), 38);
	assert_string_equal(buf, "x\\x0apboxd: stopped\\x1b[2K\\x0d\\x09\\x7f");
	/* valid UTF-8 passes; a lone continuation, an overlong '/', a
	 * surrogate, a truncated sequence and 0xff do not */
	logline_escape(buf, sizeof(buf), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	assert_string_equal(buf, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	logline_escape(buf, sizeof(buf), "\x80\xc0\xaf\xed\xa0\x80\xe2\x82\xff");
	assert_string_equal(buf, "\\x80\\xc0\\xaf\\xed\\xa0\\x80\\xe2\\x82\\xff");
	/* truncated whole: never half an escape or half a character */
	assert_int_equal(logline_escape(buf, 6, "ab\ncd"), 2);
	assert_string_equal(buf, "ab");
	assert_int_equal(logline_escape(buf, 4, "a\xc3\xa9" "b"), 3);
	assert_string_equal(buf, "a\xc3\xa9");
	assert_int_equal(logline_escape(buf, 1, "abc"), 0);
	assert_string_equal(buf, "");
}

static void log_forged(const struct box *box)
{
	ctl_log(box, CTL_LOG_WARN, "job %s: aborted: %s", "j\x1b]0;t\x07",
		"oops\npboxd: stopped");
}

static void ctl_log__escapes_every_line(void **state)
{
	static struct box box;

	(void)state;
	box.cfg.log_level = LOG_PRIO_INFO;
	/* one line, whatever the arguments held */
	assert_string_equal(stderr_of(log_forged, &box),
			    "pboxd: warn: job j\\x1b]0;t\\x07: aborted: oops\\x0apboxd: stopped\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(format__level_word_except_notice),
		cmocka_unit_test(format__level_names_clamped),
		cmocka_unit_test(prefix__every_line_once),
		cmocka_unit_test(journal__stream_names_the_fd),
		cmocka_unit_test(ctl_log__filters_by_level_then_sinks),
		cmocka_unit_test(ctl_log__stderr_without_sink),
		cmocka_unit_test(escape__controls_and_bad_utf8_as_hex),
		cmocka_unit_test(ctl_log__escapes_every_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
