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

#include "dataplane/dp.h"

/* Settings: command line (`pboxd [EAL] -- [options]`) or INI file. */
struct box_config {
	/* data ports: --ip PORT:ADDR/PREFIX (repeatable) */
	unsigned nports;
	struct {
		uint16_t port;      /* DPDK port id */
		uint32_t ip;        /* host order */
		uint8_t prefix;
	} ip[BOX_MAX_PORTS];
	char control[64];            /* --control ADDR:PORT, "" = none */
	char rpc_socket[108];        /* --rpc-socket PATH, "" = none */
	uint32_t rpc_socket_mode;    /* --rpc-socket-mode, octal, default 0660 */
	uint16_t udp_base;           /* --udp-base, default 47000 */
	uint32_t chunk_bytes;        /* --chunk-bytes, default 32768 */
	uint32_t max_jobs;           /* --max-jobs, default 16 (<= ENGINE_MAX_JOBS/2) */
	uint32_t max_world;          /* --max-world, default 64 (<= ENGINE_MAX_WORLD) */
	uint32_t max_keys;           /* --max-keys per job, default 4096 */
	uint64_t max_job_bytes;      /* --max-job-bytes, default 1 GiB */
	uint64_t default_job_bytes;  /* --job-bytes, default 256 MiB */
	uint32_t slots_per_lcore;    /* --slots, per job per lcore, default 256 */
	uint32_t mbufs;              /* --mbufs per port, default 16383 */
	uint32_t mtu;                /* --mtu of the data ports, 0 = the port's own */
	uint32_t idle_sleep_us;      /* --idle-sleep-us, default 0 (pure polling) */
	uint32_t stall_timeout_ms;   /* --stall-timeout-ms, default 5000, 0 = off */
	uint32_t join_wait_ms;       /* --join-wait-ms, default 120000 */
	/* control-plane budgets (docs/reliability.md "Resource budgets") */
	uint64_t conn_reply_bytes;   /* --conn-reply-bytes, default 4 MiB */
	uint64_t total_reply_bytes;  /* --total-reply-bytes, default 64 MiB */
	uint32_t idle_timeout_ms;    /* --idle-timeout-ms, default 60000, 0 = never */
	uint32_t request_timeout_ms; /* --request-timeout-ms, default 10000, 0 = never */
	uint32_t max_conns_per_peer; /* --max-conns-per-peer, default 64 */
	uint32_t unix_reserved_conns; /* --unix-reserved-conns, default 16 */
	uint32_t log_peer_burst;     /* --log-peer-burst lines per 10 s, default 20 */
	int fanout;                  /* --fanout auto|shared|copy (BOX_FANOUT_*) */
	bool udp_checksum;           /* --udp-checksum on|off, default on */
	char log_level[16];          /* --log-level error|warn|info|debug */
	/* --operator-secret-file: what a TCP job_abort must present; length 0
	 * = none needed. Never reported by any method. */
	char operator_secret[257];
	uint32_t operator_secret_len;
};

/* Fill c with the defaults listed above. */
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

struct jobs; /* control/jobs.h */

/* The box: everything an RPC handler may need. */
struct box {
	struct box_config cfg;
	struct box_dp dp;
	struct dp_layout layout;      /* ports, lcores, endpoints */
	double start_time;            /* CLOCK_MONOTONIC seconds at start */
	uint32_t log_peer;            /* TCP peer being served (host order), 0 = none:
				       * ctl_log counts its lines against --log-peer-burst */
	struct jobs *jobs;
};

#endif
