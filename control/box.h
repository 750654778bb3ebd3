/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * box.h - what the control plane knows of the box: its configuration, and
 * the data plane's layout and operations (dataplane/dp.h).
 *
 * pboxd (control/pboxd.c) fills struct box through dp_open; unit tests fill
 * it with real engines driven directly (tests/unit/box_fixture.h).
 */
#ifndef PBOX_BOX_H
#define PBOX_BOX_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "control/peers.h"
#include "dataplane/dp.h"

#define BOX_ID_MAX 63                /* --box-id's length */

/*
 * Settings: command line (`pboxd [EAL] -- [options]`) or INI file. Each
 * field is one row of the option table, control/options.c, which holds
 * its option name, default, range and help.
 */
struct box_config {
	unsigned nports;             /* --ip PORT:ADDR/PREFIX (repeatable) */
	struct {
		uint16_t port;      /* DPDK port id */
		uint32_t ip;        /* host order */
		uint8_t prefix;
	} ip[BOX_MAX_PORTS];
	char control[64];            /* --control ADDR:PORT, "" = none */
	char metrics[64];            /* --metrics ADDR:PORT (Prometheus), "" = none */
	char box_id[BOX_ID_MAX + 1]; /* --box-id: the metrics' box label, "" = from
					--control (control/metrics.c) */
	char rpc_socket[108];        /* --rpc-socket PATH, "" = none */
	uint32_t rpc_socket_mode;    /* --rpc-socket-mode */
	char rpc_socket_group[64];   /* --rpc-socket-group, "" = pboxd's */
	char eal[1024];              /* --eal ARGS: EAL arguments when none come
					before "--" (a config file's line) */
	uint16_t udp_base;           /* --udp-base */
	uint32_t chunk_bytes;        /* --chunk-bytes */
	uint32_t max_jobs;           /* --max-jobs */
	uint32_t max_world;          /* --max-world */
	uint32_t max_keys;           /* --max-keys, per job */
	uint64_t max_job_bytes;      /* --max-job-bytes */
	uint64_t default_job_bytes;  /* --job-bytes */
	uint32_t slots_per_lcore;    /* --slots, per job per data lcore */
	uint32_t mbufs;              /* --mbufs, per port */
	uint32_t mtu;                /* --mtu of the data ports, 0 = the port's own */
	uint32_t idle_sleep_us;      /* --idle-sleep-us, 0 = pure polling */
	uint32_t xdp_busy_budget;    /* --xdp-busy-budget, 0 = no busy polling */
	uint32_t stall_timeout_ms;   /* --stall-timeout-ms: the most any job's timeout
					may be; 0 = no bound */
	uint32_t heartbeat_timeout_ms; /* --heartbeat-timeout-ms, 0 = off */
	int fanout;                  /* --fanout (BOX_FANOUT_*) */
	bool udp_checksum;           /* --udp-checksum on|off */
	int log_level;               /* --log-level, a syslog priority (LOG_PRIO_*) */
	uint32_t join_wait_ms;       /* --join-wait-ms */
	/* control-plane budgets (docs/reliability.md "Resource budgets") */
	uint64_t conn_reply_bytes;   /* --conn-reply-bytes */
	uint64_t total_reply_bytes;  /* --total-reply-bytes */
	uint32_t idle_timeout_ms;    /* --idle-timeout-ms, 0 = never */
	uint32_t request_timeout_ms; /* --request-timeout-ms, 0 = never */
	uint32_t max_conns_per_peer; /* --max-conns-per-peer, 0 = no cap */
	uint32_t conn_rate_per_peer; /* --conn-rate-per-peer, per second, 0 = no limit */
	uint32_t max_conns;           /* --max-conns */
	uint32_t unix_reserved_conns; /* --unix-reserved-conns */
	uint32_t log_peer_burst;     /* --log-peer-burst, lines per peer per 10 s */
	/* job admission budgets (jobs_admit_budget, control/jobs_core.c) */
	uint32_t max_jobs_per_peer;  /* --max-jobs-per-peer, 0 = no cap */
	uint64_t max_job_bytes_per_peer; /* --max-job-bytes-per-peer, 0 = no cap */
	uint64_t total_job_bytes;    /* --total-job-bytes, 0 = no cap */
	uint32_t reserved_jobs;      /* --reserved-jobs: of --max-jobs, operators' only */
	uint64_t reserved_job_bytes; /* --reserved-job-bytes: of --total-job-bytes, ditto */
	uint32_t metrics_conns_per_peer; /* --metrics-conns-per-peer, 0 = no cap */
	uint32_t metrics_rate_per_peer;  /* --metrics-rate-per-peer, per second, 0 = none */
	/* --operator-secret-file: what a TCP job_abort must present; length 0
	 * = none needed. Never reported by any method. */
	char operator_secret[257];
	uint32_t operator_secret_len;
	/* PS checkpoints (docs/operations.md "Checkpoints") */
	char checkpoint_dir[1024];   /* --checkpoint-dir, "" = no periodic saves */
	uint32_t checkpoint_every_s; /* --checkpoint-every */
	uint32_t checkpoint_timeout_ms; /* --checkpoint-timeout-ms, 0 = none */
};

