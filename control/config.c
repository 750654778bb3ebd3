/*
 * config.c - pboxd's settings: defaults, command-line options (after the
 * EAL's "--") and the INI file read with --config. One table lists every
 * option once; getopt_long and the INI reader both go through it, so an
 * option cannot exist in one form and not the other.
 */
#include "control/box.h"
#include "common/secret.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)
#define TiB (1024ull * GiB)

void box_config_defaults(struct box_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->control, sizeof(c->control), "0.0.0.0:7470");
	snprintf(c->rpc_socket, sizeof(c->rpc_socket), "/run/pbox/pboxd.sock");
	c->rpc_socket_mode = 0660;
	c->udp_base = 47000;
	c->chunk_bytes = 32768;
	c->max_jobs = 16;
	c->max_world = 64;
	c->max_keys = 4096;
	c->max_job_bytes = 1 * GiB;
	c->default_job_bytes = 256 * MiB;
	c->slots_per_lcore = 256;
	c->mbufs = 16383;
	c->idle_sleep_us = 0;
	c->stall_timeout_ms = 5000;
	c->join_wait_ms = 120000;
	c->conn_reply_bytes = 4 * MiB;
	c->total_reply_bytes = 64 * MiB;
	c->idle_timeout_ms = 60000;
	c->request_timeout_ms = 10000;
	c->max_conns_per_peer = 64;
	c->unix_reserved_conns = 16;
	c->log_peer_burst = 20;
	c->udp_checksum = true;
	snprintf(c->log_level, sizeof(c->log_level), "info");
}

/* ---- value parsers: 0 or -EINVAL with "what is wrong" in err ---- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Unsigned integer with an optional binary size suffix (K, M, G, T, with
 * or without "iB"), within [min, max]. */
static int parse_u64(const char *s, int suffixes, int base, uint64_t min,
		     uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	char *end;
	uint64_t mult = 1;

	if (!s || !*s)
		return fail(err, errlen, "missing value");
	if (!isdigit((unsigned char)*s))
		return fail(err, errlen, "'%s' is not a non-negative integer", s);
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return fail(err, errlen, "'%s' is too large", s);
	if (*end && suffixes) {
		switch (toupper((unsigned char)*end)) {
		case 'K': mult = KiB; break;
		case 'M': mult = MiB; break;
		case 'G': mult = GiB; break;
		case 'T': mult = TiB; break;
		default: mult = 0;
		}
		if (mult) {
			end++;
			if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
				end += strlen(end);
		}
	}
	if (*end || mult == 0)
		return fail(err, errlen, "'%s' is not a%s number", s,
			    suffixes ? " size (N, NK, NM, NG)" : base == 8 ? "n octal" : "");
	if (v > UINT64_MAX / mult)
		return fail(err, errlen, "'%s' is too large", s);
	v *= mult;
	if (v < min || v > max)
		return fail(err, errlen, "%s is out of range [%" PRIu64 ", %" PRIu64 "]",
			    s, min, max);
	*out = v;
	return 0;
}

/* "ADDR:PORT" with a dotted-quad or host name and a port in [1, 65535]. */
static int check_hostport(const char *s, size_t cap, char *err, size_t errlen)
{
	const char *colon = strrchr(s, ':');
	uint64_t port;

	if (strlen(s) >= cap)
		return fail(err, errlen, "'%s' is longer than %zu characters", s, cap - 1);
	if (!colon || colon == s)
		return fail(err, errlen, "'%s' is not ADDR:PORT", s);
	if (parse_u64(colon + 1, 0, 10, 1, 65535, &port, err, errlen) < 0)
		return fail(err, errlen, "'%s': port '%s' is not in [1, 65535]", s, colon + 1);
	return 0;
}

