# SPDX-License-Identifier: BSD-3-Clause
"""report.py DIR - the training-quality suite's table (markdown, stdout) and
plot (DIR/sparse_quality.png: final loss against bytes per step, one
panel per task) from run.py's JSON files in DIR; checks the goals on the
final loss (top-k 1% within 3% of dense, 0.1% within 8%; at PowerSGD's
bytes top-k's loss at most PowerSGD's) and prints which hold. The
held-out loss (the final model on 4096 samples no run trains on) is
there to read beside it: where the two disagree, the difference is noise."""
import glob
import json
import os
import sys

RUNS = ["dense", "topk:0.01", "topk:0.001", "topkhost:0.01", "topkhost:0.001", "psgd:1",
        "psgd:2", "psgd:4", "topkeq:1", "topkeq:2", "topkeq:4"]
LABEL = {"dense": "dense", "topk:0.01": "top-k 1%", "topk:0.001": "top-k 0.1%",
         "topkhost:0.01": "top-k 1% per host of 2", "topkhost:0.001": "top-k 0.1% per host of 2",
         "psgd:1": "PowerSGD r1", "psgd:2": "PowerSGD r2", "psgd:4": "PowerSGD r4",
         "topkeq:1": "top-k at r1's bytes", "topkeq:2": "top-k at r2's bytes",
         "topkeq:4": "top-k at r4's bytes"}


def main():
    d = sys.argv[1]
    res = {}
    for f in glob.glob(os.path.join(d, "*.json")):
        r = json.load(open(f))
        res.setdefault(r["task"], {})[r["run"]] = r
    tasks = [t for t in ("mlp", "cnn", "embedding", "transformer") if t in res]
    print("| task (parameters) | run | final loss | of dense | held-out loss | of dense "
          "| bytes/step | of dense | ms/step | of it in the top-k hook's worker side |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    goals = []
    for t in tasks:
        rs = res[t]
        de = rs["dense"]
        for run in RUNS:
            r = rs.get(run)
            if r is None:
                continue
            below = r.get("dense_below", 1024)
            name = LABEL[run] + (f" ({r['density']:.3%}" + (f", dense_below {below}"
                                                            if below != 1024 else "") + ")"
                                 if run.startswith("topkeq") else "")
            held = (f"{r['heldout']:.4f} | {r['heldout'] / de['heldout']:.3f}"
                    if r.get("heldout") is not None and de.get("heldout") else "- | -")
            print(f"| {t} ({de['params']}) | {name} | {r['final']:.4f} | "
                  f"{r['final'] / de['final']:.3f} | {held} | {r['bytes_per_step']:.0f} | "
                  f"{r['bytes_per_step'] / de['bytes_per_step']:.4f} | "
                  f"{1e3 * r['time_per_step']:.1f} | "
                  + (f"{1e3 * r['topk_seconds_per_step']:.2f} |" if "topk_seconds_per_step" in r
                     else "|"))
        ok1 = rs["topk:0.01"]["final"] <= 1.03 * de["final"]
        ok01 = rs["topk:0.001"]["final"] <= 1.08 * de["final"]
        wins = sum(rs[f"topkeq:{k}"]["final"] <= rs[f"psgd:{k}"]["final"]
                   for k in (1, 2, 4) if f"topkeq:{k}" in rs and f"psgd:{k}" in rs)
        goals.append((t, ok1, ok01, wins))
    print()
    for t, ok1, ok01, wins in goals:
        print(f"- {t}: top-k 1% within 3% of dense: {'yes' if ok1 else 'NO'}; 0.1% within 8%: "
              f"{'yes' if ok01 else 'NO'}; at PowerSGD's bytes top-k's loss <= PowerSGD's for "
              f"{wins} of 3 ranks")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot)")
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(4 * len(tasks), 3.4))
    for ax, t in zip(axes if len(tasks) > 1 else [axes], tasks):
        rs = res[t]
        de = rs["dense"]
        ax.axhline(de["final"], color="k", lw=1, label="dense")
        for pref, style, lab in (("topk", "o-", "top-k"), ("psgd", "s--", "PowerSGD")):
            pts = sorted((r["bytes_per_step"], r["final"]) for k, r in rs.items()
                         if k.startswith(pref))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=lab)
        ax.set_xscale("log")
        ax.set_title(f"{t} ({de['params']} params)")
        ax.set_xlabel("bytes per step per rank")
        ax.set_ylabel("final loss")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(d, "sparse_quality.png")
    fig.savefig(path, dpi=90)
    print(f"(plot: {path})")


if __name__ == "__main__":
    main()
