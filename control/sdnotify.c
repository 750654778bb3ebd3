/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sdnotify.c - sd_notify's datagrams, written out (see sdnotify.h).
 */
#include "control/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sdnotify_open(struct sdnotify *n, char *err, size_t errlen)
{
	const char *path = getenv("NOTIFY_SOCKET");
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	size_t len = path ? strlen(path) : 0;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (!path || !*path)
		return 0;
	if (len < 2 || len >= sizeof(n->path) || (path[0] != '/' && path[0] != '@')) {
		snprintf(err, errlen, "NOTIFY_SOCKET=%.200s is not a socket path ('/...' or '@...',"
			 " under %zu bytes): systemd will not hear READY=1", path, sizeof(n->path));
		return -EINVAL;
	}
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		int e = errno;
		snprintf(err, errlen, "NOTIFY_SOCKET=%s: cannot make a socket: %s", path,
			 strerror(e));
		return -e;
	}
	memcpy(n->path, path, len);
	if (path[0] == '@')
		n->path[0] = '\0'; /* abstract namespace */
	n->path_len = (unsigned)len + (path[0] == '/');
	/* the watchdog is ours if WATCHDOG_PID is unset or names us */
	if (usec && (!pid || strtol(pid, NULL, 10) == (long)getpid())) {
		unsigned long long us = strtoull(usec, NULL, 10);
		n->watchdog_ns = us * 1000ull / 2;
	}
	return 0;
}

int sdnotify_send(struct sdnotify *n, const char *state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	if (n->fd < 0)
		return 0;
	memcpy(a.sun_path, n->path, n->path_len);
	ssize_t r = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&a,
			   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n->path_len));
	return r < 0 ? -errno : 0;
}

int sdnotify_watchdog(struct sdnotify *n, uint64_t now_ns)
{
	if (n->fd < 0 || !n->watchdog_ns || now_ns - n->last_ping_ns < n->watchdog_ns)
		return 0;
	n->last_ping_ns = now_ns;
	return sdnotify_send(n, "WATCHDOG=1");
}

void sdnotify_close(struct sdnotify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}