/* "PORT:ADDR/PREFIX" into the ip table; a port given again is replaced. */
static int add_ip(struct box_config *c, const char *s, char *err, size_t errlen)
{
	char buf[64];
	uint64_t port, prefix;
	struct in_addr a;

	if (strlen(s) >= sizeof(buf))
		return fail(err, errlen, "'%s' is too long for PORT:ADDR/PREFIX", s);
	snprintf(buf, sizeof(buf), "%s", s);
	char *colon = strchr(buf, ':');
	char *slash = colon ? strchr(colon, '/') : NULL;
	if (!colon || !slash)
		return fail(err, errlen, "'%s' is not PORT:ADDR/PREFIX (e.g. 0:198.18.0.1/24)", s);
	*colon = '\0';
	*slash = '\0';
	if (parse_u64(buf, 0, 10, 0, BOX_MAX_PORTS * 16 - 1, &port, err, errlen) < 0)
		return fail(err, errlen, "'%s': port id '%s' is not an integer in [0, %d]",
			    s, buf, BOX_MAX_PORTS * 16 - 1);
	if (inet_pton(AF_INET, colon + 1, &a) != 1)
		return fail(err, errlen, "'%s': '%s' is not a dotted-quad IPv4 address", s, colon + 1);
	if (parse_u64(slash + 1, 0, 10, 1, 32, &prefix, err, errlen) < 0)
		return fail(err, errlen, "'%s': prefix '%s' is not in [1, 32]", s, slash + 1);
	uint32_t ip = ntohl(a.s_addr);
	if (ip == 0 || ip == UINT32_MAX || (ip >> 24) == 127 || (ip >> 28) == 14)
		return fail(err, errlen, "'%s': %s cannot be a data address", s, colon + 1);

	unsigned i;
	for (i = 0; i < c->nports && c->ip[i].port != port; i++)
		;
	if (i == c->nports) {
		if (c->nports == BOX_MAX_PORTS)
			return fail(err, errlen, "'%s': more than %d data ports", s, BOX_MAX_PORTS);
		c->nports++;
	}
	c->ip[i].port = (uint16_t)port;
	c->ip[i].ip = ip;
	c->ip[i].prefix = (uint8_t)prefix;
	return 0;
}

static int set_string(char *dst, size_t cap, const char *s, char *err, size_t errlen)
{
	if (strlen(s) >= cap)
		return fail(err, errlen, "'%.40s...' is longer than %zu characters", s, cap - 1);
	snprintf(dst, cap, "%s", s);
	return 0;
}

/* ---- the option table ---- */

enum opt_id {
	OPT_IP = 256, OPT_CONTROL, OPT_RPC_SOCKET, OPT_RPC_SOCKET_MODE, OPT_UDP_BASE,
	OPT_CHUNK_BYTES, OPT_MAX_JOBS, OPT_MAX_WORLD, OPT_MAX_KEYS,
	OPT_MAX_JOB_BYTES, OPT_JOB_BYTES, OPT_SLOTS, OPT_MBUFS, OPT_MTU, OPT_IDLE_SLEEP, OPT_STALL,
	OPT_FANOUT, OPT_UDP_CSUM, OPT_SECRET_FILE, OPT_LOG_LEVEL, OPT_CONFIG, OPT_HELP = 'h',
};

struct opt {
	const char *name;
	int id;
	const char *arg;   /* NULL: takes no argument */
	const char *help;
};

