/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * errors.c - names of the PBOX_E* codes and the per-client "last error"
 * message that says which job, rank and key a failure concerns.
 */
#include <stdarg.h>
#include <stdio.h>

#include "client/internal.h"

const char *pbox_strerror(int rc)
{
	switch (rc) {
	case PBOX_OK:        return "success";
	case PBOX_EINVAL:    return "invalid argument";
	case PBOX_ENOMEM:    return "out of memory";
	case PBOX_ECONNECT:  return "cannot reach the box's control address";
	case PBOX_EPROTO:    return "the box answered something unexpected";
	case PBOX_EREJECTED: return "the box refused the request";
	case PBOX_ETIMEDOUT: return "no progress within the timeout";
	case PBOX_EABORTED:  return "the job was aborted";
	case PBOX_EBUSY:     return "this key already has a call in flight";
	case PBOX_ECLOSED:   return "the connection to the box was lost";
	case PBOX_ESYS:      return "a system call failed";
	case PBOX_ENOTSUP:   return "not supported here (device, driver or library missing)";
	case PBOX_EPERM:     return "missing privileges";
	default:             return "unknown pbox error code";
	}
}

int client_error(pbox_client *c, int rc, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&c->lock);
	va_start(ap, fmt);
	vsnprintf(c->last_err, sizeof(c->last_err), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

const char *pbox_last_error(const pbox_client *c)
{
	if (!c)
		return "no client (pbox_connect could not allocate one)";
	return c->last_err;
}
