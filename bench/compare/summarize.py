#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""summarize.py RAW CSV - turn compare.sh's raw samples into the comparison
CSV and print the side-by-side table.

RAW has one sample per line, "system n rep bytes us" (us = mean time per
call of one rep's timed iterations, or DNF: that rep's run did not finish
within compare.sh --timeout); '#' lines are comments, "# timeout_s S" and
"# loss_pct P" and "# loss_unit U" among them. For every (system, n, bytes) the CSV gets the
median, min and max over the reps, and algbw = bytes / median, busbw =
algbw * 2(n-1)/n (nccl's allreduce factor), in GB/s (1e9 bytes/s):

    system,n,bytes,median_us,min_us,max_us,algbw_GBps,busbw_GBps

A DNF counts as longer than any time: a time column that falls on one
says DNF, and algbw/busbw are then empty.
The table on stdout gives, per n and size, each system's median time
("DNF (> S s)" for a DNF) and the ratios t_pbox/t_openmpi and t_pbox/t_gloo
(> 1: pbox slower); with pbox-topk and gloo-psgd (compare.sh --topk, --psgd)
also t_topk / t_psgd.

With "# shape_bps R" (compare.sh --shape: every worker's link R bit/s each
way), "# box_bps Rb" (--box-rate; absent: the box's links unshaped, Rb
infinite) and "# boxes K" (--boxes; absent: 1), the table adds the link
model (docs/performance.md, "Where links are the limit"): a pbox call of
S bytes takes at least max(S/R, N*S/(K*Rb)) (each worker sends S and
receives S, each way at once; the boxes receive N*S and send N*S over K
links), any allreduce between the workers alone 2(N-1)/N*S/R (the ring's
bound). Columns: the pbox bound (ms), pbox/bound (and xdp/bound with
pbox-xdp), gloo/ring and mpi/ring, and the model's pbox/Gloo, bound/ring,
to read beside the measured pbox/Gloo.
Standard library only.
"""
import csv
import math
import statistics
import signal
import sys

ORDER = ["pbox", "pbox-xdp", "pbox-local", "pbox-topk", "pbox-topk-local", "pbox-topk-host",
         "openmpi", "gloo", "gloo-psgd"]
PEERS = ["openmpi", "gloo"]


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


META = {}  # from "# key value" comments: timeout_s, loss_pct, loss_unit


def load(path):
    samples = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                w = line[1:].split()
                if len(w) == 2 and w[0] in ("timeout_s", "loss_pct", "loss_unit", "shape_bps",
                                            "box_bps", "boxes"):
                    META[w[0]] = w[1]
                continue
            if not line:
                continue
            system, n, _rep, nbytes, us = line.split()
            us = math.inf if us == "DNF" else float(us)
            samples.setdefault((system, int(n), int(nbytes)), []).append(us)
    return samples


def us_text(v):
    return "DNF" if math.isinf(v) else "%.1f" % v


def rows_of(samples):
    rows = []
    key = lambda k: (ORDER.index(k[0]) if k[0] in ORDER else len(ORDER), k[0], k[1], k[2])
    for (system, n, nbytes) in sorted(samples, key=key):
        v = samples[(system, n, nbytes)]
        v = sorted(v)
        # the upper median when even: a tie between a time and a DNF is a DNF
        med = v[len(v) // 2] if len(v) % 2 or math.isinf(v[-1]) else statistics.median(v)
        algbw = nbytes / (med * 1e3) if 0 < med < math.inf else 0.0
        busbw = algbw * 2 * (n - 1) / n
        rows.append(dict(system=system, n=n, bytes=nbytes, median_us=med, min_us=min(v),
                         max_us=max(v), algbw_GBps=algbw, busbw_GBps=busbw, reps=len(v)))
    return rows


def write_csv(rows, path):
    fields = ["system", "n", "bytes", "median_us", "min_us", "max_us", "algbw_GBps", "busbw_GBps"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for r in rows:
            dnf = math.isinf(r["median_us"])
            w.writerow([r["system"], r["n"], r["bytes"], us_text(r["median_us"]),
                        us_text(r["min_us"]), us_text(r["max_us"]),
                        "" if dnf else "%.4f" % r["algbw_GBps"],
                        "" if dnf else "%.4f" % r["busbw_GBps"]])


def pbox_bound_s(n, nbytes):
    """The link model's least time of a pbox call (s), or None unshaped."""
    if "shape_bps" not in META:
        return None
    r = float(META["shape_bps"]) / 8
    rb = float(META["box_bps"]) / 8 if "box_bps" in META else math.inf
    k = int(META.get("boxes", 1))
    return max(nbytes / r, n * nbytes / (k * rb))


def ring_bound_s(n, nbytes):
    """Any allreduce among the workers alone: 2(n-1)/n * S / R (s)."""
    if "shape_bps" not in META:
        return None
    return 2 * (n - 1) / n * nbytes / (float(META["shape_bps"]) / 8)


def table(rows, out=sys.stdout):
    by = {(r["system"], r["n"], r["bytes"]): r for r in rows}
    ns = sorted({r["n"] for r in rows})
    sizes = sorted({r["bytes"] for r in rows})
    systems = [s for s in ORDER if any(r["system"] == s for r in rows)]

    def t(s, n, b):
        r = by.get((s, n, b))
        if r and math.isinf(r["median_us"]):
            return "DNF (> %s s)" % META.get("timeout_s", "?")
        return "%.1f" % r["median_us"] if r else "-"

    def ok(*v):
        return all(0 < x < math.inf for x in v)

    def ratio(n, b, other):
        p, o = by.get(("pbox", n, b)), by.get((other, n, b))
        return "%.2f" % (p["median_us"] / o["median_us"]) \
            if p and o and ok(p["median_us"], o["median_us"]) else "-"

    def best_peer(n, b, mine):
        p = by.get((mine, n, b))
        peers = [by[(o, n, b)]["median_us"] for o in PEERS if (o, n, b) in by]
        return "%.2f" % (p["median_us"] / min(peers)) \
            if p and peers and ok(p["median_us"], min(peers)) else "-"

    def over(n, b, mine, other):
        p, o = by.get((mine, n, b)), by.get((other, n, b))
        return "%.3f" % (p["median_us"] / o["median_us"]) \
            if p and o and ok(p["median_us"], o["median_us"]) else "-"

    xdp = any(r["system"] == "pbox-xdp" for r in rows)
    topk = any(r["system"] == "pbox-topk" for r in rows)
    local = any(r["system"] == "pbox-topk-local" for r in rows)
    thost = topk and any(r["system"] == "pbox-topk-host" for r in rows)
    psgd = topk and any(r["system"] == "gloo-psgd" for r in rows)
    head = ["n", "size"] + ["%s us" % s for s in systems] + ["pbox busbw GB/s",
                                                             "pbox/OpenMPI", "pbox/Gloo"]
    if xdp:
        head += ["xdp/best peer", "xdp/udp"]
    if topk:
        head += ["topk/pbox", "topk/Gloo"]
    if local:
        head += ["local/pbox", "local/topk"]
    if thost:
        head += ["topkhost/topk", "topkhost/Gloo"]
    if psgd:
        head += ["topk/psgd"]
    shaped = "shape_bps" in META

    def per_bound(s, n, b, bound):
        r = by.get((s, n, b))
        return "%.3f" % (r["median_us"] / 1e6 / bound) if r and ok(r["median_us"]) else "-"
    if shaped:
        head += ["bound ms", "pbox/bound"] + (["xdp/bound"] if xdp else []) + \
            ["gloo/ring", "mpi/ring", "model pbox/Gloo"]
    lines = []
    for n in ns:
        for b in sizes:
            if not any((s, n, b) in by for s in systems):
                continue
            pb = by.get(("pbox", n, b))
            lines.append([str(n), human(b)] + [t(s, n, b) for s in systems] +
                         ["%.3f" % pb["busbw_GBps"] if pb and ok(pb["median_us"]) else "-",
                          ratio(n, b, "openmpi"), ratio(n, b, "gloo")] +
                         ([best_peer(n, b, "pbox-xdp"),
                           "%.2f" % (by[("pbox-xdp", n, b)]["median_us"] / pb["median_us"])
                           if pb and ("pbox-xdp", n, b) in by
                           and ok(pb["median_us"], by[("pbox-xdp", n, b)]["median_us"])
                           else "-"] if xdp else []) +
                         ([over(n, b, "pbox-topk", "pbox"), over(n, b, "pbox-topk", "gloo")]
                          if topk else []) +
                         ([over(n, b, "pbox-topk-local", "pbox"),
                           over(n, b, "pbox-topk-local", "pbox-topk")] if local else []) +
                         ([over(n, b, "pbox-topk-host", "pbox-topk"),
                           over(n, b, "pbox-topk-host", "gloo")] if thost else []) +
                         ([over(n, b, "pbox-topk", "gloo-psgd")] if psgd else []))
            if shaped:
                pb_s, ring_s = pbox_bound_s(n, b), ring_bound_s(n, b)
                lines[-1] += ["%.1f" % (pb_s * 1e3), per_bound("pbox", n, b, pb_s)] + \
                    ([per_bound("pbox-xdp", n, b, pb_s)] if xdp else []) + \
                    [per_bound("gloo", n, b, ring_s), per_bound("openmpi", n, b, ring_s),
                     "%.3f" % (pb_s / ring_s)]
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    print("median time per call (us); ratios are t_pbox / t_other (> 1: pbox slower)", file=out)
    if "loss_pct" in META:
        print("loss: %s%% each way, per %s (nftables)" % (META["loss_pct"], "wire frame"
              if META.get("loss_unit", "wire") == "wire" else META["loss_unit"]), file=out)
    if shaped:
        print("links: workers %s bit/s each way, %s box(es) %s; bound: the link model's least "
              "time of a pbox call, max(S/R, N*S/(K*Rb)); ring: 2(N-1)/N*S/R" %
              (META["shape_bps"], META.get("boxes", "1"),
               "at %s bit/s" % META["box_bps"] if "box_bps" in META else "unshaped"), file=out)
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)), file=out)
    for l in lines:
        print("  ".join(c.rjust(w) for c, w in zip(l, widths)), file=out)


def main():
    if len(sys.argv) != 3:
        print("usage: summarize.py RAW CSV", file=sys.stderr)
        return 2
    samples = load(sys.argv[1])
    if not samples:
        print("summarize.py: no samples in %s" % sys.argv[1], file=sys.stderr)
        return 1
    rows = rows_of(samples)
    write_csv(rows, sys.argv[2])
    table(rows)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under | head
    sys.exit(main())
