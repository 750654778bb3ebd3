/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sdnotify.h - systemd's notify protocol (Type=notify units, sd_notify(3))
 * without libsystemd: one datagram per state to the Unix socket named by
 * $NOTIFY_SOCKET ("/path" or "@abstract"). pboxd says READY=1 once its
 * ports and control listeners are up, STOPPING=1 on its way out, and,
 * when the unit sets WatchdogSec (systemd exports $WATCHDOG_USEC and
 * $WATCHDOG_PID), WATCHDOG=1 at half that interval from its control loop,
 * so a hung control thread gets the unit restarted.
 */
#ifndef PBOX_SDNOTIFY_H
#define PBOX_SDNOTIFY_H

#include <stddef.h>
#include <stdint.h>

struct sdnotify {
	int fd;                  /* -1: not under systemd (no $NOTIFY_SOCKET) */
	char path[108];
	unsigned path_len;       /* bytes of the address (abstract: no NUL) */
	uint64_t watchdog_ns;    /* 0: no watchdog; else the ping interval */
	uint64_t last_ping_ns;
};

/* Read the environment; a no-op later if not under systemd. 0, or a
 * negative errno with a message in err when $NOTIFY_SOCKET is set but
 * cannot be used (then the other calls are no-ops too). */
int sdnotify_open(struct sdnotify *n, char *err, size_t errlen);

/* Send state ("READY=1", "STOPPING=1", "STATUS=..."); 0 or -errno
 * (0 when not under systemd). */
int sdnotify_send(struct sdnotify *n, const char *state);

/* WATCHDOG=1 if the interval has passed since the last ping (now in ns,
 * CLOCK_MONOTONIC): 0, or the ping's -errno. */
int sdnotify_watchdog(struct sdnotify *n, uint64_t now_ns);

void sdnotify_close(struct sdnotify *n);

#endif
