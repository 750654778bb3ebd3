/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_placement.c - unit tests of the fleet placement
 * (client/core/placement.c): determinism, alignment and coverage of the
 * partitions, balance by bytes for ResNet-50's keys (per parameter and
 * in DDP's buckets) over 4 boxes, the partitions that move when a box is
 * removed or added, weights, the hash, and bad input.
 * PLACE_SWEEP=1 prints the figures of docs/protocol.md "Fleet placement"
 * for a range of partition sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/core/placement.h"
#include "include/pbox.h"

#define MAXKEYS 256
#define MIB (1024ull * 1024)

static const struct place_box four[] = {
	{ "10.0.0.1:7470", 1 }, { "10.0.0.2:7470", 1 },
	{ "10.0.0.3:7470", 1 }, { "10.0.0.4:7470", 1 },
};
static const struct place_box five[] = {
	{ "10.0.0.1:7470", 1 }, { "10.0.0.2:7470", 1 },
	{ "10.0.0.3:7470", 1 }, { "10.0.0.4:7470", 1 }, { "10.0.0.5:7470", 1 },
};

/* torchvision's resnet50 parameters in declaration order (weights and
 * biases of conv1, bn1, layer1-4's bottlenecks, fc), as element counts:
 * 161 tensors, 25,557,032 parameters. */
static uint32_t resnet50_params(uint64_t *out)
{
	static const unsigned blocks[4] = { 3, 4, 6, 3 };
	uint32_t n = 0;
	uint64_t in = 64;

	out[n++] = 64 * 3 * 7 * 7;
	out[n++] = 64;
	out[n++] = 64;
	for (unsigned l = 0; l < 4; l++) {
		uint64_t w = 64ull << l;
		for (unsigned b = 0; b < blocks[l]; b++) {
			out[n++] = in * w;            /* conv1 1x1 */
			out[n++] = w; out[n++] = w;
			out[n++] = w * w * 9;         /* conv2 3x3 */
			out[n++] = w; out[n++] = w;
			out[n++] = w * 4 * w;         /* conv3 1x1 */
			out[n++] = 4 * w; out[n++] = 4 * w;
			if (b == 0) {                 /* downsample */
				out[n++] = in * 4 * w;
				out[n++] = 4 * w; out[n++] = 4 * w;
			}
			in = 4 * w;
		}
	}
	out[n++] = 2048 * 1000;
	out[n++] = 1000;
	return n;
}

/* DDP's buckets of f32 parameters: parameters in reverse order, a bucket
 * closed once it holds at least its cap (1 MiB for the first, 25 MiB
 * after: torch's _DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb). */
static uint32_t ddp_buckets(const uint64_t *params, uint32_t n, uint64_t *out)
{
	uint32_t nb = 0;
	uint64_t cur = 0, cap = 1 * MIB;

	for (uint32_t i = n; i-- > 0;) {
		cur += params[i];
		if (cur * 4 >= cap) {
			out[nb++] = cur;
			cur = 0;
			cap = 25 * MIB;
		}
	}
	if (cur)
		out[nb++] = cur;
	return nb;
}

/* keys of f32 from element counts (in order, or reversed), ids 1.. */
static void to_keys(struct place_key *k, const uint64_t *counts, uint32_t n, int reverse)
{
	for (uint32_t i = 0; i < n; i++)
		k[i] = (struct place_key){ .key = i + 1,
					   .count = counts[reverse ? n - 1 - i : i], .elem = 4 };
}

static uint32_t resnet_keys(struct place_key *k, int buckets, int reverse)
{
	uint64_t params[MAXKEYS], b[MAXKEYS];
	uint32_t n = resnet50_params(params);

	if (buckets) {
		uint32_t nb = ddp_buckets(params, n, b);
		to_keys(k, b, nb, reverse);
		return nb;
	}
	to_keys(k, params, n, reverse);
	return n;
}

static uint64_t total_bytes(const struct placement *p)
{
	uint64_t t = 0;

	for (uint32_t b = 0; b < p->nboxes; b++)
		t += p->box_bytes[b];
	return t;
}

