/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_finite.h - a PS key's state must be finite to be restored
 * (docs/operations.md "Checkpoints"): a checkpoint whose weights or
 * optimizer state hold a NaN or an Inf (saved from a job whose gradients
 * passed one, policy pass) is refused, naming where, instead of starting
 * a job from weights that can never become finite again. One check, apart
 * from the file's reading and writing (ps_ckpt.c), which calls it on a
 * checked file's arrays before they are loaded.
 */
#ifndef PBOX_PS_FINITE_H
#define PBOX_PS_FINITE_H

#include <stddef.h>
#include <stdint.h>

/* The narrays arrays (count fp32 each, any alignment: the weights, then
 * the optimizer kind's state planes, enum optim_kind) all finite: 0; else
 * -EINVAL with
 * "<what>: its <array>[<i>] is <NaN|inf|-inf>; ..." in err (what: e.g.
 * "job J key K: the checkpoint P"). */
int ps_state_finite(const void *const *arrays, unsigned narrays, uint64_t count,
		    unsigned optim_kind, const char *what, char *err, size_t errlen);

#endif
