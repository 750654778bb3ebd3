/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_abi.c - libpbox's growable ABI (include/pbox.h, "ABI rules";
 * client/core/abi.c): the version against the header's macros, the struct sizes
 * bindings check, pbox_opts read only within opts->size (a caller older
 * than the library gets defaults, a newer one is accepted while the fields
 * unknown here are 0), sizes out of range refused with PBOX_EINVAL and a
 * message, pbox_optim and pbox_topk_opts under the same rule,
 * pbox_get_stats writing exactly `size` bytes, and each code's name
 * (pbox_err_name).
 *
 * Callers' structs of other sizes are heap blocks of exactly that size, so
 * ASan reports any byte read or written past them. pbox_connect's reading
 * of the options is observed through a client whose connection is refused
 * (a bound port nobody listens on): the options were accepted when the code
 * is PBOX_ECONNECT, and the client's resolved options (client/core/client.h)
 * say what was read.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/ops/ops.h"
#include "include/pbox.h"
#include "include/pbox_cuda.h"
#include "tests/unit/box_inproc.h"

#define OPTS_V0  24u   /* first layouts (0.2.0), as pbox.h documents them */
#define STATS_V0 104u
#define CANARY   0xA5

/* A TCP port bound on 127.0.0.1 but not listening: connects are refused at
 * once. State: the socket (closed by the teardown) and "127.0.0.1:port". */
struct refused {
	int fd;
	char addr[32];
};

