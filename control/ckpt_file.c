/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_file.c - checkpoint files: the format, the directory rule, and file
 * operations that neither follow links nor block on anything but a
 * regular file. See ckpt_file.h.
 */
#include "control/ckpt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "dataplane/dp.h"
#include "common/wire.h"

#define MAGIC "PBOXCKP1"
#define IO_PIECE (64u << 20) /* bytes written or read between keepalives */

/* ---- format ---- */

size_t ckpt_head_bytes(const struct ckpt_hdr *h)
{
	return CKPT_HDR + strnlen(h->job, CKPT_NAME_MAX);
}

uint64_t ckpt_file_bytes(const struct ckpt_hdr *h)
{
	return ckpt_head_bytes(h) + (1 + (uint64_t)h->planes) * h->count * sizeof(float);
}

static uint8_t *put(uint8_t *p, const void *v, size_t n)
{
	memcpy(p, v, n); /* x86-64: already little-endian */
	return p + n;
}

static const uint8_t *get(const uint8_t *p, void *v, size_t n)
{
	memcpy(v, p, n);
	return p + n;
}

void ckpt_encode(uint8_t *b, const struct ckpt_hdr *h)
{
	uint32_t version = 2, zero = 0;
	uint16_t world = h->world, nlen = (uint16_t)strnlen(h->job, CKPT_NAME_MAX);
	uint8_t small[8] = { h->dtype, h->rdtype, h->average, h->kind, h->nesterov,
			     h->buf_written };
	uint8_t *p = put(b, MAGIC, 8);

	p = put(p, &version, 4);
	p = put(p, &h->key, 4);
	p = put(p, &h->count, 8);
	p = put(p, small, 8);
	p = put(p, &h->momentum, 8);
	p = put(p, &h->dampening, 8);
	p = put(p, &h->weight_decay, 8);
	p = put(p, &h->beta1, 8);
	p = put(p, &h->beta2, 8);
	p = put(p, &h->eps, 8);
	p = put(p, &h->steps, 8);
	p = put(p, &h->planes, 4);
	p = put(p, &zero, 4);
	p = put(p, &world, 2);
	p = put(p, &nlen, 2);
	p = put(p, &zero, 4);
	memcpy(p, h->job, nlen);
}

/* The fixed header of b (CKPT_HDR bytes) into h; the name's length in
 * *nlen. NULL, or what is wrong with it. */
static const char *hdr_decode(const uint8_t *b, struct ckpt_hdr *h, uint16_t *nlen)
{
	uint32_t zero, zero2;
	uint8_t small[8];
	const uint8_t *p = b + 8;

	memset(h, 0, sizeof(*h));
	*nlen = 0;
	if (memcmp(b, MAGIC, 8) != 0)
		return "it is not a pbox checkpoint (no PBOXCKP1 magic)";
	p = get(p, &h->version, 4);
	p = get(p, &h->key, 4);
	p = get(p, &h->count, 8);
	p = get(p, small, 8);
	h->dtype = small[0];
	h->rdtype = small[1];
	h->average = small[2];
	h->kind = small[3];
	h->nesterov = small[4];
	h->buf_written = small[5] != 0;
	p = get(p, &h->momentum, 8);
	p = get(p, &h->dampening, 8);
	p = get(p, &h->weight_decay, 8);
	p = get(p, &h->beta1, 8);
	p = get(p, &h->beta2, 8);
	p = get(p, &h->eps, 8);
	p = get(p, &h->steps, 8);
	p = get(p, &h->planes, 4);
	p = get(p, &zero, 4);
	if (h->version != 1 && h->version != 2)
		return "its format version is unknown";
	/* a flag is 0 or 1, the pad zero: a file that says otherwise is
	 * not one pbox wrote */
	if (zero != 0 || h->planes > OPTIM_MAX_PLANES || small[5] > 1 || small[6] || small[7])
		return "its header is damaged";
	if (h->version == 2) {
		p = get(p, &h->world, 2);
		p = get(p, nlen, 2);
		get(p, &zero2, 4);
		if (zero2 != 0 || *nlen > CKPT_NAME_MAX)
			return "its header is damaged";
	}
	return NULL;
}

/* The first field where the file's header h differs from want, or NULL. */
static const char *differs(const struct ckpt_hdr *h, const struct ckpt_hdr *want)
{
	if (h->key != want->key)
		return "key";
	if (h->count != want->count)
		return "count";
	if (h->dtype != want->dtype)
		return "gradient dtype";
	if (h->rdtype != want->rdtype)
		return "weights_dtype";
	if (h->average != want->average)
		return "sum";
	if (h->kind != want->kind)
		return "optimizer";
	if (h->nesterov != want->nesterov || h->momentum != want->momentum ||
	    h->dampening != want->dampening || h->weight_decay != want->weight_decay ||
	    h->beta1 != want->beta1 || h->beta2 != want->beta2 || h->eps != want->eps)
		return "hyperparameters";
	if (h->planes != want->planes)
		return "state planes";
	return NULL;
}

