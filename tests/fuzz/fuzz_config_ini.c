/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_config_ini.c - the INI reader of `pboxd --config FILE`
 * (control/config_ini.c, and through it every option's parser in
 * control/options.c and option_types.c) on arbitrary file contents.
 *
 * The input is the file, read through a memfd (/proc/self/fd/N), into a
 * box_config holding pboxd's defaults. Checked: the answer is 0 or
 * -EINVAL; a failure's message names the file (every message starts with
 * it, or says it cannot open or read it), one about a line too long
 * only for a line that is, one about a NUL byte only for a file with one;
 * a file without a [pboxd]
 * section never passes; reading the same file twice from the defaults
 * gives the same settings, byte for byte (nothing depends on stale or
 * uninitialized memory); the string settings stay NUL-terminated within
 * their fields.
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "control/box.h"
#include "control/options.h"

#include "tests/fuzz/fuzz_check.h"

static int fd = -1;
static char path[64];

static int read_into(struct box_config *c, char *err, size_t errlen)
{
	memset(c, 0xA5, sizeof(*c));   /* what defaults leave unset shows */
	box_config_defaults(c);
	err[0] = '\0';
	return box_config_read_ini(c, path, err, errlen);
}

/* Whether text (len bytes) has a line "[ pboxd ]" (blanks around). */
static int has_pboxd_section(const uint8_t *d, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t e = i;
		while (e < len && d[e] != '\n')
			e++;
		size_t a = i, b = e;
		while (a < b && (d[a] == ' ' || (d[a] >= '\t' && d[a] <= '\r')))
			a++;
		if (a < b && d[a] == '[') {
			const char *p = memchr(d + a, ']', b - a);
			size_t s = a + 1, t = p ? (size_t)((const uint8_t *)p - d) : b;
			while (s < t && (d[s] == ' ' || (d[s] >= '\t' && d[s] <= '\r')))
				s++;
			while (t > s && (d[t - 1] == ' ' || (d[t - 1] >= '\t' && d[t - 1] <= '\r')))
				t--;
			if (p && t - s == 5 && memcmp(d + s, "pboxd", 5) == 0)
				return 1;
		}
		i = e + 1;
	}
	return 0;
}

/* Whether err is exactly "PATH:LINE: what" (not a message that quotes
 * the file's text). */
static int is_msg(const char *err, const char *what)
{
	size_t pl = strlen(path);
	const char *p = err + pl;

	if (strncmp(err, path, pl) != 0 || *p++ != ':' || *p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return p[0] == ':' && p[1] == ' ' && strcmp(p + 2, what) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct box_config a, b;
	char ea[1024], eb[1024];

	if (fd < 0) {
		fd = memfd_create("fuzz_config_ini", MFD_CLOEXEC);
		CHECK(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	CHECK(ftruncate(fd, 0) == 0);
	CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);

	int ra = read_into(&a, ea, sizeof(ea));
	int rb = read_into(&b, eb, sizeof(eb));
	CHECK(ra == 0 || ra == -EINVAL);
	CHECK(ra == rb);
	CHECK(strcmp(ea, eb) == 0);
	if (ra < 0) {
		CHECK(strncmp(ea, path, strlen(path)) == 0 || strstr(ea, path));
		/* "line longer than" only for a line that is */
		size_t longest = 0;
		for (size_t i = 0, start = 0; i <= size; i++)
			if (i == size || data[i] == '\n') {
				if (i - start > longest)
					longest = i - start;
				start = i + 1;
			}
		if (is_msg(ea, "line longer than 1022 characters"))
			CHECK(longest >= 1023);
		if (is_msg(ea, "a NUL byte (not a text file?)"))
			CHECK(memchr(data, '\0', size));
	} else {
		CHECK(has_pboxd_section(data, size));
		CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		CHECK(memchr(a.control, '\0', sizeof(a.control)));
		CHECK(memchr(a.metrics, '\0', sizeof(a.metrics)));
		CHECK(memchr(a.rpc_socket, '\0', sizeof(a.rpc_socket)));
		CHECK(memchr(a.rpc_socket_group, '\0', sizeof(a.rpc_socket_group)));
		CHECK(memchr(a.eal, '\0', sizeof(a.eal)));
		CHECK(memchr(a.operator_secret, '\0', sizeof(a.operator_secret)));
	}
	return 0;
}
