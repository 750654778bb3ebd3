/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cast.h - the CPU reference of the GPU library's fused copies
 * (common/gpu_ops.h copy_d2h and copy_h2d): a copy with a scale and a
 * cast in one pass, element by element with the per-element code of
 * common/elem.h that the device kernels (gpu/cast.cu) compile too. The
 * unit tests check it (tests/unit/test_cast.c), the device test compares
 * the kernels with it (tests/gpu/kernels.c), and a fake device can call it
 * to do what the kernels do, bit for bit.
 */
#ifndef PBOX_CAST_H
#define PBOX_CAST_H

#include <stddef.h>

#include "common/gpu_ops.h"

/*
 * dst[i] = (dst_dt) ((float) src[i] * scale) for i < count:
 *  - src[i] is widened to binary32 exactly (f16, bf16) or taken as it is;
 *  - scale 1.0f leaves it untouched; any other scale multiplies once in
 *    binary32 (round to nearest even, subnormals kept), and a NaN product
 *    becomes the canonical quiet NaN 0x7fc00000;
 *  - the result is rounded to nearest even to dst_dt (elem.h has the
 *    NaN rules).
 * With dst_dt == src_dt and scale 1.0f it is a memcpy: the bits come back
 * unchanged, NaN payloads included (a cast through binary32 would quiet
 * an f16 signalling NaN). dst and src do not overlap; both are aligned
 * for their types. A dtype outside enum gpu_dtype is taken as GPU_F32
 * (callers check dtypes where they come in).
 */
void cast_copy(void *dst, enum gpu_dtype dst_dt, const void *src, enum gpu_dtype src_dt,
	       size_t count, float scale);

/* Bytes of one element of dt: 4 or 2 (0 for a value outside the enum). */
static inline size_t cast_size(enum gpu_dtype dt)
{
	return dt == GPU_F32 ? 4 : dt == GPU_F16 || dt == GPU_BF16 ? 2 : 0;
}

#endif
