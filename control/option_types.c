/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * option_types.c - what each type of pboxd option (options.h) accepts, how
 * a value is stored into its field of struct box_config, and how it is
 * shown again: one parser and one printer per type, shared by every row.
 */
#include "common/errmsg.h"
#include "control/options.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/secret.h"

static const struct { char suffix; uint64_t mult; } size_units[] = {
	{ 'T', 1ull << 40 }, { 'G', 1ull << 30 }, { 'M', 1ull << 20 }, { 'K', 1ull << 10 },
};


static void *field(struct box_config *c, const struct box_opt *o)
{
	return (char *)c + o->offset;
}

static const void *cfield(const struct box_config *c, const struct box_opt *o)
{
	return (const char *)c + o->offset;
}

/* A number as it is written: sizes with the largest exact binary suffix
 * (32768 -> "32K"), modes in octal with a leading 0. */
static int show_number(const struct box_opt *o, uint64_t v, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%" PRIu64, v);

	if (o->type == BOX_OPT_OCTAL && v)
		n = snprintf(buf, len, "0%" PRIo64, v);
	if (o->type == BOX_OPT_SIZE && v)
		for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++)
			if (v % size_units[i].mult == 0) {
				n = snprintf(buf, len, "%" PRIu64 "%c", v / size_units[i].mult,
					     size_units[i].suffix);
				break;
			}
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

/* ---- parsers: 0 or -EINVAL with what is wrong in err ---- */

/* Unsigned integer; SIZE takes a binary suffix (K, M, G, T, with or
 * without "iB"), OCTAL is read in base 8. The range is checked after. */
static int parse_number(const struct box_opt *o, const char *s, uint64_t *out,
			char *err, size_t errlen)
{
	int size = o->type == BOX_OPT_SIZE, base = o->type == BOX_OPT_OCTAL ? 8 : 10;
	uint64_t mult = 1;
	char *end;

	if (!s || !*s)
		return errmsg(err, errlen, -EINVAL, "missing value");
	if (!isdigit((unsigned char)*s))
		return errmsg(err, errlen, -EINVAL, "'%s' is not a non-negative integer", s);
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return errmsg(err, errlen, -EINVAL, "'%s' is too large", s);
	if (*end && size) {
		mult = 0;
		for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++)
			if (toupper((unsigned char)*end) == size_units[i].suffix)
				mult = size_units[i].mult;
		if (mult) {
			end++;
			if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
				end += strlen(end);
		}
	}
	if (*end || mult == 0)
		return errmsg(err, errlen, -EINVAL, "'%s' is not a%s number", s,
			    size ? " size (N, NK, NM, NG, NT)" : base == 8 ? "n octal" : "");
	if (v > UINT64_MAX / mult)
		return errmsg(err, errlen, -EINVAL, "'%s' is too large", s);
	*out = v * mult;
	return 0;
}

static int set_number(struct box_config *c, const struct box_opt *o, const char *s,
		      char *err, size_t errlen)
{
	uint64_t v = 0;
	int rc = parse_number(o, s, &v, err, errlen);

	if (rc)
		return rc;
	if ((v < o->min || v > o->max) && !(v == 0 && o->zero_ok)) {
		char lo[32], hi[32];
		show_number(o, o->min, lo, sizeof(lo));
		show_number(o, o->max, hi, sizeof(hi));
		return errmsg(err, errlen, -EINVAL, "%s is out of range [%s, %s]%s", s, lo, hi,
			    o->zero_ok ? " (or 0)" : "");
	}
	switch (o->size) {
	case 2: *(uint16_t *)field(c, o) = (uint16_t)v; break;
	case 4: *(uint32_t *)field(c, o) = (uint32_t)v; break;
	default: *(uint64_t *)field(c, o) = v; break;
	}
	return 0;
}

static uint64_t get_number(const struct box_config *c, const struct box_opt *o)
{
	switch (o->size) {
	case 2: return *(const uint16_t *)cfield(c, o);
	case 4: return *(const uint32_t *)cfield(c, o);
	default: return *(const uint64_t *)cfield(c, o);
	}
}

/* "'x' is not one of a, b, c" from an ENUM's choices, or on/off. */
static int not_a_choice(const struct box_opt *o, const char *s, char *err, size_t errlen)
{
	char names[128] = "";
	size_t n = 0;

	if (o->type == BOX_OPT_BOOL)
		snprintf(names, sizeof(names), "on, off");
	for (const struct box_opt_choice *ch = o->choices; ch && ch->name && n < sizeof(names); ch++)
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "", ch->name);
	return errmsg(err, errlen, -EINVAL, "'%s' is not one of %s", s, names);
}

static int set_enum(struct box_config *c, const struct box_opt *o, const char *s,
		    char *err, size_t errlen)
{
	for (const struct box_opt_choice *ch = o->choices; ch->name; ch++)
		if (strcmp(ch->name, s) == 0) {
			*(int *)field(c, o) = ch->value;
			return 0;
		}
	return not_a_choice(o, s, err, errlen);
}

