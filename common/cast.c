/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cast.c - cast_copy (common/cast.h): the CPU reference of the GPU
 * library's fused copy kernels. A loop over elem_cast (common/elem.h),
 * the function each device thread runs, specialised per pair of types so
 * that the dtype tests leave the loop.
 */
#include <string.h>

#include "common/cast.h"
#include "common/elem.h"

/* The loop for one (dst_dt, src_dt) pair: called with constants, inlined,
 * so the compiler drops the dtype branches of elem_load/elem_store. */
static inline __attribute__((always_inline)) void
cast_loop(void *dst, enum gpu_dtype dst_dt, const void *src, enum gpu_dtype src_dt,
	  size_t count, float scale)
{
	for (size_t i = 0; i < count; i++)
		elem_cast(dst, dst_dt, src, src_dt, i, scale);
}

/* Per source type: the three destination types. */
static inline __attribute__((always_inline)) void
cast_from(void *dst, enum gpu_dtype dst_dt, const void *src, enum gpu_dtype src_dt,
	  size_t count, float scale)
{
	switch (dst_dt) {
	case GPU_F16:
		cast_loop(dst, GPU_F16, src, src_dt, count, scale);
		break;
	case GPU_BF16:
		cast_loop(dst, GPU_BF16, src, src_dt, count, scale);
		break;
	default:
		cast_loop(dst, GPU_F32, src, src_dt, count, scale);
		break;
	}
}

void cast_copy(void *dst, enum gpu_dtype dst_dt, const void *src, enum gpu_dtype src_dt,
	       size_t count, float scale)
{
	if (cast_size(dst_dt) == 0)
		dst_dt = GPU_F32;
	if (cast_size(src_dt) == 0)
		src_dt = GPU_F32;
	if (dst_dt == src_dt && scale == 1.0f) {
		if (count)
			memcpy(dst, src, count * cast_size(dst_dt));
		return;
	}
	switch (src_dt) {
	case GPU_F16:
		cast_from(dst, dst_dt, src, GPU_F16, count, scale);
		break;
	case GPU_BF16:
		cast_from(dst, dst_dt, src, GPU_BF16, count, scale);
		break;
	default:
		cast_from(dst, dst_dt, src, GPU_F32, count, scale);
		break;
	}
}
