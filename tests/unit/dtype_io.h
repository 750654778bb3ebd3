/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dtype_io.h - for libpbox's tests: element i of a buffer of a pbox dtype
 * written from and read as a float (f16/bf16 rounded to nearest even and
 * widened exactly, by common/sum.h's reference conversions).
 */
#ifndef PBOX_TEST_DTYPE_IO_H
#define PBOX_TEST_DTYPE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "common/sum.h"
#include "include/pbox.h"

static inline void put(void *buf, pbox_dtype t, size_t i, float v)
{
	if (t == PBOX_F32)
		((float *)buf)[i] = v;
	else
		((uint16_t *)buf)[i] = t == PBOX_F16 ? float_to_half(v) : float_to_bf16(v);
}

static inline float get(const void *buf, pbox_dtype t, size_t i)
{
	if (t == PBOX_F32)
		return ((const float *)buf)[i];
	uint16_t h = ((const uint16_t *)buf)[i];
	return t == PBOX_F16 ? half_to_float(h) : bf16_to_float(h);
}

#endif
