/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * secret.h - the operator secret: a shared string that a remote operator
 * must present for destructive control methods (job_abort over TCP; see
 * docs/rpc.md and docs/reliability.md). Read from a file that only its
 * owner may read, compared in constant time. Used by pboxd (config) and
 * pboxctl (--secret-file).
 */
#ifndef PBOX_SECRET_H
#define PBOX_SECRET_H

#include <stddef.h>

#define SECRET_MIN_LEN 16
#define SECRET_MAX_LEN 256
#define SECRET_LINE_MAX 4096 /* the first line with its white space */

/*
 * Read the secret from path: its first line (at most SECRET_LINE_MAX
 * bytes) without surrounding white space, SECRET_MIN_LEN..SECRET_MAX_LEN
 * printable bytes (no NUL), into out (at least SECRET_MAX_LEN + 1 bytes,
 * NUL-terminated). The file must be a regular file not readable or
 * writable by group or others (chmod 600).
 * Returns the length, or a negative errno with the reason in err: that of
 * open(2) or read(2) (-ENOENT, -EACCES, -ELOOP for a symbolic link, ...);
 * -EINVAL if it is not a regular file, its first line or the secret has
 * the wrong length, or the secret a non-printable byte; -EPERM if group
 * or others have access.
 */
int secret_load(const char *path, char *out, char *err, size_t errlen);

/* 1 if a[0..alen) equals b[0..blen), else 0; time depends only on blen
 * (the stored secret's length), never on where the first difference is. */
int secret_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
