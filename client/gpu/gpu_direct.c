/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_direct.c - GPUDirect RDMA for device calls (docs/gpu.md "GPUDirect
 * RDMA"): when the transport can register GPU memory with its NIC
 * (verbs), a call's segments are sent from the device buffer itself, so
 * the copy to the host slab disappears; the results still come back
 * through the slab and its copies to the device (gpu_stage.c).
 *
 * A call goes direct when its mode allows it (PBOX_GPUDIRECT), its wire
 * dtype is the buffer's (a cast runs in the copy to the host, which a
 * direct call does not make), the transport has mem_reg, and the
 * buffer's pages register: the GPU library exports a dma-buf of them
 * (dmabuf_export) and the transport maps it, or the transport registers
 * the address (nvidia-peermem). A key keeps its registration for its
 * later calls on the same memory; a range that failed is not tried again
 * for that key. Registration runs on the caller's thread (it takes
 * milliseconds); deregistration on the progress thread, which knows when
 * the NIC has finished reading (transport.h) and alone reaps the sends
 * (mem_dereg does), or once that thread has stopped.
 *
 * Retiring a range never needs memory, so it can never fall back to the
 * caller's thread: each registration is made with its gpu_mr, left empty
 * (mr.mkey 0) on gpu->retired; dropping the range fills an empty one for
 * the progress thread, or frees one once that thread has stopped. Out of
 * memory for it, the range is not registered (the call stages).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "client/core/knobs.h"
#include "client/gpu/gpu.h"
#include "include/pbox_cuda.h"

int gpu_direct_mode(pbox_client *c, uint32_t key, int32_t opt)
{
	uint64_t v;

	if (opt == PBOX_GPUDIRECT_OFF || opt == PBOX_GPUDIRECT_AUTO || opt == PBOX_GPUDIRECT_ON)
		return opt;
	if (opt != PBOX_GPUDIRECT_DEFAULT)
		return client_error(c, PBOX_EINVAL, "key %u: pbox_dev_opts.gpudirect is %d (use "
				    "PBOX_GPUDIRECT_OFF, _AUTO, _ON or _DEFAULT)", key, (int)opt);
	if (knob_value(NULL, KNOB_GPUDIRECT, &v) < 0)
		return client_error(c, PBOX_EINVAL, "key %u: %s='%.64s' is not %s", key,
				    knobs[KNOB_GPUDIRECT].name, knob_text(KNOB_GPUDIRECT),
				    knobs[KNOB_GPUDIRECT].takes);
	return (int)v;
}

void gpu_direct_drop(struct client_gpu *g, struct gpu_key *k, bool retire)
{
	struct gpu_mr *m, **pp;

	if (!k->mr.mkey)
		return;
	/* an empty gpu_mr is there for every registration (reg_range) */
	pthread_mutex_lock(&g->lock);
	for (pp = &g->retired; *pp && (*pp)->mr.mkey; pp = &(*pp)->next)
		;
	m = *pp;   /* (NULL not reached: every registration has its node) */
	if (m && retire)
		m->mr = k->mr;
	else if (m)
		*pp = m->next;
	pthread_mutex_unlock(&g->lock);
	if (!retire) {   /* the progress thread has stopped */
		g->tp->ops->mem_dereg(g->tp, &k->mr);
		free(m);
	}
	memset(&k->mr, 0, sizeof(k->mr));
	k->reg_base = 0;
	k->reg_size = 0;
}

void gpu_direct_retire(struct client_gpu *g)
{
	struct gpu_mr *done = NULL, **pp;

	/* the retired ranges; the empty gpu_mrs stay for their registrations */
	pthread_mutex_lock(&g->lock);
	for (pp = &g->retired; *pp;) {
		struct gpu_mr *m = *pp;
		if (!m->mr.mkey) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		m->next = done;
		done = m;
	}
	pthread_mutex_unlock(&g->lock);
	while (done) {
		struct gpu_mr *next = done->next;
		g->tp->ops->mem_dereg(g->tp, &done->mr);
		free(done);
		done = next;
	}
}

