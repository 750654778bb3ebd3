/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * devargs.c - DPDK device arguments as text (see devargs.h). A spec is
 * "NAME[,key=value]..." as given to the EAL's --vdev; keys are compared
 * whole ("busy_budget" is not "budget").
 */
#include "nic/devargs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

bool devargs_is_driver(const char *spec, const char *driver)
{
	size_t n = strlen(driver), name = strcspn(spec, ",");

	return name >= n && strncmp(spec, driver, n) == 0;
}

int devargs_get(const char *spec, const char *key, char *val, size_t vallen)
{
	size_t klen = strlen(key);
	const char *p = strchr(spec, ',');

	while (p) {
		p++;
		size_t len = strcspn(p, ",");
		if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
			size_t vlen = len - klen - 1;
			if (vlen >= vallen)
				return -ENOSPC;
			memcpy(val, p + klen + 1, vlen);
			val[vlen] = '\0';
			return 1;
		}
		p = strchr(p, ',');
	}
	return 0;
}

int devargs_add_default(const char *spec, const char *key, const char *value,
			char *out, size_t outlen)
{
	char v[2];
	int named = devargs_get(spec, key, v, sizeof(v));
	int n = named != 0 ? snprintf(out, outlen, "%s", spec) :
		snprintf(out, outlen, "%s,%s=%s", spec, key, value);

	if (n < 0 || (size_t)n >= outlen)
		return -ENOSPC;
	return named != 0 ? 0 : 1;
}
