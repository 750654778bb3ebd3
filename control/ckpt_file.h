/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_file.h - a PS key's checkpoint file on disk (docs/operations.md
 * "Checkpoints"): its format (encode, and a pure decoder that checks a
 * whole file image against the declaration it is loaded into), the rules
 * a checkpoint directory must meet, and the file operations that never
 * follow a link, never block on a FIFO or device, and replace a file
 * atomically (write, fsync, rename, fsync the directory).
 *
 * File layout, little-endian: "PBOXCKP1", u32 version (1 or 2), u32 key,
 * u64 count, u8 gradient dtype, u8 weights dtype, u8 average, u8
 * optimizer, u8 nesterov, u8 buffer written (SGD: the momentum buffer was
 * given by key_write), 2 zero bytes, f64 momentum, dampening,
 * weight_decay, beta1, beta2, eps, u64 steps, u32 planes, u32 0, then
 * version 2: u16 world, u16 name length, 4 zero bytes (version 1: 8
 * bytes not read); that is CKPT_HDR bytes; then (version 2) the job's
 * name; then (1 + planes) arrays of count f32: the weights, then each
 * optimizer state plane. pbox writes version 2 and reads both.
 *
 * Directory rule: a checkpoint directory is an absolute path naming a
 * directory (not a symbolic link) owned by pboxd's effective user or root
 * and writable by no one else (no group or other write bit, sticky or
 * not): pboxd writes there as root and loads what it finds, so anyone who
 * could write there could plant links, FIFOs or weights.
 */
#ifndef PBOX_CKPT_FILE_H
#define PBOX_CKPT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "control/box.h"

#define CKPT_HDR 104
#define CKPT_NAME_MAX 255
#define CKPT_PATH 4200   /* DIR/key-<K>.pboxckpt.tmp fits */

/* What a file says about itself; for a declaration, what it must say. */
struct ckpt_hdr {
	uint32_t version, key;
	uint64_t count;
	uint8_t dtype, rdtype, average, kind, nesterov, buf_written;
	double momentum, dampening, weight_decay, beta1, beta2, eps;
	uint64_t steps;
	uint32_t planes;
	uint16_t world;             /* 0: not recorded (version 1) / any */
	char job[CKPT_NAME_MAX + 1]; /* "": not recorded (version 1) / any */
};

/* Bytes of h's header and name (version 2), and of the whole file. */
size_t ckpt_head_bytes(const struct ckpt_hdr *h);
uint64_t ckpt_file_bytes(const struct ckpt_hdr *h);

/* h as version 2 into b (ckpt_head_bytes(h) bytes). */
void ckpt_encode(uint8_t *b, const struct ckpt_hdr *h);

/*
 * Check the image of a whole file (buf, len; read from path, named in
 * messages) against want, the key's declaration (want->job "": a file of
 * any job; want->world 0: of any world): its magic and version, its
 * key, count, dtypes, optimizer and hyperparameters, job and world, and
 * its size (a truncated or overlong file). 0 with *got and *data (the
 * 1 + planes arrays, unaligned), or -EINVAL naming the file and the
 * first thing wrong. Touches nothing else: a refused file loads nothing.
 */
int ckpt_decode(const uint8_t *buf, size_t len, const struct ckpt_hdr *want,
		const char *path, struct ckpt_hdr *got, const uint8_t **data, char *err,
		size_t errlen);

/* Open dir (O_DIRECTORY, not following a link) after checking the
 * directory rule: a descriptor, or -EINVAL / -EPERM / -errno with the
 * message. */
int ckpt_dir_open(const char *dir, char *err, size_t errlen);

/* DIR/key-<K>.pboxckpt into buf (size >= CKPT_PATH); name only: the
 * file's name in its directory. */
void ckpt_path(char *buf, size_t size, const char *dir, uint32_t key);

/*
 * Write head (hlen bytes) and data (dlen bytes) into key-<K>.pboxckpt.tmp
 * in directory dfd (named dir in messages): whatever held that name is
 * removed first (a link is removed, never followed), the file is created
 * anew (O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode 0600), written
 * in pieces telling ka between them, and fsynced. 0, or -errno with the
 * message (the temporary file removed).
 */
int ckpt_write_tmp(int dfd, const char *dir, uint32_t key, const void *head, size_t hlen,
		   const void *data, size_t dlen, const struct box_keepalive *ka, char *err,
		   size_t errlen);

/* Rename key-<K>.pboxckpt.tmp to key-<K>.pboxckpt in dfd (the old
 * checkpoint is replaced at once): 0 or -errno with the message.
 * ckpt_discard removes the temporary file; ckpt_dir_sync fsyncs the
 * directory (the renames are durable): 0 or -errno with the message. */
int ckpt_commit(int dfd, const char *dir, uint32_t key, char *err, size_t errlen);
void ckpt_discard(int dfd, uint32_t key);
int ckpt_dir_sync(int dfd, const char *dir, char *err, size_t errlen);

/*
 * Read key-<K>.pboxckpt of directory dfd whole into a new buffer (*buf,
 * *len; free it): opened without following a link or blocking, refused
 * unless a regular file of at most max bytes, read in pieces telling ka.
 * 0, or -ENOENT (none), -EINVAL (not a regular file, too large, or
 * shorter than its size said), -ENOMEM, -errno, with the message.
 */
int ckpt_read(int dfd, const char *dir, uint32_t key, uint64_t max,
	      const struct box_keepalive *ka, uint8_t **buf, size_t *len, char *err,
	      size_t errlen);

#endif
