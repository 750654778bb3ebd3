/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tel_tree.c - the builder of telemetry answers (see tel_tree.h): nodes in
 * pre-order in one growing array, strings in another, each dict's member
 * count and span filled in when it is closed.
 */
#include "control/tel_tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tel_tree_init(struct tel_tree *t)
{
	memset(t, 0, sizeof(*t));
	t->cap = 64;
	t->a.nodes = calloc(t->cap, sizeof(*t->a.nodes));
	if (!t->a.nodes) {
		t->err = -ENOMEM;
		return;
	}
	t->a.n = 1;
	t->a.nodes[0].kind = DP_TEL_DICT;
	t->depth = 1;
}

static int key_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= DP_TEL_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '/'))
			return 0;
	}
	return 1;
}

/* A new node as member `name` of the open dict, or NULL (t->err set). */
static struct dp_tel_node *add(struct tel_tree *t, const char *name, uint8_t kind)
{
	if (t->err)
		return NULL;
	if (!key_ok(name)) {
		t->err = -EINVAL;
		return NULL;
	}
	if (t->a.n == t->cap) {
		struct dp_tel_node *n = realloc(t->a.nodes, 2 * t->cap * sizeof(*n));
		if (!n) {
			t->err = -ENOMEM;
			return NULL;
		}
		t->a.nodes = n;
		t->cap *= 2;
	}
	struct dp_tel_node *n = &t->a.nodes[t->a.n++];
	memset(n, 0, sizeof(*n));
	memcpy(n->name, name, strlen(name) + 1);
	n->kind = kind;
	n->span = 1;
	t->a.nodes[t->open[t->depth - 1]].nkids++;
	return n;
}

/* s (cut and cleaned) into the string area: its offset, or -1 (t->err). */
static long add_str(struct tel_tree *t, const char *s)
{
	size_t len = strnlen(s, DP_TEL_STR_MAX - 1);

	if (t->a.strs_len + len + 1 > t->strs_cap) {
		size_t cap = t->strs_cap ? t->strs_cap : 256;
		while (cap < t->a.strs_len + len + 1)
			cap *= 2;
		char *p = realloc(t->a.strs, cap);
		if (!p) {
			t->err = -ENOMEM;
			return -1;
		}
		t->a.strs = p;
		t->strs_cap = cap;
	}
	long off = (long)t->a.strs_len;
	char *d = t->a.strs + off;
	for (size_t i = 0; i < len; i++)
		d[i] = s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20 ? '\'' : s[i];
	d[len] = '\0';
	t->a.strs_len += len + 1;
	return off;
}

void tel_dict(struct tel_tree *t, const char *name, const char *alias)
{
	long off = alias && !t->err ? add_str(t, alias) : -1;
	struct dp_tel_node *n = add(t, name, DP_TEL_DICT);

	if (!n)
		return;
	if (t->depth == TEL_TREE_DEPTH) {
		t->err = -E2BIG;
		return;
	}
	n->val = off >= 0 ? (uint64_t)off + 1 : 0;
	t->open[t->depth++] = t->a.n - 1;
}

void tel_end(struct tel_tree *t)
{
	if (t->err)
		return;
	if (t->depth <= 1) {
		t->err = -EPROTO;
		return;
	}
	unsigned i = t->open[--t->depth];
	t->a.nodes[i].span = t->a.n - i;
}

void tel_u64(struct tel_tree *t, const char *name, uint64_t v)
{
	struct dp_tel_node *n = add(t, name, DP_TEL_U64);

	if (n)
		n->val = v;
}

void tel_str(struct tel_tree *t, const char *name, const char *s)
{
	long off = t->err ? -1 : add_str(t, s);
	struct dp_tel_node *n = off >= 0 ? add(t, name, DP_TEL_STR) : NULL;

	if (n)
		n->val = (uint64_t)off;
}

void tel_tree_free(struct tel_tree *t)
{
	free(t->a.nodes);
	free(t->a.strs);
	memset(t, 0, sizeof(*t));
}

int tel_tree_finish(struct tel_tree *t, struct dp_tel_answer *out)
{
	int rc = t->err ? t->err : t->depth != 1 ? -EPROTO : 0;

	memset(out, 0, sizeof(*out));
	if (rc != 0) {
		tel_tree_free(t);
		return rc;
	}
	t->a.nodes[0].span = t->a.n;
	*out = t->a;
	memset(t, 0, sizeof(*t));
	return 0;
}