int ckpt_decode(const uint8_t *buf, size_t len, const struct ckpt_hdr *want,
		const char *path, struct ckpt_hdr *got, const uint8_t **data, char *err,
		size_t errlen)
{
	uint16_t nlen = 0;
	const char *why;

	if (len < CKPT_HDR)
		return errmsg(err, errlen, -EINVAL, "%s is truncated: %zu bytes, less than a "
			      "checkpoint's %d-byte header", path, len, CKPT_HDR);
	if ((why = hdr_decode(buf, got, &nlen)) != NULL)
		return errmsg(err, errlen, -EINVAL, "%s is refused: %s", path, why);
	if (len < (size_t)CKPT_HDR + nlen)
		return errmsg(err, errlen, -EINVAL, "%s is truncated in its job name", path);
	memcpy(got->job, buf + CKPT_HDR, nlen);
	got->job[nlen] = '\0';
	if (memchr(got->job, '\0', nlen))
		return errmsg(err, errlen, -EINVAL, "%s is refused: its job name is damaged",
			      path);
	if ((why = differs(got, want)) != NULL)
		return errmsg(err, errlen, -EINVAL, "the checkpoint %s is of another key or "
			      "shape: its %s differs from the declaration (%" PRIu64 " %s, %s)",
			      path, why, got->count,
			      wire_dtype_name(got->dtype) ? wire_dtype_name(got->dtype) : "?",
			      optim_name(got->kind) ? optim_name(got->kind) : "?");
	if (want->job[0] && strcmp(got->job, want->job) != 0)
		return errmsg(err, errlen, -EINVAL, "the checkpoint %s is of another job: '%s'"
			      "%s, not '%s'", path, got->job, got->version == 1 ?
			      " (a version 1 file names none)" : "", want->job);
	if (want->world && got->world != want->world)
		return errmsg(err, errlen, -EINVAL, "the checkpoint %s is of another world: "
			      "%u ranks, not %u", path, got->world, want->world);
	/* the arrays' size in 64 bits (a count near 2^62 would wrap it) */
	if (got->count > (UINT64_MAX - CKPT_HDR - CKPT_NAME_MAX) / sizeof(float) /
			  (1 + (uint64_t)got->planes))
		return errmsg(err, errlen, -EINVAL, "%s is refused: its count %" PRIu64 " is "
			      "too large", path, got->count);
	uint64_t need = ckpt_file_bytes(got);
	if (len != need)
		return errmsg(err, errlen, -EINVAL, "%s is %s: %zu bytes, not the %" PRIu64
			      " of %" PRIu64 " elements and %" PRIu32 " state planes", path,
			      len < need ? "truncated" : "too long", len, need, got->count,
			      got->planes);
	*data = buf + CKPT_HDR + nlen;
	return 0;
}

/* ---- directory ---- */

void ckpt_path(char *buf, size_t size, const char *dir, uint32_t key)
{
	if (dir)
		snprintf(buf, size, "%s/key-%" PRIu32 ".pboxckpt", dir, key);
	else
		snprintf(buf, size, "key-%" PRIu32 ".pboxckpt", key);
}

int ckpt_dir_open(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	if (!dir || dir[0] != '/')
		return errmsg(err, errlen, -EINVAL, "checkpoint directory %s is not an absolute "
			      "path", dir ? dir : "(none)");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
			return errmsg(err, errlen, -EINVAL, "checkpoint directory %s is a symbolic "
				      "link: a symbolic link is refused (name the directory)", dir);
		return errmsg(err, errlen, rc == -ENOENT || rc == -ENOTDIR ? -EINVAL : rc,
			      "checkpoint directory %s: %s", dir, strerror(-rc));
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return errmsg(err, errlen, rc, "checkpoint directory %s: %s", dir, strerror(-rc));
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		close(fd);
		return errmsg(err, errlen, -EPERM, "checkpoint directory %s is owned by uid %u, "
			      "neither root nor pboxd's user (uid %u): refused", dir,
			      (unsigned)st.st_uid, (unsigned)geteuid());
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		close(fd);
		return errmsg(err, errlen, -EPERM, "checkpoint directory %s has mode %04o: "
			      "writable by %s, who could plant links, FIFOs or weights there; "
			      "refused (chmod go-w)", dir, (unsigned)(st.st_mode & 07777),
			      st.st_mode & S_IWOTH ? "others" : "its group");
	}
	return fd;
}

