#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""plot_cloud.py DIR PNG - plot bench/compare/cloud.sh's sets: one panel
per set (DIR/NAME/raw.txt from compare.sh --shape), for each size the
median time per call of every system as a bar (min..max over the reps as
error bars), with the link model's bounds drawn across each size's bars:
pbox's max(S/R, N*S/(K*Rb)) (solid) and the ring's 2(N-1)/N*S/R (dashed).
Needs matplotlib (python3-matplotlib); the model from summarize.py.
"""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402

COLORS = {"pbox": "tab:red", "pbox-xdp": "tab:orange", "gloo": "tab:green", "openmpi": "tab:blue"}
ORDER = ["pbox", "pbox-xdp", "gloo", "openmpi"]


def rate_text(bps):
    bps = float(bps)
    return "%g Gbit/s" % (bps / 1e9) if bps >= 1e9 else "%g Mbit/s" % (bps / 1e6)


def load_set(path):
    summarize.META.clear()
    rows = summarize.rows_of(summarize.load(path))
    return rows, dict(summarize.META)


def main():
    if len(sys.argv) != 3:
        print("usage: plot_cloud.py DIR PNG", file=sys.stderr)
        return 2
    top, png = sys.argv[1], sys.argv[2]
    sets = []
    for name in sorted(os.listdir(top)):
        raw = os.path.join(top, name, "raw.txt")
        if os.path.isfile(raw):
            rows, meta = load_set(raw)
            if rows and "shape_bps" in meta:
                sets.append((name, rows, meta))
    if not sets:
        print("plot_cloud.py: no shaped compare.sh runs under %s" % top, file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), 4.8), squeeze=False)
    for ax, (name, rows, meta) in zip(axes[0], sets):
        summarize.META.clear()
        summarize.META.update(meta)
        systems = [s for s in ORDER if any(r["system"] == s for r in rows)]
        keys = sorted({(r["n"], r["bytes"]) for r in rows})
        width = 0.8 / max(1, len(systems))
        for j, s in enumerate(systems):
            for i, (n, b) in enumerate(keys):
                r = next((r for r in rows if (r["system"], r["n"], r["bytes"]) == (s, n, b)), None)
                if not r or math.isinf(r["median_us"]):
                    continue
                med, lo = r["median_us"] / 1e3, r["min_us"] / 1e3
                hi = med if math.isinf(r["max_us"]) else r["max_us"] / 1e3
                ax.bar(i + (j - (len(systems) - 1) / 2) * width, med, width, color=COLORS.get(s, "gray"),
                       yerr=[[med - lo], [hi - med]], capsize=3, label=s if i == 0 else None)
        for i, (n, b) in enumerate(keys):
            xs = [i - 0.45, i + 0.45]
            pb, ring = summarize.pbox_bound_s(n, b) * 1e3, summarize.ring_bound_s(n, b) * 1e3
            ax.plot(xs, [pb, pb], color="black", linewidth=1.5,
                    label="pbox bound" if i == 0 else None)
            ax.plot(xs, [ring, ring], color="black", linestyle="--", linewidth=1,
                    label="ring bound" if i == 0 else None)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(["N=%d\n%s" % (n, summarize.human(b)) for n, b in keys])
        ax.set_ylabel("time per allreduce (ms), median; bars: min..max")
        box = ("%d box(es) at %s" % (int(meta.get("boxes", 1)), rate_text(meta["box_bps"]))
               if "box_bps" in meta else "balanced box (unshaped)")
        ax.set_title("%s\nworkers %s, %s" % (name, rate_text(meta["shape_bps"]), box), fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("float32 allreduce where links are the limit (tc-shaped veths, one host)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print("plot_cloud.py: wrote %s" % png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