static int refused_setup(void **state)
{
	struct refused *r = calloc(1, sizeof(*r));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	assert_non_null(r);
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (r->fd < 0 || bind(r->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(r->fd, (struct sockaddr *)&sa, &len) < 0) {
		print_error("a TCP socket on 127.0.0.1: %s\n", strerror(errno));
		if (r->fd >= 0)   /* no teardown follows a failed setup */
			close(r->fd);
		free(r);
		return -1;
	}
	snprintf(r->addr, sizeof(r->addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	unsetenv("PBOX_UDP_OFFLOAD");
	*state = r;
	return 0;
}

static int refused_teardown(void **state)
{
	struct refused *r = *state;

	close(r->fd);
	free(r);
	return 0;
}

/* pbox_connect with opts to the refused port: its code, and *c. */
static int connect_opts(void **state, const pbox_opts *opts, pbox_client **c)
{
	const struct refused *r = *state;

	*c = NULL;
	return pbox_connect(r->addr, "abi", 0, 1, opts, c);
}

/* A caller's pbox_opts of `size` bytes on the heap, filled by the library. */
static pbox_opts *opts_alloc(size_t size)
{
	pbox_opts *o = malloc(size);

	assert_non_null(o);
	assert_int_equal(pbox_opts_init_sized(o, size), 0);
	return o;
}

static void version__matches_header_macros(void **state)
{
	char want[32];

	(void)state;
	snprintf(want, sizeof(want), "%d.%d.%d", PBOX_VERSION_MAJOR, PBOX_VERSION_MINOR,
		 PBOX_VERSION_PATCH);
	assert_int_equal(pbox_version(), (unsigned)PBOX_VERSION_MAJOR << 16 |
			 (unsigned)PBOX_VERSION_MINOR << 8 | (unsigned)PBOX_VERSION_PATCH);
	assert_int_equal(pbox_version(), PBOX_VERSION);
	assert_string_equal(pbox_version_string(), want);
	/* the Makefile's reading of pbox.h (what pboxd reports) agrees */
	assert_string_equal(pbox_version_string(), PBOX_VERSION_STRING);
}

static void sizes__are_the_structs(void **state)
{
	(void)state;
	assert_int_equal(pbox_opts_size(), sizeof(pbox_opts));
	assert_int_equal(pbox_stats_size(), sizeof(pbox_stats));
	assert_true(pbox_opts_size() >= OPTS_V0);
	assert_true(pbox_stats_size() >= STATS_V0);
	assert_int_equal(offsetof(pbox_opts, size), 0);
	assert_int_equal(pbox_optim_size(), sizeof(pbox_optim));
	assert_int_equal(pbox_topk_opts_size(), sizeof(pbox_topk_opts));
	assert_int_equal(pbox_dev_opts_size(), sizeof(pbox_dev_opts));
}

/* A binding that declares a struct of the size the library reports can
 * have it filled whole by the struct's init: the getters and the inits
 * agree, and each size lies above the struct's first layout. */
static void sizes__each_init_sized_takes_its_size(void **state)
{
	size_t sizes[] = { pbox_opts_size(), pbox_optim_size(), pbox_topk_opts_size(),
			   pbox_dev_opts_size() };
	void *p[4];

	(void)state;
	for (int i = 0; i < 4; i++) {
		p[i] = calloc(1, sizes[i]);
		assert_non_null(p[i]);
		assert_true(sizes[i] >= 24);
	}
	assert_int_equal(pbox_opts_init_sized(p[0], sizes[0]), 0);
	assert_int_equal(pbox_optim_init_sized(p[1], sizes[1], PBOX_OPTIM_ADAM), 0);
	assert_int_equal(pbox_topk_opts_init_sized(p[2], sizes[2]), 0);
	assert_int_equal(pbox_dev_opts_init_sized(p[3], sizes[3]), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(*(uint32_t *)p[i], sizes[i]);   /* each struct's size field */
		free(p[i]);
	}
	assert_true(pbox_stats_size() >= STATS_V0);
	assert_int_equal(pbox_stats_size() % sizeof(uint64_t), 0);
}

/* Every code of pbox.h, named as the header spells it. */
#define CODE(c) { c, #c }
static const struct {
	int rc;
	const char *name;
} codes[] = {
	CODE(PBOX_OK), CODE(PBOX_EINVAL), CODE(PBOX_ENOMEM), CODE(PBOX_ECONNECT),
	CODE(PBOX_EPROTO), CODE(PBOX_EREJECTED), CODE(PBOX_ETIMEDOUT), CODE(PBOX_EABORTED),
	CODE(PBOX_EBUSY), CODE(PBOX_ECLOSED), CODE(PBOX_ESYS), CODE(PBOX_ENOTSUP),
	CODE(PBOX_EPERM), CODE(PBOX_EAGAIN),
};

static void err_name__every_code_as_the_header_spells_it(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		assert_string_equal(pbox_err_name(codes[i].rc), codes[i].name);
		/* the same pointer every time: static text */
		assert_ptr_equal(pbox_err_name(codes[i].rc), pbox_err_name(codes[i].rc));
		assert_string_not_equal(pbox_strerror(codes[i].rc), pbox_strerror(-1000));
	}
	/* the codes run from 0 down without a gap: each value a name */
	for (int rc = 0; rc >= PBOX_EAGAIN; rc--)
		assert_string_not_equal(pbox_err_name(rc), "PBOX_E?");
}

static void err_name__not_a_code_is_e_question(void **state)
{
	int not_codes[] = { PBOX_EAGAIN - 1, 1, 5, -100, INT_MIN, INT_MAX };

	(void)state;
	for (size_t i = 0; i < sizeof(not_codes) / sizeof(not_codes[0]); i++) {
		assert_string_equal(pbox_err_name(not_codes[i]), "PBOX_E?");
		assert_string_equal(pbox_strerror(not_codes[i]), "unknown pbox error code");
	}
}

static void opts_init__sets_size_and_defaults(void **state)
{
	pbox_opts o;

	(void)state;
	memset(&o, CANARY, sizeof(o));
	pbox_opts_init(&o);
	assert_int_equal(o.size, sizeof(o));
	assert_int_equal(o.timeout_ms, 1800000);
	assert_int_equal(o.rto_ms, 20);
	assert_int_equal(o.window, 128);
	assert_int_equal(o.mtu, 0);   /* automatic */
	assert_int_equal(o.udp_offload, 0);
}

/* A caller with the first layout only (older than, or as old as, this
 * library): exactly OPTS_V0 bytes written, nothing past them. */
static void opts_init_sized__first_layout_writes_only_it(void **state)
{
	unsigned char buf[OPTS_V0 + 16];

	(void)state;
	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(pbox_opts_init_sized((pbox_opts *)buf, OPTS_V0), 0);
	pbox_opts o;
	memcpy(&o, buf, OPTS_V0 < sizeof(o) ? OPTS_V0 : sizeof(o));
	assert_int_equal(o.size, OPTS_V0);
	assert_int_equal(o.timeout_ms, 1800000);
	for (size_t i = OPTS_V0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);
}

/* A caller newer than this library: the fields it does not know are zeroed
 * ("default"), nothing past its size is written. */
static void opts_init_sized__newer_caller_tail_zeroed(void **state)
{
	size_t size = sizeof(pbox_opts) + 12;
	unsigned char buf[sizeof(pbox_opts) + 32];

	(void)state;
	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(pbox_opts_init_sized((pbox_opts *)buf, size), 0);
	assert_int_equal(((pbox_opts *)buf)->size, size);
	assert_int_equal(((pbox_opts *)buf)->window, 128);
	for (size_t i = sizeof(pbox_opts); i < size; i++)
		assert_int_equal(buf[i], 0);
	for (size_t i = size; i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);
}

static void opts_init_sized__bad_size_einval_nothing_written(void **state)
{
	const size_t bad[] = { 0, 1, OPTS_V0 - 4, OPTS_V0 - 1, 4097, 30000 };
	unsigned char buf[64];

	(void)state;
	assert_int_equal(pbox_opts_init_sized(NULL, sizeof(pbox_opts)), PBOX_EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(buf, CANARY, sizeof(buf));
		assert_int_equal(pbox_opts_init_sized((pbox_opts *)buf, bad[i]), PBOX_EINVAL);
		for (size_t j = 0; j < sizeof(buf); j++)
			assert_int_equal(buf[j], CANARY);
	}
}

/* Every size from the first layout up to today's: the fields inside the
 * caller's size are read, the ones beyond it (the caller does not have
 * them) take their defaults, and no byte past the caller's block is read
 * (ASan). Today the first layout is the whole struct, so this runs for one
 * size; each field appended later adds one. */
static void connect__older_caller_read_within_size(void **state)
{
	pbox_opts d;

	pbox_opts_init(&d);
	for (size_t size = OPTS_V0; size <= sizeof(pbox_opts); size += sizeof(uint32_t)) {
		pbox_opts *o = opts_alloc(size);
		pbox_client *c;
		o->timeout_ms = 1234;
		o->rto_ms = 7;
		o->window = 0; /* 0 = default */
		o->mtu = 9000;
		o->udp_offload = 1;
		assert_int_equal(connect_opts(state, o, &c), PBOX_ECONNECT);
		assert_int_equal(c->opts.timeout_ms, 1234);
		assert_int_equal(c->opts.rto_ms, 7);
		assert_int_equal(c->opts.window, d.window);
		assert_int_equal(c->opts.mtu, 9000);
		assert_int_equal(c->opts.udp_offload, 1);
		/* fields beyond the caller's size: the library's defaults */
		assert_memory_equal((char *)&c->opts + size, (char *)&d + size,
				    sizeof(pbox_opts) - size);
		pbox_close(c);
		free(o);
	}
}

static void connect__null_opts_defaults(void **state)
{
	pbox_opts d;
	pbox_client *c;

	pbox_opts_init(&d);
	assert_int_equal(connect_opts(state, NULL, &c), PBOX_ECONNECT);
	assert_memory_equal(&c->opts, &d, sizeof(d));
	pbox_close(c);
}

/* A caller newer than this library whose extra fields are 0: accepted,
 * the known fields read. */
static void connect__newer_caller_zero_tail_accepted(void **state)
{
	size_t size = sizeof(pbox_opts) + 8;
	pbox_opts *o = opts_alloc(size);
	pbox_client *c;

	o->window = 64;
	assert_int_equal(connect_opts(state, o, &c), PBOX_ECONNECT);
	assert_int_equal(c->opts.window, 64);
	assert_int_equal(c->opts.timeout_ms, 1800000);
	pbox_close(c);
	free(o);
}

/* ...and refused when it sets one of them: never silently ignored. */
static void connect__newer_caller_unknown_field_set_einval(void **state)
{
	size_t size = sizeof(pbox_opts) + 8;
	pbox_opts *o = opts_alloc(size);
	pbox_client *c;
	char want[64];

	((unsigned char *)o)[sizeof(pbox_opts) + 5] = 1;
	assert_int_equal(connect_opts(state, o, &c), PBOX_EINVAL);
	snprintf(want, sizeof(want), "sets byte %zu of its %zu", sizeof(pbox_opts) + 5, size);
	assert_non_null(strstr(pbox_last_error(c), want));
	assert_non_null(strstr(pbox_last_error(c), "newer libpbox"));
	assert_non_null(strstr(pbox_last_error(c), pbox_version_string()));
	pbox_close(c);
	free(o);
}

static void connect__size_zero_einval(void **state)
{
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	o.size = 0;
	assert_int_equal(connect_opts(state, &o, &c), PBOX_EINVAL);
	assert_string_equal(pbox_last_error(c), "pbox_opts.size is 0, below the smallest "
			    "pbox_opts (24 bytes): fill opts with pbox_opts_init() before setting "
			    "fields (programs built against libpbox before 0.2 must be rebuilt)");
	pbox_close(c);
}

static void connect__size_below_first_layout_einval(void **state)
{
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	o.size = OPTS_V0 - 4;
	assert_int_equal(connect_opts(state, &o, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "pbox_opts.size is 20, below the smallest"));
	pbox_close(c);
}

/* A pbox_opts laid out before the size field starts with timeout_ms: read
 * as a size, the usual values are too large for any struct. */
static void connect__size_too_large_einval(void **state)
{
	pbox_opts o;
	pbox_client *c;

	pbox_opts_init(&o);
	o.size = 30000;
	assert_int_equal(connect_opts(state, &o, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "pbox_opts.size is 30000, more than any "
			       "pbox_opts (at most 4096 bytes)"));
	pbox_close(c);
}

/* pbox_optim and pbox_topk_opts follow pbox_opts' rule: a caller's struct
 * larger than this library's (its size field says so) is read while the
 * bytes unknown here are 0, and refused naming the first that is not. */
static void *tail_struct(size_t size)
{
	void *p = calloc(1, size);

	assert_non_null(p);
	return p;
}

static void declare_optimizer__newer_caller_unknown_field_set_einval(void **state)
{
	size_t size = sizeof(pbox_optim) + 8;
	pbox_optim *o = tail_struct(size);
	pbox_client *c;
	char want[64];

	assert_int_equal(connect_opts(state, NULL, &c), PBOX_ECONNECT);
	/* a program built with a newer header: its inline pbox_optim_init
	 * passes its own sizeof, and the size field keeps it (an older library
	 * that wrote its own size there let the newer fields go unseen) */
	assert_int_equal(pbox_optim_init_sized(o, size, PBOX_OPTIM_SGD), 0);
	assert_int_equal(o->size, size);
	assert_int_equal(pbox_optim_size(), sizeof(pbox_optim));
	((unsigned char *)o)[sizeof(pbox_optim) + 3] = 1;
	assert_int_equal(pbox_declare_optimizer(c, 1, 16, PBOX_F32, o), PBOX_EINVAL);
	snprintf(want, sizeof(want), "pbox_optim sets byte %zu of its %zu",
		 sizeof(pbox_optim) + 3, size);
	assert_non_null(strstr(pbox_last_error(c), want));
	assert_non_null(strstr(pbox_last_error(c), "newer libpbox"));
	/* a zero tail is read: the call gets as far as the connection */
	((unsigned char *)o)[sizeof(pbox_optim) + 3] = 0;
	assert_int_equal(pbox_declare_optimizer(c, 1, 16, PBOX_F32, o), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "not connected"));
	pbox_close(c);
	free(o);
}

static void allreduce_topk__newer_caller_unknown_field_set_einval(void **state)
{
	size_t size = sizeof(pbox_topk_opts) + 8;
	pbox_topk_opts *o = tail_struct(size);
	struct box_inproc *b = box_inproc_new(1);
	float x[64] = { 1 };
	pbox_client *c;
	char want[64];

	(void)state;
	box_inproc_start(b);
	assert_int_equal(pbox_connect(b->addr, "abitopk", 0, 1, NULL, &c), 0);
	assert_int_equal(pbox_topk_opts_init_sized(o, size), 0);
	assert_int_equal(o->size, size);
	((unsigned char *)o)[size - 1] = 1;
	assert_int_equal(pbox_allreduce_topk(c, 1, x, 64, PBOX_F32, o), PBOX_EINVAL);
	snprintf(want, sizeof(want), "pbox_topk_opts sets byte %zu of its %zu", size - 1, size);
	assert_non_null(strstr(pbox_last_error(c), want));
	assert_true(x[0] == 1);   /* refused before the selection took the gradient */
	((unsigned char *)o)[size - 1] = 0;
	assert_int_equal(pbox_allreduce_topk(c, 1, x, 64, PBOX_F32, o), 0);
	assert_true(x[0] == 1);   /* world 1: the sum is what was sent */
	pbox_close(c);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_stop(b);
	box_inproc_free(b);
	free(o);
}

/* A failed client with every counter set to a distinct value (i + 1). */
static pbox_client *client_with_counters(void **state)
{
	pbox_client *c;

	assert_int_equal(connect_opts(state, NULL, &c), PBOX_ECONNECT);
	uint64_t *ctr = (uint64_t *)&c->stats;
	for (size_t i = 0; i < sizeof(c->stats) / sizeof(uint64_t); i++)
		ctr[i] = i + 1;
	/* no transport is open: its counters (gso_sends ...) add nothing */
	return c;
}

static void get_stats__fills_every_counter(void **state)
{
	pbox_client *c = client_with_counters(state);
	pbox_stats st;

	memset(&st, CANARY, sizeof(st));
	assert_int_equal(pbox_get_stats(c, &st), 0);
	const uint64_t *ctr = (const uint64_t *)&st;
	for (size_t i = 0; i < sizeof(st) / sizeof(uint64_t); i++)
		assert_int_equal(ctr[i], i + 1);
	assert_int_equal(st.calls, 1 + offsetof(pbox_stats, calls) / sizeof(uint64_t));
	pbox_close(c);
}

/* A caller with the first layout: exactly STATS_V0 bytes written (ASan
 * watches the block's end). */
static void get_stats__first_layout_writes_only_it(void **state)
{
	pbox_client *c = client_with_counters(state);
	uint64_t *st = malloc(STATS_V0);

	assert_non_null(st);
	assert_int_equal(pbox_get_stats_sized(c, (pbox_stats *)st, STATS_V0), 0);
	for (size_t i = 0; i < STATS_V0 / sizeof(uint64_t); i++)
		assert_int_equal(st[i], i + 1);
	free(st);
	pbox_close(c);
}

/* A caller newer than this library: counters it has but the library does
 * not read 0; nothing past its size is written. */
static void get_stats__newer_caller_zeros_beyond_stop_at_size(void **state)
{
	pbox_client *c = client_with_counters(state);
	size_t size = sizeof(pbox_stats) + 16;
	unsigned char buf[sizeof(pbox_stats) + 40];

	memset(buf, CANARY, sizeof(buf));
	assert_int_equal(pbox_get_stats_sized(c, (pbox_stats *)buf, size), 0);
	assert_int_equal(((pbox_stats *)buf)->pkts_sent, 1);
	for (size_t i = sizeof(pbox_stats); i < size; i++)
		assert_int_equal(buf[i], 0);
	for (size_t i = size; i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);
	pbox_close(c);
}

static void get_stats__bad_size_einval_nothing_written(void **state)
{
	const size_t bad[] = { 0, 8, STATS_V0 - 8, STATS_V0 - 1, 4097 };
	pbox_client *c = client_with_counters(state);
	unsigned char buf[STATS_V0 + 8];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(buf, CANARY, sizeof(buf));
		assert_int_equal(pbox_get_stats_sized(c, (pbox_stats *)buf, bad[i]), PBOX_EINVAL);
		for (size_t j = 0; j < sizeof(buf); j++)
			assert_int_equal(buf[j], CANARY);
	}
	assert_int_equal(pbox_get_stats_sized(c, NULL, sizeof(pbox_stats)), PBOX_EINVAL);
	pbox_close(c);
}

