#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_fleet_view.sh - two pboxd, each in its own namespace, seen as one
# fleet: `pboxctl --box A,B jobs` shows a job on both boxes (a row per box,
# the rounds a second of the one whose workers run, and a total of 2
# boxes) and a job on one; `job show NAME` the same for one job; a third,
# unreachable box is named (exit 3) without hiding the two others; a job
# whose ranks joined the two boxes with different placement hashes is
# shown with both and DIFFERS on its total. On the
# second box, job_join's placement check: the first rank's hash binds the
# job, a rank with another is refused naming both, and job_list shows it.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet --box-id box1

# the second box: its own namespace, data and management veths to the
# workers' namespace (cleaned up with the other namespaces, by PID)
NS_B2=pbox-h$TAG-b2
HOST_NS+=("$NS_B2")
ip netns add "$NS_B2" || die "cannot create namespace $NS_B2"
ip link add "b2d$TAG" type veth peer name "w2d$TAG" &&
ip link add "b2m$TAG" type veth peer name "w2m$TAG" &&
ip link set "b2d$TAG" netns "$NS_B2" && ip link set "b2m$TAG" netns "$NS_B2" &&
ip link set "w2d$TAG" netns "$NS_WK" && ip link set "w2m$TAG" netns "$NS_WK" &&
ip -n "$NS_B2" link set lo up && ip -n "$NS_B2" link set "b2d$TAG" up &&
ip -n "$NS_B2" addr add 198.18.2.1/24 dev "b2m$TAG" && ip -n "$NS_B2" link set "b2m$TAG" up &&
ip -n "$NS_WK" link set "w2d$TAG" up &&
ip -n "$NS_WK" addr add 198.18.2.2/24 dev "w2m$TAG" && ip -n "$NS_WK" link set "w2m$TAG" up ||
	die "cannot set up the second box's links"
ip netns exec "$NS_B2" "$BUILD/pboxd" -l 0-1 --no-huge -m 512 --no-pci --no-shconf \
	--file-prefix=pboxr$TAG --vdev="net_af_packet0,iface=b2d$TAG" --log-level=lib.eal:error -- \
	--ip 0:198.18.3.1/24 --control 0.0.0.0:7470 --rpc-socket "$WORKDIR/pboxd2.sock" \
	--idle-sleep-us 20 --box-id box2 > "$WORKDIR/pboxd2.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do
	grep -q 'pboxd: ready' "$WORKDIR/pboxd2.log" 2>/dev/null && break
	sleep 0.1
done
grep -q 'pboxd: ready' "$WORKDIR/pboxd2.log" || { cat "$WORKDIR/pboxd2.log"; die "box 2 not ready"; }
B1=$CONTROL B2=198.18.2.1:7470
ctl2() { "$BUILD/pboxctl" --socket "$WORKDIR/pboxd2.sock" "$@"; }

# fleetjob: 2 ranks on box 1 (traffic), made on box 2 too; solo on box 2 only
workers 2 fleetjob "$WORKDIR/w" --minbytes 256K --maxbytes 256K --iters 100000
ctl2 job create fleetjob --world 2 > /dev/null || die "job create fleetjob on box 2 failed"
ctl2 job create solo --world 3 > /dev/null || die "job create solo on box 2 failed"

# job_join's placement on box 2 (control plane only: a data address that
# nobody serves does no harm)
in_wk python3 - "$B2" <<'PY' > "$WORKDIR/placement.txt" 2>&1 || { cat "$WORKDIR/placement.txt"; die "placement check"; }
import json, socket, sys
host, port = sys.argv[1].split(":")
s = socket.create_connection((host, int(port)), timeout=5)
f = s.makefile("rwb")
def call(method, params, rid=[0]):
    rid[0] += 1
    f.write((json.dumps({"jsonrpc": "2.0", "id": rid[0], "method": method,
                         "params": params}) + "\n").encode()); f.flush()
    while True:
        m = json.loads(f.readline())
        if m.get("id") == rid[0]:
            return m
j = {"job": "pjob", "world": 2, "data_ip": "198.18.0.2"}
r = call("job_join", dict(j, rank=0, data_port=41000, placement="00000000000000aa"))
assert "result" in r, r
r = call("job_join", dict(j, rank=1, data_port=41001, placement="00000000000000bb"))
msg = r["error"]["message"]
print(msg)
assert "rank 1's key placement (hash 00000000000000bb) differs from rank 0's " \
       "(00000000000000aa): every rank must list the same boxes in the same order" in msg, msg
