#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# compare.sh - side-by-side float32 allreduce benchmark on one host: pbox
# vs OpenMPI (MPI_Allreduce over its TCP BTL) vs Gloo (torch.distributed),
# same sizes, same worker counts, same timing, in one invocation.
#
#   bench/compare/compare.sh [--quick] [--sizes MIN:MAX] [--n 2,4] [--reps R]
#                            [--iters I] [--warmup W] [--systems pbox,openmpi,gloo]
#                            [--mtu 9000|1500] [--topology hosts|shared] [--out DIR]
#                            [--transport udp,xdp] [--loss PCT] [--loss-unit wire|skb]
#                            [--timeout S] [--topk D] [--topk-local L] [--local L]
#                            [--psgd R]
#                            [--shape RATE] [--box-rate RATE] [--boxes K] [--check]
#
# Defaults: sizes 4K:256M (x4 steps), N = 2,4, 5 reps of 5 timed calls after
# 2 warm-up calls, out build/compare. --quick: 4K:4M, N = 2, 3 reps (options
# given explicitly win over --quick). Needs root (namespaces, veth, DPDK);
# `make compare` builds what it needs and runs it.
#
# Topology (--topology):
#   hosts    (default) every worker rank in its own network namespace with
#            its own veth (eth0, 198.18.0.10+rank/24) on one bridge, as
#            separate hosts on one switch; the box's DPDK port (data
#            198.18.0.1) and its management interface (198.18.0.240,
#            control) on the same bridge; with --boxes K, box k at
#            198.18.0.(1+k) and 198.18.0.(240+k), each in its own
#            namespace. All three systems cross the same veths and bridge.
#   shared   all ranks in the one workers' namespace of
#            tests/integration/lib.sh (topo_up): pbox crosses its veth, but
#            the kernel carries OpenMPI's and Gloo's traffic between local
#            addresses over loopback (64 KiB MTU, no veth).
# --transport: the pbox transports to measure, each as its own system:
#   udp -> "pbox" (the default, kernel UDP), xdp -> "pbox-xdp" (AF_XDP; the
#   hosts topology: one worker per interface). cpu.txt gets each pbox run's
#   rank-0 CPU seconds in its calls, warm-up calls included (user + system,
#   pbox-perf's "# cpu" line: not filling the buffer) and the bytes it
#   reduced, and table.txt their ratio per transport and N (s per GB), each rep.
# Systems:
#   pbox     pboxd on DPDK net_af_packet on a veth (box_start af_packet), N
#            pbox-perf workers (kernel UDP), one pbox-perf run (one job) per
#            rep covering all sizes; the veths, pboxd and the workers at
#            --mtu (default 9000: jumbo frames, as training clusters run;
#            1500 for standard Ethernet);
#   openmpi  mpirun --allow-run-as-root --oversubscribe --bind-to none -np N
#            --mca btl tcp,self $BUILD/bench/mpi_allreduce over TCP
#            (hosts: mpirun in the bridge's namespace, each rank entering
#            its own through bench/compare/rank_netns.sh, PMIx over TCP on
#            the bridge); MALLOC_MMAP_THRESHOLD_=1G for its ranks, so its
#            per-call temporary buffer is not a fresh mmap above 32 MiB
#            (measured as installed, 64 MiB took 4x longer);
#   gloo     bench/compare/gloo_allreduce.py (torch.multiprocessing, N
#            processes; hosts: each enters its rank's namespace, eth0;
#            shared: the workers' veth).
# The reps are rounds: each runs pbox (pboxd started for it and stopped
# after, so its lcore takes no CPU from the others; warmed by one 16 MiB
# call of a one-rank job first), then OpenMPI, then Gloo,
# each for every N, one process launch (one pbox job) per system, N and rep.
# Each rep yields one sample per size: the mean time per call of its timed
# calls on rank 0. Outputs in DIR:
#   raw.txt          every sample: system n rep bytes us
#   compare.csv      system,n,bytes,median_us,min_us,max_us,algbw_GBps,busbw_GBps
#   compare.png      time and bus bandwidth vs size (bench/compare/plot.py)
#   table.txt        medians and the ratios t_pbox/t_openmpi, t_pbox/t_gloo
#   info.txt, logs/  the machine, versions and commands; every run's output
# --topk D: one more system, "pbox-topk": the same pbox-perf workers on the
#   same pboxd session calling pbox_allreduce_topk at density D (error
#   feedback; the selection time is inside the call's time), udp transport;
#   the table adds t_topk / t_pbox (dense) and t_topk / t_gloo.
# --topk-local L (with --topk): one more, "pbox-topk-local": hierarchical
#   top-k (pbox-perf --topk-local L: hosts of L consecutive ranks sum
#   through shared memory first, one rank per host selects and sends); the
#   table adds t_local / t_pbox and t_local / t_topk. Every N must be a
#   multiple of L.
# --local L (--systems pbox,gloo): hosts of L ranks: rank r runs in the
#   namespace (and behind the link, shaped with --shape) of rank r - r % L,
#   so a host's ranks share one link; "pbox" runs them with the host level
#   off (pbox-perf --local 1) and one more system, "pbox-local", with it on
#   (pbox-perf --local L: the host's ranks sum through shared memory and the
#   box gets one contribution per host; docs/architecture.md "The host
#   level"). Every N must be a multiple of L. Gloo's ranks are placed the
#   same way (gloo_allreduce.py --local L); OpenMPI's are not (refused).
#   With --topk D too, one more, "pbox-topk-host": top-k through the host
#   level (each local rank selects from its part of the host's sum: a
#   host sends D of the entries, not L times as many); the table adds
#   t_topkhost / t_topk and t_topkhost / t_gloo.
# --psgd R: one more system, "gloo-psgd": each call one PowerSGD step of
#   rank R on the tensor as a square-ish matrix over Gloo, as torch's
#   powerSGD_hook does it (error feedback, warm start; two all_reduces of
#   (rows + cols) * R floats, the matrix products and the error feedback
#   in the call's time: bench/compare/gloo_allreduce.py --psgd); the table
#   adds t_topk / t_psgd with --topk.
# PBOXD_ARGS (environment): more pboxd options for every pbox run, split at
#   spaces (e.g. PBOXD_ARGS="--slots 1024"); info.txt records them.
# Every run is bounded in time (timeout, whole process group); an EXIT trap
# stops what is left and removes the namespaces (lib.sh topo_down). Exit
# status 0 if every requested system produced every size.
#
# --timeout S: every run (one system, one N, one rep: process start, all
#   sizes) gets S seconds instead of the computed limit. A run that hits it
#   did not finish (DNF): the sizes it finished keep their samples, the
#   others get "DNF" in raw.txt (in place of us_per_call), and later reps
#   of that system and N are not run (raw.txt says so in a comment). A size
#   whose median over its reps is a DNF has "DNF" in compare.csv's time
#   columns (algbw and busbw empty) and "DNF (> S s)" in the table. A DNF
#   is a result, not a failure: the exit status stays 0. Without --timeout
#   a run out of time fails as before.
# --loss PCT (hosts topology, udp transport only): PCT% of the IPv4 frames
#   on the data path dropped each way, alike for all three systems, with
#   nftables `numgen random mod 10000 < PCT*100` (PCT in steps of 0.01, so
#   0.1 works). Installed once the topology is up, before the first run
#   (the pbox warm-up job runs under the loss too; it is untimed), and gone
#   with the namespaces. Where the frames are dropped, and why there:
#   - On this host TCP hands the veth 64 KiB TSO super-packets and they
#     cross the bridge whole (measured: 64 MiB crossed br0 as 1164 skbs);
#     a drop there would lose ~44 wire frames at once, far fewer, burstier
#     loss events than PCT% of frames (TCP at 1%: 19 drops instead of 949
#     for 64 MiB, and no slowdown). So with --loss-unit wire (the default)
#     every bridge port gets gso_max_segs 1: the bridge cuts super-packets
#     into wire frames on the way out, as a switch's wire would (the
#     senders keep TSO: with gso_max_segs 1 on the senders' own veths TCP
#     moved 64 MiB 25x slower here).
#   - Frames to a rank are dropped where they arrive, after that cut: a
#     netdev ingress chain on every rank's eth0 (frames from the box and
#     from the other ranks).
#   - Frames to the box are dropped in a bridge forward chain in the
#     switch's namespace, on the way out of the port toward the box's DPDK
#     port (pboxd's net_af_packet sees frames before any ingress hook of
#     its veth). pbox's workers send one datagram per skb here (no
#     --udp-offload), so those are wire frames already.
#   Every frame meets exactly one of these rules: PCT% each way. Spared
#   (the issue's loss is on the data path, not on set-up or control):
#   pbox's control connection (to and from the boxes' management addresses
#   198.18.0.240+k), OpenMPI's PMIx/out-of-band traffic with mpirun
#   (198.18.0.250, on br0 itself: ranks->mpirun never crosses a rule), and
#   Gloo's TCPStore rendezvous (TCP port 29600-29999 on rank 0). ARP and
#   IPv6 pass. Counters on every rule; after each system's block the
#   frames dropped and passed are printed, and logs/nft-loss.txt has the
#   rule sets with their counters at the end. --loss 0 installs the same
#   rules and the same cut, dropping nothing: the baseline for loss runs.
#   --topology shared is refused (OpenMPI/Gloo talk over loopback there,
#   which no bridge rule sees), as is --transport xdp (AF_XDP takes frames
#   before the ingress hook).
# --loss-unit wire|skb: what PCT% counts. Neither is free of bias here:
#   wire (default): wire frames, after the cut above. The cut is software
#     segmentation and per-frame forwarding that a NIC does in hardware,
#     and it slows TCP even with nothing dropped (--loss 0 vs no --loss,
#     64 MiB, N = 2, MTU 1500, quiet machine: OpenMPI 52-57 -> 109-111 ms,
#     Gloo 86-98 -> 159-165 ms; pbox sends wire frames anyway). GRO on the
#     receiving veths did not win it back. The nft rules alone cost nothing
#     measurable.
#   skb: no cut: what the kernel hands the bridge, TSO super-packets whole
#     (the oversize counter counts them). TCP's baseline is untouched, but
#     at the same PCT it sees ~44x fewer loss events per byte than pbox.
#   The two bracket a real network; run both to show the spread.
# --shape RATE (hosts topology): every rank's link RATE each way (tc's
#   units, powers of 1000: 1gbit, 500mbit, 2.5gbit; at least 1mbit), for
#   all systems and every transport. Both directions are shaped on the
#   switch's side of the rank's veth (in the bridge's namespace), so what
#   the rank's own stack does (kernel UDP, TCP, AF_XDP, which skips the
#   rank's qdiscs) does not matter: toward the rank a tbf on the port's
#   egress; from the rank the port's ingress (tc qdisc ingress, a u32
#   filter `match u32 0 0`, action mirred egress redirect) to an ifb
#   device (ifbwR) with the same tbf. (The kernel here has no netem and no
#   matchall or flower classifier.) Each tbf: burst max(64 KiB, 1 ms at
#   RATE) (measured, one TCP stream at MTU 9000 through two shaped links,
#   1 Gbit/s: burst 16 KiB 0.983, 64 KiB 0.988, 512 KiB 1.002 of RATE; a
#   64 MiB call takes 0.54 s, against which 64-128 KiB at line rate is
#   0.1-0.2%), limit max(4 MiB, 50 ms at RATE) queued bytes
#   (COMPARE_SHAPE_LIMIT_MS=Q: Q ms at RATE, at least 16 frames): pbox has no congestion control, its window (64-128
#   segments of 8.9 KiB) arrives at a port as a burst, and with shallower
#   queues its calls lost segments at the tbf and took up to 3.8x the
#   bound (docs/performance.md). A deep-buffered port, as a cloud VM's
#   rate limiter; TCP is indifferent to it. Once the links are up,
#   one TCP stream rank 0 -> rank 1 (bench/compare/tcp_rate.py, half a
#   second's worth) checks the shaping: info.txt gives its goodput against
#   RATE (a WARNING outside 0.90-1.05). At the end logs/shape-stats.txt has
#   every shaped link's bytes and drops each way ("PORT down B bytes D
#   drops up B bytes D drops"), logs/tc-qdiscs.txt the qdiscs; the EXIT
#   trap deletes the qdiscs and ifbs by name, then the namespaces.
#   raw.txt gets "# shape_bps R" and the table the link model's bound
#   beside each ratio (summarize.py; docs/performance.md "Where links are
#   the limit"): pbox/bound with bound max(S/R, N*S/(K*Rb)), gloo/ring and
#   mpi/ring with the ring's 2(N-1)/N*S/R, and the model's pbox/Gloo.
# --box-rate RATE (with --shape): each box's data link shaped the same way
#   (ifbbK); default unshaped: a balanced box (Rb infinite in the model).
#   The management links (control) are never shaped.
# --boxes K (hosts topology, 1-9, default 1): K pboxd, each in its own
#   namespace with its own DPDK port and management address on the bridge;
#   the workers get the list 198.18.0.240:7470,198.18.0.241:7470,... as
#   pbox-perf --control (PBOX_CONTROL's format). libpbox does not take a
#   list of boxes yet (issue 40 item 2, the fleet): before anything is set
#   up, compare.sh runs pbox-perf --control 127.0.0.1:1,127.0.0.1:2 (no box
#   there) and stops at once (status 2) if libpbox says it cannot resolve
#   that whole list as one control address, which is how a libpbox without
#   fleets fails. Any other answer (a fleet-aware libpbox names the first
#   box it cannot reach) lets the run go on, and the warm-up job (one rank
#   on the K boxes) then decides: if it fails, compare.sh stops naming the
#   list. So --boxes starts working by itself once libpbox takes lists.
#   COMPARE_FLEET_PROBE=0 skips the first check (to try the K-box set-up).
# --check: pbox's workers verify every element of every call (pbox-perf
#   --check, outside the timed calls); a wrong sum fails the run (its
#   logs' #wrong column).
# With --shape the pbox workers get --mtu MTU (the veths'), not the
#   automatic MTU: on this loaded 2-CPU machine the four ranks of one job
#   all had their 9000-byte probe unanswered within its 630 ms, fell back to
#   MTU 1500 and took 29x the bound; a figure of the links, not of a probe.
set -u
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}

