/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp.h - the data plane as the control plane sees it: the one header of
 * dataplane/ that control/ includes. Of the engine it gives the control
 * plane engine_control.h (job and key layout, messages, counters), not
 * engine.h (tests/layering.sh checks it).
 *
 * dp_open brings up the DPDK ports and the data lcores (dataplane/dp.c) and
 * describes them (struct dp_layout); afterwards the control plane reaches
 * the lcores only through struct box_dp: messages posted to an lcore's
 * ring, the count it has applied, job memory, and counters. It never
 * touches lcore-owned memory. Unit tests fill struct box_dp with real
 * engines driven directly (tests/unit/box_fixture.h), so the control plane
 * runs without DPDK there.
 */
#ifndef PBOX_DP_H
#define PBOX_DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/drops.h"
#include "dataplane/engine_control.h"
#include "nic/port_info.h"

#define BOX_MAX_LCORES 64
#define BOX_MAX_EPS    (BOX_MAX_PORTS * BOX_MAX_LCORES)

/* Data endpoint: one per (port, lcore). Index = position in layout.eps. */
struct box_endpoint {
	uint32_t ip;          /* host order */
	uint16_t udp_port;    /* udp_base + lcore index */
	uint16_t port;        /* DPDK port id */
	uint16_t lcore;       /* lcore index (0..nlcores-1), not the EAL id */
};

struct box_lcore_info {
	unsigned eal_id;
	unsigned index;
	int socket;
	int cpu;                  /* CPU the lcore runs on, -1 if several */
	uint32_t hold_max;        /* contributions it may keep in rx mbufs at once */
};

struct box_port_stats {
	uint64_t ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf;
	int link_up;
};

/* Counters of one data lcore; written by that lcore only. */
struct lcore_stats {
	uint64_t rx, tx;
	uint64_t arp, icmp;
	uint64_t handoff_out, handoff_in;
	uint64_t busy_polls, idle_polls;
	uint64_t busy_ns;         /* time in the polls that found work */
	uint64_t csum_unfilled;   /* UDP checksums left for an offload (accepted) */
	uint64_t probes;          /* path MTU probes answered */
	uint64_t drops[DROP_COUNT];
};

/*
 * DPDK telemetry (docs/operations.md "Telemetry"): pboxd's counters as the
 * telemetry socket's commands /pbox/stats, /pbox/jobs and /pbox/info. The
 * control plane owns the counters' meaning and names: every 200 ms it
 * builds one answer per command (control/telemetry.c) and publishes them
 * through box_dp.tel_publish; DPDK's telemetry thread answers from the
 * last snapshot published (dataplane/dp_telemetry.c). Neither side ever
 * waits on the lcores.
 *
 * An answer is a tree of dicts whose leaves are u64 or strings, laid out in
 * pre-order: nodes[0] is the top dict; a dict's nkids members follow it,
 * each followed by its own subtree (span nodes, itself included).
 */
#define DP_TEL_NAME_MAX 32  /* bytes of a key, NUL included: [A-Za-z0-9_/] */
#define DP_TEL_STR_MAX  128 /* bytes of a string value, NUL included (DPDK's) */

enum dp_tel_cmd { DP_TEL_STATS, DP_TEL_JOBS, DP_TEL_INFO, DP_TEL_NCMDS };
enum dp_tel_kind { DP_TEL_U64, DP_TEL_STR, DP_TEL_DICT };

struct dp_tel_node {
	char name[DP_TEL_NAME_MAX]; /* key in its dict; "" for the top */
	uint8_t kind;               /* enum dp_tel_kind */
	uint32_t nkids;             /* DICT: members */
	uint32_t span;              /* nodes of the subtree, itself included */
	uint64_t val;               /* U64: the value; STR: offset in strs;
				       DICT: 1 + offset of its alias in strs
				       (another name a query may use, a job's
				       name), 0 = none */
};

struct dp_tel_answer {
	struct dp_tel_node *nodes;  /* n nodes, malloc'ed */
	unsigned n;
	char *strs;                 /* NUL-terminated strings, malloc'ed */
	size_t strs_len;
};

/* What tel_publish takes over: every pointer malloc'ed (the data plane
 * frees them with free()). */
struct dp_tel_snapshot {
	struct dp_tel_answer answer[DP_TEL_NCMDS];
};

