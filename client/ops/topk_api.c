/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_api.c - pbox_topk: the top-k selection of common/topk.h for
 * callers of libpbox (no client needed).
 */
#include "client/ops/ops.h"
#include "common/topk.h"

int pbox_topk(const float *x, size_t n, size_t k, uint32_t *idx, float *val, size_t *m)
{
	if (!x || !idx || !val || !m || n > UINT32_MAX)
		return PBOX_EINVAL;
	*m = topk_select(NULL, x, n, k, idx, val);
	return 0;
}
