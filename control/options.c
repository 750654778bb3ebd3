/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * options.c - the table of pboxd's options (see options.h): the one place
 * where an option, its default and its range are written. To add an
 * option: a field in struct box_config (control/box.h), a row here, a row
 * in docs/operations.md and a line in deploy/pboxd.conf (the unit test
 * test_options fails until both show it with this default).
 */
#include "control/options.h"

#include <string.h>

#include "common/logline.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define TiB (1024ull * 1024ull * MiB)

#define FIELD(f) .offset = offsetof(struct box_config, f), .size = sizeof(((struct box_config *)0)->f)

static const struct box_opt_choice fanout_choices[] = {
	{ "auto", BOX_FANOUT_AUTO }, { "shared", BOX_FANOUT_SHARED }, { "copy", BOX_FANOUT_COPY },
	{ NULL, 0 },
};

/* Syslog priorities, as the journal and the DPDK log type `pbox` use them. */
static const struct box_opt_choice level_choices[] = {
	{ "error", LOG_PRIO_ERR }, { "warn", LOG_PRIO_WARNING }, { "notice", LOG_PRIO_NOTICE },
	{ "info", LOG_PRIO_INFO }, { "debug", LOG_PRIO_DEBUG },
	{ NULL, 0 },
};

const struct box_opt box_opts[] = {
	{ .name = "ip", .type = BOX_OPT_IP_LIST, .arg = "PORT:ADDR/PREFIX", .def = NULL,
	  FIELD(ip),
	  .help = "data port PORT (DPDK port id) has ADDR/PREFIX; repeat per port" },
	{ .name = "eal", .type = BOX_OPT_STRING, .arg = "ARGS", .def = NULL,
	  FIELD(eal),
	  .help = "DPDK EAL arguments (lcores, devices, memory), split at spaces, used when "
		  "the command line has none before '--' (so a unit file needs no edits)" },
	{ .name = "control", .type = BOX_OPT_HOSTPORT, .arg = "ADDR:PORT", .def = "0.0.0.0:7470",
	  FIELD(control),
	  .help = "JSON-RPC over TCP for workers and remote operators; none = off" },
	{ .name = "metrics", .type = BOX_OPT_HOSTPORT, .arg = "ADDR:PORT", .def = NULL,
	  FIELD(metrics),
	  .help = "serve Prometheus metrics over HTTP (GET /metrics); none = off" },
	{ .name = "box-id", .type = BOX_OPT_STRING, .arg = "ID", .def = NULL,
	  FIELD(box_id),
	  .help = "this box's name in the metrics' box label, one box of a fleet told from "
		  "another; none = --control's ADDR:PORT (the host name for 0.0.0.0)" },
	{ .name = "rpc-socket", .type = BOX_OPT_STRING, .arg = "PATH", .def = "/run/pbox/pboxd.sock",
	  FIELD(rpc_socket),
	  .help = "JSON-RPC Unix socket for local operators; none = off" },
	{ .name = "rpc-socket-mode", .type = BOX_OPT_OCTAL, .arg = "MODE", .def = "0660",
	  .min = 0, .max = 0777, FIELD(rpc_socket_mode),
	  .help = "permissions of the Unix socket, octal" },
	{ .name = "rpc-socket-group", .type = BOX_OPT_STRING, .arg = "GROUP", .def = NULL,
	  FIELD(rpc_socket_group),
	  .help = "group owning the Unix socket (with mode 0660: its members run pboxctl); "
		  "none = pboxd's" },
	{ .name = "udp-base", .type = BOX_OPT_UINT, .arg = "N", .def = "47000",
	  .min = 1024, .max = 65535 - BOX_MAX_LCORES, FIELD(udp_base),
	  .help = "UDP port of data lcore 0; data lcore i uses N+i" },
	{ .name = "chunk-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "32K",
	  .min = 64, .max = 64 * MiB, FIELD(chunk_bytes),
	  .help = "chunk size for key assignment: each chunk has one (port, lcore) owner" },
	{ .name = "max-jobs", .type = BOX_OPT_UINT, .arg = "N", .def = "16",
	  .min = 1, .max = ENGINE_MAX_JOBS / 2, FIELD(max_jobs),
	  .help = "concurrent jobs" },
	{ .name = "max-world", .type = BOX_OPT_UINT, .arg = "N", .def = "1024",
	  .min = 1, .max = ENGINE_MAX_WORLD, FIELD(max_world),
	  .help = "workers per job" },
	{ .name = "max-keys", .type = BOX_OPT_UINT, .arg = "N", .def = "4096",
	  .min = 1, .max = 1u << 20, FIELD(max_keys),
	  .help = "keys per job" },
	{ .name = "max-job-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "1G",
	  .min = 1 * MiB, .max = 1 * TiB, FIELD(max_job_bytes),
	  .help = "largest job memory (arena) a job may ask for" },
	{ .name = "job-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "256M",
	  .min = 1 * MiB, .max = 1 * TiB, FIELD(default_job_bytes),
	  .help = "job memory when the job does not ask; at most --max-job-bytes" },
	{ .name = "slots", .type = BOX_OPT_UINT, .arg = "N", .def = "256",
	  .min = 1, .max = ENGINE_NO_SLOT - 1, FIELD(slots_per_lcore),
	  .help = "contribution slots (open segment rounds) per job per data lcore" },
	{ .name = "mbufs", .type = BOX_OPT_UINT, .arg = "N", .def = "16383",
	  .min = 1023, .max = 1u << 24, FIELD(mbufs),
	  .help = "mbufs per port, in a pool on the port's NUMA node" },
	{ .name = "mtu", .type = BOX_OPT_UINT, .arg = "BYTES", .def = "0",
	  .min = 576, .max = 9000, .zero_ok = true, FIELD(mtu),
	  .help = "MTU of every data port; 0 = the port's own (1500 for vdevs; "
		  "net_af_packet needs framesz= above it)" },
	{ .name = "idle-sleep-us", .type = BOX_OPT_UINT, .arg = "US", .def = "0",
	  .min = 0, .max = 1000000, FIELD(idle_sleep_us),
	  .help = "sleep of an idle data lcore; 0 = pure polling (production)" },
	{ .name = "xdp-busy-budget", .type = BOX_OPT_UINT, .arg = "N", .def = "64",
	  .min = 0, .max = 65535, FIELD(xdp_busy_budget),
	  .help = "net_af_xdp ports: NAPI budget of the kernel's preferred busy polling, "
		  "given to each such --vdev that names no busy_budget; 0 = off" },
	{ .name = "stall-timeout-ms", .type = BOX_OPT_UINT, .arg = "MS", .def = "3600000",
	  .min = 0, .max = 604800000, FIELD(stall_timeout_ms),
	  .help = "the most a job may wait for a late rank: a job's own timeout (its "
		  "creator's timeout_ms) is capped here; a job whose open rounds make no "
		  "progress for its timeout is aborted, naming the missing ranks; 0 = no bound" },
	{ .name = "heartbeat-timeout-ms", .type = BOX_OPT_UINT, .arg = "MS", .def = "6000",
	  .min = 1000, .max = 600000, .zero_ok = true, FIELD(heartbeat_timeout_ms),
	  .help = "a rank whose worker promised heartbeats and sent nothing on its control "
		  "connection for MS is lost (process stopped, hung or unreachable): its job "
		  "is aborted naming it; 0 = off" },
	{ .name = "join-wait-ms", .type = BOX_OPT_UINT, .arg = "MS", .def = "120000",
	  .min = 1000, .max = 86400000, .zero_ok = true, FIELD(join_wait_ms),
	  .help = "how long a job waits from its creation for every rank to join before it "
		  "is aborted (a job nobody joins is removed); 0 = forever" },
	{ .name = "fanout", .type = BOX_OPT_ENUM, .arg = "MODE", .def = "auto",
	  FIELD(fanout), .choices = fanout_choices,
	  .help = "results to N ranks: shared (one payload copy, needs chained-mbuf tx), "
		  "copy (one mbuf per rank), auto (shared from 2 KiB where the port can)" },
	{ .name = "udp-checksum", .type = BOX_OPT_BOOL, .arg = "on|off", .def = "on",
	  FIELD(udp_checksum),
	  .help = "fill in the UDP checksum of results, one pass over each payload "
		  "for all its ranks" },
	{ .name = "operator-secret-file", .type = BOX_OPT_SECRET_FILE, .arg = "FILE", .def = NULL,
	  FIELD(operator_secret),
	  .help = "operator methods over TCP must present the secret in FILE (mode 600, "
		  "16-256 printable bytes); none = TCP operators may only read" },
	{ .name = "conn-reply-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "4M",
	  .min = 64 << 10, .max = 1ull << 30, FIELD(conn_reply_bytes),
	  .help = "unread replies one control connection may have queued; beyond, its "
		  "requests wait unread" },
	{ .name = "total-reply-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "64M",
	  .min = 1 << 20, .max = 16ull << 30, FIELD(total_reply_bytes),
	  .help = "unread replies all control connections may have queued; beyond, no "
		  "connection holding more than its fair share of it is read" },
	{ .name = "idle-timeout-ms", .type = BOX_OPT_UINT, .arg = "MS", .def = "60000",
	  .min = 1000, .max = 86400000, .zero_ok = true, FIELD(idle_timeout_ms),
	  .help = "close a control connection that holds no rank and sends nothing for MS; "
		  "0 = never" },
	{ .name = "request-timeout-ms", .type = BOX_OPT_UINT, .arg = "MS", .def = "10000",
	  .min = 100, .max = 3600000, .zero_ok = true, FIELD(request_timeout_ms),
	  .help = "close a control connection whose request line is not complete within "
		  "MS; 0 = never" },
	{ .name = "max-conns-per-peer", .type = BOX_OPT_UINT, .arg = "N", .def = "64",
	  .min = 1, .max = 2048, .zero_ok = true, FIELD(max_conns_per_peer),
	  .help = "TCP control connections one peer address may hold; 0 = no cap" },
	{ .name = "conn-rate-per-peer", .type = BOX_OPT_UINT, .arg = "N", .def = "20",
	  .min = 1, .max = 100000, .zero_ok = true, FIELD(conn_rate_per_peer),
	  .help = "new TCP control connections per second one peer address may open, after "
		  "a burst of --max-conns-per-peer; 0 = no limit" },
	{ .name = "max-conns", .type = BOX_OPT_UINT, .arg = "N", .def = "8192",
	  .min = 64, .max = 65536, FIELD(max_conns),
	  .help = "control connections in all (each rank holds one per job it is in: two on "
		  "the host level)" },
	{ .name = "unix-reserved-conns", .type = BOX_OPT_UINT, .arg = "N", .def = "16",
	  .min = 0, .max = 1024, FIELD(unix_reserved_conns),
	  .help = "of the --max-conns control connections, those only the Unix socket may take" },
	{ .name = "log-peer-burst", .type = BOX_OPT_UINT, .arg = "N", .def = "50",
	  .min = 1, .max = 100000, FIELD(log_peer_burst),
	  .help = "log lines one TCP peer may cause per 10 s; the rest are counted and "
		  "reported as suppressed" },
	{ .name = "max-jobs-per-peer", .type = BOX_OPT_UINT, .arg = "N", .def = "4",
	  .min = 1, .max = ENGINE_MAX_JOBS / 2, .zero_ok = true, FIELD(max_jobs_per_peer),
	  .help = "jobs one TCP peer address may have created (job_join) and not yet ended; "
		  "0 = no cap" },
	{ .name = "max-job-bytes-per-peer", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "4G",
	  .min = 1 * MiB, .max = 64 * TiB, .zero_ok = true, FIELD(max_job_bytes_per_peer),
	  .help = "job memory of the jobs one TCP peer address created, together; 0 = no cap" },
	{ .name = "total-job-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "16G",
	  .min = 1 * MiB, .max = 64 * TiB, .zero_ok = true, FIELD(total_job_bytes),
	  .help = "job memory of every job together (removed jobs count until their memory "
		  "is freed); 0 = no cap" },
	{ .name = "reserved-jobs", .type = BOX_OPT_UINT, .arg = "N", .def = "2",
	  .min = 0, .max = ENGINE_MAX_JOBS / 2, FIELD(reserved_jobs),
	  .help = "of --max-jobs, those only an operator's jobs may take (job_create, or any "
		  "job made over the Unix socket)" },
	{ .name = "reserved-job-bytes", .type = BOX_OPT_SIZE, .arg = "BYTES", .def = "1G",
	  .min = 0, .max = 64 * TiB, FIELD(reserved_job_bytes),
	  .help = "of --total-job-bytes, the memory only an operator's jobs may take" },
	{ .name = "metrics-conns-per-peer", .type = BOX_OPT_UINT, .arg = "N", .def = "2",
	  .min = 1, .max = 16, .zero_ok = true, FIELD(metrics_conns_per_peer),
	  .help = "--metrics connections one peer address may hold; its oldest gives way "
		  "to its newest; 0 = no cap" },
	{ .name = "metrics-rate-per-peer", .type = BOX_OPT_UINT, .arg = "N", .def = "10",
	  .min = 1, .max = 100000, .zero_ok = true, FIELD(metrics_rate_per_peer),
	  .help = "new --metrics connections per second one peer address may open, after a "
		  "burst of as many; the rest are closed unanswered; 0 = no limit" },
	{ .name = "log-level", .type = BOX_OPT_ENUM, .arg = "LEVEL", .def = "info",
	  FIELD(log_level), .choices = level_choices,
	  .help = "level of the DPDK log type pbox (pboxd's messages); overrides the "
		  "EAL's --log-level=pbox:LEVEL" },
	{ .name = "checkpoint-dir", .type = BOX_OPT_STRING, .arg = "DIR", .def = NULL,
	  FIELD(checkpoint_dir),
	  .help = "save every PS job's weights and optimizer state into DIR/<job>/ every "
		  "--checkpoint-every seconds, and restore a job created again with the same "
		  "name and world from there; DIR: owned by pboxd's user or root, writable by "
		  "no one else; none = off" },
	{ .name = "checkpoint-every", .type = BOX_OPT_UINT, .arg = "SECONDS", .def = "600",
	  .min = 1, .max = 604800, FIELD(checkpoint_every_s),
	  .help = "period of the --checkpoint-dir saves (a job that took no step is skipped)" },
	{ .name = "checkpoint-timeout-ms", .type = BOX_OPT_UINT, .arg = "MS", .def = "600000",
	  .min = 1000, .max = 86400000, .zero_ok = true, FIELD(checkpoint_timeout_ms),
	  .help = "a job_save not written within MS is answered ETIMEDOUT (the write goes on "
		  "in the background), as is a restore's key_declare whose file is not read "
		  "within MS; 0 = never" },
	{ .name = "config", .type = BOX_OPT_CONFIG, .arg = "FILE", .def = NULL,
	  .help = "read options from the [pboxd] section of an INI file" },
	{ .name = "help", .type = BOX_OPT_FLAG, .arg = NULL, .def = NULL,
	  .help = "print this help and exit" },
};

const size_t box_nopts = sizeof(box_opts) / sizeof(box_opts[0]);

const struct box_opt *box_opt_find(const char *name)
{
	for (size_t i = 0; i < box_nopts; i++) {
		const char *a = box_opts[i].name, *b = name;
		while (*a && (*a == *b || (*a == '-' && *b == '_'))) {
			a++;
			b++;
		}
		if (!*a && !*b)
			return &box_opts[i];
	}
	return NULL;
}

bool box_opt_is_setting(const struct box_opt *o)
{
	return o->type != BOX_OPT_CONFIG && o->type != BOX_OPT_FLAG;
}
