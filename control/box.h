/*
 * box.h - what the control plane knows of the box: its configuration, its
 * data endpoints and ports, and the narrow interface through which it
 * reaches the data plane (messages to lcores, counters back).
 *
 * pboxd (control/pboxd.c) fills struct box from DPDK; unit tests fill it
 * with real engines driven directly (tests/unit/box_fixture.h). The control
 * plane never touches lcore-owned memory except through these calls.
 */
#ifndef PBOX_BOX_H
#define PBOX_BOX_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "drops.h"
#include "engine.h"

#define BOX_MAX_PORTS  16
#define BOX_MAX_LCORES 64
#define BOX_MAX_EPS    (BOX_MAX_PORTS * BOX_MAX_LCORES)

/* How results reach the ranks (dataplane/lcore_fanout.h). */
enum { BOX_FANOUT_AUTO = 0, BOX_FANOUT_SHARED, BOX_FANOUT_COPY };

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

/* Data endpoint: one per (port, lcore). Index = position in box.eps. */
struct box_endpoint {
	uint32_t ip;          /* host order */
	uint16_t udp_port;    /* udp_base + lcore index */
	uint16_t port;        /* DPDK port id */
	uint16_t lcore;       /* lcore index (0..nlcores-1), not the EAL id */
};

struct box_port_info {
	uint16_t port;
	char name[64];
	uint8_t mac[6];
	uint32_t ip;
	uint8_t prefix;
	uint32_t mtu;
	uint16_t rx_queues;
	const char *steering;     /* "rte_flow", "rss" or "ring" */
	const char *fanout;       /* "shared" (one payload copy) or "copy" (per rank) */
	int hold;                 /* contributions stay in rx mbufs (else copied) */
	int numa_node;            /* the NIC's NUMA node (hwloc), -1 = unknown/any */
	char local_cpus[128];     /* CPUs local to it ("0-15"); all for vdevs */
};

struct box_lcore_info {
	unsigned eal_id;
	unsigned index;
	int socket;
	int cpu;                  /* CPU the lcore runs on, -1 if several */
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
	uint64_t drops[DROP_COUNT];
};

/* The data plane as seen from the control plane. */
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
	/* Live counters of an lcore: its own and its engine's. */
	const struct lcore_stats *(*lcore_stats)(void *ctx, unsigned lcore);
	const struct engine_counters *(*engine_stats)(void *ctx, unsigned lcore);
	/* Port counters; 0 or negative errno. */
	int (*port_stats)(void *ctx, unsigned port_index, struct box_port_stats *out);
	/* Snapshot of a job's progress on an lcore (engine_job_progress);
	 * 0 or -ENOENT. May be NULL: no stall detection. */
	int (*job_progress)(void *ctx, unsigned lcore, uint32_t job_id,
			    struct engine_progress *out);
};

struct jobs; /* control/jobs.h */

/* The box: everything an RPC handler may need. */
struct box {
	struct box_config cfg;
	struct box_dp dp;
	unsigned nports;
	struct box_port_info ports[BOX_MAX_PORTS];
	unsigned nlcores;
	struct box_lcore_info lcores[BOX_MAX_LCORES];
	unsigned neps;
	struct box_endpoint eps[BOX_MAX_EPS];
	uint32_t mtu;                 /* smallest data-port MTU */
	const char *kernel;           /* sum kernel variant in use */
	double start_time;            /* CLOCK_MONOTONIC seconds at start */
	struct jobs *jobs;
};

#endif