/* The data plane's operations for the control plane. */
struct box_dp {
	void *ctx;
	/* Enqueue m for lcore `lcore`; 0 or -EAGAIN (ring full). */
	int (*post)(void *ctx, unsigned lcore, const struct engine_msg *m);
	/* Messages lcore `lcore` has applied so far (monotonic). A message is
	 * done, and memory it released may be freed, once applied() reaches
	 * the count posted up to and including it. */
	uint64_t (*applied)(void *ctx, unsigned lcore);
	/* Zeroed, 64-byte aligned memory near the data ports; NULL if none. */
	void *(*mem_alloc)(void *ctx, size_t bytes);
	void (*mem_free)(void *ctx, void *p, size_t bytes);
	/* Make [p, p + bytes) of such memory read as zeros again, giving
	 * whole pages back to the system where it can (anonymous memory);
	 * NULL: the caller writes zeros. */
	void (*mem_zero)(void *ctx, void *p, size_t bytes);
	/* Live counters of an lcore: its own and its engine's. */
	const struct lcore_stats *(*lcore_stats)(void *ctx, unsigned lcore);
	const struct engine_counters *(*engine_stats)(void *ctx, unsigned lcore);
	/* Port counters; 0 or negative errno. */
	int (*port_stats)(void *ctx, unsigned port_index, struct box_port_stats *out);
	/* Snapshot of a job's progress on an lcore (engine_job_progress);
	 * 0 or -ENOENT. May be NULL: no stall detection. */
	int (*job_progress)(void *ctx, unsigned lcore, uint32_t job_id,
			    struct engine_progress *out);
	/* While on, the lcores mark completed rounds as congested (the
	 * ports miss frames: control/ports_watch.c). May be NULL. */
	void (*set_rx_missing)(void *ctx, int on);
	/* A rank's lateness on an lcore (engine_rank_lateness); 0 or
	 * -ENOENT. May be NULL: none reported. */
	int (*rank_lateness)(void *ctx, unsigned lcore, uint32_t job_id, uint16_t rank,
			     struct engine_lateness *out);
	/* Replace the telemetry snapshot with s (taken over, even NULL).
	 * NULL op: telemetry is off (the EAL's --no-telemetry, or its
	 * commands could not be registered). Control thread only. */
	void (*tel_publish)(void *ctx, struct dp_tel_snapshot *s);
};

/* What the data plane is: its ports, lcores and endpoints. */
struct dp_layout {
	unsigned nports;
	struct box_port_info ports[BOX_MAX_PORTS];
	unsigned nlcores;
	struct box_lcore_info lcores[BOX_MAX_LCORES];
	unsigned neps;
	struct box_endpoint eps[BOX_MAX_EPS];
	uint32_t mtu;                 /* smallest data-port MTU */
	const char *kernel;           /* sum kernel variant in use */
	char telemetry[108];          /* DPDK telemetry socket serving /pbox/...,
					 "" = telemetry off */
};

/* What dp_open needs to know (from pboxd's options). */
struct dp_params {
	unsigned nports;
	struct {
		uint16_t port;      /* DPDK port id */
		uint32_t ip;        /* host order */
		uint8_t prefix;
	} ip[BOX_MAX_PORTS];
	uint16_t udp_base;       /* lcore i listens on udp_base + i */
	uint32_t mbufs;          /* per port */
	uint32_t mtu;            /* 0 = each port's own */
	uint32_t idle_sleep_us;  /* 0 = pure polling */
	int fanout;              /* BOX_FANOUT_* */
	bool udp_checksum;       /* fill in the UDP checksums of results */
	volatile bool *quit;     /* the lcores return once it is true */
};

struct dp;
struct dp_log;

/*
 * pboxd's log (dataplane/dp_log.c). Every DPDK log line, the EAL's and
 * pboxd's own (the DPDK log type `pbox`), goes to stderr; when stderr is
 * the journal ($JOURNAL_STREAM), each line starts with its syslog priority
 * ("<3>"), so journald records its level. Call dp_log_open first (before
 * dp_eal_init, so the EAL's lines go the same way) and dp_log_close last.
 * Returns 0 or -ENOMEM with a message in err.
 */
int dp_log_open(struct dp_log **log, char *err, size_t errlen);
void dp_log_close(struct dp_log *log);
/* The control plane's sink (struct box_log_sink): msg as one line of the
 * `pbox` type at syslog priority prio ("pboxd: LEVEL: msg"). ctx unused. */
void dp_log_write(void *ctx, int prio, const char *msg);
/* The `pbox` type's level as a syslog priority (error .. debug): INFO
 * unless the EAL was given --log-level=pbox:LEVEL; and setting it. */
int dp_log_level(void);
void dp_log_set_level(int prio);

/* pboxd's options for the devices the EAL creates (dataplane/dp_eal.c). */
struct dp_eal_params {
	uint32_t xdp_busy_budget;   /* busy_budget of net_af_xdp vdevs that name none */
};

/*
 * Initialise DPDK's EAL with the arguments before "--", every net_af_xdp
 * --vdev given p's busy_budget unless it names one. argv is not changed.
 * Returns how many arguments the EAL consumed, or a negative errno with a
 * message in err.
 */
int dp_eal_init(int argc, char **argv, const struct dp_eal_params *p, char *err, size_t errlen);
/* Release what the EAL holds; last call of the process. */
void dp_eal_cleanup(void);

/*
 * Create the data lcores' contexts (one per EAL worker lcore) and start
 * every port. Fills *layout and *ops; the lcores do not run yet. Returns 0
 * and *dp, or a negative errno with a message in err naming the port or
 * lcore and what to change. On failure everything started is stopped.
 */
int dp_open(const struct dp_params *p, struct dp **dp, struct dp_layout *layout,
	    struct box_dp *ops, char *err, size_t errlen);
/* Launch every data lcore's poll loop. */
void dp_launch(struct dp *dp);
/* Wait until every launched lcore has returned (after *quit is set). */
void dp_wait(struct dp *dp);
/* Stop the ports and free the lcore contexts, after dp_wait and after the
 * control plane has released the job memory. NULL is ignored. */
void dp_close(struct dp *dp);

#endif
