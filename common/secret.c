/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * secret.c - load and compare the operator secret (secret.h).
 */
#include "common/secret.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int secret_load(const char *path, char *out, char *err, size_t errlen)
{
	char buf[SECRET_MAX_LEN + 64];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	out[0] = '\0';
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot open secret file '%s': %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "secret file '%s' is not a regular file", path);
		return -EINVAL;
	}
	if (st.st_mode & 077) {
		close(fd);
		snprintf(err, errlen, "secret file '%s' has mode %04o: group and others must "
			 "have no access (chmod 600)", path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read secret file '%s': %s", path, strerror(e));
		return -e;
	}
	buf[n] = '\0';
	char *s = buf, *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	while (isspace((unsigned char)*s))
		s++;
	size_t len = strlen(s);
	while (len && isspace((unsigned char)s[len - 1]))
		s[--len] = '\0';
	if (len < SECRET_MIN_LEN || len > SECRET_MAX_LEN) {
		snprintf(err, errlen, "secret in '%s' is %zu bytes; it must be %d to %d "
			 "(e.g. head -c 24 /dev/urandom | base64)", path, len, SECRET_MIN_LEN,
			 SECRET_MAX_LEN);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		if (!isprint((unsigned char)s[i])) {
			snprintf(err, errlen, "secret in '%s' has a non-printable byte at %zu",
				 path, i);
			return -EINVAL;
		}
	}
	memcpy(out, s, len + 1);
	return (int)len;
}

int secret_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	volatile uint8_t diff = alen != blen;

	for (size_t i = 0; i < blen; i++)
		diff |= (uint8_t)((i < alen ? (uint8_t)a[i] : 0) ^ (uint8_t)b[i]);
	return diff == 0;
}
