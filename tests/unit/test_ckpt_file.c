/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ckpt_file.c - checkpoint files (control/ckpt_file.h): the decoder
 * refuses a truncated or overlong file, one of another job, world, shape,
 * dtype or optimizer, naming the file and what is wrong; it accepts
 * version 1 files where no job is asked for; inputs fuzz_ckpt found are
 * refused. The file operations refuse a FIFO and a link at once.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/wire.h"
#include "control/ckpt_file.h"
#include "dataplane/dp.h"

enum { COUNT = 16 };

static const struct ckpt_hdr sgd = {
	.version = 2, .key = 7, .count = COUNT, .dtype = WIRE_F32, .rdtype = WIRE_F32,
	.average = 1, .kind = OPTIM_SGD, .momentum = 0.9, .steps = 42, .planes = 1,
	.world = 2, .job = "train",
};

static uint8_t img[CKPT_HDR + CKPT_NAME_MAX + 2 * COUNT * sizeof(float) + 8];

/* h's file image into img: its length. */
static size_t image(const struct ckpt_hdr *h)
{
	size_t hlen = ckpt_head_bytes(h), n = (1 + h->planes) * h->count;

	ckpt_encode(img, h);
	for (size_t i = 0; i < n; i++) {
		float f = (float)i;
		memcpy(img + hlen + i * sizeof(f), &f, sizeof(f));
	}
	return hlen + n * sizeof(float);
}

static int decode(size_t len, const struct ckpt_hdr *want, char *err, size_t errlen)
{
	struct ckpt_hdr got;
	const uint8_t *data;

	return ckpt_decode(img, len, want, "/d/key-7.pboxckpt", &got, &data, err, errlen);
}

static void decode__whole_file_accepted_arrays_at_the_end(void **state)
{
	size_t len = image(&sgd);
	struct ckpt_hdr got;
	const uint8_t *data;
	char err[256] = "";
	float f;

	(void)state;
	assert_int_equal(ckpt_decode(img, len, &sgd, "p", &got, &data, err, sizeof(err)), 0);
	assert_int_equal(got.version, 2);
	assert_int_equal(got.steps, 42);
	assert_int_equal(got.world, 2);
	assert_string_equal(got.job, "train");
	assert_ptr_equal(data, img + CKPT_HDR + 5);
	memcpy(&f, data + (2 * COUNT - 1) * sizeof(float), sizeof(f));
	assert_true(f == 2 * COUNT - 1);
	assert_int_equal(ckpt_file_bytes(&got), len);
}

