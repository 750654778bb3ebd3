/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_gpu.h - what the fake GPU library (tests/unit/fake_gpu.c, built as
 * build/tests/libpbox-gpu-fake.so) exports beyond common/gpu_ops.h, for the
 * tests and benchmarks that drive libpbox's device calls without a GPU.
 * They reach these functions with dlsym on the same file libpbox loads
 * (PBOX_GPU_LIB), so both share one fake device.
 *
 * The fake device: "device memory" is host memory that dev_alloc tracks
 * (is_device answers from that registry); each stream is a worker thread
 * running its enqueued operations in order, each after a random delay of
 * up to PBOX_FAKE_GPU_DELAY_US (default 50) microseconds from a generator
 * seeded by PBOX_FAKE_GPU_SEED (default 1) and the stream's number, so
 * that work on different streams completes in an order that varies; an
 * event completes when its stream reaches the point where it was
 * recorded. Knobs read when the library is asked for its table or
 * initialised: PBOX_FAKE_GPU_ABI (the ABI number it claims),
 * PBOX_FAKE_GPU_INIT (a negative errno its init returns),
 * PBOX_FAKE_GPU_DMABUF=0 (dmabuf_export refuses, as a device under the
 * proprietary driver does). Devices: each thread has a current device
 * (fake_gpu_set_device); an event records only on a stream of its
 * device, and a kernel (a cast or scaled copy, topk_ef, dev_zero) runs
 * only on its stream's device and that device's memory, as on CUDA.
 * Device memory is page aligned; dmabuf_export
 * hands out a memfd as the dma-buf: nothing maps it, the fake NIC of
 * test_tp_verbs reads device memory by its address.
 */
#ifndef PBOX_TEST_FAKE_GPU_H
#define PBOX_TEST_FAKE_GPU_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The fake's path beside the running program (build/tests/ or
 * build-san/tests/) into path (len bytes): false if it cannot be told. */
static inline bool fake_gpu_path(char *path, size_t len)
{
	ssize_t n = len > 32 ? readlink("/proc/self/exe", path, len - 32) : -1;
	if (n <= 0)
		return false;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	if (!slash)
		return false;
	strcpy(slash + 1, "libpbox-gpu-fake.so");
	return true;
}

/* The fake at path opened as libpbox opens it (the same file: one
 * device); NULL with dlopen's reason on stderr. */
static inline void *fake_gpu_dlopen(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
	return h;
}

/* One copy as the fake ran it: order numbers from one counter shared by
 * every stream (enqueue, start and end of the copy), so the trace says
 * which copies overlapped which. */
enum fake_gpu_kind { FAKE_D2H = 1, FAKE_H2D = 2 };

struct fake_gpu_op {
	int kind;             /* enum fake_gpu_kind */
	unsigned stream;      /* the stream's number (creation order, from 1) */
	const void *dev;      /* the device side of the copy */
	size_t count;         /* elements */
	uint64_t enq, start, end;
};

/* Calls of host_alloc so far, and host_alloc'd buffers not yet freed. */
typedef unsigned long (*fake_gpu_host_allocs_fn)(void);
typedef unsigned long (*fake_gpu_host_live_fn)(void);
/* Enqueue fn(arg) on stream as a "kernel": it runs in stream order on the
 * stream's worker (after the random delay) and may read and write device
 * memory. 0 or -ENOMEM. */
typedef int (*fake_gpu_launch_fn)(void *stream, void (*fn)(void *arg), void *arg);
/* Copy up to max trace entries (oldest first) into out; returns how many
 * there are (it keeps the first FAKE_GPU_TRACE_MAX). */
typedef size_t (*fake_gpu_trace_fn)(struct fake_gpu_op *out, size_t max);
typedef void (*fake_gpu_trace_reset_fn)(void);
/* dmabuf_export calls that succeeded so far. */
typedef unsigned long (*fake_gpu_dmabuf_exports_fn)(void);
/* The largest random delay per operation, microseconds (0: none). */
typedef void (*fake_gpu_set_delay_fn)(unsigned max_us);
/* The nth copy_h2d (copy_d2h) call from now (1: the next) fails to
 * enqueue with -EIO, as a device that faults would; 0: none fails. */
typedef void (*fake_gpu_fail_h2d_fn)(unsigned long nth);
typedef void (*fake_gpu_fail_d2h_fn)(unsigned long nth);
/* is_device returns err (a negative errno, as for a CUDA failure) from
 * now on; 0: it answers again. */
typedef void (*fake_gpu_fail_is_device_fn)(int err);
/* The calling thread's current device (cudaSetDevice, cudaGetDevice): a
 * new thread is on device 0. Streams, events and device memory belong to
 * the device current where they are made. */
typedef void (*fake_gpu_set_device_fn)(int dev);
typedef int (*fake_gpu_device_fn)(void);
/* 1 (default): each call that enqueues on a stream works on the stream's
 * device, as the library's gpu_enter makes it (gpu/lib.c); 0: on the
 * calling thread's, so a kernel into a stream of another device fails
 * (-EINVAL, "a kernel launched into a stream of device 1 from device
 * 0"), as it did before the library switched. */
typedef void (*fake_gpu_set_switch_fn)(int on);

#define FAKE_GPU_TRACE_MAX 65536

#endif
