/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * devargs.h - DPDK device arguments as text ("net_af_xdp0,iface=eth1,
 * busy_budget=64"), without DPDK: what a --vdev names and a key pboxd adds
 * to it before the EAL probes the device (pboxd's --xdp-busy-budget).
 */
#ifndef PBOX_DEVARGS_H
#define PBOX_DEVARGS_H

#include <stdbool.h>
#include <stddef.h>

/* Whether spec's device name (the part before the first ',') starts with
 * driver ("net_af_xdp" for "net_af_xdp0,iface=eth1"). */
bool devargs_is_driver(const char *spec, const char *driver);

/*
 * The value of key in spec's arguments (after the device name) into
 * val[vallen]. Returns 1 if spec names the key, 0 if not, -ENOSPC if the
 * value does not fit.
 */
int devargs_get(const char *spec, const char *key, char *val, size_t vallen);

/*
 * spec with ",key=value" added unless spec names key already (then spec
 * as it is), into out[outlen]. Returns 1 if added, 0 if spec names it,
 * -ENOSPC if out is too small.
 */
int devargs_add_default(const char *spec, const char *key, const char *value,
			char *out, size_t outlen);

#endif
