#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""plan.py - alpha-beta scaling model: pbox (parameter-server style) vs ring
allreduce, for planning a deployment and for checking measured results.

Model, for one allreduce of M bytes over N workers (Hockney alpha-beta:
alpha = per-message latency, beta = 1/bandwidth):

  pbox  every worker sends M to the box and receives M back; the box carries
        N*M each way over its P ports of bandwidth B:
            t_pbox = alpha + max(M / link, N*M / (P*B))
  ring  2(N-1) steps (reduce-scatter, then all-gather), each moving M/N:
            t_ring = 2(N-1)*alpha + 2(N-1)/N * M / link

So while the box's ports keep up (N <= P*B/link) pbox moves M per worker
where the ring moves 2(N-1)/N*M (almost 2M), and pays one alpha instead of
2(N-1). Past N = P*B/link the box's ports are the bound and pbox's time
grows with N; it stays below the ring's while N*M/(P*B) < 2(N-1)/N*M/link,
i.e. while N^2/(N-1) < 2*P*B/link.

Prediction:
  plan.py [--link-gbps 100] [--box-ports 4] [--box-port-gbps 100]
          [--n 2,4,8,16,32,64] [--bytes 1M,16M,256M] [--alpha-us 10]

Fit to measurements (bench/compare/compare.sh's CSV):
  plan.py --from-csv build/compare/compare.csv [--per-n]

fits alpha and beta for each system by least squares on the measured
medians (relative error, so that 4 KiB and 256 MiB points weigh alike):
pbox with t = alpha + beta*M (the worker link bound; on one host the box's
ports are not the limit), openmpi and gloo with the ring formula
t = 2(N-1)*alpha + 2(N-1)/N*beta*M. All n of a system share one fit
(--per-n: one fit per system and n). Prints the fitted alpha, 1/beta as
GB/s, and predicted vs measured time per size. A coefficient that comes
out negative is fixed at 0 and the other refitted. Standard library only.
"""
import argparse
import csv
import math
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare"))
from summarize import human  # noqa: E402  (sizes printed as compare.sh's table does)


def parse_bytes(s):
    mul = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip()
    if s and s[-1].lower() in mul:
        return int(float(s[:-1]) * mul[s[-1].lower()])
    return int(float(s))


def fmt_us(us):
    if us >= 1e6:
        return "%.2f s" % (us / 1e6)
    if us >= 1e3:
        return "%.2f ms" % (us / 1e3)
    return "%.1f us" % us


def t_pbox(m, n, alpha_s, link_Bps, ports, port_Bps):
    link_t = m / link_Bps
    box_t = n * m / (ports * port_Bps)
    return alpha_s + max(link_t, box_t), ("box" if box_t > link_t else "link")


def t_ring(m, n, alpha_s, link_Bps):
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * m / link_Bps


def print_table(head, rows):
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    print("  ".join(h.rjust(x) for h, x in zip(head, w)))
    for r in rows:
        print("  ".join(c.rjust(x) for c, x in zip(r, w)))


def predict(a):
    link = a.link_gbps * 1e9 / 8
    port = a.box_port_gbps * 1e9 / 8
    alpha = a.alpha_us * 1e-6
    ns = [int(x) for x in a.n.split(",")]
    sizes = [parse_bytes(x) for x in a.bytes.split(",")]
    print("model: worker link %.1f Gb/s, box %d x %.1f Gb/s, alpha %.1f us"
          % (a.link_gbps, a.box_ports, a.box_port_gbps, a.alpha_us))
    cross = a.box_ports * a.box_port_gbps / a.link_gbps
    print("box ports are the bound beyond N = P*B/link = %.1f workers" % cross)
    # largest N with N^2/(N-1) < 2*P*B/link (bandwidth terms only)
    k = 2 * cross
    best = max([n for n in range(2, 100000) if n * n / (n - 1) <= k * (1 + 1e-12)], default=None)
    if best:
        print("pbox's bandwidth term is at most the ring's up to N = %d (N^2/(N-1) <= 2*P*B/link)"
              % best)
    else:
        print("the box's ports make pbox slower than the ring at every N >= 2 (2*P*B/link = %.2f < 4)"
              % k)
    rows = []
    for n in ns:
        for m in sizes:
            tp, bound = t_pbox(m, n, alpha, link, a.box_ports, port)
            tr = t_ring(m, n, alpha, link)
            rows.append([str(n), human(m), fmt_us(tp * 1e6), bound, fmt_us(tr * 1e6),
                         "%.2f" % (tr / tp)])
    print_table(["n", "size", "pbox", "pbox bound", "ring", "ring/pbox"], rows)
    return 0


def lsq2(rows):
    """Least squares for t = c0*x0 + c1*x1 on rows (x0, x1, t), each row
    weighted by 1/t (relative error); coefficients kept >= 0."""
    def solve(use0, use1):
        s00 = s01 = s11 = s0t = s1t = 0.0
        for x0, x1, t in rows:
            w = 1.0 / (t * t)
            x0 = x0 if use0 else 0.0
            x1 = x1 if use1 else 0.0
            s00 += w * x0 * x0
            s01 += w * x0 * x1
            s11 += w * x1 * x1
            s0t += w * x0 * t
            s1t += w * x1 * t
        if use0 and use1:
            det = s00 * s11 - s01 * s01
            if det <= 0:
                return None
            return ((s11 * s0t - s01 * s1t) / det, (s00 * s1t - s01 * s0t) / det)
        if use0:
            return (s0t / s00 if s00 > 0 else 0.0, 0.0)
        return (0.0, s1t / s11 if s11 > 0 else 0.0)

    c = solve(True, True)
    if c is None or c[0] < 0 or c[1] < 0:
        cands = [solve(True, False), solve(False, True)]
        c = min(cands, key=lambda cc: sum(((cc[0] * x0 + cc[1] * x1 - t) / t) ** 2
                                          for x0, x1, t in rows))
    return c


def features(system, n, m):
    """(x0, x1) of t = alpha*x0 + beta*x1 for the system's model."""
    if system == "pbox":
        return 1.0, float(m)
    return 2.0 * (n - 1), 2.0 * (n - 1) / n * m


def from_csv(a):
    pts = []
    with open(a.from_csv) as f:
        for r in csv.DictReader(f):
            pts.append((r["system"], int(r["n"]), int(r["bytes"]), float(r["median_us"]) * 1e-6))
    if not pts:
        print("plan.py: no rows in %s" % a.from_csv, file=sys.stderr)
        return 1
    groups = {}
    for s, n, m, t in pts:
        groups.setdefault((s, n) if a.per_n else (s,), []).append((s, n, m, t))
    print("fit: t = alpha + beta*M (pbox), t = 2(N-1)*alpha + 2(N-1)/N*beta*M (openmpi, gloo);")
    print("least squares on relative error over the measured medians of %s" % a.from_csv)
    fits = {}
    rows = []
    for g in sorted(groups):
        gp = groups[g]
        alpha, beta = lsq2([features(s, n, m) + (t,) for s, n, m, t in gp])
        fits[g] = (alpha, beta)
        err = [((alpha * features(s, n, m)[0] + beta * features(s, n, m)[1]) - t) / t
               for s, n, m, t in gp]
        rms = math.sqrt(sum(e * e for e in err) / len(err))
        rows.append([g[0], str(g[1]) if a.per_n else ",".join(str(x) for x in
                                                             sorted({p[1] for p in gp})),
                     "%.1f" % (alpha * 1e6), "%.3f" % (1 / beta / 1e9) if beta > 0 else "inf",
                     "%.0f%%" % (100 * rms), str(len(gp))])
    print_table(["system", "n", "alpha us", "1/beta GB/s", "rms err", "points"], rows)
    print()
    rows = []
    for s, n, m, t in sorted(pts, key=lambda p: (p[0], p[1], p[2])):
        alpha, beta = fits[(s, n) if a.per_n else (s,)]
        x0, x1 = features(s, n, m)
        pred = alpha * x0 + beta * x1
        rows.append([s, str(n), human(m), fmt_us(t * 1e6), fmt_us(pred * 1e6),
                     "%+.0f%%" % (100 * (pred - t) / t)])
    print_table(["system", "n", "size", "measured", "predicted", "error"], rows)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--link-gbps", type=float, default=100, help="worker link, Gb/s (default 100)")
    p.add_argument("--box-ports", type=int, default=4, help="box data ports (default 4)")
    p.add_argument("--box-port-gbps", type=float, default=100, help="per box port, Gb/s (default 100)")
    p.add_argument("--n", default="2,4,8,16,32,64", help="worker counts (comma list)")
    p.add_argument("--bytes", default="1M,16M,256M", help="buffer sizes (comma list, K/M/G)")
    p.add_argument("--alpha-us", type=float, default=10, help="per-message latency, us (default 10)")
    p.add_argument("--from-csv", metavar="FILE", help="fit to compare.sh's CSV instead")
    p.add_argument("--per-n", action="store_true", help="with --from-csv: one fit per system and n")
    a = p.parse_args()
    if a.from_csv:
        return from_csv(a)
    if a.link_gbps <= 0 or a.box_port_gbps <= 0 or a.box_ports < 1 or a.alpha_us < 0:
        p.error("bandwidths and --box-ports must be positive, --alpha-us >= 0")
    return predict(a)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under | head
    sys.exit(main())
