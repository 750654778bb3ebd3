/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * knobs.c - the table of libpbox's environment variables (knobs.h): what
 * each takes, the pbox_opts field it stands in for, its default, and its
 * parser. A variable that is set but empty counts as unset. A flag is on
 * for "1" alone; a level or mode that is not one of its words is its
 * default (as they always were); every other variable that is not one of
 * its values is PBOX_EINVAL naming it, never silently something else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/core/client.h"
#include "client/core/knobs.h"
#include "include/pbox_cuda.h"

const struct knob knobs[KNOB_COUNT] = {
	[KNOB_CONTROL] = { .name = "PBOX_CONTROL", .parse = NULL,
	  .takes = "the box's control address, host:port, or a fleet's list of them "
		   "(a:7470,b:7470)",
	  .field = NULL, .when = KNOB_READ, .dflt = "", .dval = 0,
	  .doc = "the box's control address when pbox_connect's control is NULL or "
		    "empty" },
	[KNOB_TRANSPORT] = { .name = "PBOX_TRANSPORT", .parse = knob_parse_transport,
	  .takes = "a transport: auto, udp, xdp or verbs",
	  .field = "transport", .when = KNOB_AT_CONNECT, .dflt = "auto",
	  .dval = PBOX_TRANSPORT_AUTO,
	  .doc = "the road to the box when pbox_opts.transport is auto" },
	[KNOB_MTU] = { .name = "PBOX_MTU", .parse = knob_parse_mtu,
	  .takes = "an MTU in 576..65535",
	  .field = "mtu", .when = KNOB_AT_CONNECT, .dflt = "0", .dval = 0,
	  .doc = "the MTU when pbox_opts.mtu is 0 (automatic)" },
	[KNOB_JOIN_SECRET] = { .name = "PBOX_JOIN_SECRET", .parse = NULL,
	  .takes = "1..256 bytes of UTF-8",
	  .field = "join_secret", .when = KNOB_AT_CONNECT, .dflt = "", .dval = 0,
	  .doc = "the job's join secret when pbox_opts.join_secret is NULL" },
	[KNOB_JOB_BYTES] = { .name = "PBOX_JOB_BYTES", .parse = knob_parse_size,
	  .takes = "a size: bytes, or with a K, M, G or T suffix (binary), e.g. 512M",
	  .field = "job_bytes", .when = KNOB_AT_CONNECT, .dflt = "0", .dval = 0,
	  .doc = "the job memory to ask for when pbox_opts.job_bytes is 0" },
	[KNOB_UDP_OFFLOAD] = { .name = "PBOX_UDP_OFFLOAD", .parse = knob_parse_flag,
	  .takes = "1 (on), else off",
	  .field = "udp_offload", .when = KNOB_AT_INIT, .dflt = "0", .dval = 0,
	  .doc = "1: UDP GSO/GRO (pbox_opts_init sets udp_offload)" },
	[KNOB_BUSY_POLL] = { .name = "PBOX_BUSY_POLL", .parse = knob_parse_flag,
	  .takes = "1 (on), else off",
	  .field = "busy_poll", .when = KNOB_AT_INIT, .dflt = "0", .dval = 0,
	  .doc = "1: the xdp transport's busy polling (pbox_opts_init sets "
		    "busy_poll)" },
	[KNOB_XDP_MODE] = { .name = "PBOX_XDP_MODE", .parse = knob_parse_xdp_mode,
	  .takes = "skb (generic), else native",
	  .field = NULL, .when = KNOB_READ, .dflt = "native", .dval = 0,
	  .doc = "skb: attach the xdp transport's program in generic mode, not "
		    "native" },
	[KNOB_DEBUG] = { .name = "PBOX_DEBUG", .parse = knob_parse_debug,
	  .takes = "OFF, WARN or INFO (DEBUG or 1 are INFO; any case), else off",
	  .field = NULL, .when = KNOB_READ, .dflt = "OFF", .dval = KNOB_DEBUG_OFF,
	  .doc = "the join's and the close's summaries" },
	[KNOB_DEBUG_FILE] = { .name = "PBOX_DEBUG_FILE", .parse = NULL,
	  .takes = "a file to append to",
	  .field = NULL, .when = KNOB_READ, .dflt = "stderr", .dval = 0,
	  .doc = "where PBOX_DEBUG's summaries go" },
	[KNOB_KERNEL] = { .name = "PBOX_KERNEL", .parse = knob_parse_kernel,
	  .takes = "scalar, avx2 or avx512",
	  .field = NULL, .when = KNOB_READ, .dflt = "the fastest the CPU has", .dval = 3,
	  .doc = "the CPU kernels of top-k selection and the hierarchical top-k's "
		    "local sums (read by common/sum.c, which pboxd shares)" },
	[KNOB_GPU_LIB] = { .name = "PBOX_GPU_LIB", .parse = NULL,
	  .takes = "a path or a library name",
	  .field = NULL, .when = KNOB_READ, .dflt = "libpbox-gpu.so.1", .dval = 0,
	  .doc = "the GPU library the device calls load" },
	[KNOB_GPUDIRECT] = { .name = "PBOX_GPUDIRECT", .parse = knob_parse_gpudirect,
	  .takes = "off, auto or on (or 0, 1)",
	  .field = "gpudirect (pbox_dev_opts)", .when = KNOB_READ, .dflt = "auto",
	  .dval = PBOX_GPUDIRECT_AUTO,
	  .doc = "GPUDirect RDMA for device calls whose pbox_dev_opts.gpudirect is "
		    "the default" },
	[KNOB_TIMEOUT] = { .name = "PBOX_TIMEOUT", .parse = knob_parse_duration,
	  .takes = "a time: milliseconds, or with an ms, s, m or h suffix (30m), "
		   "1 ms .. 2^31-1 ms",
	  .field = "timeout_ms", .when = KNOB_AT_INIT, .dflt = "30m", .dval = 1800000,
	  .doc = "how long a call waits without progress, and the job's timeout for "
		    "late ranks if this worker creates it (pbox_opts_init sets timeout_ms)" },
	[KNOB_REPLACE_WAIT] = { .name = "PBOX_REPLACE_WAIT", .parse = knob_parse_wait,
	  .takes = "a time as PBOX_TIMEOUT's, or 0 (off)",
	  .field = NULL, .when = KNOB_READ, .dflt = "0", .dval = 0,
	  .doc = "if this worker creates the job: how long a lost rank is waited for "
		    "a process that joins in its place (0: a lost rank aborts the job)" },
	[KNOB_NONFINITE] = { .name = "PBOX_NONFINITE", .parse = knob_parse_nonfinite,
	  .takes = "a policy: abort, skip or pass",
	  .field = "nonfinite", .when = KNOB_AT_CONNECT, .dflt = "abort",
	  .dval = PBOX_NONFINITE_DEFAULT,
	  .doc = "what the box does with a PS round whose gradient sum holds a NaN or "
		    "Inf, if this worker creates the job, when pbox_opts.nonfinite is 0" },
	[KNOB_RESUME] = { .name = "PBOX_RESUME", .parse = knob_parse_onoff,
	  .takes = "on or off (or 1, 0)",
	  .field = NULL, .when = KNOB_AT_CONNECT, .dflt = "on", .dval = 1,
	  .doc = "when the control connection is lost, reconnect, rejoin and resume "
		    "the calls in flight within the timeout (docs/reliability.md); "
		    "off: every call fails PBOX_ECLOSED at once, and dense keys keep no "
		    "copy of their last results" },
	[KNOB_HOST_LOCAL] = { .name = "PBOX_HOST_LOCAL", .parse = knob_parse_onoff,
	  .takes = "on or off (or 1, 0)",
	  .field = NULL, .when = KNOB_AT_CONNECT, .dflt = "on", .dval = 1,
	  .doc = "host-local aggregation when the host's ranks are known "
		    "(pbox_opts.local_world or LOCAL_WORLD_SIZE above 1); off: every rank "
		    "sends to the box on its own" },
	[KNOB_LOCAL_RANK] = { .name = "LOCAL_RANK", .parse = knob_parse_count,
	  .takes = "a number in 0..65535",
	  .field = "local_rank", .when = KNOB_AT_CONNECT, .dflt = "", .dval = 0,
	  .doc = "torchrun's: this rank's place on its host, when pbox_opts.local_world "
		    "is 0" },
	[KNOB_LOCAL_WORLD_SIZE] = { .name = "LOCAL_WORLD_SIZE", .parse = knob_parse_count,
	  .takes = "a number in 0..65535",
	  .field = "local_world", .when = KNOB_AT_CONNECT, .dflt = "", .dval = 0,
	  .doc = "torchrun's: the ranks on this host, when pbox_opts.local_world is 0 "
		    "(with LOCAL_RANK)" },
};