/* Register [dev, dev + bytes) for k: 0, or < 0 with why. */
static int reg_range(struct client_gpu *g, struct gpu_key *k, void *dev, size_t bytes,
		     char *why, size_t whylen)
{
	const struct pbox_gpu_ops *ops = g->ops;
	struct tp_mem_src src = { .base = dev, .size = bytes, .dmabuf_fd = -1 };
	char dmabuf_why[200] = "";
	void *base;
	size_t size;
	int fd;
	struct gpu_mr *m = malloc(sizeof(*m));   /* its retirement's, empty */

	if (!m) {
		snprintf(why, whylen, "out of memory");
		return PBOX_ENOMEM;
	}
	int rc = ops->dmabuf_export(dev, bytes, &fd, &base, &size);
	if (rc == 0) {
		src = (struct tp_mem_src){ .base = base, .size = size, .dmabuf_fd = fd };
	} else {
		/* by address (nvidia-peermem): whole pages around the buffer */
		uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)dev;
		src.base = (void *)(a & ~(pg - 1));
		src.size = ((a + bytes + pg - 1) & ~(pg - 1)) - (a & ~(pg - 1));
		snprintf(dmabuf_why, sizeof(dmabuf_why), " (after %s: %s)", ops->name,
			 ops->last_error());
	}
	rc = g->tp->ops->mem_reg(g->tp, &src, &k->mr, why, whylen);
	if (src.dmabuf_fd >= 0)
		close(src.dmabuf_fd);   /* the registration holds its own reference */
	if (rc < 0) {
		size_t n = strlen(why);
		snprintf(why + n, whylen - n, "%s", dmabuf_why);
		memset(&k->mr, 0, sizeof(k->mr));
		free(m);
		return rc;
	}
	memset(m, 0, sizeof(*m));
	pthread_mutex_lock(&g->lock);
	m->next = g->retired;
	g->retired = m;
	pthread_mutex_unlock(&g->lock);
	k->reg_base = (uintptr_t)src.base;
	k->reg_size = src.size;
	return 0;
}

int gpu_direct_prepare(pbox_client *c, struct client_gpu *g, struct gpu_key *k, int mode,
		       void *dev, size_t count, unsigned dtype, unsigned wire)
{
	uintptr_t a = (uintptr_t)dev;
	size_t bytes = count * wire_dtype_size(dtype);
	char why[256] = "";

	k->direct = false;
	if (mode == PBOX_GPUDIRECT_OFF)
		return 0;
	if (wire != dtype)
		snprintf(why, sizeof(why), "the wire dtype (%s) is not the buffer's (%s): the cast "
			 "runs in the copy to the host", wire_dtype_name(wire), wire_dtype_name(dtype));
	else if (!g->tp->ops->mem_reg)
		snprintf(why, sizeof(why), "the %s transport cannot read GPU memory (only verbs "
			 "can)", g->tp->ops->name);
	else if (!g->ops->dmabuf_export)
		snprintf(why, sizeof(why), "the GPU library (%s) exports no dma-bufs", g->ops->name);
	else if (k->mr.mkey && a >= k->reg_base && a + bytes <= k->reg_base + k->reg_size)
		k->direct = true;                          /* registered by an earlier call */
	else if (mode == PBOX_GPUDIRECT_AUTO && k->fail_size && a >= k->fail_base &&
		 a + bytes <= k->fail_base + k->fail_size)
		return 0;   /* failed before: staged (gpu->why kept that reason) */
	else {
		gpu_direct_drop(g, k, true);               /* another range: the old one goes */
		int rc = reg_range(g, k, dev, bytes, why, sizeof(why));
		if (rc == 0) {
			k->direct = true;
		} else if (rc != PBOX_ENOMEM) {   /* out of memory: the range may do later */
			k->fail_base = a;
			k->fail_size = bytes;
		}
	}
	if (k->direct)
		return 0;
	if (mode == PBOX_GPUDIRECT_ON)
		return client_error(c, PBOX_ENOTSUP, "job '%s' rank %d key %u: GPUDirect is "
				    "required (PBOX_GPUDIRECT on) but not possible: %s", c->job,
				    c->rank, k->key, why);
	pthread_mutex_lock(&g->lock);
	snprintf(g->why, sizeof(g->why), "key %u: %s", k->key, why);
	pthread_mutex_unlock(&g->lock);
	return 0;
}
