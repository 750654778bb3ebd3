#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_compare.sh - smoke test of the side-by-side benchmark
# (bench/compare/compare.sh, `make compare`): N = 2, 4 KiB .. 64 KiB, one
# rep, default topology (hosts: a namespace per rank on one bridge). The
# CSV must have the header and one row per size for each of pbox, openmpi
# and gloo, the PNG must exist, the ratio table must be printed, and
# compare.sh must leave no namespace behind. Then one size with
# --topology shared; then --shape: pbox alone, 2 ranks, 2 MiB, every link
# (the ranks' and the box's) shaped to 500 Mbit/s each way: the TCP check
# must reach 0.5-1.05 of the rate (0.8-1.0 seen on a loaded machine), pbox's time must respect the link
# model's bound (0.9 to 6 times it; an unshaped box link would make it about
# half), every shaped link's tbfs must have carried the traffic, and no
# namespace may be left; and --boxes 2 must either fail at once naming the
# missing fleet support or (once libpbox takes a list of boxes) run. Takes
# about 35 s.
# Skips (77) without mpirun/mpicc (openmpi-bin, libopenmpi-dev) or without
# torch for /usr/bin/python3 (python3-torch) or matplotlib.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
PY=${PYTHON:-/usr/bin/python3}
command -v mpirun > /dev/null && command -v mpicc > /dev/null ||
	{ log "SKIP: mpirun/mpicc missing (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
timeout 60 "$PY" -c 'import torch.distributed, matplotlib' 2>/dev/null ||
	{ log "SKIP: $PY cannot import torch.distributed and matplotlib (python3-torch, python3-matplotlib)"; exit 77; }
make -s BUILD="$BUILD" mpi-allreduce > /dev/null || die "cannot build $BUILD/bench/mpi_allreduce"

OUT=$WORKDIR/compare
trap 'rm -rf "$WORKDIR"' EXIT
# in the background so that $! is compare.sh's own PID, its lib.sh TAG
BUILD=$BUILD PYTHON=$PY COMPARE_RUN_TIMEOUT=40 bash bench/compare/compare.sh \
	--sizes 4K:64K --n 2 --reps 1 --out "$OUT" > "$WORKDIR/compare.log" 2>&1 &
CMP=$!
wait $CMP
rc=$?
cat "$WORKDIR/compare.log"
[ $rc -eq 0 ] || die "compare.sh exited $rc"
ip netns list | grep -q -e "^pbox-[a-z0-9]*-$CMP\b" && die "compare.sh left its namespaces"

[ -s "$OUT/compare.png" ] || die "no $OUT/compare.png"
head -c 8 "$OUT/compare.png" | od -An -c | grep -q 'P   N   G' || die "compare.png is not a PNG"
grep -q 'pbox/OpenMPI' "$WORKDIR/compare.log" || die "no ratio table printed"
"$PY" - "$OUT/compare.csv" <<'PY' || die "bad CSV"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = ["system", "n", "bytes", "median_us", "min_us", "max_us", "algbw_GBps", "busbw_GBps"]
assert rows and list(rows[0].keys()) == want, rows[:1]
for system in ("pbox", "openmpi", "gloo"):
    got = sorted(int(r["bytes"]) for r in rows if r["system"] == system and r["n"] == "2")
    assert got == [4096, 16384, 65536], (system, got)
for r in rows:
    med, lo, hi = float(r["median_us"]), float(r["min_us"]), float(r["max_us"])
    assert 0 < lo <= med <= hi, r
    assert abs(float(r["busbw_GBps"]) - float(r["algbw_GBps"])) < 1e-3, r  # N=2: factor 1
print("csv: %d rows, all three systems at every size" % len(rows))
PY
grep -q "topology hosts" "$OUT/info.txt" || die "the default topology is not hosts"

# the other topology: every rank in one namespace (OpenMPI/Gloo over loopback)
BUILD=$BUILD PYTHON=$PY COMPARE_RUN_TIMEOUT=40 bash bench/compare/compare.sh \
	--topology shared --sizes 4K:4K --n 2 --reps 1 --out "$OUT.shared" > "$WORKDIR/shared.log" 2>&1 &
CMP=$!
wait $CMP || { cat "$WORKDIR/shared.log"; die "compare.sh --topology shared failed"; }
ip netns list | grep -q -e "^pbox-[a-z0-9]*-$CMP\b" && die "compare.sh --topology shared left its namespaces"
[ "$(grep -c '^[a-z]*,2,4096,' "$OUT.shared/compare.csv")" = 3 ] || die "--topology shared: not all three systems measured"

# --shape/--box-rate: the links are the limit (tc tbf, ifb)
BUILD=$BUILD PYTHON=$PY COMPARE_RUN_TIMEOUT=40 bash bench/compare/compare.sh --shape 500mbit \
	--box-rate 500mbit --systems pbox --sizes 2M:2M --n 2 --reps 1 --iters 2 --warmup 1 \
	--out "$OUT.shape" > "$WORKDIR/shape.log" 2>&1 &
CMP=$!
wait $CMP || { cat "$WORKDIR/shape.log"; die "compare.sh --shape failed"; }
cat "$WORKDIR/shape.log"
ip netns list | grep -q -e "^pbox-[a-z0-9]*-$CMP\b" && die "compare.sh --shape left its namespaces"
"$PY" - "$OUT.shape" <<'PY' || die "--shape: the links were not shaped as asked"
import re, sys
d = sys.argv[1]
info = open(d + "/info.txt").read()
m = re.search(r"shaping check: .*: ([0-9.]+) Mbit/s, ([0-9.]+) of the shaped rate", info)
assert m and 0.5 <= float(m.group(2)) <= 1.05, m and m.group(0)  # loaded CI: 0.8-1.0
links = [l.split() for l in open(d + "/logs/shape-stats.txt")]
assert len(links) == 3, links  # two ranks and the box
for l in links:  # PORT down B bytes D drops up B bytes D drops
    assert int(l[2]) > 1 << 20 and int(l[7]) > 1 << 20, l
import csv
row = next(r for r in csv.DictReader(open(d + "/compare.csv")) if r["system"] == "pbox")
# the model: max(S/R, N*S/(K*Rb)) with N = 2, K = 1, R = Rb = 200 Mbit/s
bound = max(2 << 20, 2 * (2 << 20)) * 8 / 500e6
ratio = float(row["median_us"]) / 1e6 / bound
assert 0.9 <= ratio <= 6, ("pbox/bound", ratio, row)
assert "pbox/bound" in open(d + "/table.txt").read()
print("shape: %s; pbox/bound %.2f" % (m.group(0), ratio))
PY

# --boxes 2: fails at once until libpbox takes a list of boxes, then runs
start=$SECONDS
BUILD=$BUILD PYTHON=$PY COMPARE_RUN_TIMEOUT=40 bash bench/compare/compare.sh --boxes 2 \
	--systems pbox --sizes 4K:4K --n 2 --reps 1 --out "$OUT.boxes" > "$WORKDIR/boxes.log" 2>&1 &
CMP=$!
if wait $CMP; then
	grep -q '^pbox,2,4096,' "$OUT.boxes/compare.csv" || die "--boxes 2: no pbox result"
else
	cat "$WORKDIR/boxes.log"
	grep -q "does not take a list of boxes" "$WORKDIR/boxes.log" && [ $((SECONDS - start)) -le 5 ] ||
		die "--boxes 2 failed, but not at once naming the missing fleet support"
fi
ip netns list | grep -q -e "^pbox-[a-z0-9]*-$CMP\b" && die "compare.sh --boxes 2 left its namespaces"
echo "compare: CSV and PNG complete (topology hosts, and shared); --shape in place and removed; --boxes 2 as expected"