const char *knob_text(enum knob_id k)
{
	const char *v = getenv(knobs[k].name);

	return v && *v ? v : NULL;
}

int knob_value(pbox_client *c, enum knob_id k, uint64_t *v)
{
	const struct knob *n = &knobs[k];
	const char *t = knob_text(k);

	*v = n->dval;
	if (!n->parse || !t || n->parse(t, v) == 0)
		return 0;
	if (c)
		client_error(c, PBOX_EINVAL, "%s='%.64s' is not %s", n->name, t, n->takes);
	return PBOX_EINVAL;
}

/* The index of text among words, compared without case; -1 if none. */
static int word_index(const char *text, const char *const *words, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (words[i] && !strcasecmp(text, words[i]))
			return (int)i;
	return -1;
}

int knob_parse_flag(const char *text, uint64_t *v)
{
	*v = strcmp(text, "1") == 0;
	return 0;
}

int knob_parse_mtu(const char *text, uint64_t *v)
{
	char *end;
	unsigned long m;

	errno = 0;
	m = strtoul(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || *end || errno || m < 576 || m > 65535)
		return PBOX_EINVAL;
	*v = m;
	return 0;
}

int knob_parse_size(const char *text, uint64_t *v)
{
	static const char units[] = "KMGT";
	char *end;
	unsigned shift = 0;

	errno = 0;
	unsigned long long n = strtoull(text, &end, 10);
	const char *u = *end ? strchr(units, *end) : NULL;
	if (u && end[1] == 0) {
		shift = 10 * (unsigned)(u - units + 1);
		end++;
	}
	if (text[0] < '0' || text[0] > '9' || *end || errno || n == 0 ||
	    n > (UINT64_MAX >> shift))
		return PBOX_EINVAL;
	*v = (uint64_t)n << shift;
	return 0;
}