static const struct opt opts[] = {
	{ "ip", OPT_IP, "PORT:ADDR/PREFIX", "data port PORT (DPDK port id) has ADDR/PREFIX; repeat per port" },
	{ "control", OPT_CONTROL, "ADDR:PORT", "JSON-RPC over TCP for workers (default 0.0.0.0:7470; \"\" = off)" },
	{ "rpc-socket", OPT_RPC_SOCKET, "PATH", "JSON-RPC Unix socket (default /run/pbox/pboxd.sock; \"\" = off)" },
	{ "rpc-socket-mode", OPT_RPC_SOCKET_MODE, "MODE", "octal permissions of the socket (default 0660)" },
	{ "udp-base", OPT_UDP_BASE, "N", "UDP port of lcore 0; lcore i uses N+i (default 47000)" },
	{ "chunk-bytes", OPT_CHUNK_BYTES, "BYTES", "chunk size for key assignment (default 32K)" },
	{ "max-jobs", OPT_MAX_JOBS, "N", "concurrent jobs (default 16, at most 32)" },
	{ "max-world", OPT_MAX_WORLD, "N", "workers per job (default 64, at most 64)" },
	{ "max-keys", OPT_MAX_KEYS, "N", "keys per job (default 4096)" },
	{ "max-job-bytes", OPT_MAX_JOB_BYTES, "BYTES", "largest job memory a job may ask for (default 1G)" },
	{ "job-bytes", OPT_JOB_BYTES, "BYTES", "job memory when a job does not ask (default 256M)" },
	{ "slots", OPT_SLOTS, "N", "contribution slots per job per lcore (default 256)" },
	{ "mbufs", OPT_MBUFS, "N", "mbufs per port (default 16383)" },
	{ "mtu", OPT_MTU, "BYTES", "MTU of every data port, 576..9000 (default: the port's own, 1500 for vdevs; net_af_packet needs framesz= above it)" },
	{ "idle-sleep-us", OPT_IDLE_SLEEP, "US", "sleep of an idle lcore (default 0: pure polling)" },
	{ "stall-timeout-ms", OPT_STALL, "MS", "abort a job whose open rounds make no progress for MS (default 5000; 0 = never)" },
	{ "fanout", OPT_FANOUT, "MODE", "results to N ranks: shared (one payload copy, needs chained-mbuf tx), copy (one per rank) or auto (default)" },
	{ "udp-checksum", OPT_UDP_CSUM, "on|off", "fill in the UDP checksum of results, one pass over each payload for all ranks (default on; lets receivers' GRO coalesce them)" },
	{ "operator-secret-file", OPT_SECRET_FILE, "FILE", "remote (TCP) job_abort must present the secret in FILE (mode 600, 16-256 bytes); default: no secret needed" },
	{ "log-level", OPT_LOG_LEVEL, "LEVEL", "error, warn, info or debug (default info)" },
	{ "config", OPT_CONFIG, "FILE", "read options from the [pboxd] section of an INI file" },
	{ "help", OPT_HELP, NULL, "print this help and exit" },
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static const struct opt *opt_by_name(const char *name)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (strcmp(opts[i].name, name) == 0)
			return &opts[i];
	return NULL;
}

static const struct opt *opt_by_id(int id)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opts[i].id == id)
			return &opts[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pboxd [EAL args] -- [options]\n\n"
		"Aggregates gradient segments from pbox workers on DPDK ports.\n\n"
		"options:\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char lhs[64];
		snprintf(lhs, sizeof(lhs), "--%s%s%s", opts[i].name,
			 opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-34s %s\n", lhs, opts[i].help);
	}
	fprintf(f, "\nSizes take a K, M or G suffix (binary). INI keys are the long\n"
		"option names without the leading \"--\", e.g. `max-world = 8`.\n");
}

static int read_ini(struct box_config *c, const char *path, char *err, size_t errlen);

static int set_u32(uint32_t *dst, const char *v, int base, uint64_t min, uint64_t max,
		   int suffixes, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_u64(v, suffixes, base, min, max, &x, err, errlen);
	if (rc == 0)
		*dst = (uint32_t)x;
	return rc;
}

