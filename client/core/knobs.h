/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * knobs.h - libpbox's environment variables, one table (knobs.c), as
 * pboxd's options are control/options.c: a row per variable with its
 * parser, the pbox_opts field it stands in for, its default and its
 * documentation. Every reader asks the table (knob_text, knob_value); no
 * other file of client/ calls getenv. docs/man/libpbox.3 (ENVIRONMENT)
 * and include/pbox.h say the same: tests/unit/test_client_knobs.c holds
 * the rows against both. Part of core.
 */
#ifndef PBOX_CLIENT_CORE_KNOBS_H
#define PBOX_CLIENT_CORE_KNOBS_H

#include <stddef.h>
#include <stdint.h>

#include "include/pbox.h"

enum knob_id {
	KNOB_CONTROL = 0,
	KNOB_TRANSPORT,
	KNOB_MTU,
	KNOB_JOIN_SECRET,
	KNOB_JOB_BYTES,
	KNOB_UDP_OFFLOAD,
	KNOB_BUSY_POLL,
	KNOB_XDP_MODE,
	KNOB_DEBUG,
	KNOB_DEBUG_FILE,
	KNOB_KERNEL,
	KNOB_GPU_LIB,
	KNOB_GPUDIRECT,
	KNOB_TIMEOUT,
	KNOB_REPLACE_WAIT,
	KNOB_NONFINITE,
	KNOB_RESUME,
	KNOB_HOST_LOCAL,
	KNOB_LOCAL_RANK,
	KNOB_LOCAL_WORLD_SIZE,
	KNOB_COUNT
};

/* When a knob stands in for a pbox_opts field. */
enum knob_when {
	KNOB_READ = 0,     /* no field: read where it is used */
	KNOB_AT_INIT,      /* pbox_opts_init fills the field from it */
	KNOB_AT_CONNECT,   /* pbox_connect, when the field is at its default */
};

/* Text to value: 0 and *v, or PBOX_EINVAL (the text is not one). */
typedef int knob_parse_fn(const char *text, uint64_t *v);

struct knob {
	const char *name;        /* the variable */
	knob_parse_fn *parse;    /* NULL: the text itself (an address, a path) */
	const char *takes;       /* what it takes, for messages and the docs */
	const char *field;       /* the pbox_opts field it stands in for, or NULL */
	uint8_t when;            /* enum knob_when */
	const char *dflt;        /* unset or empty: this (text, as documented) */
	uint64_t dval;           /* ... whose value (knob_value) is this */
	const char *doc;         /* one line */
};

/* The table, in enum knob_id's order. */
extern const struct knob knobs[KNOB_COUNT];

/* The variable's text now, NULL if unset or empty. */
const char *knob_text(enum knob_id k);
/* The variable parsed by its row: 0 and *v (the default's value when
 * unset or empty), or PBOX_EINVAL with c's message naming the variable,
 * its text and what it takes. c may be NULL (no message kept). */
int knob_value(pbox_client *c, enum knob_id k, uint64_t *v);

/* The parsers, for the rows and their test. Choices are their index in
 * the row's takes ("auto|udp|xdp|verbs": xdp is 2), a flag 1 or 0. */
knob_parse_fn knob_parse_flag, knob_parse_mtu, knob_parse_size, knob_parse_transport,
	knob_parse_xdp_mode, knob_parse_debug, knob_parse_kernel, knob_parse_gpudirect,
	knob_parse_duration, knob_parse_wait, knob_parse_nonfinite, knob_parse_onoff,
	knob_parse_count;

/* PBOX_DEBUG's levels (knob_parse_debug). */
enum { KNOB_DEBUG_OFF = 0, KNOB_DEBUG_WARN, KNOB_DEBUG_INFO };

#endif