int knob_parse_transport(const char *text, uint64_t *v)
{
	int k = transport_parse(text);

	if (k < 0)
		return PBOX_EINVAL;
	*v = (uint64_t)k;
	return 0;
}

int knob_parse_nonfinite(const char *text, uint64_t *v)
{
	static const char *const words[] = { NULL, "abort", "skip", "pass" };
	int k = word_index(text, words, 4);   /* pbox_nonfinite's values */

	if (k < 0)
		return PBOX_EINVAL;
	*v = (uint64_t)k;
	return 0;
}

int knob_parse_xdp_mode(const char *text, uint64_t *v)
{
	*v = strcmp(text, "skb") == 0;   /* 1: generic (skb) mode */
	return 0;
}

int knob_parse_debug(const char *text, uint64_t *v)
{
	static const char *const words[] = { "OFF", "WARN", "INFO", "DEBUG", "1" };
	int i = word_index(text, words, 5);

	*v = i < 0 ? KNOB_DEBUG_OFF : i >= KNOB_DEBUG_INFO ? KNOB_DEBUG_INFO : (uint64_t)i;
	return 0;
}

int knob_parse_kernel(const char *text, uint64_t *v)
{
	static const char *const words[] = { "scalar", "avx2", "avx512" };
	int i = word_index(text, words, 3);

	if (i < 0)
		return PBOX_EINVAL;
	*v = (uint64_t)i;
	return 0;
}

int knob_parse_gpudirect(const char *text, uint64_t *v)
{
	static const char *const words[] = { "off", "auto", "on" };
	int i = word_index(text, words, 3);

	if (!strcmp(text, "0"))
		i = 0;
	else if (!strcmp(text, "1"))
		i = 2;
	if (i < 0)
		return PBOX_EINVAL;
	*v = i == 0 ? PBOX_GPUDIRECT_OFF : i == 1 ? PBOX_GPUDIRECT_AUTO : PBOX_GPUDIRECT_ON;
	return 0;
}

int knob_parse_count(const char *text, uint64_t *v)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(text, &end, 10);
	if (errno || end == text || *end || text[0] == '-' || n > 65535)
		return PBOX_EINVAL;
	*v = n;
	return 0;
}

int knob_parse_onoff(const char *text, uint64_t *v)
{
	static const char *const words[] = { "off", "on" };
	int i = word_index(text, words, 2);

	if (!strcmp(text, "0") || !strcmp(text, "1"))
		i = text[0] - '0';
	if (i < 0)
		return PBOX_EINVAL;
	*v = (uint64_t)i;
	return 0;
}

int knob_parse_duration(const char *text, uint64_t *v)
{
	static const struct { const char *unit; uint64_t ms; } units[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	char *end;

	errno = 0;
	unsigned long long n = strtoull(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || errno || n == 0)
		return PBOX_EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit)) {
			if (n > INT32_MAX / units[i].ms)
				return PBOX_EINVAL;
			*v = n * units[i].ms;
			return 0;
		}
	return PBOX_EINVAL;
}

int knob_parse_wait(const char *text, uint64_t *v)
{
	if (!strcmp(text, "0")) {
		*v = 0;
		return 0;
	}
	return knob_parse_duration(text, v);
}