usage() {
	sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
}

. bench/sizes.sh
. bench/shape.sh    # rate_bps, shape_link, shape_down (NS_SW, MTU)

QUICK=0; SIZES=; NLIST=; REPS=; ITERS=5; WARMUP=2; OUT=; SYSTEMS=pbox,openmpi,gloo; MTU=9000; TOPO=hosts; TPS=udp
LOSS=; LOSS_UNIT=wire; TIMEOUT=; TOPK=; TOPK_LOCAL=; PSGD=; SHAPE=; BOX_RATE=; BOXES=1; HOST_LOCAL=
CHECK=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--sizes) SIZES=${2:?--sizes needs MIN:MAX}; shift ;;
	--n) NLIST=${2:?--n needs a list}; shift ;;
	--reps) REPS=${2:?--reps needs a number}; shift ;;
	--iters) ITERS=${2:?--iters needs a number}; shift ;;
	--warmup) WARMUP=${2:?--warmup needs a number}; shift ;;
	--systems) SYSTEMS=${2:?--systems needs a list}; shift ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--mtu) MTU=${2:?--mtu needs 1500 or 9000}; shift ;;
	--topology) TOPO=${2:?--topology needs hosts or shared}; shift ;;
	--transport) TPS=${2:?--transport needs a list (udp,xdp)}; shift ;;
	--loss) LOSS=${2:?--loss needs a percentage (e.g. 0.1, 5)}; shift ;;
	--loss-unit) LOSS_UNIT=${2:?--loss-unit needs wire or skb}; shift ;;
	--timeout) TIMEOUT=${2:?--timeout needs seconds}; shift ;;
	--topk) TOPK=${2:?--topk needs a density}; shift ;;
	--topk-local) TOPK_LOCAL=${2:?--topk-local needs ranks per host}; shift ;;
	--local) HOST_LOCAL=${2:?--local needs ranks per host}; shift ;;
	--psgd) PSGD=${2:?--psgd needs a rank}; shift ;;
	--shape) SHAPE=${2:?--shape needs a rate (e.g. 1gbit, 500mbit)}; shift ;;
	--box-rate) BOX_RATE=${2:?--box-rate needs a rate (e.g. 1gbit)}; shift ;;
	--boxes) BOXES=${2:?--boxes needs a number}; shift ;;
	--check) CHECK=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "compare.sh: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
	shift
