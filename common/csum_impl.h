/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * csum_impl.h - the variants behind frame_csum_partial (common/frame.h),
 * scalar and AVX2, each compiled for its ISA only (common/Makefile.inc);
 * frame.c picks one when the program is loaded. Every variant returns
 * the same integer, the plain sum of the 32-bit words and the tail, so
 * partial sums from different variants may be added.
 */
#ifndef PBOX_COMMON_CSUM_IMPL_H
#define PBOX_COMMON_CSUM_IMPL_H

#include <stddef.h>
#include <stdint.h>

uint64_t frame_csum_scalar(const void *p, size_t len, uint64_t sum);
uint64_t frame_csum_avx2(const void *p, size_t len, uint64_t sum);

#endif