/* How far the fullest box is over its weighted share, in 1/1000. */
static uint64_t imbalance_pm(const struct placement *p, const struct place_box *boxes)
{
	uint64_t t = total_bytes(p), wsum = 0, worst = 0;

	for (uint32_t b = 0; b < p->nboxes; b++)
		wsum += boxes[b].weight;
	for (uint32_t b = 0; b < p->nboxes; b++) {
		uint64_t pm = p->box_bytes[b] * wsum * 1000 / (t * boxes[b].weight);
		if (pm > worst)
			worst = pm;
	}
	return worst - 1000;
}

/* The worst key's fullest box over its share of that key, in 1/1000,
 * among keys of at least 2 partitions per box. */
static uint64_t key_imbalance_pm(const struct placement *p, const struct place_key *keys)
{
	uint64_t worst = 0;

	for (uint32_t k = 0; k < p->nkeys; k++) {
		uint64_t on[PLACE_MAX_BOXES] = { 0 }, mx = 0;
		if (p->key_first[k + 1] - p->key_first[k] < 2 * p->nboxes)
			continue;
		for (uint32_t i = p->key_first[k]; i < p->key_first[k + 1]; i++)
			on[p->parts[i].box] += p->parts[i].count;
		for (uint32_t b = 0; b < p->nboxes; b++)
			if (on[b] > mx)
				mx = on[b];
		uint64_t pm = mx * p->nboxes * 1000 / keys[k].count;
		if (pm - 1000 > worst)
			worst = pm - 1000;
	}
	return worst;
}

/* Bytes whose box differs between a (boxes ba) and b (boxes bb), by id:
 * the same keys and partition size, so the partitions correspond. */
static uint64_t moved_bytes(const struct placement *a, const struct place_box *ba,
			    const struct placement *b, const struct place_box *bb,
			    const struct place_key *keys)
{
	uint64_t m = 0;

	assert_int_equal(a->nparts, b->nparts);
	for (uint32_t i = 0; i < a->nparts; i++)
		if (strcmp(ba[a->parts[i].box].id, bb[b->parts[i].box].id) != 0)
			m += a->parts[i].count * keys[a->parts[i].key_index].elem;
	return m;
}

static void place_ok(struct placement *p, const struct place_box *boxes, uint32_t nb,
		     const struct place_key *keys, uint32_t nk, uint64_t part)
{
	char err[256] = "";
	int rc = placement_compute(p, boxes, nb, keys, nk, part, err, sizeof(err));

	if (rc != 0)
		print_message("placement_compute: %s\n", err);
	assert_int_equal(rc, 0);
}

/* Movement (1/1000 of all bytes) when four's last box is removed and
 * when five's last is added, with the ideal (that box's bytes). */
struct moves { uint64_t rm, rm_ideal, add, add_ideal; };

static struct moves movement(const struct place_key *keys, uint32_t nk, uint64_t part)
{
	struct placement p4, p3, p5;
	struct moves mv;

	place_ok(&p4, four, 4, keys, nk, part);
	place_ok(&p3, four, 3, keys, nk, part);
	place_ok(&p5, five, 5, keys, nk, part);
	uint64_t t = total_bytes(&p4);
	mv.rm = moved_bytes(&p4, four, &p3, four, keys) * 1000 / t;
	mv.rm_ideal = p4.box_bytes[3] * 1000 / t;
	mv.add = moved_bytes(&p4, four, &p5, five, keys) * 1000 / t;
	mv.add_ideal = p5.box_bytes[4] * 1000 / t;
	placement_free(&p4);
	placement_free(&p3);
	placement_free(&p5);
	return mv;
}

