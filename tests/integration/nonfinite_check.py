#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""nonfinite_check.py - one rank of test_nonfinite.sh: a PS key on the real
box, where rank 1 sends a NaN (skip) or an Inf (abort) in one step.

    nonfinite_check.py skip|abort CONTROL JOB RANK WORLD DIR

skip (the job created by rank 0 with nonfinite="skip"): key 1 of COUNT
weights (3 segments at MTU 1500), all 1, SGD lr 0.5. Step 1: every rank's
gradient is 1, rank 1's element BAD is NaN: the segment holding BAD keeps
its weights (1), the others step to 0.5; every rank counts one skipped
segment (stats()["ps_skipped"]). Step 2 (gradient 1 everywhere): 0.5 and
0; the weights read back (ps_read) are all finite. Then the rank writes
DIR/ready.RANK and waits (at most 60 s) for DIR/go, so the test can read
the box's counters while the job lives.

abort (the job created by `pboxctl job create --nonfinite abort`): step 1
as above but with +Inf: every rank's call fails with EABORTED naming rank
1 and key 1.
"""
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))    # tests/python: checks.py

import pbox  # noqa: E402
from checks import check, check_eq, check_in, fail  # noqa: E402

COUNT = 1000          # 3 segments of 352 fp32 elements (MTU 1500)
BAD = 500             # in segment 1
SEG = 352


def main():
    mode, control, job, rank, world, d = sys.argv[1:7]
    rank, world = int(rank), int(world)
    kw = {"nonfinite": "skip"} if mode == "skip" else {}
    c = pbox.Client(control, job, rank, world, timeout_ms=20000, **kw)
    c.declare_optimizer(1, COUNT, "f32", "sgd", lr=0.5)
    w = torch.ones(COUNT) if rank == 0 else None
    out = torch.empty(COUNT)
    c.ps_init(1, w, out)
    g = torch.ones(COUNT)
    if rank == 1:
        g[BAD] = math.nan if mode == "skip" else math.inf
    if mode == "abort":
        try:
            c.push_pull(1, g, out)
        except pbox.Error as e:
            check_eq(e.code, pbox.EABORTED, "the error's code")
            check_in("rank 1 sent a NaN or Inf gradient for key 1", e.message, "the message")
            print(f"rank {rank}: aborted as expected: {e.message}")
            c.close()
            return 0
        fail("the step with an Inf gradient succeeded under abort")
    c.push_pull(1, g, out)
    seg = BAD // SEG
    for i in range(COUNT):
        check_eq(out[i].item(), 1.0 if i // SEG == seg else 0.5, f"step 1 weight {i}")
    check_eq(c.stats()["ps_skipped"], 1, "ps_skipped after step 1")
    c.push_pull(1, torch.ones(COUNT), out)
    for i in range(COUNT):
        check_eq(out[i].item(), 0.5 if i // SEG == seg else 0.0, f"step 2 weight {i}")
    check_eq(c.stats()["ps_skipped"], 1, "ps_skipped after step 2")
    if rank == 0:
        back = torch.empty(COUNT)
        c.ps_read(1, back)
        check(bool(torch.isfinite(back).all()), "non-finite weights on the box")
        check(torch.equal(back, out), "the box's weights differ from the step's result")
    open(os.path.join(d, f"ready.{rank}"), "w").close()
    for _ in range(600):
        if os.path.exists(os.path.join(d, "go")):
            break
        time.sleep(0.1)
    c.close()
    print(f"rank {rank}: skip: weights finite, one segment skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