static int set_string(char *dst, size_t cap, const char *s, char *err, size_t errlen)
{
	if (strcmp(s, "none") == 0)
		s = "";
	if (strlen(s) >= cap)
		return errmsg(err, errlen, -EINVAL, "'%.40s...' is longer than %zu characters", s, cap - 1);
	snprintf(dst, cap, "%s", s);
	return 0;
}

/* "ADDR:PORT" with a dotted-quad or host name and a port in [1, 65535]. */
static int set_hostport(char *dst, size_t cap, const char *s, char *err, size_t errlen)
{
	const char *colon = strrchr(s, ':');
	char *end = (char *)"";

	if (!*s || strcmp(s, "none") == 0)
		return set_string(dst, cap, "", err, errlen);
	if (strlen(s) >= cap)
		return errmsg(err, errlen, -EINVAL, "'%s' is longer than %zu characters", s, cap - 1);
	if (!colon || colon == s)
		return errmsg(err, errlen, -EINVAL, "'%s' is not ADDR:PORT", s);
	errno = 0;
	unsigned long port = isdigit((unsigned char)colon[1]) ? strtoul(colon + 1, &end, 10) : 0;
	if (port < 1 || port > 65535 || *end || errno)
		return errmsg(err, errlen, -EINVAL, "'%s': port '%s' is not in [1, 65535]", s, colon + 1);
	return set_string(dst, cap, s, err, errlen);
}

/* A decimal in [0, max] without sign or suffix, for the parts of --ip. */
static int small_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return *end || errno || *out > max ? -EINVAL : 0;
}

/* "PORT:ADDR/PREFIX" into the ip table; a port given again is replaced. */
static int add_ip(struct box_config *c, const char *s, char *err, size_t errlen)
{
	char buf[64];
	unsigned long port, prefix;
	struct in_addr a;

	if (strlen(s) >= sizeof(buf))
		return errmsg(err, errlen, -EINVAL, "'%s' is too long for PORT:ADDR/PREFIX", s);
	snprintf(buf, sizeof(buf), "%s", s);
	char *colon = strchr(buf, ':');
	char *slash = colon ? strchr(colon, '/') : NULL;
	if (!colon || !slash)
		return errmsg(err, errlen, -EINVAL, "'%s' is not PORT:ADDR/PREFIX (e.g. 0:198.18.0.1/24)", s);
	*colon = '\0';
	*slash = '\0';
	if (small_uint(buf, BOX_MAX_PORTS * 16 - 1, &port) < 0)
		return errmsg(err, errlen, -EINVAL, "'%s': port id '%s' is not an integer in [0, %d]",
			    s, buf, BOX_MAX_PORTS * 16 - 1);
	if (inet_pton(AF_INET, colon + 1, &a) != 1)
		return errmsg(err, errlen, -EINVAL, "'%s': '%s' is not a dotted-quad IPv4 address", s, colon + 1);
	if (small_uint(slash + 1, 32, &prefix) < 0 || prefix < 1)
		return errmsg(err, errlen, -EINVAL, "'%s': prefix '%s' is not in [1, 32]", s, slash + 1);
	uint32_t ip = ntohl(a.s_addr);
	if (ip == 0 || ip == UINT32_MAX || (ip >> 24) == 127 || (ip >> 28) == 14)
		return errmsg(err, errlen, -EINVAL, "'%s': %s cannot be a data address", s, colon + 1);
	/* a subnet of more than two addresses (/30 and wider) keeps its
	 * first and last for the network and its broadcast: workers cannot
	 * send to a box there (the kernel refuses a broadcast destination) */
	uint32_t host = prefix >= 32 ? 0 : UINT32_MAX >> prefix;
	char net[INET_ADDRSTRLEN]; /* not buf: colon + 1, the address given, is in it */
	if (prefix <= 30 && ((ip & host) == 0 || (ip & host) == host))
		return errmsg(err, errlen, -EINVAL, "'%s': %s is the %s address of %s/%u, not a "
			    "host's", s, colon + 1, (ip & host) ? "broadcast" : "network",
			    inet_ntop(AF_INET, &(struct in_addr){ htonl(ip & ~host) }, net,
				      sizeof(net)) ? net : "?", (unsigned)prefix);

	unsigned i;
	for (i = 0; i < c->nports && c->ip[i].port != port; i++)
		;
	if (i == c->nports) {
		if (c->nports == BOX_MAX_PORTS)
			return errmsg(err, errlen, -EINVAL, "'%s': more than %d data ports", s, BOX_MAX_PORTS);
		c->nports++;
	}
	c->ip[i].port = (uint16_t)port;
	c->ip[i].ip = ip;
	c->ip[i].prefix = (uint8_t)prefix;
	return 0;
}

