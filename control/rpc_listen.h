/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_listen.h - opening the control listeners: a TCP socket on
 * "ADDR:PORT" and a Unix socket at a path (replacing a stale one, refusing
 * to steal a live one). Split from rpc_server.c so the event loop reads on
 * its own.
 */
#ifndef PBOX_RPC_LISTEN_H
#define PBOX_RPC_LISTEN_H

#include <stddef.h>
#include <stdint.h>

/* Listening, non-blocking TCP socket; *port gets the bound port. Returns
 * the fd or -errno with a message naming addr as the `what` address
 * ("control", "metrics"). */
int rpc_listen_tcp(const char *what, const char *addr, unsigned *port, char *err,
		   size_t errlen);

/* Listening, non-blocking Unix socket at path with permissions mode, owned
 * by group (a name; NULL or "" = pboxd's). Returns the fd or -errno with a
 * message naming path. */
int rpc_listen_unix(const char *path, uint32_t mode, const char *group, char *err,
		    size_t errlen);

#endif
