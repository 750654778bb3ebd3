/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_eal.c - DPDK's EAL for pboxd: its arguments (those before "--"), with
 * pboxd's defaults for the devices they create, and its cleanup. A
 * device's arguments are read when the EAL probes it, before pboxd's own
 * code runs, so a pboxd option for a device goes into its --vdev here:
 * busy_budget on net_af_xdp (--xdp-busy-budget; a --vdev that names
 * busy_budget keeps its own).
 */
#include "dataplane/dp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>

#include "common/errmsg.h"
#include "nic/devargs.h"

/* argv[i] with the --vdev it gives amended, in a new string; NULL if
 * argv[i] gives none or its vdev needs nothing. *err set if out of memory. */
static char *amend_vdev(char **argv, int i, const struct dp_eal_params *p, int *err)
{
	const char *spec = NULL, *arg = argv[i];
	char budget[16], *out;
	size_t prefix = 0;

	if (strncmp(arg, "--vdev=", 7) == 0) {
		spec = arg + 7;
		prefix = 7;
	} else if (i > 0 && strcmp(argv[i - 1], "--vdev") == 0) {
		spec = arg;
	}
	if (!spec || !devargs_is_driver(spec, "net_af_xdp"))
		return NULL;
	size_t len = strlen(arg) + 32;
	if (!(out = malloc(len))) {
		*err = -ENOMEM;
		return NULL;
	}
	memcpy(out, arg, prefix);
	snprintf(budget, sizeof(budget), "%u", p->xdp_busy_budget);
	if (devargs_add_default(spec, "busy_budget", budget, out + prefix, len - prefix) != 1) {
		free(out);
		return NULL;
	}
	return out;
}

int dp_eal_init(int argc, char **argv, const struct dp_eal_params *p, char *err, size_t errlen)
{
	char **eargv = calloc((size_t)argc + 1, sizeof(*eargv));
	char **mine = calloc((size_t)argc + 1, sizeof(*mine));
	int rc = eargv && mine ? 0 : -ENOMEM;

	/* only the EAL's arguments: up to "--" */
	for (int i = 0; i < argc && rc == 0; i++) {
		if (i > 0 && strcmp(argv[i], "--") == 0)
			break;
		mine[i] = amend_vdev(argv, i, p, &rc);
	}
	if (rc) {
		rc = errmsg(err, errlen, rc, "out of memory for the EAL's arguments");
	} else {
		for (int i = 0; i < argc; i++)
			eargv[i] = mine[i] ? mine[i] : argv[i];
		/* The EAL copies what it keeps of its arguments (devargs, options). */
		rc = rte_eal_init(argc, eargv);
		if (rc < 0) {
			int e = rte_errno;
			rc = errmsg(err, errlen, e ? -e : -EINVAL, "EAL initialisation failed: %s",
				    rte_strerror(e));
		}
	}
	for (int i = 0; mine && i < argc; i++)
		free(mine[i]);
	free(mine);
	free(eargv);
	return rc;
}

void dp_eal_cleanup(void)
{
	rte_eal_cleanup();
}