static void decode__truncated_or_overlong_named(void **state)
{
	size_t len = image(&sgd);
	char err[256];

	(void)state;
	assert_int_equal(decode(len - 1, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/d/key-7.pboxckpt is truncated: 236 bytes, not the 237"));
	assert_int_equal(decode(50, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/d/key-7.pboxckpt is truncated: 50 bytes"));
	assert_int_equal(decode(CKPT_HDR + 2, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "truncated in its job name"));
	assert_int_equal(decode(len + 4, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/d/key-7.pboxckpt is too long: 241 bytes"));
}

static void decode__other_job_world_shape_dtype_optimizer_named(void **state)
{
	struct ckpt_hdr h = sgd, want = sgd;
	char err[256];

	(void)state;
	snprintf(h.job, sizeof(h.job), "other");
	assert_int_equal(decode(image(&h), &want, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/d/key-7.pboxckpt is of another job: 'other', not 'train'"));
	want.job[0] = '\0';   /* an explicit restore: any job */
	want.world = 0;
	assert_int_equal(decode(image(&h), &want, err, sizeof(err)), 0);
	h = sgd;
	h.world = 4;
	assert_int_equal(decode(image(&h), &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "of another world: 4 ranks, not 2"));
	static const char *const what[] = { "count", "gradient dtype", "weights_dtype",
					    "optimizer", "hyperparameters", "key" };
	for (int i = 0; i < 6; i++) {
		h = sgd;
		switch (i) {
		case 0: h.count = COUNT - 1; break;
		case 1: h.dtype = WIRE_BF16; break;
		case 2: h.rdtype = WIRE_BF16; break;
		case 3: h.kind = OPTIM_ADAM; break;
		case 4: h.momentum = 0.8; break;
		case 5: h.key = 8; break;
		}
		assert_int_equal(decode(image(&h), &sgd, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "/d/key-7.pboxckpt is of another key or shape"));
		assert_non_null(strstr(err, what[i]));
	}
}

static void decode__version1_any_job_only(void **state)
{
	struct ckpt_hdr want = sgd;
	size_t len = image(&sgd) - 5;
	char err[256];

	(void)state;
	img[8] = 1;                                   /* version 1: no name */
	memmove(img + CKPT_HDR, img + CKPT_HDR + 5, len - CKPT_HDR);
	memset(img + 96, 0xa5, 8);                    /* not read */
	assert_int_equal(decode(len, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "of another job: '' (a version 1 file names none)"));
	want.job[0] = '\0';
	want.world = 0;
	assert_int_equal(decode(len, &want, err, sizeof(err)), 0);
	img[8] = 3;
	assert_int_equal(decode(len, &want, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "format version is unknown"));
	memcpy(img, "PBOXCKP0", 8);
	assert_int_equal(decode(len, &want, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is not a pbox checkpoint"));
}

/* fuzz_ckpt: a flag byte other than 0/1 and the pad bytes after it were
 * accepted (the file then encoded back otherwise); and a count whose
 * arrays' size overflows 64 bits. */
static void decode__fuzz_found_flag_pad_count_overflow_refused(void **state)
{
	struct ckpt_hdr want = sgd, h = sgd;
	size_t len = image(&sgd);
	char err[256];

	(void)state;
	img[29] = 0x20;
	assert_int_equal(decode(len, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "header is damaged"));
	img[29] = 1;
	img[31] = 1;
	assert_int_equal(decode(len, &sgd, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "header is damaged"));
	/* count 2^62, one plane: 2 * 4 * 2^62 bytes wraps to 0 */
	h.count = want.count = 1ull << 62;
	len = ckpt_head_bytes(&h);
	ckpt_encode(img, &h);
	assert_int_equal(decode(len, &want, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "too large"));
}

static void read__fifo_link_directory_refused_at_once(void **state)
{
	char dir[] = "/tmp/pbox-ckf-XXXXXX", path[256], err[512];
	uint8_t *buf = NULL;
	size_t len = 0;

	(void)state;
	alarm(20); /* a blocking open of the FIFO would hang here */
	assert_non_null(mkdtemp(dir));
	int dfd = ckpt_dir_open(dir, err, sizeof(err));
	assert_true(dfd >= 0);
	snprintf(path, sizeof(path), "%s/key-1.pboxckpt", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(ckpt_read(dfd, dir, 1, 1 << 20, NULL, &buf, &len, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "key-1.pboxckpt is not a regular file"));
	snprintf(path, sizeof(path), "%s/key-2.pboxckpt", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(ckpt_read(dfd, dir, 2, 1 << 20, NULL, &buf, &len, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "a symbolic link, refused"));
	assert_int_equal(ckpt_read(dfd, dir, 3, 1 << 20, NULL, &buf, &len, err, sizeof(err)),
			 -ENOENT);
	/* writing over a FIFO at the temporary name: removed, a new file */
	snprintf(path, sizeof(path), "%s/key-1.pboxckpt.tmp", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(ckpt_write_tmp(dfd, dir, 1, "ab", 2, "cd", 2, NULL, err, sizeof(err)),
			 0);
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode) && st.st_size == 4);
	unlink(path);
	for (int k = 1; k <= 2; k++) {
		snprintf(path, sizeof(path), "%s/key-%d.pboxckpt", dir, k);
		unlink(path);
	}
	close(dfd);
	rmdir(dir);
	alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decode__whole_file_accepted_arrays_at_the_end),
		cmocka_unit_test(decode__truncated_or_overlong_named),
		cmocka_unit_test(decode__other_job_world_shape_dtype_optimizer_named),
		cmocka_unit_test(decode__version1_any_job_only),
		cmocka_unit_test(decode__fuzz_found_flag_pad_count_overflow_refused),
		cmocka_unit_test(read__fifo_link_directory_refused_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
