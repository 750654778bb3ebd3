/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * errors.c - names of the PBOX_E* codes and the "last error" message that
 * says which job, rank and key a failure concerns. Each thread keeps the
 * message of its own last failure, with the client it failed on: threads
 * sharing a client each read their own (another thread's failure between
 * a call and pbox_last_error cannot replace it). The client also keeps
 * its latest failure, from any thread, for a thread that had none on it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/core/req.h"

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
	case PBOX_EAGAIN:    return "the job dropped its calls in flight (a rank was replaced): call again";
	default:             return "unknown pbox error code";
	}
}

/* This thread's last failure and the client's serial (0: none); and the
 * copy of a client's latest that pbox_last_error gave this thread when it
 * had none on that client. */
static __thread struct {
	uint64_t serial;
	char msg[CLIENT_MSG_LEN];
	char latest[CLIENT_MSG_LEN];
} thread_err;

uint64_t client_serial_next(void)
{
	static uint64_t next;   /* only ever incremented, atomically */

	return __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
}

void client_error_locked(pbox_client *c, const char *msg)
{
	snprintf(c->last_err, sizeof(c->last_err), "%s", msg);
	memcpy(thread_err.msg, c->last_err, sizeof(thread_err.msg));
	thread_err.serial = c->serial;
}

int client_error(pbox_client *c, int rc, const char *fmt, ...)
{
	char msg[CLIENT_MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&c->lock);
	client_error_locked(c, msg);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

const char *pbox_last_error(const pbox_client *c)
{
	if (!c)
		return "no client (pbox_connect could not allocate one)";
	if (thread_err.serial == c->serial)
		return thread_err.msg;
	/* c's latest is another thread's, which any thread may replace while
	 * this one reads it: copied under the lock its writers take, and
	 * this thread's copy handed out, never c->last_err itself */
	pbox_client *w = (pbox_client *)c;   /* for its lock only */
	pthread_mutex_lock(&w->lock);
	memcpy(thread_err.latest, c->last_err, sizeof(thread_err.latest));
	pthread_mutex_unlock(&w->lock);
	return thread_err.latest;
}

const char *pbox_err_name(int rc)
{
	switch (rc) {
	case PBOX_OK:        return "PBOX_OK";
	case PBOX_EINVAL:    return "PBOX_EINVAL";
	case PBOX_ENOMEM:    return "PBOX_ENOMEM";
	case PBOX_ECONNECT:  return "PBOX_ECONNECT";
	case PBOX_EPROTO:    return "PBOX_EPROTO";
	case PBOX_EREJECTED: return "PBOX_EREJECTED";
	case PBOX_ETIMEDOUT: return "PBOX_ETIMEDOUT";
	case PBOX_EABORTED:  return "PBOX_EABORTED";
	case PBOX_EBUSY:     return "PBOX_EBUSY";
	case PBOX_ECLOSED:   return "PBOX_ECLOSED";
	case PBOX_ESYS:      return "PBOX_ESYS";
	case PBOX_ENOTSUP:   return "PBOX_ENOTSUP";
	case PBOX_EPERM:     return "PBOX_EPERM";
	case PBOX_EAGAIN:    return "PBOX_EAGAIN";
	default:             return "PBOX_E?";   /* not an identifier: no code's name */
	}
}