int ckpt_dir_sync(int dfd, const char *dir, char *err, size_t errlen)
{
	if (fsync(dfd) == 0)
		return 0;
	int rc = -errno;
	return errmsg(err, errlen, rc, "cannot fsync checkpoint directory %s: %s", dir,
		      strerror(-rc));
}

/* ---- files ---- */

static void tmp_name(char *buf, size_t size, uint32_t key)
{
	snprintf(buf, size, "key-%" PRIu32 ".pboxckpt.tmp", key);
}

/* write n bytes in pieces, telling ka between them. 0 or -errno. */
static int write_all(int fd, const void *p, size_t n, const struct box_keepalive *ka)
{
	const uint8_t *b = p;
	size_t piece = 0;

	while (n) {
		ssize_t w = write(fd, b, n < IO_PIECE - piece ? n : IO_PIECE - piece);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		b += w;
		n -= (size_t)w;
		if ((piece += (size_t)w) >= IO_PIECE) {
			piece = 0;
			box_keepalive(ka);
		}
	}
	box_keepalive(ka);
	return 0;
}

int ckpt_write_tmp(int dfd, const char *dir, uint32_t key, const void *head, size_t hlen,
		   const void *data, size_t dlen, const struct box_keepalive *ka, char *err,
		   size_t errlen)
{
	char name[64];
	int fd, rc;

	tmp_name(name, sizeof(name), key);
	/* a leftover (a crash mid-save) or anything planted: removed, not
	 * followed; O_EXCL then makes the file ours, new */
	if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) {
		rc = -errno;
		return errmsg(err, errlen, rc, "cannot remove the old %s/%s: %s", dir, name,
			      strerror(-rc));
	}
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		return errmsg(err, errlen, rc, "cannot create %s/%s: %s", dir, name,
			      strerror(-rc));
	}
	rc = write_all(fd, head, hlen, ka);
	if (rc == 0)
		rc = write_all(fd, data, dlen, ka);
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(dfd, name, 0);
		return errmsg(err, errlen, rc, "cannot write %s/%s: %s", dir, name,
			      strerror(-rc));
	}
	return 0;
}

int ckpt_commit(int dfd, const char *dir, uint32_t key, char *err, size_t errlen)
{
	char name[64], tmp[64];

	ckpt_path(name, sizeof(name), NULL, key);
	tmp_name(tmp, sizeof(tmp), key);
	if (renameat(dfd, tmp, dfd, name) == 0)
		return 0;
	int rc = -errno;
	return errmsg(err, errlen, rc, "cannot rename %s/%s to %s: %s", dir, tmp, name,
		      strerror(-rc));
}

void ckpt_discard(int dfd, uint32_t key)
{
	char tmp[64];

	tmp_name(tmp, sizeof(tmp), key);
	unlinkat(dfd, tmp, 0);
}

int ckpt_read(int dfd, const char *dir, uint32_t key, uint64_t max,
	      const struct box_keepalive *ka, uint8_t **buf, size_t *len, char *err,
	      size_t errlen)
{
	char name[64];
	struct stat st;
	int fd, rc;

	ckpt_path(name, sizeof(name), NULL, key);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		return errmsg(err, errlen, rc == -ELOOP ? -EINVAL : rc, "%s/%s: %s", dir, name,
			      rc == -ELOOP ? "a symbolic link, refused" : strerror(-rc));
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return errmsg(err, errlen, rc, "%s/%s: %s", dir, name, strerror(-rc));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return errmsg(err, errlen, -EINVAL, "%s/%s is not a regular file (a FIFO, device "
			      "or directory): refused", dir, name);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return errmsg(err, errlen, -EINVAL, "%s/%s is %lld bytes, more than a checkpoint "
			      "of this key can be (%" PRIu64 "): refused", dir, name,
			      (long long)st.st_size, max);
	}
	size_t n = (size_t)st.st_size, got = 0;
	uint8_t *b = malloc(n ? n : 1);
	if (!b) {
		close(fd);
		return errmsg(err, errlen, -ENOMEM, "%s/%s: out of memory for %zu bytes", dir,
			      name, n);
	}
	while (got < n) {
		size_t m = n - got < IO_PIECE ? n - got : IO_PIECE;
		ssize_t r = read(fd, b + got, m);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		box_keepalive(ka);
	}
	close(fd);
	if (got < n) {
		free(b);
		return errmsg(err, errlen, -EINVAL, "%s/%s: read %zu of its %zu bytes (it shrank, "
			      "or an I/O error)", dir, name, got, n);
	}
	*buf = b;
	*len = n;
	return 0;
}
