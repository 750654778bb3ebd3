/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_load.c - finding the GPU library (docs/gpu.md): dlopen of
 * $PBOX_GPU_LIB, else libpbox-gpu.so.1 (the loader's search path: the
 * GPU library is installed beside libpbox), its one symbol
 * PBOX_GPU_SYMBOL, the ABI number, and its init(). libpbox links no CUDA:
 * a process that never makes a device call never loads it.
 *
 * The one piece of process-wide state in libpbox: the GPU libraries
 * loaded so far, by file name, under a mutex. init() is "once per
 * process" in the ABI, so a file is opened and initialised by the first
 * client that needs it and its ops table is then handed to every client
 * (each keeps its own pointer: c->gpu->ops). A failure is not kept: a
 * later call tries again (the environment may have been fixed), and each
 * says why in the client's message. Libraries are never closed (CUDA
 * must not be unloaded while a context lives).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/knobs.h"
#include "client/gpu/gpu.h"

#define GPU_LIB_DEFAULT "libpbox-gpu.so.1"

struct gpu_lib {
	struct gpu_lib *next;
	char *path;
	const struct pbox_gpu_ops *ops;
};

static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gpu_lib *libs;   /* loaded and initialised: never freed */

/* Open, check and initialise path; 0 and *ops or PBOX_ENOTSUP and err. */
static int open_lib(const char *path, const struct pbox_gpu_ops **ops, char *err,
		    size_t errlen)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *why = dlerror();
		snprintf(err, errlen, "no GPU library: %s (build it with `make gpu`, or set "
			 "PBOX_GPU_LIB to its path)", why ? why : path);
		return PBOX_ENOTSUP;
	}
	pbox_gpu_ops_fn fn;
	void *sym = dlsym(h, PBOX_GPU_SYMBOL);
	memcpy(&fn, &sym, sizeof(fn));   /* (POSIX: a data pointer to a function) */
	if (!fn) {
		snprintf(err, errlen, "%s is not a pbox GPU library: it has no %s()", path,
			 PBOX_GPU_SYMBOL);
		dlclose(h);
		return PBOX_ENOTSUP;
	}
	const struct pbox_gpu_ops *o = fn();
	if (!o) {
		snprintf(err, errlen, "%s: %s() returned no ops table", path, PBOX_GPU_SYMBOL);
		dlclose(h);
		return PBOX_ENOTSUP;
	}
	if (o->abi != PBOX_GPU_ABI) {
		snprintf(err, errlen, "%s speaks GPU ABI %u, this libpbox %u: use the GPU "
			 "library built from the same pbox tree (make gpu)", path, o->abi,
			 PBOX_GPU_ABI);
		dlclose(h);   /* nothing of it ran but the table */
		return PBOX_ENOTSUP;
	}
	int rc = o->init();
	if (rc < 0) {   /* (kept open: a failed init may leave the driver loaded) */
		const char *why = o->last_error ? o->last_error() : NULL;
		const char *what = rc == -ENODEV ? "no CUDA device"
				   : rc == -ENOENT ? "no CUDA driver" : "GPU library init failed";
		snprintf(err, errlen, "%s: %s (%s %s)", what, why && *why ? why : strerror(-rc),
			 o->name ? o->name : "?", path);
		return PBOX_ENOTSUP;
	}
	*ops = o;
	return 0;
}

int gpu_load(const struct pbox_gpu_ops **ops, char *err, size_t errlen)
{
	const char *path = knob_text(KNOB_GPU_LIB);
	int rc = 0;

	if (!path)
		path = GPU_LIB_DEFAULT;
	pthread_mutex_lock(&libs_lock);
	struct gpu_lib *l = libs;
	while (l && strcmp(l->path, path) != 0)
		l = l->next;
	if (l) {
		*ops = l->ops;
	} else if (!(l = calloc(1, sizeof(*l))) || !(l->path = strdup(path))) {
		free(l);
		snprintf(err, errlen, "out of memory loading %s", path);
		rc = PBOX_ENOMEM;
	} else if ((rc = open_lib(path, ops, err, errlen)) < 0) {
		free(l->path);
		free(l);
	} else {
		l->ops = *ops;
		l->next = libs;
		libs = l;
	}
	pthread_mutex_unlock(&libs_lock);
	return rc;
}
