#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""loss_report.py MANIFEST OUTDIR [--timeout S] [--unit wire|skb] [--title TEXT] - gather the
compare.sh runs of bench/loss.sh into one CSV, a table and a plot.

MANIFEST has one line per compare.sh run, "loss_pct bytes dir rc" (dir
holds that run's compare.csv; rc is compare.sh's exit status). OUTDIR gets:

  loss.csv  system,n,bytes,loss_pct,median_us,min_us,max_us,slowdown
            (times as in compare.csv, "DNF" for a run that did not finish;
            slowdown = median at this loss / median of the same system, n
            and bytes at loss 0, empty when either is a DNF or missing)
  loss.txt  per n and size: one row per loss rate, per system its median
            time and slowdown, then t_pbox/t_gloo and t_pbox/t_openmpi
            (also printed)
  loss.png  median time per call vs loss rate, log y, one panel per
            (n, size), one line per system, bars min..max; a DNF is a
            triangle at the top of its panel (needs matplotlib)

Exit status 1 if there is nothing to report, 0 otherwise (also when the
plot fails: the CSV and the table are written first; a message says so).
"""
import argparse
import csv
import math
import os
import sys
import textwrap

ORDER = ["pbox", "pbox-xdp", "openmpi", "gloo"]
LABELS = {"pbox": "pbox", "pbox-xdp": "pbox (xdp)", "openmpi": "OpenMPI (TCP)", "gloo": "Gloo (torch)"}
COLORS = {"pbox": "tab:red", "pbox-xdp": "tab:orange", "openmpi": "tab:blue", "gloo": "tab:green"}
MARKERS = {"pbox": "o", "pbox-xdp": "D", "openmpi": "s", "gloo": "^"}


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def num(v):
    """compare.csv time -> float; DNF -> inf."""
    return math.inf if v == "DNF" else float(v)


def us_text(v):
    return "DNF" if math.isinf(v) else "%.1f" % v


def t_text(v, timeout):
    if v is None:
        return "-"
    if math.isinf(v):
        return "DNF (> %s s)" % timeout
    if v < 1e3:
        return "%.0f us" % v
    if v < 1e6:
        return "%.2f ms" % (v / 1e3)
    return "%.2f s" % (v / 1e6)


def sys_key(s):
    return (ORDER.index(s) if s in ORDER else len(ORDER), s)


def load(manifest):
    """-> rows {(system, n, bytes, loss_str): (med, lo, hi)}, losses {str: float},
    failed [(loss_str, bytes, rc)]"""
    rows, losses, failed = {}, {}, []
    with open(manifest) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            loss, nbytes, d, rc = w[0], int(w[1]), w[2], int(w[3])
            losses[loss] = float(loss)
            if rc != 0:
                failed.append((loss, nbytes, rc))
            path = os.path.join(d, "compare.csv")
            if not os.path.exists(path):
                continue
            with open(path) as c:
                for r in csv.DictReader(c):
                    rows[(r["system"], int(r["n"]), int(r["bytes"]), loss)] = (
                        num(r["median_us"]), num(r["min_us"]), num(r["max_us"]))
    return rows, losses, failed


def slowdown(rows, base, key):
    med = rows[key][0]
    b = base.get(key[:3])
    if b is None or not (0 < b < math.inf) or math.isinf(med):
        return None
    return med / b


def write_csv(rows, losses, path):
    base = {k[:3]: v[0] for k, v in rows.items() if losses[k[3]] == 0}
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["system", "n", "bytes", "loss_pct", "median_us", "min_us", "max_us", "slowdown"])
        for k in sorted(rows, key=lambda k: (sys_key(k[0]), k[1], k[2], losses[k[3]])):
            med, lo, hi = rows[k]
            s = slowdown(rows, base, k)
            w.writerow([k[0], k[1], k[2], k[3], us_text(med), us_text(lo), us_text(hi),
                        "" if s is None else "%.3f" % s])
    return base


def table(rows, losses, base, failed, timeout, unit, out):
    systems = sorted({k[0] for k in rows}, key=sys_key)
    ns = sorted({k[1] for k in rows})
    sizes = sorted({k[2] for k in rows})
    order = sorted(losses, key=lambda l: losses[l])
    print("median time per call (slowdown: / the same system at 0%% loss); ratios t_pbox / t_other"
          " (> 1: pbox slower); loss = %% of the data %s dropped each way"
          % ("frames" if unit == "wire" else "skbs (TSO super-packets whole)"), file=out)
    for n in ns:
        for b in sizes:
            head = ["loss %"]
            for s in systems:
                head += [s, "x"]
            peers = [p for p in ("gloo", "openmpi") if p in systems and "pbox" in systems]
            head += ["pbox/%s" % {"gloo": "Gloo", "openmpi": "OpenMPI"}[p] for p in peers]
            lines = []
            for l in order:
                line = [l]
                for s in systems:
                    k = (s, n, b, l)
                    if k not in rows:
                        fail = any(fl == l and fb == b for fl, fb, _ in failed)
                        line += ["fail" if fail else "-", ""]
                        continue
                    sd = slowdown(rows, base, k)
                    line += [t_text(rows[k][0], timeout), "" if sd is None else "%.2f" % sd]
                for p in peers:
                    a, o = rows.get(("pbox", n, b, l)), rows.get((p, n, b, l))
                    if a and o and 0 < a[0] < math.inf and 0 < o[0] < math.inf:
                        line.append("%.2f" % (a[0] / o[0]))
                    elif a and o and a[0] < math.inf and math.isinf(o[0]):
                        line.append("%s DNF" % p)
                    else:
                        line.append("-")
                lines.append(line)
            widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
            print("\nN = %d, %s" % (n, human(b)), file=out)
            print("  ".join(h.rjust(w) for h, w in zip(head, widths)), file=out)
            for x in lines:
                print("  ".join(c.rjust(w) for c, w in zip(x, widths)), file=out)
    if failed:
        print("\nruns that failed (not DNF; see their compare.log): %s" %
              ", ".join("loss %s%% %s (exit %d)" % (l, human(b), rc) for l, b, rc in failed), file=out)


def plot(rows, losses, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = sorted({k[0] for k in rows}, key=sys_key)
    ns = sorted({k[1] for k in rows})
    sizes = sorted({k[2] for k in rows})
    order = sorted(losses, key=lambda l: losses[l])
    fig, axes = plt.subplots(len(ns), len(sizes), figsize=(max(7, 5.5 * len(sizes)), 4 * len(ns)),
                             squeeze=False)
    for i, n in enumerate(ns):
        for j, b in enumerate(sizes):
            ax = axes[i][j]
            finite = [v for k, r in rows.items() if k[1] == n and k[2] == b
                      for v in r if v < math.inf]
            top = max(finite) * 3 if finite else 1e6
            for s in systems:
                pts = [(x, rows[(s, n, b, l)]) for x, l in enumerate(order) if (s, n, b, l) in rows]
                ok = [(x, r) for x, r in pts if r[0] < math.inf]
                dnf = [x for x, r in pts if math.isinf(r[0])]
                if ok:
                    ax.errorbar([x for x, _ in ok], [r[0] for _, r in ok],
                                yerr=[[r[0] - r[1] for _, r in ok],
                                      [(r[2] if r[2] < math.inf else r[0]) - r[0] for _, r in ok]],
                                color=COLORS.get(s), marker=MARKERS.get(s, "o"), markersize=5,
                                capsize=2, label=LABELS.get(s, s))
                if dnf:
                    ax.plot(dnf, [top] * len(dnf), linestyle="none", marker="^", markersize=9,
                            markerfacecolor="none", color=COLORS.get(s),
                            label="%s: DNF" % LABELS.get(s, s))
            ax.set_yscale("log")
            ax.set_xticks(range(len(order)))
            ax.set_xticklabels(["%s%%" % l for l in order])
            ax.set_xlabel("loss each way (data frames)")
            ax.set_ylabel("time per allreduce (us), median")
            ax.set_title("N = %d, %s" % (n, human(b)))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("\n".join(textwrap.wrap(title, 90)), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("manifest")
    p.add_argument("outdir")
    p.add_argument("--timeout", default="?", help="the per-run timeout (s), for the table's DNF")
    p.add_argument("--unit", default="wire", choices=["wire", "skb"],
                   help="what the loss rate counts (compare.sh --loss-unit)")
    p.add_argument("--title", default="float32 allreduce under packet loss")
    a = p.parse_args()
    rows, losses, failed = load(a.manifest)
    if not rows:
        print("loss_report.py: no results in the runs of %s" % a.manifest, file=sys.stderr)
        return 1
    base = write_csv(rows, losses, os.path.join(a.outdir, "loss.csv"))
    with open(os.path.join(a.outdir, "loss.txt"), "w") as f:
        table(rows, losses, base, failed, a.timeout, a.unit, f)
    with open(os.path.join(a.outdir, "loss.txt")) as f:
        sys.stdout.write(f.read())
    try:
        plot(rows, losses, os.path.join(a.outdir, "loss.png"), a.title)
        print("loss_report.py: wrote %s" % os.path.join(a.outdir, "loss.png"))
    except Exception as e:  # ImportError without matplotlib, or a drawing error
        print("loss_report.py: no plot: %s" % e, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
