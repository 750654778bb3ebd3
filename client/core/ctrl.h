/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctrl.h - the control connection of a client (ctrl.c): JSON-RPC 2.0
 * lines over TCP to the box (docs/rpc.md). pbox_connect's calls wait for
 * their answer (ctrl_call); the progress thread sends without waiting
 * (ctrl_send) and reads what comes (ctrl_read). Part of core.
 */
#ifndef PBOX_CLIENT_CORE_CTRL_H
#define PBOX_CLIENT_CORE_CTRL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/jsonl.h"

struct ctrl {
	int fd;                  /* -1 when closed */
	struct jsonl_buf in;
	uint64_t next_id;
	char addr[128];          /* "host:port" as given, for messages */
};

void ctrl_init(struct ctrl *k);
/* Connect to "host:port" within timeout_ms. 0, or PBOX_EINVAL (bad
 * address), PBOX_ECONNECT, PBOX_ENOMEM with the cause in err. */
int ctrl_connect(struct ctrl *k, const char *hostport, int timeout_ms,
		 char *err, size_t errlen);
void ctrl_close(struct ctrl *k);
/* Send a request; params is consumed. *id gets its id. 0 or PBOX_ENOMEM,
 * PBOX_ECLOSED, PBOX_ESYS (message in err). */
int ctrl_send(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
	      uint64_t *id, char *err, size_t errlen);
/* Send a notification (no id, no answer); params is consumed. 0 or the
 * codes of ctrl_send. */
int ctrl_notify(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
		char *err, size_t errlen);
/* Send a request and wait for its answer (notifications are skipped), all
 * within timeout_ms. params is consumed; *result is a new reference on
 * success. 0, or PBOX_ETIMEDOUT, PBOX_ECLOSED, PBOX_EPROTO, PBOX_EREJECTED,
 * PBOX_EABORTED, PBOX_ENOMEM, PBOX_ESYS; err starts with the method. */
int ctrl_call(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
	      json_t **result, char *err, size_t errlen);
/* Read what the socket has and hand every complete message to cb (a new
 * parsed object, borrowed by cb). 0, PBOX_ECLOSED (end of stream or a read
 * error), or PBOX_EPROTO (a line is not JSON or too long); err says which. */
int ctrl_read(struct ctrl *k, void (*cb)(void *arg, json_t *msg), void *arg,
	      char *err, size_t errlen);
/* The same for the lines already read, without reading: a ctrl_call
 * stops at its answer, so lines that came in the same read (a
 * notification right after it) wait in the buffer, and the socket will
 * not become readable for them. 0 or PBOX_EPROTO. */
int ctrl_read_buffered(struct ctrl *k, void (*cb)(void *arg, json_t *msg), void *arg,
		       char *err, size_t errlen);
/* Map a JSON-RPC error object of `method` to a PBOX code and a message
 * "method: box message". */
int ctrl_error(const json_t *error, const char *method, char *err, size_t errlen);

#endif
