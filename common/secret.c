/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * secret.c - load and compare the operator secret (secret.h).
 */
#include "common/secret.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"

int secret_load(const char *path, char *out, char *err, size_t errlen)
{
	/* the whole first line, white space included, and one byte more to
	 * tell a line of SECRET_LINE_MAX bytes from a longer one: a line cut
	 * short, or read as a C string up to a NUL, would be a shorter secret
	 * than the file holds */
	char buf[SECRET_LINE_MAX + 1];
	const char *nl = NULL;
	size_t n = 0;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	out[0] = '\0';
	if (fd < 0) {
		int e = errno;
		return errmsg(err, errlen, -e, "cannot open secret file '%s': %s", path,
			      strerror(e));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return errmsg(err, errlen, -EINVAL, "secret file '%s' is not a regular file", path);
	}
	if (st.st_mode & 077) {
		close(fd);
		return errmsg(err, errlen, -EPERM,
			      "secret file '%s' has mode %04o: group and others must "
			      "have no access (chmod 600)", path, (unsigned)(st.st_mode & 07777));
	}
	while (!nl && n < sizeof(buf)) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return errmsg(err, errlen, -e, "cannot read secret file '%s': %s", path,
				      strerror(e));
		}
		if (r == 0)
			break;
		nl = memchr(buf + n, '\n', (size_t)r);
		n += (size_t)r;
	}
	close(fd);
	if (!nl && n > SECRET_LINE_MAX)
		return errmsg(err, errlen, -EINVAL,
			      "the first line of secret file '%s' is over %d bytes",
			      path, SECRET_LINE_MAX);
	size_t from = 0, to = nl ? (size_t)(nl - buf) : n;
	while (from < to && isspace((unsigned char)buf[from]))
		from++;
	while (to > from && isspace((unsigned char)buf[to - 1]))
		to--;
	size_t len = to - from;
	if (len < SECRET_MIN_LEN || len > SECRET_MAX_LEN)
		return errmsg(err, errlen, -EINVAL,
			      "secret in '%s' is %zu bytes; it must be %d to %d "
			      "(e.g. head -c 24 /dev/urandom | base64)", path, len, SECRET_MIN_LEN,
			      SECRET_MAX_LEN);
	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char)buf[from + i])) /* a NUL too */
			return errmsg(err, errlen, -EINVAL,
				      "secret in '%s' has a non-printable byte at %zu", path, i);
	memcpy(out, buf + from, len);
	out[len] = '\0';
	return (int)len;
}

int secret_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile uint8_t diff = alen != blen;

	for (size_t i = 0; i < blen; i++)
		diff |= (uint8_t)((i < alen ? (uint8_t)a[i] : 0) ^ (uint8_t)b[i]);
	return diff == 0;
}
