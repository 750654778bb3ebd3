#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_systemd.sh - pboxd under systemd's notify protocol: with
# $NOTIFY_SOCKET it sends READY=1 once it serves, WATCHDOG=1 at half of
# $WATCHDOG_USEC from its control loop, STOPPING=1 on SIGTERM (and warns,
# naming it, when $NOTIFY_SOCKET cannot be reached); it takes its
# EAL arguments from its config file's `eal =` line when none come before
# "--" (as the unit runs it); and deploy/pboxd.service passes
# `systemd-analyze verify` (pointed at the built pboxd; skipped with a
# message where systemd-analyze is missing).
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up

SOCK=$WORKDIR/notify.sock
python3 - "$SOCK" > "$WORKDIR/notify.txt" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); s.settimeout(1)
end = time.time() + 30
while time.time() < end:
    try:
        m = s.recv(4096).decode()
    except socket.timeout:
        continue
    print(f"{time.monotonic():.3f} {m}", flush=True)
    if m == "STOPPING=1":
        break
PY
LISTEN_PID=$!; PIDS+=($LISTEN_PID)
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
NOTIFY_SOCKET=$SOCK WATCHDOG_USEC=400000 box_start af_packet
sleep 1.5
grep -q ' READY=1$' "$WORKDIR/notify.txt" || die "no READY=1: $(cat "$WORKDIR/notify.txt")"
pings=$(grep -c ' WATCHDOG=1$' "$WORKDIR/notify.txt")
[ "$pings" -ge 4 ] || die "$pings WATCHDOG=1 in 1.5 s with WATCHDOG_USEC=400000 (want one per 0.2 s)"
box_stop || die "pboxd exited non-zero"
wait $LISTEN_PID
grep -q ' STOPPING=1$' "$WORKDIR/notify.txt" || die "no STOPPING=1"
echo "notify: READY=1, $pings watchdog pings, STOPPING=1"

# the EAL's arguments from the config file (`eal =`), none before "--"
cat > "$WORKDIR/eal.conf" <<CONF
[pboxd]
eal = -l 0-1 --no-huge -m 512 --no-pci --no-shconf --file-prefix=pboxeal$TAG --vdev=net_af_packet0,iface=$IF_BD --log-level=lib.eal:error
ip = 0:$BOX_IP/24
control = none
rpc-socket = $WORKDIR/eal.sock
CONF
# ... under a $NOTIFY_SOCKET nobody listens on: a warning names it
NOTIFY_SOCKET=$WORKDIR/nobody.sock ip netns exec "$NS_BOX" "$BUILD/pboxd" -- --config "$WORKDIR/eal.conf" > "$WORKDIR/eal.log" 2>&1 &
EAL_PID=$!; PIDS+=($EAL_PID)
for _ in $(seq 100); do grep -q 'pboxd: ready' "$WORKDIR/eal.log" && break; sleep 0.1; done
grep -q 'pboxd: ready' "$WORKDIR/eal.log" || { cat "$WORKDIR/eal.log"; die "pboxd with eal = in its config did not start"; }
"$BUILD/pboxctl" --socket "$WORKDIR/eal.sock" status | grep -q 'net_af_packet0' || die "no port from eal ="
grep -q "warn: systemd notify: cannot send READY=1 to NOTIFY_SOCKET=$WORKDIR/nobody.sock: No such file" \
	"$WORKDIR/eal.log" || { cat "$WORKDIR/eal.log"; die "no warning for an unusable NOTIFY_SOCKET"; }
kill -TERM $EAL_PID; wait $EAL_PID || die "pboxd (eal =) exited non-zero"
echo "eal = in the config file: ok; an unusable NOTIFY_SOCKET named"

# a config the unit must not restart for exits 2 (RestartPreventExitStatus),
# naming what is wrong: an EAL argument the EAL does not know, an address
# for a port that is not there, pboxd's options without "--"
# status_of EXPECT NAME ARGS...: run pboxd (bounded), check status and message
status_of() {
	local want=$1 name=$2; shift 2
	timeout 60 ip netns exec "$NS_BOX" "$BUILD/pboxd" "$@" > "$WORKDIR/$name.log" 2>&1
	local rc=$?
	[ $rc = 2 ] || { cat "$WORKDIR/$name.log"; die "$name: exit status $rc, not 2"; }
	grep -q -- "$want" "$WORKDIR/$name.log" || { cat "$WORKDIR/$name.log"; die "$name: no '$want'"; }
}
sed "s/--file-prefix=pboxeal$TAG/--file-prefx=pboxeal$TAG/" "$WORKDIR/eal.conf" > "$WORKDIR/typo.conf"
status_of "unrecognized option '--file-prefx" eal_typo -- --config "$WORKDIR/typo.conf"
sed "s/^ip = 0:/ip = 1:/" "$WORKDIR/eal.conf" > "$WORKDIR/noport.conf"
status_of "port 0 (net_af_packet0) has no address" no_port -- --config "$WORKDIR/noport.conf"
status_of "pboxd's options go after '--'" no_sep -l 0-1 --no-huge -m 512 --no-pci --no-shconf \
	--file-prefix=pboxsep$TAG --vdev=net_af_packet0,iface=$IF_BD --ip 0:$BOX_IP/24
echo "bad EAL argument, port without address, options without '--': exit 2"

if command -v systemd-analyze > /dev/null; then
	case $BUILD in /*) bin=$BUILD/pboxd ;; *) bin=$(pwd)/$BUILD/pboxd ;; esac
	sed "s|^ExecStart=/usr/local/bin/pboxd|ExecStart=$bin|" deploy/pboxd.service \
		> "$WORKDIR/pboxd.service"
	systemd-analyze verify "$WORKDIR/pboxd.service" > "$WORKDIR/verify.txt" 2>&1 ||
		die "systemd-analyze verify: $(cat "$WORKDIR/verify.txt")"
	grep -q '^Type=notify' "$WORKDIR/pboxd.service" || die "the unit is not Type=notify"
	echo "systemd-analyze verify: ok"
else
	echo "SKIP systemd-analyze verify: systemd-analyze is not installed (package systemd)"
fi
echo "systemd: ok"