/* The secret in FILE (common/secret.h); "" or none = no secret needed. */
static int set_secret(struct box_config *c, const char *path, char *err, size_t errlen)
{
	if (!*path || strcmp(path, "none") == 0) {
		memset(c->operator_secret, 0, sizeof(c->operator_secret));
		c->operator_secret_len = 0;
		return 0;
	}
	int rc = secret_load(path, c->operator_secret, err, errlen);
	if (rc < 0)
		return -EINVAL;
	c->operator_secret_len = (uint32_t)rc;
	return 0;
}

int box_opt_set(struct box_config *c, const struct box_opt *o, const char *v,
		char *err, size_t errlen)
{
	if (!v)
		return errmsg(err, errlen, -EINVAL, "missing value");
	switch (o->type) {
	case BOX_OPT_UINT:
	case BOX_OPT_SIZE:
	case BOX_OPT_OCTAL:
		return set_number(c, o, v, err, errlen);
	case BOX_OPT_BOOL:
		if (strcmp(v, "on") && strcmp(v, "off"))
			return not_a_choice(o, v, err, errlen);
		*(bool *)field(c, o) = strcmp(v, "on") == 0;
		return 0;
	case BOX_OPT_ENUM:
		return set_enum(c, o, v, err, errlen);
	case BOX_OPT_STRING:
		return set_string(field(c, o), o->size, v, err, errlen);
	case BOX_OPT_HOSTPORT:
		return set_hostport(field(c, o), o->size, v, err, errlen);
	case BOX_OPT_IP_LIST:
		return add_ip(c, v, err, errlen);
	case BOX_OPT_SECRET_FILE:
		return set_secret(c, v, err, errlen);
	case BOX_OPT_CONFIG:
	case BOX_OPT_FLAG:
		break;
	}
	return errmsg(err, errlen, -EINVAL, "not a setting");
}

/* ---- printers ---- */

static int show_ips(const struct box_config *c, char *buf, size_t len)
{
	size_t n = 0;

	if (c->nports == 0)
		return snprintf(buf, len, "none") < (int)len ? 4 : -ENOSPC;
	for (unsigned i = 0; i < c->nports; i++) {
		uint32_t ip = c->ip[i].ip;
		int k = snprintf(buf + n, len - n, "%s%u:%u.%u.%u.%u/%u", i ? " " : "",
				 c->ip[i].port, ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255,
				 ip & 255, c->ip[i].prefix);
		if (k < 0 || (size_t)k >= len - n)
			return -ENOSPC;
		n += (size_t)k;
	}
	return (int)n;
}

int box_opt_show(const struct box_config *c, const struct box_opt *o, char *buf, size_t len)
{
	const char *s = NULL;
	int n;

	switch (o->type) {
	case BOX_OPT_UINT:
	case BOX_OPT_SIZE:
	case BOX_OPT_OCTAL:
		return show_number(o, get_number(c, o), buf, len);
	case BOX_OPT_BOOL:
		s = *(const bool *)cfield(c, o) ? "on" : "off";
		break;
	case BOX_OPT_ENUM:
		for (const struct box_opt_choice *ch = o->choices; ch->name && !s; ch++)
			if (ch->value == *(const int *)cfield(c, o))
				s = ch->name;
		if (!s) {
			n = snprintf(buf, len, "%d", *(const int *)cfield(c, o));
			return n < 0 || (size_t)n >= len ? -ENOSPC : n;
		}
		break;
	case BOX_OPT_STRING:
	case BOX_OPT_HOSTPORT:
		s = *(const char *)cfield(c, o) ? (const char *)cfield(c, o) : "none";
		break;
	case BOX_OPT_IP_LIST:
		return show_ips(c, buf, len);
	case BOX_OPT_SECRET_FILE:
		s = c->operator_secret_len ? "set" : "none";
		break;
	case BOX_OPT_CONFIG:
	case BOX_OPT_FLAG:
		s = "none";
		break;
	}
	n = snprintf(buf, len, "%s", s);
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

int box_opt_range(const struct box_opt *o, char *buf, size_t len)
{
	char lo[32], hi[32];
	size_t n = 0;
	int k = 0;

	if (len)
		buf[0] = '\0';
	switch (o->type) {
	case BOX_OPT_UINT:
	case BOX_OPT_SIZE:
	case BOX_OPT_OCTAL:
		show_number(o, o->min, lo, sizeof(lo));
		show_number(o, o->max, hi, sizeof(hi));
		k = snprintf(buf, len, "%s%s..%s", o->zero_ok ? "0 or " : "", lo, hi);
		break;
	case BOX_OPT_BOOL:
		k = snprintf(buf, len, "on|off");
		break;
	case BOX_OPT_ENUM:
		for (const struct box_opt_choice *ch = o->choices; ch->name; ch++) {
			k = snprintf(buf + n, len - n, "%s%s", n ? "|" : "", ch->name);
			if (k < 0 || (size_t)k >= len - n)
				return -ENOSPC;
			n += (size_t)k;
		}
		return (int)n;
	default:
		break;
	}
	return k < 0 || (size_t)k >= len ? -ENOSPC : k;
}
