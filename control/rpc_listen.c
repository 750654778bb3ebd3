/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_listen.c - open the TCP and Unix listeners of the control plane.
 * See rpc_listen.h.
 */
#include "control/rpc_listen.h"

#include "common/rpc_client.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BACKLOG 128

static int fail(char *err, size_t errlen, int rc, const char *fmt, const char *what)
{
	snprintf(err, errlen, fmt, what, strerror(-rc));
	return rc;
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

int rpc_listen_tcp(const char *what, const char *addr, unsigned *port, char *err,
		   size_t errlen)
{
	char host[256], serv[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	int one = 1;

	if (rpc_hostport_split(addr, host, sizeof(host), serv, sizeof(serv)) < 0) {
		snprintf(err, errlen, "%s address '%s' is not ADDR:PORT", what, addr);
		return -EINVAL;
	}
	int rc = getaddrinfo(host, serv, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "%s address '%s': %s", what, addr, gai_strerror(rc));
		return -EINVAL;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		snprintf(err, errlen, "%s address '%s': socket: %s", what, addr, strerror(-rc));
		return rc;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, BACKLOG) < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		close(fd);
		snprintf(err, errlen, "cannot listen on %s address %s: %s", what, addr,
			 strerror(-rc));
		return rc;
	}
	freeaddrinfo(ai);
	*port = bound_port(fd);
	return fd;
}

/* A socket file at path: replace it if nobody listens, refuse if someone does. */
static int clear_stale(const char *path, const struct sockaddr_un *sa, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : fail(err, errlen, -errno, "%s: %s", path);
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket; not replacing it", path);
		return -EEXIST;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(err, errlen, -errno, "%s: socket: %s", path);
	int live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(fd);
	if (live) {
		snprintf(err, errlen, "%s: another pboxd is listening there", path);
		return -EADDRINUSE;
	}
	if (unlink(path) < 0)
		return fail(err, errlen, -errno, "cannot remove stale socket %s: %s", path);
	return 0;
}

/* Create the socket's directory if it is missing (one level, 0755). */
static void make_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];

	snprintf(dir, sizeof(dir), "%s", path);
	mkdir(dirname(dir), 0755);
}

int rpc_listen_unix(const char *path, uint32_t mode, const char *group, char *err,
		    size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path %s is longer than %zu bytes", path,
			 sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	make_parent(path);
	if ((rc = clear_stale(path, &sa, err, errlen)) < 0)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(err, errlen, -errno, "%s: socket: %s", path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		close(fd);
		return fail(err, errlen, rc, "cannot bind %s: %s", path);
	}
	if (group && *group) {
		struct group *g = getgrnam(group);
		if (!g || chown(path, (uid_t)-1, g->gr_gid) < 0) {
			rc = g ? -errno : -ENOENT;
			close(fd);
			unlink(path);
			snprintf(err, errlen, "%s: --rpc-socket-group %s: %s", path, group,
				 g ? strerror(-rc) : "no such group");
			return rc;
		}
	}
	if (chmod(path, mode) < 0 || listen(fd, BACKLOG) < 0) {
		rc = -errno;
		close(fd);
		unlink(path);
		return fail(err, errlen, rc, "cannot listen on %s: %s", path);
	}
	return fd;
}
