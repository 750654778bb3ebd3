/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net.h - the host's network as the roads to the box (transport.h) and
 * pbox_connect need it: this host's source address toward the box, a UDP
 * port reserved for a raw road, and the path MTU with its probe. Part of
 * the transport room (client/transport/): common/ below it, nothing else.
 * Errors: 0 or a negative PBOX_* code, with a message in err.
 */
#ifndef PBOX_CLIENT_TRANSPORT_NET_H
#define PBOX_CLIENT_TRANSPORT_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/transport/transport.h"

/* ---- udp.c: the kernel UDP road, and what the raw roads share of it ---- */

/* This host's source address toward dst (a throwaway connected socket). */
int udp_source_ip(const struct sockaddr_in *dst, struct in_addr *src,
		  char *err, size_t errlen);
/* A UDP socket bound to INADDR_ANY:0 (nonblocking); *port its port, host
 * order. The raw transports hold one so the kernel gives their port to
 * nobody else and answers nothing on it. 0 or PBOX_ESYS. */
int udp_reserve_port(int *fd, uint16_t *port, char *err, size_t errlen);

/* ---- pmtu.c: the automatic MTU ------------------------------------------ */

/* The route's MTU toward dst (IP_MTU of a connected socket). 0 or PBOX_ESYS. */
int pmtu_route(const struct sockaddr_in *dst, uint32_t *mtu, char *err, size_t errlen);
/* mtu lowered to the smallest route MTU toward the box's addresses. */
uint32_t pmtu_route_min(const struct sockaddr_in *eps, unsigned neps, uint32_t mtu);
/* A full-segment PROBE for mtu to every box address came back through fd
 * (within ~0.6 s): 0, else PBOX_ETIMEDOUT. */
int pmtu_confirm(int fd, const struct sockaddr_in *eps, unsigned neps, uint32_t mtu);

#endif
