#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""plot.py CSV PNG [--title TEXT] - plot compare.sh's CSV: median time per
call vs size (left) and bus bandwidth vs size (right), both log-log, one
line per (system, n); min..max over the reps as error bars on the time.
Sizes whose median is DNF (compare.sh --timeout) are left out; a DNF max
is drawn as the median.
Needs matplotlib (Debian: python3-matplotlib); draws without a display.
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Every system its own colour (the pbox variants too: "pbox-xdp" drawn in
# matplotlib's default cycle matched Gloo's green, "pbox-topk" OpenMPI's blue).
COLORS = {"pbox": "tab:red", "openmpi": "tab:blue", "gloo": "tab:green",
          "pbox-xdp": "tab:orange", "pbox-topk": "tab:purple", "pbox-topk-local": "tab:brown"}
OTHER_COLORS = ["tab:pink", "tab:olive", "tab:cyan", "tab:gray"]
LABELS = {"pbox": "pbox (udp)", "openmpi": "OpenMPI (TCP)", "gloo": "Gloo (torch)",
          "pbox-xdp": "pbox (AF_XDP)", "pbox-topk": "pbox top-k 1% (udp)",
          "pbox-topk-local": "pbox hierarchical top-k", "pbox-local": "pbox host level",
          "pbox-topk-host": "pbox top-k through the host level"}
STYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("png")
    p.add_argument("--title", default="float32 allreduce, one host")
    a = p.parse_args()

    series = {}
    with open(a.csv) as f:
        for r in csv.DictReader(f):
            if r["median_us"] == "DNF":
                continue
            med = float(r["median_us"])
            series.setdefault((r["system"], int(r["n"])), []).append(
                (int(r["bytes"]), med, float(r["min_us"]),
                 med if r["max_us"] == "DNF" else float(r["max_us"]), float(r["busbw_GBps"])))
    if not series:
        print("plot.py: %s has no rows" % a.csv, file=sys.stderr)
        return 1
    ns = sorted({n for _, n in series})
    others = sorted({s for s, _ in series if s not in COLORS})
    colors = dict(COLORS, **{s: OTHER_COLORS[i % len(OTHER_COLORS)] for i, s in enumerate(others)})
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(13, 5))
    for (system, n), pts in sorted(series.items()):
        pts.sort()
        x = [q[0] for q in pts]
        med = [q[1] for q in pts]
        err = [[q[1] - q[2] for q in pts], [q[3] - q[1] for q in pts]]
        style = dict(color=colors[system], linestyle=STYLES[ns.index(n) % len(STYLES)],
                     marker=MARKERS[ns.index(n) % len(MARKERS)], markersize=4,
                     label="%s, N=%d" % (LABELS.get(system, system), n))
        ax_t.errorbar(x, med, yerr=err, capsize=2, **style)
        ax_b.plot(x, [q[4] for q in pts], **style)
    for ax in (ax_t, ax_b):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("buffer size (bytes, float32)")
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_ylabel("time per allreduce (us), median; bars: min..max")
    ax_b.set_ylabel("bus bandwidth (GB/s) = 2(N-1)/N * bytes / time")
    ax_t.set_title("time per call")
    ax_b.set_title("bus bandwidth")
    ax_b.legend(fontsize=8, loc="best")
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print("plot.py: wrote %s" % a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