static void get_stats__null_client_einval_zeroed(void **state)
{
	pbox_stats st;

	(void)state;
	memset(&st, CANARY, sizeof(st));
	assert_int_equal(pbox_get_stats(NULL, &st), PBOX_EINVAL);
	for (size_t i = 0; i < sizeof(st); i++)
		assert_int_equal(((unsigned char *)&st)[i], 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, refused_setup, refused_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(version__matches_header_macros),
		cmocka_unit_test(sizes__are_the_structs),
		cmocka_unit_test(sizes__each_init_sized_takes_its_size),
		cmocka_unit_test(err_name__every_code_as_the_header_spells_it),
		cmocka_unit_test(err_name__not_a_code_is_e_question),
		T(opts_init__sets_size_and_defaults),
		cmocka_unit_test(opts_init_sized__first_layout_writes_only_it),
		cmocka_unit_test(opts_init_sized__newer_caller_tail_zeroed),
		cmocka_unit_test(opts_init_sized__bad_size_einval_nothing_written),
		T(connect__older_caller_read_within_size),
		T(connect__null_opts_defaults),
		T(connect__newer_caller_zero_tail_accepted),
		T(connect__newer_caller_unknown_field_set_einval),
		T(connect__size_zero_einval),
		T(connect__size_below_first_layout_einval),
		T(connect__size_too_large_einval),
		T(declare_optimizer__newer_caller_unknown_field_set_einval),
		cmocka_unit_test(allreduce_topk__newer_caller_unknown_field_set_einval),
		T(get_stats__fills_every_counter),
		T(get_stats__first_layout_writes_only_it),
		T(get_stats__newer_caller_zeros_beyond_stop_at_size),
		T(get_stats__bad_size_einval_nothing_written),
		cmocka_unit_test(get_stats__null_client_einval_zeroed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