static void compute__deterministic_and_hash_names_every_input(void **state)
{
	struct place_key keys[MAXKEYS];
	uint32_t nk = resnet_keys(keys, 0, 0);
	struct placement a, b, c;

	(void)state;
	place_ok(&a, four, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	place_ok(&b, four, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	assert_int_equal(a.nparts, b.nparts);
	assert_memory_equal(a.parts, b.parts, sizeof(*a.parts) * a.nparts);
	assert_true(a.hash == b.hash);
	assert_true(a.hash == placement_hash(&a, four, keys));

	/* a pinned value: the same on every machine and every build */
	struct place_key one[2] = { { 7, 1000000, 4 }, { 9, 10, 2 } };
	place_ok(&c, four, 4, one, 2, PLACE_PART_BYTES_DEFAULT);
	char hex[PLACE_HASH_HEX];
	placement_hash_hex(c.hash, hex);
	static const uint32_t want_box[9] = { 2, 3, 2, 0, 1, 1, 0, 3, 3 };
	assert_int_equal(c.nparts, 9);
	for (uint32_t i = 0; i < c.nparts; i++) {
		print_message("%u", c.parts[i].box);
		assert_int_equal(c.parts[i].box, want_box[i]);
	}
	print_message(" %s\n", hex);
	assert_string_equal(hex, "c29420970fbce0d4");
	placement_free(&c);

	/* another box order, partition size, key order or count: another hash */
	const struct place_box swapped[] = { four[1], four[0], four[2], four[3] };
	place_ok(&c, swapped, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	assert_true(c.hash != a.hash);
	placement_free(&c);
	place_ok(&c, four, 4, keys, nk, PLACE_PART_BYTES_DEFAULT * 2);
	assert_true(c.hash != a.hash);
	placement_free(&c);
	keys[5].count++;
	place_ok(&c, four, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	assert_true(c.hash != a.hash);
	placement_free(&c);
	const struct place_box heavier[] = { four[0], four[1], four[2], { four[3].id, 2 } };
	keys[5].count--;
	place_ok(&c, heavier, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	assert_true(c.hash != a.hash);
	placement_free(&c);
	placement_free(&a);
	placement_free(&b);
}

static void compute__partitions_cover_each_element_once_aligned(void **state)
{
	struct place_key keys[4] = {
		{ 1, 3 * 262144 + 5, 4 },        /* 3 full f32 partitions and a short one */
		{ 2, 262144, 4 },                /* exactly one */
		{ 3, 1, 2 },                     /* one f16 element */
		{ 4, 2 * 524288 + 1, 2 },        /* f16: 2 full and one element */
	};
	struct placement p;
	static const uint32_t want[4] = { 4, 1, 1, 3 };

	(void)state;
	place_ok(&p, four, 4, keys, 4, 1 * MIB);
	assert_int_equal(p.nparts, 9);
	for (uint32_t k = 0; k < 4; k++) {
		uint64_t next = 0;
		assert_int_equal(p.key_first[k + 1] - p.key_first[k], want[k]);
		for (uint32_t i = p.key_first[k]; i < p.key_first[k + 1]; i++) {
			const struct place_part *pp = &p.parts[i];
			assert_int_equal(pp->key_index, k);
			assert_int_equal(pp->part, i - p.key_first[k]);
			assert_int_equal(pp->first, next);           /* no gap, no overlap */
			assert_true(pp->count > 0);
			assert_true(pp->count * keys[k].elem <= 1 * MIB);
			/* every partition but the last is a whole 1 MiB: it starts
			 * on a multiple of the partition size (and of 64 bytes) */
			assert_int_equal(pp->first * keys[k].elem % MIB, 0);
			if (i + 1 < p.key_first[k + 1])
				assert_int_equal(pp->count * keys[k].elem, MIB);
			assert_true(pp->box < 4);
			next += pp->count;
		}
		assert_int_equal(next, keys[k].count);
	}
	assert_int_equal(total_bytes(&p), (3 * 262144 + 5) * 4 + 262144 * 4 + 2 +
					  (2 * 524288 + 1) * 2);
	/* a partition size that is no multiple of the element: whole
	 * elements, floor(part / elem) of them */
	placement_free(&p);
	struct place_key odd = { 1, 10, 4 };
	place_ok(&p, four, 4, &odd, 1, 9);
	assert_int_equal(p.nparts, 5);
	assert_int_equal(p.parts[4].first, 8);
	assert_int_equal(p.parts[4].count, 2);
	placement_free(&p);
}

static void compute__big_key_uses_every_box_evenly(void **state)
{
	struct place_key k = { 1, 64 * MIB / 4, 4 };     /* 64 MiB: 64 partitions */
	struct placement p;

	(void)state;
	place_ok(&p, four, 4, &k, 1, 1 * MIB);
	for (uint32_t b = 0; b < 4; b++)
		assert_int_equal(p.box_bytes[b], 16 * MIB);
	placement_free(&p);
	/* 7 partitions over 4 boxes: no box holds more than 2 */
	k.count = 7 * MIB / 4;
	place_ok(&p, four, 4, &k, 1, 1 * MIB);
	for (uint32_t b = 0; b < 4; b++)
		assert_true(p.box_bytes[b] <= 2 * MIB && p.box_bytes[b] >= 1 * MIB);
	placement_free(&p);
}

static void compute__later_key_never_moves_an_earlier_one(void **state)
{
	struct place_key keys[MAXKEYS];
	uint32_t nk = resnet_keys(keys, 0, 0);
	struct placement all, prefix;

	(void)state;
	place_ok(&all, four, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	place_ok(&prefix, four, 4, keys, nk / 2, PLACE_PART_BYTES_DEFAULT);
	assert_memory_equal(prefix.parts, all.parts, sizeof(*all.parts) * prefix.nparts);
	placement_free(&all);
	placement_free(&prefix);
}

/* The goal: within 10% by bytes over 4 boxes, for ResNet-50's
 * keys per parameter (in both orders) and in DDP's buckets. */
static void balance__resnet50_within_10_percent_on_4_boxes(void **state)
{
	struct place_key keys[MAXKEYS];
	uint64_t params[MAXKEYS], sum = 0;
	uint32_t n = resnet50_params(params);

	(void)state;
	assert_int_equal(n, 161);
	for (uint32_t i = 0; i < n; i++)
		sum += params[i];
	assert_int_equal(sum, 25557032);
	for (int buckets = 0; buckets < 2; buckets++) {
		for (int rev = 0; rev < 2; rev++) {
			struct placement p;
			uint32_t nk = resnet_keys(keys, buckets, rev);
			place_ok(&p, four, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
			uint64_t pm = imbalance_pm(&p, four);
			print_message("%s%s: %u keys, %u partitions, fullest box %llu.%llu%% over\n",
				      buckets ? "DDP buckets" : "per parameter",
				      rev ? " (reversed)" : "", nk, p.nparts,
				      (unsigned long long)pm / 10, (unsigned long long)pm % 10);
			assert_true(pm < 100);
			placement_free(&p);
		}
	}
}

/* Removing a box moves its partitions and few others; adding one moves
 * about its share. Bound: 1.5 times the ideal plus 5% of the bytes. */
static void movement__remove_and_add_one_box(void **state)
{
	struct place_key keys[MAXKEYS];

	(void)state;
	for (int buckets = 0; buckets < 2; buckets++) {
		uint32_t nk = resnet_keys(keys, buckets, 0);
		struct moves mv = movement(keys, nk, PLACE_PART_BYTES_DEFAULT);
		print_message("%s: remove a box: %llu.%llu%% moved (ideal %llu.%llu%%); "
			      "add one: %llu.%llu%% (ideal %llu.%llu%%)\n",
			      buckets ? "DDP buckets" : "per parameter",
			      (unsigned long long)mv.rm / 10, (unsigned long long)mv.rm % 10,
			      (unsigned long long)mv.rm_ideal / 10, (unsigned long long)mv.rm_ideal % 10,
			      (unsigned long long)mv.add / 10, (unsigned long long)mv.add % 10,
			      (unsigned long long)mv.add_ideal / 10,
			      (unsigned long long)mv.add_ideal % 10);
		assert_true(mv.rm >= mv.rm_ideal);
		assert_true(mv.rm <= mv.rm_ideal * 3 / 2 + 50);
		assert_true(mv.add <= mv.add_ideal * 3 / 2 + 50);
	}
}

/* A box of weight 2 takes about twice the bytes of a box of weight 1. */
static void weights__share_follows_weight(void **state)
{
	struct place_key keys[MAXKEYS];
	uint32_t nk = resnet_keys(keys, 0, 0);
	const struct place_box w[] = { { "a:1", 1 }, { "b:1", 2 }, { "c:1", 1 }, { "d:1", 4 } };
	struct placement p;

	(void)state;
	place_ok(&p, w, 4, keys, nk, PLACE_PART_BYTES_DEFAULT);
	uint64_t pm = imbalance_pm(&p, w);
	print_message("weights 1,2,1,4: bytes %llu %llu %llu %llu, fullest %llu.%llu%% over\n",
		      (unsigned long long)p.box_bytes[0], (unsigned long long)p.box_bytes[1],
		      (unsigned long long)p.box_bytes[2], (unsigned long long)p.box_bytes[3],
		      (unsigned long long)pm / 10, (unsigned long long)pm % 10);
	assert_true(pm < 100);
	assert_true(p.box_bytes[3] > p.box_bytes[1] && p.box_bytes[1] > p.box_bytes[0]);
	placement_free(&p);
}

static void expect_err(const struct place_box *boxes, uint32_t nb, const struct place_key *keys,
		       uint32_t nk, uint64_t part, const char *want)
{
	struct placement p;
	char err[256] = "";

	assert_int_equal(placement_compute(&p, boxes, nb, keys, nk, part, err, sizeof(err)),
			 PBOX_EINVAL);
	print_message("%s\n", err);
	assert_non_null(strstr(err, want));
	assert_null(p.parts);
}

static void compute__bad_input_named(void **state)
{
	struct place_key k = { 1, 100, 4 };
	const struct place_box dup[] = { { "a:1", 1 }, { "b:1", 1 }, { "a:1", 1 } };
	const struct place_box zero[] = { { "a:1", 1 }, { "b:1", 0 } };
	const struct place_box heavy[] = { { "a:1", PLACE_MAX_WEIGHT + 1 } };
	const struct place_box noid[] = { { "a:1", 1 }, { "", 1 } };
	struct place_key twice[2] = { { 3, 10, 4 }, { 3, 20, 4 } };
	struct place_key empty = { 1, 0, 4 }, noelem = { 1, 10, 0 };

	(void)state;
	expect_err(four, 0, &k, 1, MIB, "no boxes");
	expect_err(dup, 3, &k, 1, MIB, "box a:1 is listed twice (entries 0 and 2)");
	expect_err(zero, 2, &k, 1, MIB, "box b:1 has weight 0");
	expect_err(heavy, 1, &k, 1, MIB, "has weight 101 (1..100)");
	expect_err(noid, 2, &k, 1, MIB, "box 1 has no id");
	expect_err(four, 4, &k, 1, 3, "partition size 3 bytes is smaller than key 1's 4-byte");
	expect_err(four, 4, twice, 2, MIB, "key 3 is declared twice");
	expect_err(four, 4, &empty, 1, MIB, "key 1 has count 0");
	expect_err(four, 4, &noelem, 1, MIB, "key 1 has element size 0");

	/* no keys yet: an empty placement, still with a hash of the boxes */
	struct placement p;
	char err[64];
	assert_int_equal(placement_compute(&p, four, 4, NULL, 0, MIB, err, sizeof(err)), 0);
	assert_int_equal(p.nparts, 0);
	placement_free(&p);
}

/* PLACE_SWEEP=1: balance and movement against the partition size. */
static void sweep(void)
{
	static const uint64_t sizes[] = { 256 * 1024, 512 * 1024, 587136, MIB, 2 * MIB, 4 * MIB, 8 * MIB };
	struct place_key keys[MAXKEYS];

	printf("part     keys    parts  over(fwd)  over(rev)  key-over  moved-rm (ideal)  moved-add (ideal)\n");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int buckets = 0; buckets < 2; buckets++) {
			struct placement p, q;
			uint32_t nk = resnet_keys(keys, buckets, 1);
			place_ok(&q, four, 4, keys, nk, sizes[s]);
			nk = resnet_keys(keys, buckets, 0);
			place_ok(&p, four, 4, keys, nk, sizes[s]);
			struct moves mv = movement(keys, nk, sizes[s]);
			uint64_t f = imbalance_pm(&p, four), r = imbalance_pm(&q, four);
			uint64_t ko = key_imbalance_pm(&p, keys);
			printf("%4lluK %-7s %5u  %5.1f%%     %5.1f%%    %5.1f%%   %5.1f%% (%4.1f%%)    %5.1f%% (%4.1f%%)\n",
			       (unsigned long long)(sizes[s] / 1024), buckets ? "buckets" : "params",
			       p.nparts, f / 10.0, r / 10.0, ko / 10.0, mv.rm / 10.0, mv.rm_ideal / 10.0,
			       mv.add / 10.0, mv.add_ideal / 10.0);
			placement_free(&p);
			placement_free(&q);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(compute__deterministic_and_hash_names_every_input),
		cmocka_unit_test(compute__partitions_cover_each_element_once_aligned),
		cmocka_unit_test(compute__big_key_uses_every_box_evenly),
		cmocka_unit_test(compute__later_key_never_moves_an_earlier_one),
		cmocka_unit_test(balance__resnet50_within_10_percent_on_4_boxes),
		cmocka_unit_test(movement__remove_and_add_one_box),
		cmocka_unit_test(weights__share_follows_weight),
		cmocka_unit_test(compute__bad_input_named),
	};
	if (getenv("PLACE_SWEEP")) {
		sweep();
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
