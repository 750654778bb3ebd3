/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ext.c - the hooks of the rooms above core (struct client_ext, client.h):
 * a room that keeps state per client (ops/ top-k, gpu/ staging) attaches
 * its hooks once, and core calls them at the client's events (a released
 * key, the progress thread's staging poll, pbox_close), so no room below
 * names one above. Also the progress thread's wake-up.
 */
#include <stdio.h>
#include <unistd.h>

#include "client/core/client.h"

int client_ext_attach_locked(pbox_client *c, const struct client_ext *e)
{
	unsigned i;

	for (i = 0; i < CLIENT_EXT_MAX && c->ext[i]; i++)
		if (c->ext[i] == e)
			return 0;
	if (i == CLIENT_EXT_MAX) {
		char msg[CLIENT_MSG_LEN];
		snprintf(msg, sizeof(msg), "libpbox: no room for the hooks of %s (%d taken)",
			 e->name, CLIENT_EXT_MAX);
		client_error_locked(c, msg);
		return PBOX_ENOMEM;
	}
	c->ext[i] = e;
	return 0;
}

/* The attached hooks now (they are only ever added). */
static unsigned ext_snapshot(const pbox_client *cc, const struct client_ext **out)
{
	pbox_client *c = (pbox_client *)cc;   /* (its lock) */
	unsigned n = 0;

	pthread_mutex_lock(&c->lock);
	for (; n < CLIENT_EXT_MAX && c->ext[n]; n++)
		out[n] = c->ext[n];
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* Call hook(args) of every attached room that has it. */
#define EXT_EACH(c, hook, ...)                                              \
	do {                                                                \
		const struct client_ext *e_[CLIENT_EXT_MAX];                \
		unsigned n_ = ext_snapshot((c), e_);                        \
		for (unsigned i_ = 0; i_ < n_; i_++)                        \
			if (e_[i_]->hook)                                   \
				e_[i_]->hook(__VA_ARGS__);                  \
	} while (0)

void client_forget_key(pbox_client *c, uint32_t key)
{
	EXT_EACH(c, forget_key, c, key);
}

int client_ext_topk_reset(pbox_client *c, uint32_t key)
{
	const struct client_ext *e[CLIENT_EXT_MAX];
	unsigned n = ext_snapshot(c, e);

	for (unsigned i = 0; i < n; i++) {
		int rc = e[i]->topk_reset ? e[i]->topk_reset(c, key) : 1;
		if (rc != 1)
			return rc;
	}
	return 1;
}

void client_ext_staging_poll(pbox_client *c, uint64_t now)
{
	EXT_EACH(c, staging_poll, c, now);
}

void client_ext_summary(const pbox_client *c, FILE *f)
{
	EXT_EACH(c, summary, c, f);
}

void client_ext_close(pbox_client *c)
{
	EXT_EACH(c, close, c);
}

void client_kick(pbox_client *c)
{
	uint64_t one = 1;
	ssize_t w = write(c->evfd, &one, sizeof(one));
	(void)w; /* EAGAIN: the counter is already non-zero, the thread wakes */
}