/* Fill c with every option's default (control/options.c). */
void box_config_defaults(struct box_config *c);

/*
 * Parse options (argv after the EAL's "--"; argv[0] is the program name)
 * into c, which holds defaults or earlier settings. --config FILE reads an
 * INI file whose keys are the long option names without dashes, in a
 * [pboxd] section (`ip` may repeat); later options override it.
 * Returns 0, 1 if --help was given (usage printed to stdout), or -EINVAL
 * with a message naming the option in err.
 */
int box_config_parse(struct box_config *c, int argc, char **argv,
		     char *err, size_t errlen);

/* The --help text, from the option table. */
void box_config_usage(FILE *f);

/*
 * Where the control plane's log lines go (control/log.h). pboxd sets
 * dp_log_write, the DPDK log type `pbox`; with no write function (unit
 * tests) they go to stderr. prio is a syslog priority (LOG_PRIO_*).
 */
struct box_log_sink {
	void (*write)(void *ctx, int prio, const char *msg);
	void *ctx;
};

struct jobs; /* control/jobs.h */
struct ckpt_worker; /* control/ckpt_worker.h */

/* Called between the pieces of long work on the control thread (a
 * job_save writing gigabytes), so that pboxd's systemd watchdog sees the
 * thread alive; fn NULL: nothing to tell. */
struct box_keepalive {
	void (*fn)(void *ctx);
	void *ctx;
};

static inline void box_keepalive(const struct box_keepalive *k)
{
	if (k && k->fn)
		k->fn(k->ctx);
}

/* The box: everything an RPC handler may need. */
struct box {
	struct box_config cfg;
	struct box_dp dp;
	struct dp_layout layout;      /* ports, lcores, endpoints */
	double start_time;            /* CLOCK_MONOTONIC seconds at start */
	struct peer_addr log_peer;    /* TCP peer being served, all zero = none:
				       * ctl_log counts its lines against --log-peer-burst */
	struct jobs *jobs;
	struct ckpt_worker *ckpt;     /* writes checkpoint files (rpc_server's) */
	struct {                      /* box_ports_watch */
		double at;            /* last look (CLOCK_MONOTONIC s) */
		uint64_t missed;      /* imissed summed over the data ports then */
		int seen, on;         /* a first look was taken; marking on misses */
	} miss_watch;
	struct {                      /* box_telemetry_tick (control/telemetry.c) */
		double at;            /* last snapshot published (CLOCK_MONOTONIC s) */
		int failed;           /* the last build failed (logged once) */
	} tel_watch;
	struct box_log_sink log;      /* see ctl_log */
	struct box_keepalive keepalive; /* pboxd: the watchdog's ping */
	/* Per-peer log budget: lines logged while log_peer is a peer are
	 * written only if allow(ctx, &log_peer) (the RPC server's; NULL = all). */
	struct {
		int (*allow)(void *ctx, const struct peer_addr *peer);
		void *ctx;
	} log_gate;
};

/* Congestion marks while the data ports miss frames (ports_watch.c);
 * called from the control thread's loop, looks every 100 ms. */
void box_ports_watch(struct box *b);

#endif