done
if [ $QUICK = 1 ]; then
	SIZES=${SIZES:-4K:4M}; NLIST=${NLIST:-2}; REPS=${REPS:-3}
fi
SIZES=${SIZES:-4K:256M}; NLIST=${NLIST:-2,4}; REPS=${REPS:-5}; OUT=${OUT:-$BUILD/compare}
MINB=$(to_bytes "${SIZES%%:*}") && MAXB=$(to_bytes "${SIZES##*:}") && [ "$MINB" -ge 4 ] &&
	[ "$MAXB" -ge "$MINB" ] && [[ $SIZES == *:* ]] ||
	{ echo "compare.sh: bad --sizes $SIZES (MIN:MAX, e.g. 4K:256M, 4 <= MIN <= MAX)" >&2; exit 2; }
[ "$MTU" = 1500 ] || [ "$MTU" = 9000 ] || { echo "compare.sh: --mtu must be 1500 or 9000" >&2; exit 2; }
[ "$TOPO" = hosts ] || [ "$TOPO" = shared ] || { echo "compare.sh: --topology must be hosts or shared" >&2; exit 2; }
[[ $TPS =~ ^(udp|xdp)(,(udp|xdp))*$ ]] || { echo "compare.sh: bad --transport $TPS (udp, xdp or udp,xdp)" >&2; exit 2; }
[[ $TPS == *xdp* ]] && [ "$TOPO" != hosts ] && { echo "compare.sh: --transport xdp needs --topology hosts (one worker per interface)" >&2; exit 2; }
IFS=, read -r -a TP_LIST <<< "$TPS"
if [ -n "$LOSS" ]; then
	# PCT with at most two decimals -> frames per 10000 (numgen random mod 10000)
	[[ $LOSS =~ ^([0-9]{1,3})(\.([0-9]{1,2}))?$ ]] && frac=${BASH_REMATCH[3]}00 &&
		LOSS_N=$((10#${BASH_REMATCH[1]} * 100 + 10#${frac:0:2})) && [ "$LOSS_N" -le 10000 ] ||
		{ echo "compare.sh: bad --loss $LOSS (a percentage 0..100, at most two decimals, e.g. 0.1 or 5)" >&2; exit 2; }
	[ "$TOPO" = hosts ] || { echo "compare.sh: --loss needs --topology hosts (shared: OpenMPI and Gloo talk over loopback, which no bridge rule sees)" >&2; exit 2; }
	[[ $TPS == *xdp* ]] && { echo "compare.sh: --loss works with --transport udp only (AF_XDP takes frames before the ingress hook that drops them)" >&2; exit 2; }
fi
[ "$LOSS_UNIT" = wire ] || [ "$LOSS_UNIT" = skb ] || { echo "compare.sh: bad --loss-unit $LOSS_UNIT (wire or skb)" >&2; exit 2; }
if [ -n "$TIMEOUT" ]; then
	[[ $TIMEOUT =~ ^[0-9]+$ ]] && [ "$TIMEOUT" -ge 1 ] ||
		{ echo "compare.sh: bad --timeout $TIMEOUT (seconds per run, >= 1)" >&2; exit 2; }
fi
[[ $NLIST =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "compare.sh: bad --n $NLIST (e.g. 2,4)" >&2; exit 2; }
for v in "$REPS" "$ITERS" "$WARMUP"; do
	[[ $v =~ ^[0-9]+$ ]] || { echo "compare.sh: --reps/--iters/--warmup must be numbers" >&2; exit 2; }
done
[ "$REPS" -ge 1 ] && [ "$ITERS" -ge 1 ] || { echo "compare.sh: --reps and --iters must be >= 1" >&2; exit 2; }
IFS=, read -r -a NS <<< "$NLIST"
for n in "${NS[@]}"; do
	[ "$n" -ge 2 ] || { echo "compare.sh: every N must be >= 2 (got $n)" >&2; exit 2; }
done
if [ -n "$HOST_LOCAL" ]; then
	[[ $HOST_LOCAL =~ ^[0-9]+$ ]] && [ "$HOST_LOCAL" -ge 2 ] ||
		{ echo "compare.sh: --local L needs L >= 2 (got $HOST_LOCAL)" >&2; exit 2; }
	! want openmpi ||
		{ echo "compare.sh: --local measures pbox and Gloo (--systems pbox,gloo): OpenMPI's ranks are not placed by host" >&2; exit 2; }
	for n in "${NS[@]}"; do
		[ $((n % HOST_LOCAL)) = 0 ] ||
			{ echo "compare.sh: --local $HOST_LOCAL: N = $n is not a multiple of it" >&2; exit 2; }
	done
fi
if [ -n "$TOPK_LOCAL" ]; then
	[ -n "$TOPK" ] && [[ $TOPK_LOCAL =~ ^[0-9]+$ ]] && [ "$TOPK_LOCAL" -ge 2 ] ||
		{ echo "compare.sh: --topk-local L needs --topk D and L >= 2 (got $TOPK_LOCAL)" >&2; exit 2; }
	for n in "${NS[@]}"; do
		[ $((n % TOPK_LOCAL)) = 0 ] ||
			{ echo "compare.sh: --topk-local $TOPK_LOCAL: N = $n is not a multiple of it" >&2; exit 2; }
	done
fi
SHAPE_BPS=; BOX_BPS=
if [ -n "$SHAPE" ]; then
	SHAPE_BPS=$(rate_bps "$SHAPE") ||
		{ echo "compare.sh: bad --shape $SHAPE (a rate of at least 1mbit: 1gbit, 500mbit, 2.5gbit)" >&2; exit 2; }
	[ "$TOPO" = hosts ] || { echo "compare.sh: --shape needs --topology hosts (a link per rank)" >&2; exit 2; }
fi
if [ -n "$BOX_RATE" ]; then
	BOX_BPS=$(rate_bps "$BOX_RATE") ||
		{ echo "compare.sh: bad --box-rate $BOX_RATE (a rate of at least 1mbit: 1gbit, 500mbit)" >&2; exit 2; }
	[ -n "$SHAPE" ] || { echo "compare.sh: --box-rate needs --shape (the model compares the box's link with the workers')" >&2; exit 2; }
fi
[[ $BOXES =~ ^[0-9]+$ ]] && [ "$BOXES" -ge 1 ] && [ "$BOXES" -le 9 ] ||
	{ echo "compare.sh: bad --boxes $BOXES (1 to 9)" >&2; exit 2; }
[ "$BOXES" = 1 ] || [ "$TOPO" = hosts ] || { echo "compare.sh: --boxes $BOXES needs --topology hosts" >&2; exit 2; }
want() { [[ ,$SYSTEMS, == *",$1,"* ]]; }

# The sizes every tool runs (minbytes * 4^k <= maxbytes, whole float32s).
SIZE_LIST=()
for ((s = MINB; s <= MAXB; s *= 4)); do SIZE_LIST+=($((s / 4 * 4))); done
SUM=0; for s in "${SIZE_LIST[@]}"; do SUM=$((SUM + s)); done

. tests/integration/lib.sh
need_root "bench/compare/compare.sh" compare

# ---- --topology hosts: one namespace per rank, all on one bridge ----------------
NS_SW=pbox-sw-$TAG                     # the "switch": bridge br0, mpirun runs here
MAXN=0; for n in "${NS[@]}"; do [ "$n" -gt $MAXN ] && MAXN=$n; done
[ "$MAXN" -le 230 ] || { echo "compare.sh: N = $MAXN: at most 230 ranks (198.18.0.10-239)" >&2; exit 2; }
wk_ns() { echo "pbox-w$1-$TAG"; }      # rank r's namespace (host)
# the namespace pbox's rank r runs in: its own, or with --local L its host's
pbox_ns() { wk_ns $(( HOST_LOCAL ? $1 / HOST_LOCAL * HOST_LOCAL : $1 )); }
wk_ip() { echo "198.18.0.$((10 + $1))"; }
# Box k (--boxes): its namespace, data port (DPDK's veth) and management
# veth, data and management addresses, pboxctl socket, log and EAL prefix.
# Box 0 keeps lib.sh's names (topo_down knows them).
bx_ns() { [ "$1" = 0 ] && echo "$NS_BOX" || echo "pbox-box$1-$TAG"; }
bx_dp() { [ "$1" = 0 ] && echo "$IF_BD" || echo "pb$1d$TAG"; }
bx_mp() { [ "$1" = 0 ] && echo "$IF_BM" || echo "pb$1m$TAG"; }
bx_ip() { echo "198.18.0.$((1 + $1))"; }
bx_mgmt() { echo "198.18.0.$((240 + $1))"; }
bx_sock() { [ "$1" = 0 ] && echo "$PBOX_SOCKET" || echo "$WORKDIR/pboxd$1.sock"; }
bx_log() { echo "$WORKDIR/pboxd$1.log"; }
bx_prefix() { [ "$1" = 0 ] && echo "pbox$TAG" || echo "pbox${TAG}b$1"; }
hosts_down() {
	local k
	ip netns del "$NS_SW" 2>/dev/null
	for ((k = 1; k < BOXES; k++)); do
		ip netns del "$(bx_ns $k)" 2>/dev/null; rm -rf "/run/dpdk/$(bx_prefix $k)" 2>/dev/null
	done
	for ((i = 0; i < MAXN; i++)); do ip netns del "$(wk_ns $i)" 2>/dev/null; done
}
# plug IF (in the root namespace) into the bridge from the other end of a new veth
hosts_plug() { # hosts_plug IF NS: veth IF (moved to NS) <-> x$IF on br0
	ip link add "$1" type veth peer name "x$1" || die "cannot create veth $1"
	ip link set "$1" netns "$2" && ip link set "x$1" netns "$NS_SW" || die "cannot move veth $1"
	ip -n "$NS_SW" link set "x$1" mtu "$MTU" master br0 up || die "cannot attach x$1 to the bridge"
}
hosts_up() {
	local k ns dp mp
	trap hosts_topo_down EXIT
	trap 'exit 130' INT TERM
	ip netns add "$NS_SW" || die "cannot create network namespaces"
	ip -n "$NS_SW" link add br0 type bridge || die "cannot create the bridge"
	ip -n "$NS_SW" link set lo up
	for ((k = 0; k < BOXES; k++)); do
		ns=$(bx_ns $k); dp=$(bx_dp $k); mp=$(bx_mp $k)
		ip netns add "$ns" || die "cannot create namespace $ns"
		ip -n "$ns" link set lo up
		hosts_plug "$dp" "$ns"; hosts_plug "$mp" "$ns"
		ip -n "$ns" link set "$dp" mtu "$MTU" up
		ip netns exec "$ns" sysctl -qw net.ipv6.conf."$dp".disable_ipv6=1 2>/dev/null
		ip -n "$ns" addr add "$(bx_mgmt $k)/24" dev "$mp"; ip -n "$ns" link set "$mp" mtu "$MTU" up
	done
	for ((i = 0; i < MAXN; i++)); do
		ns=$(wk_ns $i)
		ip netns add "$ns" || die "cannot create namespace $ns"
		hosts_plug "pw${i}_$TAG" "$ns"
		ip -n "$ns" link set "pw${i}_$TAG" name eth0 && ip -n "$ns" link set lo up &&
			ip -n "$ns" addr add "$(wk_ip $i)/24" dev eth0 && ip -n "$ns" link set eth0 mtu "$MTU" up ||
			die "cannot set up eth0 in $ns"
	done
	ip -n "$NS_SW" addr add 198.18.0.250/24 dev br0; ip -n "$NS_SW" link set br0 mtu "$MTU" up
}
# K pboxd (hosts topology), one per box namespace, as lib.sh's box_start
# starts one (af_packet, 2 lcores, no hugepages); BX_PIDS[k] while it runs.
BX_PIDS=()
boxes_start() {
	local k lg vdev mtu_opt=() extra=",framesz=10240,blocksz=20480,framecnt=1024"
	[ "$MTU" = 9000 ] && mtu_opt=(--mtu 9000) || extra=
	for ((k = 0; k < BOXES; k++)); do
		lg=$(bx_log $k); vdev="net_af_packet0,iface=$(bx_dp $k)$extra"
		rm -f "$lg" # not the last rep's "ready": the shell truncates it after the fork
		ip netns exec "$(bx_ns $k)" "$BUILD/pboxd" -l 0-1 --no-huge -m 512 --no-pci --no-shconf \
			--file-prefix="$(bx_prefix $k)" --vdev="$vdev" --log-level=lib.eal:error -- \
			--ip "0:$(bx_ip $k)/24" --control "$(bx_mgmt $k):7470" --rpc-socket "$(bx_sock $k)" \
			--idle-sleep-us "${PBOX_IDLE_SLEEP_US:-20}" "${mtu_opt[@]}" "$@" > "$lg" 2>&1 &
		BX_PIDS[k]=$!
	done
	for ((k = 0; k < BOXES; k++)); do
		lg=$(bx_log $k)
		for _ in $(seq 200); do
			grep -q 'pboxd: ready' "$lg" 2>/dev/null && continue 2
			kill -0 "${BX_PIDS[k]}" 2>/dev/null || { cat "$lg" >&2; die "pboxd of box $k exited during start-up"; }
			sleep 0.1
		done
		cat "$lg" >&2
		die "pboxd of box $k not ready within 20 s"
	done
}
# boxes_stop: SIGTERM to every box, SIGKILL after 10 s; status 1 if one
# exited non-zero or had to be killed
boxes_stop() {
	local k p rc=0
	for p in "${BX_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for ((k = 0; k < ${#BX_PIDS[@]}; k++)); do
		p=${BX_PIDS[k]}
		[ -n "$p" ] || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && { kill -KILL "$p"; log "compare: pboxd of box $k did not stop within 10 s of SIGTERM"; rc=1; }
		wait "$p" 2>/dev/null || rc=1
	done
	BX_PIDS=()
	return $rc
}
hosts_topo_down() { local rc=$?; hosts_down; (exit $rc); topo_down; }

# ---- --loss: nftables drops on the data path (why these places: the header) -------
GLOO_PORT0=29600; GLOO_PORTS=29600-29999 # run_gloo's rendezvous ports: one more per run
box_ports() { local k; for ((k = 0; k < BOXES; k++)); do echo "x$(bx_dp $k)"; done; }
loss_up() {
	local big=$((MTU + 14)) i p ns k
	local ports mgmts
	ports=$(box_ports | sed 's/.*/"&"/' | paste -sd, -)
	mgmts=$(for ((k = 0; k < BOXES; k++)); do bx_mgmt $k; done | paste -sd, -)
	# --loss-unit wire: the bridge cuts TSO/GSO super-packets into wire frames on the way out
	[ "$LOSS_UNIT" = wire ] &&
		for p in $(box_ports) $(for ((i = 0; i < MAXN; i++)); do echo "xpw${i}_$TAG"; done); do
			ip -n "$NS_SW" link set "$p" gso_max_segs 1 || die "cannot set gso_max_segs 1 on bridge port $p"
		done
	# toward the box: on the way out of its data port's bridge port
	ip netns exec "$NS_SW" nft -f - <<NFT || die "cannot install the loss rules in $NS_SW"
table bridge pboxloss {
	chain forw {
		type filter hook forward priority 0; policy accept;
		oifname != { $ports } accept
		ether type != ip accept
		meta length > $big counter comment "oversize"
		numgen random mod 10000 < $LOSS_N counter drop comment "loss"
		counter comment "passed"
	}
}
NFT
	# toward each rank: where the frames arrive, after the bridge's cut
	for ((i = 0; i < MAXN; i++)); do
		ns=$(wk_ns $i)
		ip netns exec "$ns" nft -f - <<NFT || die "cannot install the loss rules in $ns"
table netdev pboxloss {
	chain in {
		type filter hook ingress device "eth0" priority 0; policy accept;
		ether type != ip accept
		ip saddr { $mgmts, 198.18.0.250 } counter accept comment "spared: control"
		ip saddr $(wk_ip 0) tcp sport $GLOO_PORTS counter accept comment "spared: rendezvous"
		ip daddr $(wk_ip 0) tcp dport $GLOO_PORTS counter accept comment "spared: rendezvous"
		meta length > $big counter comment "oversize"
		numgen random mod 10000 < $LOSS_N counter drop comment "loss"
		counter comment "passed"
	}
}
NFT
	done
}
loss_rulesets() { # every loss rule set with its counters
	echo "## $NS_SW (toward the boxes' data ports)"; ip netns exec "$NS_SW" nft list table bridge pboxloss
	for ((i = 0; i < MAXN; i++)); do
		echo "## $(wk_ns $i) (toward rank $i)"; ip netns exec "$(wk_ns $i)" nft list table netdev pboxloss
	done
}
loss_counts() { # frames so far, summed over every rule set: dropped passed spared oversize
	loss_rulesets 2>/dev/null | awk '/counter packets/ {
		for (i = 1; i < NF; i++) if ($i == "packets") p = $(i + 1)
		if (/comment "loss"/) d += p; else if (/comment "passed"/) k += p
		else if (/comment "spared/) c += p; else if (/comment "oversize"/) o += p }
		END { print d + 0, k + 0, c + 0, o + 0 }'
}
LOSS_LAST=(0 0 0 0)
loss_delta() { # LOSS_LINE: what the rules did since the last call (not in $(...): it keeps LOSS_LAST)
	local now; read -r -a now <<< "$(loss_counts)"
	local d=$((now[0] - LOSS_LAST[0])) k=$((now[1] - LOSS_LAST[1])) c=$((now[2] - LOSS_LAST[2])) o=$((now[3] - LOSS_LAST[3]))
	LOSS_LAST=("${now[@]}")
	LOSS_LINE=$(printf 'loss: %d of %d data %s dropped (%s%%), %d control/rendezvous frames spared' \
		"$d" $((d + k)) "$([ "$LOSS_UNIT" = wire ] && echo frames || echo skbs)" \
		"$(awk -v d=$d -v t=$((d + k)) 'BEGIN { printf "%.2f", t ? 100 * d / t : 0 }')" "$c")
	if [ "$LOSS_UNIT" = skb ]; then
		LOSS_LINE+=", $o of them super-packets"
	elif [ "$o" != 0 ]; then
		LOSS_LINE+="; WARNING: $o frames larger than the MTU met a loss rule (one drop loses several wire frames)"
	fi
}
# ---- --shape / --box-rate: each link's rate each way, on the switch's side ------
# (why these qdiscs, burst and limit: the header)
shape_up() {
	local i k
	for ((i = 0; i < MAXN; i++)); do shape_link "xpw${i}_$TAG" "ifbw$i" "$SHAPE_BPS"; done
	if [ -n "$BOX_BPS" ]; then
		for ((k = 0; k < BOXES; k++)); do shape_link "x$(bx_dp $k)" "ifbb$k" "$BOX_BPS"; done
	fi
}
# shape_check: one TCP stream rank 0 -> rank 1 through two shaped links
# (rank 0's upload, rank 1's download): its goodput against --shape
shape_check() {
	local bytes port=5201 out=$OUT/logs/shape-check.txt got
	bytes=$(awk -v r="$SHAPE_BPS" 'BEGIN { b = int(r / 8 / 2); print (b > 4194304 ? b : 4194304) }')
	ip netns exec "$(wk_ns 1)" timeout 30 "$PY" bench/compare/tcp_rate.py serve --addr "$(wk_ip 1)" \
		--port $port --timeout 25 > "$out" 2>&1 &
	local srv=$!
	ip netns exec "$(wk_ns 0)" timeout 30 "$PY" bench/compare/tcp_rate.py send --addr "$(wk_ip 1)" \
		--port $port --bytes "$bytes" --timeout 25 >> "$out" 2>&1
	wait $srv || { cat "$out" >&2; die "shaping check: the TCP stream rank 0 -> rank 1 failed"; }
	got=$(awk 'NF == 3 { print $3 }' "$out")
	SHAPE_LINE=$(awk -v g="$got" -v r="$SHAPE_BPS" -v b="$bytes" 'BEGIN {
		printf "one TCP stream rank 0 -> rank 1, %d bytes: %.1f Mbit/s, %.3f of the shaped rate", b, g / 1e6, g / r }')
	awk -v g="$got" -v r="$SHAPE_BPS" 'BEGIN { exit !(g >= 0.9 * r && g <= 1.05 * r) }' ||
		SHAPE_LINE+=" (WARNING: not within 0.90-1.05 of it)"
}

if [ "$TOPO" = hosts ]; then
	CONTROL=$(for ((k = 0; k < BOXES; k++)); do echo "$(bx_mgmt $k):7470"; done | paste -sd, -)
fi
[ -x "$BUILD/pboxd" ] && [ -x "$BUILD/pbox-perf" ] || die "$BUILD/pboxd or $BUILD/pbox-perf missing: run make first"
# --boxes K > 1: does this libpbox take a list of boxes? (the probe: the header)
if [ "$BOXES" -gt 1 ] && want pbox && [ "${COMPARE_FLEET_PROBE:-1}" = 1 ]; then
	probe=$(timeout 10 "$BUILD/pbox-perf" --control 127.0.0.1:1,127.0.0.1:2 --job fleet-probe \
		--rank 0 --world 1 --minbytes 4 --maxbytes 4 --iters 1 --warmup 0 2>&1)
	if [[ $probe == *"control address 127.0.0.1:1,127.0.0.1:2"* ]]; then
		echo "compare.sh: --boxes $BOXES: this libpbox does not take a list of boxes yet (the fleet," \
			"issue 40 item 2); pbox-perf --control 127.0.0.1:1,127.0.0.1:2 said: $probe" >&2
		exit 2
	fi
fi

mkdir -p "$OUT/logs" || die "cannot create $OUT"
rm -f "$OUT"/logs/* "$OUT/raw.txt" "$OUT/compare.csv" "$OUT/compare.png" "$OUT/table.txt" "$OUT/cpu.txt"
RAW=$OUT/raw.txt
echo "# system n rep bytes us_per_call (DNF: the run did not finish within the timeout)" > "$RAW"
[ -z "$TIMEOUT" ] || echo "# timeout_s $TIMEOUT" >> "$RAW"
[ -z "$LOSS" ] || echo "# loss_pct $LOSS" >> "$RAW"
[ -z "$LOSS" ] || echo "# loss_unit $LOSS_UNIT" >> "$RAW"
[ -z "$SHAPE" ] || echo "# shape_bps $SHAPE_BPS" >> "$RAW"
[ -z "$BOX_RATE" ] || echo "# box_bps $BOX_BPS" >> "$RAW"
[ "$BOXES" = 1 ] || echo "# boxes $BOXES" >> "$RAW"

# Time limits: a run may take its size sweep at COMPARE_MIN_BPS bytes/s per
# call (default 8 MB/s, several times slower than anything seen here), plus
# 60 s for start-up; COMPARE_RUN_TIMEOUT overrides the computed limit.
MIN_BPS=${COMPARE_MIN_BPS:-8000000}
limit_for() { # limit_for REPS_IN_RUN
	local calls=$(((WARMUP + ITERS) * $1))
	echo "${COMPARE_RUN_TIMEOUT:-$((60 + calls * SUM / MIN_BPS))}"
}

# Runs started here get their own process group (timeout makes one); the
# EXIT trap stops those groups before lib.sh's topo_down does the rest.
RUN_PGIDS=()
cleanup() {
	local rc=$?
	for g in "${RUN_PGIDS[@]}"; do kill -TERM -- "-$g" 2>/dev/null; done
	for g in "${RUN_PGIDS[@]}"; do
		for _ in $(seq 30); do kill -0 -- "-$g" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$g" 2>/dev/null
	done
	[ ${#BX_PIDS[@]} = 0 ] || boxes_stop
	shape_down
	(exit $rc)
	[ "$TOPO" = hosts ] && hosts_down
	topo_down
}
# run_in NS LIMIT LOG CMD...: CMD in namespace NS, at most LIMIT s; waits in
# the background so a signal to this script is handled at once.
run_in() {
	local ns=$1 limit=$2 logf=$3; shift 3
	ip netns exec "$ns" timeout -k 10 "$limit" "$@" > "$logf" 2>&1 &
	local pid=$!
	RUN_PGIDS+=("$pid")
	wait "$pid"
	local rc=$?
	local keep=() g
	for g in "${RUN_PGIDS[@]}"; do [ "$g" = "$pid" ] || keep+=("$g"); done
	RUN_PGIDS=("${keep[@]}")
	[ $rc -eq 124 ] && log "  timed out after ${limit}s (see $logf)"
	return $rc
}

FAILED=()
START=$SECONDS
elapsed() { echo "$((SECONDS - START))s"; }
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "host: $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "memory: $(free -m | awk '/^Mem:/ {print $2 " MiB"}')"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "sizes: ${SIZE_LIST[*]}"
	echo "n: ${NS[*]}; reps $REPS; iters $ITERS; warmup $WARMUP; systems $SYSTEMS; MTU $MTU; topology $TOPO"
	[ -z "$LOSS" ] || echo "loss: $LOSS% each way, per $([ "$LOSS_UNIT" = wire ] &&
		echo "wire frame (bridge ports gso_max_segs 1)" || echo "skb (TSO super-packets whole)")" \
		"(nftables numgen random mod 10000 < $LOSS_N)"
	[ -z "$TIMEOUT" ] || echo "timeout: $TIMEOUT s per run; a run out of time is recorded as DNF"
	[ -z "$SHAPE" ] || echo "shape: every rank's link $SHAPE ($SHAPE_BPS bit/s) each way (tbf burst $(shape_burst "$SHAPE_BPS") B, limit $(shape_limit "$SHAPE_BPS") B; upload through an ifb)"
	echo "boxes: $BOXES, $([ -n "$BOX_RATE" ] && echo "each link $BOX_RATE ($BOX_BPS bit/s) each way (tbf burst $(shape_burst "$BOX_BPS") B, limit $(shape_limit "$BOX_BPS") B)" || echo "links unshaped (a balanced box)"); control $CONTROL"
	echo "pbox: $(git -C "$ROOT" describe --always --dirty 2>/dev/null)"
	command -v mpirun > /dev/null && echo "openmpi: $(mpirun --version 2>/dev/null | head -1)"
	echo "torch: $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
} > "$OUT/info.txt"
sed 's/^/compare: /' "$OUT/info.txt"
others=$(pgrep -c -x pboxd) || true
[ "${others:-0}" -eq 0 ] || log "compare: WARNING: $others other pboxd process(es) running: the timings will be disturbed"

if [ "$TOPO" = hosts ]; then hosts_up; else topo_up; fi
trap cleanup EXIT
if [ -n "$SHAPE" ]; then
	shape_up
	shape_check
	echo "shaping check: $SHAPE_LINE" >> "$OUT/info.txt"
	echo "compare: shaping in place on ${#SHAPED[@]} links; $SHAPE_LINE"
fi
if [ -n "$LOSS" ]; then
	loss_up
	echo "compare: loss rules in place: $LOSS% each way, per $LOSS_UNIT (logs/nft-loss.txt at the end)"
fi

# ---- the runs -----------------------------------------------------------------
# Rep-major: every round runs one rep of every system and N, so a disturbance
# (another job on the machine) hits all systems alike, not one.
MPI_BIN=$BUILD/bench/mpi_allreduce
HAVE_MPI=0; HAVE_GLOO=0; HAVE_PBOX=0
want pbox && HAVE_PBOX=1
if want openmpi; then
	if command -v mpirun > /dev/null && [ -x "$MPI_BIN" ]; then HAVE_MPI=1; else
		log "compare: SKIP openmpi: mpirun or $MPI_BIN missing (apt-get install openmpi-bin libopenmpi-dev; make mpi-allreduce)"
		FAILED+=("openmpi/missing")
	fi
fi
if want gloo; then
	if timeout 120 "$PY" -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then HAVE_GLOO=1; else
		log "compare: SKIP gloo: $PY cannot import torch.distributed (apt-get install python3-torch)"
		FAILED+=("gloo/missing")
	fi
fi
# The box keeps every size's key of a job: the job arena must hold the whole
# sweep (shadow copies, about the sum of the sizes) plus engine memory.
JOB_MIB=$(((2 * SUM >> 20) + 64)); [ $JOB_MIB -ge 256 ] || JOB_MIB=256
MAX_MIB=$JOB_MIB; [ $MAX_MIB -ge 1024 ] || MAX_MIB=1024
limit=${TIMEOUT:-$(limit_for 1)}
port=$GLOO_PORT0

# --timeout: a run out of time is a DNF (see the header)
declare -A DNF_AT=()
timed_out() { [ -n "$TIMEOUT" ] && { [ "$1" = 124 ] || [ "$1" = 137 ]; }; }
dnf_record() { # dnf_record SYS N REP: DNF for every size the run did not finish
	local b
	for b in "${SIZE_LIST[@]}"; do
		awk -v s="$1" -v n="$2" -v r="$3" -v b="$b" '$1 == s && $2 == n && $3 == r && $4 == b { f = 1 }
			END { exit !f }' "$RAW" || echo "$1 $2 $3 $b DNF" >> "$RAW"
	done
	DNF_AT[$1/$2]=$3
	log "compare: $1 N=$2 rep $3 did not finish within ${TIMEOUT}s: DNF (later reps of $1 N=$2 are not run)"
}
dnf_skip() { # dnf_skip SYS N REP: true (noted in raw.txt) if an earlier rep of SYS, N did not finish
	[ -n "${DNF_AT[$1/$2]:-}" ] || return 1
	echo "# $1 $2 rep $3: not run (rep ${DNF_AT[$1/$2]} did not finish within ${TIMEOUT}s)" >> "$RAW"
	return 0
}

# run_pbox N REP TRANSPORT [topk|topk-local|local]: N pbox-perf workers, one job,
# all sizes (topk: pbox_allreduce_topk at --topk's density, system
# pbox-topk; topk-local: the same, hierarchical, system pbox-topk-local;
# local: host-local aggregation, system pbox-local; topk-host: top-k
# through the host level, system pbox-topk-host)
run_pbox() {
	local n=$1 rep=$2 tp=$3 sys=pbox lg=$OUT/logs/pbox.$3${4:+-$4}.n$1.r$2 rc p
	local PBOX_TRANSPORT=$tp   # wait_workers checks rank 0 used it
	[ "$tp" = udp ] || sys=pbox-$tp
	[ -z "${4:-}" ] || sys=pbox-$4
	dnf_skip "$sys" "$n" "$rep" && return 0
	# no --mtu: the clients find the path MTU themselves (pbox_opts.mtu 0);
	# but --shape gives --mtu (see the header)
	local args=(--minbytes "$MINB" --maxbytes "$MAXB" --stepfactor 4 --iters "$ITERS"
		    --warmup "$WARMUP" --transport "$tp" ${SHAPE:+--mtu "$MTU"} ${CHECK:+--check})
	[[ ${4:-} != topk* ]] || args+=(--topk "$TOPK")
	[ "${4:-}" != topk-local ] || args+=(--topk-local "$TOPK_LOCAL")
	if [ -n "$HOST_LOCAL" ]; then   # the same placement, the host level off or on
		args+=(--local "$([ "${4:-}" = local ] || [ "${4:-}" = topk-host ] && echo "$HOST_LOCAL" || echo 1)")
	fi
	if [ "$TOPO" = hosts ]; then
		WK_PIDS=(); WK_OUT=$lg
		for ((r = 0; r < n; r++)); do
			ip netns exec "$(pbox_ns $r)" "$BUILD/pbox-perf" --control "$CONTROL" \
				--job "cmp-$tp${4:+-$4}-n$n-r$rep" --rank $r --world "$n" "${args[@]}" > "$lg.$r.log" 2>&1 &
			WK_PIDS+=($!); PIDS+=($!)
		done
	else
		workers "$n" "cmp-$tp${4:+-$4}-n$n-r$rep" "$lg" "${args[@]}"
	fi
	wait_workers "$limit"; rc=$?
	if [ $rc != 0 ]; then
		for p in "${WK_PIDS[@]}"; do kill "$p" 2>/dev/null; done
		for p in "${WK_PIDS[@]}"; do
			for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null
		done
	fi
	if [ $rc = 0 ] || timed_out $rc; then
		awk -v s="$sys" -v n="$n" -v r="$rep" '/^ +[0-9]+ / { print s, n, r, $1, $4 }' "$lg.0.log" >> "$RAW"
	fi
	if [ $rc = 0 ]; then
		awk -v s="$sys" -v n="$n" -v r="$rep" -v b=$((SUM * (ITERS + WARMUP))) \
			'/^# cpu:/ { print s, n, r, $3 + $6, b }' "$lg.0.log" >> "$OUT/cpu.txt"
	elif timed_out $rc; then
		dnf_record "$sys" "$n" "$rep"
	else
		log "compare: pbox N=$n rep $rep failed:"; tail -n 3 "$lg".*.log >&2
		FAILED+=("$sys/n$n/rep$rep")
	fi
}

# run_mpi N REP
run_mpi() {
	local n=$1 rep=$2 lg=$OUT/logs/openmpi.n$1.r$2.log rc
	dnf_skip openmpi "$n" "$rep" && return 0
	local where=(--mca btl_tcp_if_include "$WK_IP/32" --mca oob_tcp_if_include "$WK_IP/32")
	local ns=$NS_WK pmix=()
	if [ "$TOPO" = hosts ]; then
		# mpirun (the PMIx server, listening on the bridge) in the switch's
		# namespace; each rank enters its own host's
		ns=$NS_SW
		pmix=(PMIX_MCA_ptl=tcp PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=br0)
		where=(--mca btl_tcp_if_include 198.18.0.0/24 --mca oob_tcp_if_include br0
		       -x PBOX_NETNS_PREFIX=pbox-w -x PBOX_NETNS_SUFFIX="-$TAG" "$ROOT/bench/compare/rank_netns.sh")
	fi
	run_in "$ns" "$limit" "$lg" env "${pmix[@]}" \
		mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
		--mca btl tcp,self -x MALLOC_MMAP_THRESHOLD_=1073741824 \
		-x MALLOC_TRIM_THRESHOLD_=4294967296 "${where[@]}" \
		"$MPI_BIN" --minbytes "$MINB" --maxbytes "$MAXB" --stepfactor 4 \
		--iters "$ITERS" --warmup "$WARMUP" --reps 1; rc=$?
	if [ $rc = 0 ] || timed_out $rc; then
		awk -v n="$n" -v r="$rep" '/^[0-9]+ [0-9]+ / { print "openmpi", n, r, $2, $3 }' "$lg" >> "$RAW"
		[ $rc = 0 ] || dnf_record openmpi "$n" "$rep"
	else
		log "compare: openmpi N=$n rep $rep failed:"; tail -n 5 "$lg" >&2
		FAILED+=("openmpi/n$n/rep$rep")
	fi
}

# run_gloo N REP [psgd]: all_reduce, or (psgd) PowerSGD rank --psgd, system gloo-psgd
run_gloo() {
	local n=$1 rep=$2 sys=gloo${3:+-$3} rc
	local lg=$OUT/logs/$sys.n$1.r$2.log
	dnf_skip "$sys" "$n" "$rep" && return 0
	port=$((port + 1))
	[ $port -le ${GLOO_PORTS#*-} ] || die "out of Gloo rendezvous ports ($GLOO_PORTS): fewer reps or N per run"
	local ns=$NS_WK ifname=$IF_WD addr=$WK_IP where=()
	if [ "$TOPO" = hosts ]; then
		ns=$NS_SW; ifname=eth0; addr=$(wk_ip 0); where=(--netns "pbox-w{rank}-$TAG")
		[ -z "$HOST_LOCAL" ] || where+=(--local "$HOST_LOCAL")
	fi
	run_in "$ns" "$limit" "$lg" env GLOO_SOCKET_IFNAME="$ifname" OMP_NUM_THREADS=1 \
		"$PY" bench/compare/gloo_allreduce.py --n "$n" --addr "$addr" --port "$port" "${where[@]}" \
		--minbytes "$MINB" --maxbytes "$MAXB" --stepfactor 4 \
		--iters "$ITERS" --warmup "$WARMUP" --reps 1 ${3:+--psgd "$PSGD"}; rc=$?
	if [ $rc = 0 ] || timed_out $rc; then
		awk -v s="$sys" -v n="$n" -v r="$rep" '/^[0-9]+ [0-9]+ / { print s, n, r, $2, $3 }' "$lg" >> "$RAW"
		[ $rc = 0 ] || dnf_record "$sys" "$n" "$rep"
	else
		log "compare: $sys N=$n rep $rep failed:"; tail -n 5 "$lg" >&2
		FAILED+=("$sys/n$n/rep$rep")
	fi
}

# done_line SYSTEM: the progress line after a system's block (with --loss what the rules did)
done_line() {
	LOSS_LINE=; [ -z "$LOSS" ] || loss_delta
	echo "compare: [$(elapsed)] rep $((rep + 1))/$REPS: $1 done${LOSS_LINE:+; $LOSS_LINE}"
}
pbox_systems() { # the pbox systems measured: one per transport, then the top-k ones
	local tp
	for tp in "${TP_LIST[@]}"; do [ "$tp" = udp ] && echo pbox || echo "pbox-$tp"; done
	[ -z "$TOPK" ] || echo pbox-topk
	[ -z "$TOPK_LOCAL" ] || echo pbox-topk-local
	[ -z "$HOST_LOCAL" ] || echo pbox-local
	[ -z "$HOST_LOCAL" ] || [ -z "$TOPK" ] || echo pbox-topk-host
}
pbox_left() { # true if some pbox system and N still runs (not DNF earlier)
	local n sys
	for sys in $(pbox_systems); do
		for n in "${NS[@]}"; do [ -n "${DNF_AT[$sys/$n]:-}" ] || return 0; done
	done
	return 1
}
for ((rep = 0; rep < REPS; rep++)); do
	if [ $HAVE_PBOX = 1 ] && ! pbox_left; then
		for sys in $(pbox_systems); do
			for n in "${NS[@]}"; do dnf_skip "$sys" "$n" "$rep"; done
		done
	elif [ $HAVE_PBOX = 1 ]; then
		# pboxd runs only while pbox is measured: its lcore takes no CPU from the others
		others=$(pgrep -c -x pboxd) || true
		echo "rep $rep: load $(cut -d' ' -f1 /proc/loadavg), other pboxd processes $others (theirs share our lcores' CPUs)" >> "$OUT/info.txt"
		if [ "$TOPO" = hosts ]; then # the veths have their MTU already
			boxes_start --job-bytes "${JOB_MIB}M" --max-job-bytes "${MAX_MIB}M" ${PBOXD_ARGS:-}
			BOX_LOG=$(bx_log 0)
		else
			BOX_MTU=$([ "$MTU" = 9000 ] && echo 9000) box_start af_packet --job-bytes "${JOB_MIB}M" --max-job-bytes "${MAX_MIB}M" ${PBOXD_ARGS:-}
		fi
		[ $rep -gt 0 ] || echo "pboxd: job arena ${JOB_MIB} MiB; extra options: ${PBOXD_ARGS:-none}; $(head -c 300 "$BOX_LOG" | tr '\n' ' ')" >> "$OUT/info.txt"
		# A box runs for days; measure it warm. Right after start, the first
		# pass through net_af_packet's rx and tx rings (1024 frames each) is
		# slow on this VM: the PMD's copies into them take several times
		# longer (perf: memcpy in rte_eth_tx_burst/rx_burst; guest page
		# faults unchanged; cause not found), and the first job's 64-256 KiB
		# calls took 2-3x longer than the second job's. One 16 MiB call (1886 frames each
		# way) by a job of one rank cycles both rings.
		ip netns exec "$([ "$TOPO" = hosts ] && wk_ns 0 || echo "$NS_WK")" timeout 60 "$BUILD/pbox-perf" \
			--control "$CONTROL" --job "warm-r$rep" --rank 0 --world 1 --minbytes 16M --maxbytes 16M \
			--iters 1 --warmup 0 > "$OUT/logs/pbox-warmup.r$rep.log" 2>&1 || {
			# a job over K boxes: libpbox must take the list (see --boxes)
			[ "$BOXES" = 1 ] || { cat "$OUT/logs/pbox-warmup.r$rep.log" >&2
				die "--boxes $BOXES: a one-rank job on the boxes $CONTROL failed (its log above)"; }
			log "compare: pbox warm-up job failed (see $OUT/logs/pbox-warmup.r$rep.log)"; }
		for tp in "${TP_LIST[@]}"; do
			for n in "${NS[@]}"; do run_pbox "$n" "$rep" "$tp"; done
		done
		if [ -n "$TOPK" ]; then
			for n in "${NS[@]}"; do run_pbox "$n" "$rep" udp topk; done
		fi
		if [ -n "$TOPK_LOCAL" ]; then
			for n in "${NS[@]}"; do run_pbox "$n" "$rep" udp topk-local; done
		fi
		if [ -n "$HOST_LOCAL" ]; then
			for n in "${NS[@]}"; do run_pbox "$n" "$rep" udp local; done
		fi
		if [ -n "$HOST_LOCAL" ] && [ -n "$TOPK" ]; then
			for n in "${NS[@]}"; do run_pbox "$n" "$rep" udp topk-host; done
		fi
		if [ "$TOPO" = hosts ]; then
			for ((k = 0; k < BOXES; k++)); do
				"$BUILD/pboxctl" --socket "$(bx_sock $k)" stats > "$OUT/logs/pboxctl-stats$([ $k = 0 ] || echo ".box$k").r$rep.txt" 2>&1
			done
			boxes_stop || log "compare: a pboxd exited non-zero (see $OUT/logs/pboxd*.r$rep.log)"
			for ((k = 0; k < BOXES; k++)); do
				cp "$(bx_log $k)" "$OUT/logs/pboxd$([ $k = 0 ] || echo ".box$k").r$rep.log"
			done
		else
			ctl stats > "$OUT/logs/pboxctl-stats.r$rep.txt" 2>&1
			box_stop || log "compare: pboxd exited non-zero (see $OUT/logs/pboxd.r$rep.log)"
			cp "$BOX_LOG" "$OUT/logs/pboxd.r$rep.log"
		fi
		done_line pbox
	fi
	if [ $HAVE_MPI = 1 ]; then
		for n in "${NS[@]}"; do run_mpi "$n" "$rep"; done
		done_line openmpi
	fi
	if [ $HAVE_GLOO = 1 ]; then
		for n in "${NS[@]}"; do run_gloo "$n" "$rep"; done
		done_line gloo
		if [ -n "$PSGD" ]; then
			for n in "${NS[@]}"; do run_gloo "$n" "$rep" psgd; done
			done_line gloo-psgd
		fi
	fi
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/info.txt"
if [ -n "$SHAPE" ]; then
	shape_stats > "$OUT/logs/shape-stats.txt"
	tc -n "$NS_SW" -s qdisc show > "$OUT/logs/tc-qdiscs.txt" 2>&1
	awk '{ d += $3; u += $8; dd += $5; ud += $10 } END {
		printf "shaping: %d links, %.1f MB down and %.1f MB up through their tbfs, %d and %d dropped\n", NR, d / 1e6, u / 1e6, dd, ud }' \
		"$OUT/logs/shape-stats.txt" | tee -a "$OUT/info.txt"
fi
if [ -n "$LOSS" ]; then
	loss_rulesets > "$OUT/logs/nft-loss.txt" 2>&1
	LOSS_LAST=(0 0 0 0); loss_delta
	echo "compare: all runs: $LOSS_LINE" | tee -a "$OUT/info.txt"
fi

# ---- results ----------------------------------------------------------------
echo "compare: [$(elapsed)] results in $OUT"
"$PY" bench/compare/summarize.py "$RAW" "$OUT/compare.csv" | tee "$OUT/table.txt" ||
	die "summarize.py failed"
# rank 0's CPU per GB reduced, each rep, per transport and N
[ -s "$OUT/cpu.txt" ] && sort -k1,1 -k2,2n "$OUT/cpu.txt" | awk '
	{ k = $1 " n=" $2; v[k] = v[k] " " ($4 / ($5 / 1e9)) }
	END { print "worker CPU (rank 0, user + system) per GB reduced, each rep:";
	      for (k in v) print "  " k ":" v[k] " s/GB" }' | tee -a "$OUT/table.txt"
"$PY" bench/compare/plot.py "$OUT/compare.csv" "$OUT/compare.png" \
	--title "float32 allreduce on $(nproc) CPUs, $([ "$TOPO" = hosts ] && echo "a namespace per rank on one bridge" || echo "pbox over veth, OpenMPI/Gloo over loopback"), MTU $MTU" ||
	FAILED+=("plot")

# every system run (pbox once per transport and top-k variant) must have
# every size at every n
RUN_SYS=()
if want pbox; then
	for tp in "${TP_LIST[@]}"; do RUN_SYS+=("$([ "$tp" = udp ] && echo pbox || echo "pbox-$tp")"); done
	[ -z "$TOPK" ] || RUN_SYS+=(pbox-topk)
	[ -z "$TOPK_LOCAL" ] || RUN_SYS+=(pbox-topk-local)
	[ -z "$HOST_LOCAL" ] || RUN_SYS+=(pbox-local)
	[ -z "$HOST_LOCAL" ] || [ -z "$TOPK" ] || RUN_SYS+=(pbox-topk-host)
fi
want openmpi && RUN_SYS+=(openmpi)
want gloo && RUN_SYS+=(gloo)
want gloo && [ -n "$PSGD" ] && RUN_SYS+=(gloo-psgd)
for sys in "${RUN_SYS[@]}"; do
	for n in "${NS[@]}"; do
		got=$(awk -v s="$sys" -v n="$n" '$1 == s && $2 == n { print $4 }' "$RAW" | sort -u | wc -l)
		[ "$got" -eq "${#SIZE_LIST[@]}" ] || FAILED+=("$sys/n$n: $got of ${#SIZE_LIST[@]} sizes")
	done
done
echo "compare: csv $OUT/compare.csv, plot $OUT/compare.png, table $OUT/table.txt ($(elapsed))"
if [ ${#FAILED[@]} -gt 0 ]; then
	log "compare: incomplete: ${FAILED[*]}"
	exit 1
fi
exit 0