r = call("job_list", {})
pj = [x for x in r["result"]["jobs"] if x["job"] == "pjob"][0]
assert pj["placement"] == "00000000000000aa" and pj["joined"] == 1, pj
print("placement kept:", pj["placement"])
PY
cat "$WORKDIR/placement.txt"

for _ in $(seq 100); do ctl --json jobs | grep -q '"active"' && break; sleep 0.1; done
in_wk "$BUILD/pboxctl" --box "$B1,$B2" --interval 300 jobs > "$WORKDIR/jobs.txt"
rc=$?
cat "$WORKDIR/jobs.txt"
[ $rc = 0 ] || die "pboxctl --box jobs exit $rc"
python3 - "$WORKDIR/jobs.txt" "$B1" "$B2" <<'PY' || die "the fleet view is wrong"
import re, sys
rows = [re.split(r"\s{2,}", l.strip()) for l in open(sys.argv[1]) if l.strip()]
b1, b2 = sys.argv[2], sys.argv[3]
head = rows[0]
assert head[:3] == ["JOB", "BOX", "STATE"], head
col = head.index("ROUNDS/S")
fj = [r for r in rows if r[0] == "fleetjob"]
assert [r[1] for r in fj[:2]] == [b1, b2], fj
assert fj[0][2] == "active" and int(fj[0][col]) > 0, fj[0]     # box 1's rounds a second
assert fj[1][2] == "forming" and int(fj[1][col]) == 0, fj[1]
assert fj[2][1] == "total (2 of 2 boxes)" and fj[2][col] == fj[0][col], fj[2]
solo = [r for r in rows if r[0] == "solo"]
assert solo[0][1] == b2 and solo[1][1] == "total (1 of 2 boxes)", solo
PY

in_wk "$BUILD/pboxctl" --box "$B1,$B2" --interval 200 job show fleetjob > "$WORKDIR/show.txt" ||
	die "pboxctl --box job show failed"
cat "$WORKDIR/show.txt"
[ "$(grep -c '^fleetjob ' "$WORKDIR/show.txt")" = 3 ] || die "job show: not 2 boxes and a total"
grep -q '^solo' "$WORKDIR/show.txt" && die "job show shows another job"

# ranks that joined box 1 and box 2 with different placements (each box
# alone cannot tell): the fleet view's total says DIFFERS
ip netns exec "$NS_WK" python3 - "$B1" "$B2" > "$WORKDIR/hashjob.txt" 2>&1 <<'PY' &   # $!: python itself
import json, socket, sys, time
for i, box in enumerate(sys.argv[1:]):
    host, port = box.split(":")
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "job_join", "params": {
        "job": "hashjob", "rank": 0, "world": 2, "data_ip": "198.18.0.2",
        "data_port": 42000, "placement": "%016x" % (0xaa + i)}}) + "\n").encode())
    assert b'"result"' in s.makefile("rb").readline()
    globals()["keep%d" % i] = s
print("joined", flush=True)
time.sleep(20)
PY
PIDS+=($!)
for _ in $(seq 50); do grep -q joined "$WORKDIR/hashjob.txt" && break; sleep 0.1; done
in_wk "$BUILD/pboxctl" --box "$B1,$B2" --interval 100 job show hashjob > "$WORKDIR/hash.txt" ||
	{ cat "$WORKDIR/hashjob.txt"; die "pboxctl --box job show hashjob failed"; }
cat "$WORKDIR/hash.txt"
grep -q '^hashjob .*00000000000000aa$' "$WORKDIR/hash.txt" &&
grep -q '^hashjob .*00000000000000ab$' "$WORKDIR/hash.txt" &&
grep -q '^hashjob .*total (2 of 2 boxes).*DIFFERS$' "$WORKDIR/hash.txt" ||
	die "the view does not show the boxes' different placements"

# a box that cannot be reached: named, exit 3, the two others still shown
in_wk "$BUILD/pboxctl" --box "$B1,198.18.2.1:7999,$B2" --interval 100 --timeout 1000 jobs \
	> "$WORKDIR/down.txt" 2>&1
rc=$?
cat "$WORKDIR/down.txt"
[ $rc = 3 ] || die "an unreachable box gave exit $rc, not 3"
grep -q '^box 198.18.2.1:7999: unreachable: ' "$WORKDIR/down.txt" || die "the unreachable box is not named"
grep -q "^fleetjob .*total (2 of 3 boxes)" "$WORKDIR/down.txt" || die "the reachable boxes are hidden"
in_wk "$BUILD/pboxctl" --box "$B1,$B1" jobs 2> "$WORKDIR/dup.txt"
[ $? = 2 ] && grep -q "listed twice" "$WORKDIR/dup.txt" || die "a repeated box is not a usage error"
log "PASS: test_fleet_view"
