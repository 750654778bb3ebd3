/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * transport.c - choosing the road to the box (transport.h). A named kind
 * is opened or fails with its reason; PBOX_TRANSPORT_AUTO tries the
 * fastest first (verbs, xdp, udp) and keeps each skipped one's reason,
 * shortened to one clause, in t->info after the one chosen. A transport
 * that opens but vetoes itself for auto (xdp in copy mode: slower than
 * udp, docs/performance.md) is closed and skipped the same way.
 */
#include <stdio.h>
#include <string.h>

#include "client/transport/transport.h"

static const char *const names[] = {
	[PBOX_TRANSPORT_AUTO] = "auto",
	[PBOX_TRANSPORT_UDP] = "udp",
	[PBOX_TRANSPORT_XDP] = "xdp",
	[PBOX_TRANSPORT_VERBS] = "verbs",
};

const char *transport_name(pbox_transport kind)
{
	return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : NULL;
}

int transport_parse(const char *name)
{
	for (unsigned i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}

typedef int (*opener)(struct transport *, const struct tp_config *, char *, size_t);

static opener opener_of(pbox_transport kind)
{
	switch (kind) {
	case PBOX_TRANSPORT_UDP: return tp_udp_open;
	case PBOX_TRANSPORT_XDP: return tp_xdp_open;
	case PBOX_TRANSPORT_VERBS: return tp_verbs_open;
	default: return NULL;
	}
}

static int open_one(struct transport *t, pbox_transport kind, const struct tp_config *cfg,
		    char *err, size_t errlen)
{
	opener o = opener_of(kind);

	memset(t, 0, sizeof(*t));
	if (!o) {
		snprintf(err, errlen, "transport %u is not one of udp, xdp, verbs, auto",
			 (unsigned)kind);
		return PBOX_EINVAL;
	}
	t->kind = kind;
	int rc = o(t, cfg, err, errlen);
	if (rc < 0)
		memset(t, 0, sizeof(*t));
	return rc;
}

int transport_open(struct transport *t, pbox_transport kind, const struct tp_config *cfg,
		   char *err, size_t errlen)
{
	static const pbox_transport order[] = { PBOX_TRANSPORT_VERBS, PBOX_TRANSPORT_XDP,
						PBOX_TRANSPORT_UDP };
	char skipped[sizeof(t->info)] = "", why[256];
	size_t used = 0;

	if (kind != PBOX_TRANSPORT_AUTO)
		return open_one(t, kind, cfg, err, errlen);
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int rc = open_one(t, order[i], cfg, why, sizeof(why));
		if (rc == 0 && t->auto_veto[0]) {
			snprintf(why, sizeof(why), "%s", t->auto_veto);
			transport_close(t);
			rc = PBOX_ENOTSUP;
		}
		if (rc == 0) {
			size_t n = strlen(t->info);
			if (used && n + 2 < sizeof(t->info))
				snprintf(t->info + n, sizeof(t->info) - n, "; %s", skipped);
			return 0;
		}
		/* The last one (udp) failing is the error itself. */
		if (order[i] == PBOX_TRANSPORT_UDP) {
			snprintf(err, errlen, "%s", why);
			return rc;
		}
		if (used < sizeof(skipped))
			used += (size_t)snprintf(skipped + used, sizeof(skipped) - used,
						 "%s%s skipped: %s", used ? "; " : "",
						 names[order[i]], why);
	}
	return PBOX_ESYS; /* not reached: udp is last */
}

void transport_close(struct transport *t)
{
	if (t->ops)
		t->ops->close(t);
	t->ops = NULL;
	t->priv = NULL;
}
