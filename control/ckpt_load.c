/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_load.c - a checkpoint file read, checked and copied on a thread of
 * its own. See ckpt_load.h.
 *
 * Ownership: the thread and the control thread each hold a reference;
 * the last to let go frees the load. The mutex guards done, dropped, rc,
 * err and got, and the copy into the arena: the thread copies only while
 * holding it and only if the control thread has not dropped the load.
 */
#include "control/ckpt_load.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errmsg.h"
#include "control/rpc.h"

struct ckpt_load {
	pthread_mutex_t mu;
	int refs, done, dropped, rc;
	char err[RPC_ERR_MAX];
	struct ckpt_hdr got;
	struct ps_ckpt_load_args a;
};

/* Reader threads alive, box-wide (a counter, not state: the threads
 * outlive any registry when a read hangs past pboxd's end). */
static unsigned live;

unsigned ckpt_load_inflight(void)
{
	return __atomic_load_n(&live, __ATOMIC_ACQUIRE);
}

static void unref(struct ckpt_load *l)
{
	pthread_mutex_lock(&l->mu);
	int last = --l->refs == 0;
	pthread_mutex_unlock(&l->mu);
	if (!last)
		return;
	pthread_mutex_destroy(&l->mu);
	free(l);
}

static void *load_main(void *arg)
{
	struct ckpt_load *l = arg;
	char err[RPC_ERR_MAX] = "";
	struct ckpt_hdr got;
	const uint8_t *data = NULL;
	uint8_t *buf = NULL;

	memset(&got, 0, sizeof(got));
	int rc = ps_ckpt_load_read(&l->a, NULL, &buf, &data, &got, err, sizeof(err));
	pthread_mutex_lock(&l->mu);
	if (rc == 0 && !l->dropped)
		ps_ckpt_load_copy(&l->a, data, NULL);
	l->rc = rc;
	l->got = got;
	snprintf(l->err, sizeof(l->err), "%s", err);
	l->done = 1;
	pthread_mutex_unlock(&l->mu);
	free(buf);   /* hundreds of MiB unmapped here, not on the control thread */
	unref(l);
	__atomic_sub_fetch(&live, 1, __ATOMIC_ACQ_REL);
	return NULL;
}

int ckpt_load_start(const struct ps_ckpt_load_args *a, struct ckpt_load **out)
{
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if (__atomic_add_fetch(&live, 1, __ATOMIC_ACQ_REL) > CKPT_LOAD_MAX) {
		__atomic_sub_fetch(&live, 1, __ATOMIC_ACQ_REL);
		return -EAGAIN;
	}
	struct ckpt_load *l = calloc(1, sizeof(*l));
	if (!l) {
		__atomic_sub_fetch(&live, 1, __ATOMIC_ACQ_REL);
		return -ENOMEM;
	}
	pthread_mutex_init(&l->mu, NULL);
	l->refs = 2;
	l->a = *a;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, load_main, l);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_destroy(&l->mu);
		free(l);
		__atomic_sub_fetch(&live, 1, __ATOMIC_ACQ_REL);
		return -rc;
	}
	*out = l;
	return 0;
}

int ckpt_load_poll(struct ckpt_load *l, struct ckpt_hdr *got, char *err, size_t errlen)
{
	int rc = 1;

	pthread_mutex_lock(&l->mu);
	if (l->done) {
		rc = l->rc;
		*got = l->got;
		if (rc < 0)
			snprintf(err, errlen, "%s", l->err);
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

void ckpt_load_drop(struct ckpt_load *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->dropped = 1;
	pthread_mutex_unlock(&l->mu);
	unref(l);
}