/* Apply one option; on failure err says what is wrong with the value. */
static int apply(struct box_config *c, const struct opt *o, const char *v,
		 int depth, char *err, size_t errlen)
{
	uint64_t x;
	int rc;

	switch (o->id) {
	case OPT_IP:
		return add_ip(c, v, err, errlen);
	case OPT_CONTROL:
		if (!*v || strcmp(v, "none") == 0)
			return set_string(c->control, sizeof(c->control), "", err, errlen);
		rc = check_hostport(v, sizeof(c->control), err, errlen);
		return rc ? rc : set_string(c->control, sizeof(c->control), v, err, errlen);
	case OPT_RPC_SOCKET:
		if (strcmp(v, "none") == 0)
			v = "";
		return set_string(c->rpc_socket, sizeof(c->rpc_socket), v, err, errlen);
	case OPT_RPC_SOCKET_MODE:
		return set_u32(&c->rpc_socket_mode, v, 8, 0, 0777, 0, err, errlen);
	case OPT_UDP_BASE:
		rc = parse_u64(v, 0, 10, 1024, 65535 - BOX_MAX_LCORES, &x, err, errlen);
		if (rc == 0)
			c->udp_base = (uint16_t)x;
		return rc;
	case OPT_CHUNK_BYTES:
		return set_u32(&c->chunk_bytes, v, 10, 64, 64 * MiB, 1, err, errlen);
	case OPT_MAX_JOBS:
		return set_u32(&c->max_jobs, v, 10, 1, ENGINE_MAX_JOBS / 2, 0, err, errlen);
	case OPT_MAX_WORLD:
		return set_u32(&c->max_world, v, 10, 1, ENGINE_MAX_WORLD, 0, err, errlen);
	case OPT_MAX_KEYS:
		return set_u32(&c->max_keys, v, 10, 1, 1u << 20, 0, err, errlen);
	case OPT_MAX_JOB_BYTES:
		return parse_u64(v, 1, 10, 1 * MiB, 1 * TiB, &c->max_job_bytes, err, errlen);
	case OPT_JOB_BYTES:
		return parse_u64(v, 1, 10, 1 * MiB, 1 * TiB, &c->default_job_bytes, err, errlen);
	case OPT_SLOTS:
		return set_u32(&c->slots_per_lcore, v, 10, 1, ENGINE_NO_SLOT - 1, 0, err, errlen);
	case OPT_MTU:
		return set_u32(&c->mtu, v, 10, 576, 9000, 0, err, errlen);
	case OPT_MBUFS:
		return set_u32(&c->mbufs, v, 10, 1023, 1u << 24, 0, err, errlen);
	case OPT_IDLE_SLEEP:
		return set_u32(&c->idle_sleep_us, v, 10, 0, 1000000, 0, err, errlen);
	case OPT_STALL:
		return set_u32(&c->stall_timeout_ms, v, 10, 0, 3600000, 0, err, errlen);
	case OPT_FANOUT:
		if (strcmp(v, "auto") == 0)
			c->fanout = BOX_FANOUT_AUTO;
		else if (strcmp(v, "shared") == 0)
			c->fanout = BOX_FANOUT_SHARED;
		else if (strcmp(v, "copy") == 0)
			c->fanout = BOX_FANOUT_COPY;
		else
			return fail(err, errlen, "'%s' is not one of auto, shared, copy", v);
		return 0;
	case OPT_UDP_CSUM:
		if (strcmp(v, "on") == 0)
			c->udp_checksum = true;
		else if (strcmp(v, "off") == 0)
			c->udp_checksum = false;
		else
			return fail(err, errlen, "'%s' is not one of on, off", v);
		return 0;
	case OPT_SECRET_FILE:
		if (!*v) {
			c->operator_secret[0] = '\0';
			c->operator_secret_len = 0;
			return 0;
		}
		rc = secret_load(v, c->operator_secret, err, errlen);
		if (rc < 0)
			return -EINVAL;
		c->operator_secret_len = (uint32_t)rc;
		return 0;
	case OPT_LOG_LEVEL:
		if (strcmp(v, "error") && strcmp(v, "warn") && strcmp(v, "info") && strcmp(v, "debug"))
			return fail(err, errlen, "'%s' is not one of error, warn, info, debug", v);
		return set_string(c->log_level, sizeof(c->log_level), v, err, errlen);
	case OPT_CONFIG:
		if (depth > 0)
			return fail(err, errlen, "a config file cannot include another");
		return read_ini(c, v, err, errlen);
	default:
		return fail(err, errlen, "not settable here");
	}
}

