#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""topk_run.py - top-k's time per call as a training run sees it (issue 42's
time goal): the density schedule's warm-up included and momentum
correction's worker-side passes added, from compare.sh runs of
pbox-topk at several densities on the same links.

    topk_run.py [--n 4] [--bytes 64M] [--steps 300,1000,10000]
                [--density 0.01] [--warmup STEPS] [--warmup-start D]
                [--mc-us US | --mc-measure] D1=DIR1 [D2=DIR2 ...]

Each Di=DIRi is a compare.sh --out directory of a run with --topk Di
(compare.csv: its pbox-topk, pbox, gloo and gloo-psgd medians at N and
the size). t(d), a call's time at density d, is the least-squares line
through the measured (Di, t) points (a call moves 8 bytes per entry
sent, so on shaped links its time is affine in d). A run of S steps
costs sum over its steps of t(schedule(step)) (pbox._sparse's schedule:
exponential from warmup_start to the target over the warm-up steps, the
defaults unless given) plus S times momentum correction's own cost: the
extra passes over the bucket (u = m u + g, v += u, u masked where sent),
--mc-us microseconds a call, or measured here with --mc-measure
(pbox._sparse.Engine.prepare on one bucket of the size, momentum 0.9
against 0, the mean of 5 calls after 2, in CPU time of the process: one
thread, so on a quiet core its wall time; needs torch and libpbox). Prints
the mean time per step for each run length and its ratios to pbox dense,
Gloo dense and PowerSGD (the gloo-psgd system, compare.sh --psgd), where
measured. Standard library only, but for --mc-measure."""
import argparse
import csv
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def size(s):
    mul = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(float(s[:-1]) * mul[s[-1].lower()]) if s[-1].lower() in mul else int(s)


def medians(path, n, nbytes):
    out = {}
    with open(os.path.join(path, "compare.csv")) as f:
        for r in csv.DictReader(f):
            if int(r["n"]) == n and int(r["bytes"]) == nbytes and r["median_us"] not in ("", "inf"):
                out[r["system"]] = float(r["median_us"])
    return out


def mc_measure(nbytes):
    """Momentum correction's cost a call: Engine.prepare with momentum 0.9
    minus with 0 (the selection is in both), microseconds."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import torch
    from pbox import _sparse
    torch.set_num_threads(1)
    n = nbytes // 4

    class Bucket:
        def __init__(self, p, buf):
            self.p, self.buf = p, buf

        def parameters(self):
            return [self.p]

        def buffer(self):
            return self.buf

    p = torch.nn.Parameter(torch.zeros(n))
    g = torch.randn(n)
    res = {}
    for m in (0.0, 0.9):
        e = _sparse.Engine(0.01, True, m, False, True, None, _sparse.Schedule(0.01, []),
                           _sparse.DENSE_BELOW, "bucket", None)
        ts = []
        for i in range(7):
            buf = g.clone()
            t0 = time.process_time()
            e.prepare(1, Bucket(p, buf), buf, 4)
            ts.append(time.process_time() - t0)
        res[m] = sum(ts[2:]) / 5 * 1e6
    print("# momentum correction: prepare() %.0f us CPU with momentum 0.9, %.0f us without"
          % (res[0.9], res[0.0]))
    return max(0.0, res[0.9] - res[0.0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--bytes", type=size, default=64 << 20)
    ap.add_argument("--steps", default="300,1000,10000")
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--warmup-start", type=float, default=None)
    ap.add_argument("--mc-us", type=float, default=None)
    ap.add_argument("--mc-measure", action="store_true")
    ap.add_argument("runs", nargs="+", help="D=DIR: a compare.sh --topk D output directory")
    a = ap.parse_args()
    pts, peers = [], {}
    for spec in a.runs:
        d, path = spec.split("=", 1)
        m = medians(path, a.n, a.bytes)
        if "pbox-topk" not in m:
            sys.exit(f"topk_run.py: {path}: no pbox-topk median at n {a.n}, {a.bytes} bytes")
        pts.append((float(d), m["pbox-topk"]))
        for s in ("pbox", "gloo", "gloo-psgd"):
            if s in m:
                peers.setdefault(s, []).append(m[s])
    if len(pts) == 1:
        slope, icept = pts[0][1] / pts[0][0], 0.0     # one point: through 0
    else:
        mx = sum(d for d, _ in pts) / len(pts)
        my = sum(t for _, t in pts) / len(pts)
        slope = sum((d - mx) * (t - my) for d, t in pts) / sum((d - mx) ** 2 for d, _ in pts)
        icept = my - slope * mx
    for d, t in pts:
        print(f"# pbox-topk at density {d:g}: {t / 1e3:.1f} ms (line: {(icept + slope * d) / 1e3:.1f})")
    mc = a.mc_us if a.mc_us is not None else (mc_measure(a.bytes) if a.mc_measure else 0.0)
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import importlib.util
    spec = importlib.util.spec_from_file_location("_sparse_sched", os.path.join(
        HERE, "..", "..", "python", "pbox", "_sparse.py"))
    ws = a.warmup
    start = a.warmup_start
    try:   # the defaults, without importing torch: read the constants
        src = open(spec.origin).read()
        consts = {}
        for line in src.splitlines():
            if line.startswith(("WARMUP_STEPS =", "WARMUP_START =")):
                k, v = line.split("#")[0].split("=")
                consts[k.strip()] = float(v)
        ws = int(consts["WARMUP_STEPS"]) if ws is None else ws
        start = consts["WARMUP_START"] if start is None else start
    except (OSError, KeyError, ValueError):
        sys.exit("topk_run.py: cannot read the defaults from pbox/_sparse.py: give --warmup "
                 "and --warmup-start")

    def dens(step):
        if ws <= 0 or start <= a.density or step >= ws:
            return a.density
        return start * (a.density / start) ** (step / ws)
    print(f"# schedule: {start:g} -> {a.density:g} over {ws} steps; momentum correction "
          f"{mc / 1e3:.1f} ms a call")
    med = {s: sorted(v)[len(v) // 2] for s, v in peers.items()}
    for s, v in med.items():
        print(f"# {s}: {v / 1e3:.1f} ms a call")
    print("steps  top-k ms/step  " + "  ".join(f"{s}/top-k" for s in med))
    for steps in (int(x) for x in a.steps.split(",")):
        tot = sum(icept + slope * min(1.0, dens(s)) + mc for s in range(steps)) / steps
        print(f"{steps:5d}  {tot / 1e3:13.1f}  " +
              "  ".join(f"{med[s] / tot:{len(s) + 7}.2f}" for s in med))


if __name__ == "__main__":
    main()
