/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_finite.c - is a PS key's state finite (ps_finite.h)? The arrays may
 * be unaligned (a checkpoint file's image): every load goes through
 * memcpy (common/finite.h); the vector check over each array, the scalar
 * one only to name the first bad element.
 */
#include "control/ps_finite.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/finite.h"
#include "dataplane/dp.h"

/* torch.optim's names for the arrays of a key of optimizer kind. */
static const char *array_name(unsigned kind, unsigned a)
{
	if (a == 0)
		return "weights";
	if (kind == OPTIM_SGD)
		return "momentum_buffer";
	return a == 1 ? "exp_avg" : "exp_avg_sq";
}

int ps_state_finite(const void *const *arrays, unsigned narrays, uint64_t count,
		    unsigned optim_kind, const char *what, char *err, size_t errlen)
{
	for (unsigned a = 0; a < narrays; a++) {
		if (finite_all_f32(arrays[a], count))
			continue;
		size_t i = finite_first(arrays[a], count, WIRE_F32);
		float v;
		memcpy(&v, (const uint8_t *)arrays[a] + 4 * i, sizeof(v));
		return errmsg(err, errlen, -EINVAL, "%s: its %s[%zu] is %s (a NaN or Inf got into "
			      "the state, e.g. under the nonfinite policy pass): not restored; "
			      "restore an earlier checkpoint", what, array_name(optim_kind, a), i,
			      isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
	}
	return 0;
}