/* ---- INI file ---- */

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* One line of the file: "" / comment / [section] / key = value. */
static int ini_line(struct box_config *c, char *line, int *in_section,
		    char *msg, size_t msglen)
{
	char *s = trim(line);

	if (!*s || *s == '#' || *s == ';')
		return 0;
	if (*s == '[') {
		char *e = strchr(s, ']');
		if (!e || *trim(e + 1))
			return fail(msg, msglen, "malformed section header '%s'", s);
		*e = '\0';
		*in_section = strcmp(trim(s + 1), "pboxd") == 0;
		return 0;
	}
	char *eq = strchr(s, '=');
	if (!eq)
		return fail(msg, msglen, "expected 'key = value', got '%s'", s);
	*eq = '\0';
	char *key = trim(s), *val = trim(eq + 1);
	if (!*in_section)
		return 0; /* other sections belong to other tools */
	size_t vl = strlen(val);
	if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
		val[vl - 1] = '\0';
		val++;
	}
	for (char *p = key; *p; p++)
		if (*p == '_')
			*p = '-';
	const struct opt *o = opt_by_name(key);
	if (!o || !o->arg)
		return fail(msg, msglen, "unknown option '%s'", key);
	char why[256];
	if (apply(c, o, val, 1, why, sizeof(why)) < 0)
		return fail(msg, msglen, "%s: %s", key, why);
	return 0;
}

static int read_ini(struct box_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[1024], msg[512];
	int in_section = 0, lineno = 0, rc = 0, seen = 0;

	if (!f)
		return fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = fail(err, errlen, "%s:%d: line longer than %zu characters",
				  path, lineno, sizeof(line) - 2);
			break;
		}
		int before = in_section;
		rc = ini_line(c, line, &in_section, msg, sizeof(msg));
		if (rc < 0)
			fail(err, errlen, "%s:%d: %s", path, lineno, msg);
		seen |= in_section && !before;
	}
	if (rc == 0 && ferror(f))
		rc = fail(err, errlen, "cannot read '%s': %s", path, strerror(errno));
	fclose(f);
	if (rc == 0 && !seen)
		rc = fail(err, errlen, "%s: no [pboxd] section", path);
	return rc;
}

/* ---- command line ---- */

static void build_longopts(struct option *lo)
{
	for (size_t i = 0; i < NOPTS; i++)
		lo[i] = (struct option){ opts[i].name,
					 opts[i].arg ? required_argument : no_argument,
					 NULL, opts[i].id };
	lo[NOPTS] = (struct option){ 0 };
}

/* Settings that depend on each other, checked once at the end. */
static int check_consistency(const struct box_config *c, char *err, size_t errlen)
{
	if (c->default_job_bytes > c->max_job_bytes)
		return fail(err, errlen, "--job-bytes %" PRIu64 " exceeds --max-job-bytes %" PRIu64,
			    c->default_job_bytes, c->max_job_bytes);
	if (!c->control[0] && !c->rpc_socket[0])
		return fail(err, errlen, "--control and --rpc-socket are both off: "
			    "the box could not be reached");
	return 0;
}

int box_config_parse(struct box_config *c, int argc, char **argv,
		     char *err, size_t errlen)
{
	struct option lo[NOPTS + 1];
	char why[384];
	int id;

	build_longopts(lo);
	optind = 0; /* glibc: full re-initialisation, so parse may run twice */
	opterr = 0;
	while ((id = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		if (id == '?') {
			if (optopt)
				return fail(err, errlen, "unknown option '-%c' (see --help)", optopt);
			return fail(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
		}
		if (id == ':')
			return fail(err, errlen, "option '%s' needs a value", argv[optind - 1]);
		if (id == OPT_HELP) {
			usage(stdout);
			return 1;
		}
		const struct opt *o = opt_by_id(id);
		if (apply(c, o, optarg, 0, why, sizeof(why)) < 0) {
			if (o->id == OPT_CONFIG)
				return fail(err, errlen, "--config: %s", why);
			return fail(err, errlen, "--%s: %s", o->name, why);
		}
	}
	if (optind < argc)
		return fail(err, errlen, "unexpected argument '%s' (options start with --; "
			    "EAL arguments go before '--')", argv[optind]);
	return check_consistency(c, err, errlen);
}
