/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sum.c - picks the sum-kernel variant for this CPU, and the public scalar
 * conversions (the reference for every variant; see sum_impl.h for the
 * rounding and NaN rules).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "common/sum.h"
#include "common/sum_impl.h"

#if defined(__x86_64__) || defined(__i386__)
/* clang's __builtin_cpu_supports does not know "f16c": ask CPUID. The OS
 * side (AVX state enabled in XCR0) is covered by the avx2/avx512 checks. */
static int cpu_has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

/* Does this CPU (and OS: __builtin_cpu_supports checks XCR0) run a variant? */
static int variant_supported(const struct sum_kernels *k)
{
	if (k == &sum_kernels_scalar)
		return 1;
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	if (k == &sum_kernels_avx2)
		return __builtin_cpu_supports("avx2") && cpu_has_f16c();
	if (k == &sum_kernels_avx512)
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && cpu_has_f16c();
#endif
	return 0;
}

/* Fastest first. */
static const struct sum_kernels *const variants[] = {
	&sum_kernels_avx512,
	&sum_kernels_avx2,
	&sum_kernels_scalar,
};

#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

const struct sum_kernels *sum_by_name(const char *name)
{
	if (name == NULL)
		return NULL;
	for (size_t i = 0; i < NVARIANTS; i++)
		if (strcmp(variants[i]->name, name) == 0)
			return variant_supported(variants[i]) ? variants[i] : NULL;
	return NULL;
}

const struct sum_kernels *sum_pick(const char *want, char *warn, size_t warnlen)
{
	if (warnlen)
		warn[0] = '\0';
	if (want != NULL && *want != '\0') {
		const struct sum_kernels *k = sum_by_name(want);
		if (k != NULL)
			return k;
		snprintf(warn, warnlen, "PBOX_KERNEL=%s is unknown or not supported by this CPU "
			 "(scalar, avx2 needs AVX2+F16C, avx512 needs AVX-512 F/BW/VL+F16C); "
			 "ignored", want);
	}
	for (size_t i = 0; i < NVARIANTS; i++)
		if (variant_supported(variants[i]))
			return variants[i];
	return &sum_kernels_scalar;
}

const struct sum_kernels *sum_best(void)
{
	char warn[256];
	const struct sum_kernels *k = sum_pick(getenv("PBOX_KERNEL"), warn, sizeof(warn));

	if (warn[0])
		fprintf(stderr, "pbox: %s\n", warn);
	return k;
}

static const struct sum_kernels *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
	chosen = sum_best();
}

const struct sum_kernels *sum_chosen(void)
{
	pthread_once(&chosen_once, choose);
	return chosen;
}

float half_to_float(uint16_t h)
{
	return elem_h2f(h);
}

uint16_t float_to_half(float f)
{
	return elem_f2h(f);
}

float bf16_to_float(uint16_t b)
{
	return elem_b2f(b);
}

uint16_t float_to_bf16(float f)
{
	return elem_f2b(f);
}

void sum_widen(float *dst, const void *const *src, unsigned n, size_t count, unsigned dtype)
{
	for (size_t i = 0; i < count; i++) {
		float acc = 0;
		for (unsigned k = 0; k < n; k++) {
			uint16_t h = ((const uint16_t *)src[k])[i];
			float x = dtype == WIRE_F16 ? elem_h2f(h) : elem_b2f(h);
			acc = k == 0 ? x : acc + x;
		}
		dst[i] = n >= 2 ? sum_canon(acc) : acc;
	}
}

void sum_narrow(void *dst, const float *src, size_t count, unsigned dtype)
{
	uint16_t *d = dst;

	if (dtype == WIRE_F32) {
		memcpy(dst, src, count * sizeof(float));
		return;
	}
	for (size_t i = 0; i < count; i++)
		d[i] = dtype == WIRE_F16 ? elem_f2h(src[i]) : elem_f2b(src[i]);
}
